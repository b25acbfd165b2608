//! Causal multi-head attention with grouped KV heads, an optional sliding window and
//! an optional logit soft-cap, for one sequence's share of a batch.
//!
//! [`attend_batch`] sends one long decoding sequence to the split by keys ([`keys`]),
//! anything else through the query tiles ([`tiles`]); both read an [`AttnArgs`]
//! ([`args`]) and, on x86-64, share the AVX2 kernels of `simd`.

mod args;
mod keys;
#[cfg(target_arch = "x86_64")]
mod simd;
#[cfg(test)]
mod tests;
mod tiles;

pub(crate) use args::{AttnArgs, AttnJob, TaskEpilogue};

use crate::pool::ThreadPool;

/// The attention of every job of a step into `out` (`n_head·head_dim_v` values per
/// batch row; all jobs share the head layout), handing each task's results to `then`:
/// a step of one long decoding sequence split by keys, any other through the tiles.
pub(crate) fn attend_batch(
    pool: &ThreadPool,
    jobs: &[AttnJob],
    out: &mut [f32],
    then: Option<TaskEpilogue>,
) {
    if let [only] = jobs {
        if keys::attend_by_keys(pool, only, out, then) {
            return;
        }
    }
    tiles::attend_tiles(pool, jobs, out, then);
}

/// Writes `n × n_head·head_dim_v` attention outputs into `out`.
#[cfg(test)]
fn attend(pool: &ThreadPool, a: &AttnArgs, out: &mut [f32]) {
    assert_eq!(out.len(), a.n * a.n_head * a.head_dim_v);
    attend_batch(pool, &[AttnJob { args: *a, row0: 0 }], out, None);
}
