//! The attention of one long decoding sequence, split by keys.
//!
//! With one sequence, the tasks of the tiles ([`attend_tiles`]) are its KV heads. SmolLM2 has three,
//! so on two threads one thread does two while the other waits, and at a few thousand
//! positions reading the cache is most of a decoding step. Here the keys are cut into
//! chunks instead, and the work runs in three pool jobs:
//! 1. the scores of every head for a chunk, each cache row read whole, once;
//! 2. the softmax of each head: the same function over the same row as the tiles use,
//!    so the same probabilities;
//! 3. each chunk's share of the value sums, added up afterwards in chunk order (so the
//!    result does not depend on which thread ran what).
//!
//! [`attend_tiles`]: super::tiles::attend_tiles

use super::args::{AttnJob, TaskEpilogue};
use crate::pool::ThreadPool;

/// Fewest visible keys for which the split pays for its two extra pool jobs.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const MIN_KEYS: usize = 512;

/// Computes `job`, the step's only job, split by keys, if it is one decoding token with
/// at least [`MIN_KEYS`] visible keys, on a CPU with AVX2 and a pool of two threads or
/// more; returns whether it did. Writes what the tiles ([`attend_tiles`]) would (the same
/// bits: both add the value sums by chunks of `VALUE_CHUNK` keys; within rounding of
/// the single-query path, one head per KV head) and calls `then` once per KV head.
///
/// [`attend_tiles`]: super::tiles::attend_tiles
pub(crate) fn attend_by_keys(
    pool: &ThreadPool,
    job: &AttnJob,
    out: &mut [f32],
    then: Option<TaskEpilogue>,
) -> bool {
    let a = &job.args;
    if a.n != 1 || pool.n_threads() < 2 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        x86::attend_by_keys(pool, job, out, then)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (out, then, MIN_KEYS);
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::cell::RefCell;

    use super::super::args::{visible, AttnJob, TaskEpilogue};
    use super::super::simd::{self, PREFETCH_ROWS};
    use super::super::tiles::has_avx2;
    use super::MIN_KEYS;
    use crate::kv_cache::rows::{paged_row, Elem, Paged};
    use crate::model::ops::{round_to_f16, softmax_with_sink};
    use crate::pool::{SyncPtr, ThreadPool};

    /// Keys per task: enough tasks to balance two threads from 512 keys on, few enough
    /// that the chunks' value sums stay a small fraction of the work; the tiles sum
    /// values by the same chunks.
    const CHUNK: usize = super::super::args::VALUE_CHUNK;

    thread_local! {
        /// The scores (then probabilities) of every head, and each chunk's value sums:
        /// kept by the calling thread from step to step.
        static SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> =
            const { RefCell::new((Vec::new(), Vec::new())) };
    }

    pub(super) fn attend_by_keys(
        pool: &ThreadPool,
        job: &AttnJob,
        out: &mut [f32],
        then: Option<TaskEpilogue>,
    ) -> bool {
        let a = &job.args;
        let group = a.n_head / a.n_head_kv;
        if !(1..=4).contains(&group) || !has_avx2() {
            return false;
        }
        let (lo, hi) = visible(a, 0);
        if hi + 1 - lo < MIN_KEYS {
            return false;
        }
        macro_rules! with_group {
            ($k:expr, $v:expr) => {
                // SAFETY: the CPU has AVX2, FMA and F16C (checked above).
                unsafe {
                    match group {
                        1 => by_keys::<_, _, 1>(pool, job, ($k, $v), out, then),
                        2 => by_keys::<_, _, 2>(pool, job, ($k, $v), out, then),
                        3 => by_keys::<_, _, 3>(pool, job, ($k, $v), out, then),
                        _ => by_keys::<_, _, 4>(pool, job, ($k, $v), out, then),
                    }
                }
            };
        }
        match (a.k_old, a.v_old) {
            (Paged::F32(k), Paged::F32(v)) => with_group!(k, v),
            (Paged::F16(k), Paged::F16(v)) => with_group!(k, v),
            (Paged::F32(k), Paged::F16(v)) => with_group!(k, v),
            (Paged::F16(k), Paged::F32(v)) => with_group!(k, v),
        }
        true
    }

    /// [`attend_by_keys`] with the cache's element types and the heads per KV head (`T`)
    /// known. Requires AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn by_keys<K: Elem + Sync, V: Elem + Sync, const T: usize>(
        pool: &ThreadPool,
        job: &AttnJob,
        (k_old, v_old): (&[&[K]], &[&[V]]),
        out: &mut [f32],
        then: Option<TaskEpilogue>,
    ) {
        let a = &job.args;
        let (hk, hv) = (a.head_dim_k, a.head_dim_v);
        let (kw, vw) = (a.n_head_kv * hk, a.n_head_kv * hv);
        let (n_head, ow) = (a.n_head, a.n_head * hv);
        let (lo, hi) = visible(a, 0);
        let span = hi + 1 - lo;
        // Cached keys are `lo..split`; the token's own (from the step's buffers) `split..=hi`.
        let split = a.start.clamp(lo, hi + 1);
        // Every row read below lies inside its slice.
        assert!(T * a.n_head_kv == n_head && a.q.len() >= n_head * hk);
        assert!(lo >= a.old_start && split >= a.start);
        assert!(a.holds_old(split));
        assert!((hi + 1 - split) * kw <= a.k_new.len() && (hi + 1 - split) * vw <= a.v_new.len());
        assert!((job.row0 + 1) * ow <= out.len());
        let n_chunks = span.div_ceil(CHUNK);
        let keys_of = |c: usize| lo + c * CHUNK..(lo + (c + 1) * CHUNK).min(hi + 1);
        let k_old_row = |j: usize| paged_row(k_old, j, kw);
        let v_old_row = |j: usize| paged_row(v_old, j, vw);
        SCRATCH.with(|scratch| {
            let (scores, partial) = &mut *scratch.borrow_mut();
            scores.resize(n_head * span, 0.0);
            partial.resize(n_chunks * ow, 0.0);
            let scores_ptr = SyncPtr::new(scores);
            let partial_ptr = SyncPtr::new(partial);
            // 1. Scores: row `h` of `scores` holds head `h`'s, key `lo + i` at `i`.
            pool.run(n_chunks, &|c| {
                let keys = keys_of(c);
                let cached_end = split.min(keys.end);
                let fetch_row = |j: usize| {
                    if j < cached_end {
                        simd::prefetch_lines::<{ simd::L1 }>(
                            k_old_row(j) as *const u8,
                            kw * size_of::<K>(),
                        );
                    }
                };
                (keys.start..keys.start + PREFETCH_ROWS).for_each(fetch_row);
                for j in keys {
                    fetch_row(j + PREFETCH_ROWS);
                    for kvh in 0..a.n_head_kv {
                        let q: [*const f32; T] =
                            std::array::from_fn(|r| a.q.as_ptr().add((kvh * T + r) * hk));
                        let s = if j < split {
                            simd::dot_n::<K, T>(q, k_old_row(j).add(kvh * hk), hk)
                        } else {
                            let row = a.k_new.as_ptr().add((j - split) * kw + kvh * hk);
                            simd::dot_n::<f32, T>(q, row, hk)
                        };
                        for (r, s) in s.into_iter().enumerate() {
                            let s = match a.softcap {
                                Some(cap) => cap * (s / cap).tanh(),
                                None => s,
                            };
                            // SAFETY: key `j` of head `kvh·T + r`: this chunk's alone.
                            unsafe { scores_ptr.slice((kvh * T + r) * span + j - lo, 1)[0] = s };
                        }
                    }
                }
            });
            // 2. Probabilities, a head per task.
            pool.run(n_head, &|h| {
                // SAFETY: head `h`'s row, this task's alone.
                let row = unsafe { scores_ptr.slice(h * span, span) };
                softmax_with_sink(row, a.sink(h));
                if a.f16_probs {
                    round_to_f16(row);
                }
            });
            // 3. Each chunk's value sums, every head, into its own slice of `partial`.
            let probs: &[f32] = std::slice::from_raw_parts(scores_ptr.0, n_head * span);
            pool.run(n_chunks, &|c| {
                let keys = keys_of(c);
                let cached = keys.start..split.min(keys.end);
                for j in cached.clone() {
                    simd::prefetch_lines::<{ simd::L2 }>(
                        v_old_row(j) as *const u8,
                        vw * size_of::<V>(),
                    );
                }
                // SAFETY: chunk `c`'s slice, this task's alone.
                let sums = unsafe { partial_ptr.slice(c * ow, ow) };
                for kvh in 0..a.n_head_kv {
                    let (old, new) = a.value_runs(v_old, kvh, keys.clone());
                    let heads = &mut sums[kvh * T * hv..(kvh + 1) * T * hv];
                    let p = &probs[kvh * T * span + keys.start - lo..];
                    simd::weighted_sum_n::<T, V>(heads, p, span, old, new);
                }
            });
            // The chunks' sums in chunk order, whichever thread computed them.
            let dst = &mut out[job.row0 * ow..(job.row0 + 1) * ow];
            dst.fill(0.0);
            for sums in partial.chunks_exact(ow) {
                dst.iter_mut().zip(sums).for_each(|(o, s)| *o += s);
            }
            if let Some(then) = then {
                for kvh in 0..a.n_head_kv {
                    then(0, kvh, 0, &dst[kvh * T * hv..(kvh + 1) * T * hv]);
                }
            }
        });
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::{attend_batch, AttnArgs};
    use super::*;
    use crate::kv_cache::rows::Paged;
    use crate::model::attention::tests::{paged, plain_args};
    use crate::sampler::Rng;

    /// A decoding token with `old` cached positions: queries, its own key and value, and
    /// the cache (f32 and f16 copies).
    struct Case {
        q: Vec<f32>,
        k_new: Vec<f32>,
        v_new: Vec<f32>,
        k_old: Vec<f32>,
        v_old: Vec<f32>,
        k_half: Vec<half::f16>,
        v_half: Vec<half::f16>,
    }

    fn case(rng: &mut Rng, old: usize, n_head: usize, n_head_kv: usize, hd: usize) -> Case {
        let mut rand =
            |n: usize| -> Vec<f32> { (0..n).map(|_| rng.next_f64() as f32 * 2.0 - 1.0).collect() };
        let (k_old, v_old) = (rand(old * n_head_kv * hd), rand(old * n_head_kv * hd));
        let half = |x: &[f32]| x.iter().map(|&v| half::f16::from_f32(v)).collect();
        Case {
            q: rand(n_head * hd),
            k_new: rand(n_head_kv * hd),
            v_new: rand(n_head_kv * hd),
            k_half: half(&k_old),
            v_half: half(&v_old),
            k_old,
            v_old,
        }
    }

    /// Split by keys, the outputs are the tiles' within rounding (the value sums are
    /// added in another order), and the epilogue sees each KV head's outputs once: for
    /// one to four heads per KV head, f32 and f16 caches, a soft-cap and a window.
    #[test]
    fn attention_split_by_keys_matches_the_tiles() {
        let mut rng = Rng::new(17);
        let (one, two) = (ThreadPool::new(1), ThreadPool::new(2));
        let hd = 24;
        for (group, n_head_kv) in [(1, 2), (2, 2), (3, 3), (4, 1)] {
            let n_head = group * n_head_kv;
            for (f16_cache, softcap, window) in [
                (false, None, None),
                (true, Some(0.8), None),
                (true, None, Some(600)),
            ] {
                let old = 700;
                let c = case(&mut rng, old, n_head, n_head_kv, hd);
                let w = n_head_kv * hd;
                let (k_pages, v_pages) = (paged(&c.k_old, w), paged(&c.v_old, w));
                let (k_hpages, v_hpages) = (paged(&c.k_half, w), paged(&c.v_half, w));
                let (k_rows, v_rows) = if f16_cache {
                    (Paged::F16(&k_hpages), Paged::F16(&v_hpages))
                } else {
                    (Paged::F32(&k_pages), Paged::F32(&v_pages))
                };
                let args = AttnArgs {
                    q: &c.q,
                    k_new: &c.k_new,
                    v_new: &c.v_new,
                    k_old: k_rows,
                    v_old: v_rows,
                    old_start: 0,
                    start: old,
                    n: 1,
                    n_head,
                    n_head_kv,
                    head_dim_k: hd,
                    head_dim_v: hd,
                    window,
                    softcap,
                    f16_probs: f16_cache,
                    sinks: None,
                    token_tiles: false,
                    non_causal: false,
                };
                // Row 1 of a two-row output, so that `row0` is honoured.
                let job = AttnJob { args, row0: 1 };
                let ow = n_head * hd;
                let calls = std::sync::Mutex::new(Vec::new());
                let then = |j: usize, kvh: usize, t: usize, out: &[f32]| {
                    calls.lock().unwrap().push((j, kvh, t, out.to_vec()));
                };
                let mut split = vec![0.0; 2 * ow];
                assert!(attend_by_keys(&two, &job, &mut split, Some(&then)));
                let mut tiles = vec![0.0; 2 * ow];
                attend_batch(&one, &[job], &mut tiles, None);
                let what = format!("group {group}, f16 {f16_cache}, window {window:?}");
                assert!(
                    split[..ow].iter().all(|&v| v == 0.0),
                    "{what}: row 0 untouched"
                );
                for (i, (x, y)) in split[ow..].iter().zip(&tiles[ow..]).enumerate() {
                    assert!(
                        (x - y).abs() <= 1e-5 * y.abs().max(1.0),
                        "{what}, value {i}: {x} vs {y}"
                    );
                }
                // The tiles sum values by the same chunks: the same bits, wherever
                // tiles serve a decoding token (two heads per KV head or more; one
                // goes through the single-query path).
                if group >= 2 {
                    assert_eq!(split[ow..], tiles[ow..], "{what}: bit for bit");
                }
                let mut calls = calls.into_inner().unwrap();
                calls.sort_by_key(|c| c.1);
                assert_eq!(calls.len(), n_head_kv, "{what}");
                for (kvh, (j, k, t, out)) in calls.into_iter().enumerate() {
                    assert_eq!((j, k, t), (0, kvh, 0), "{what}");
                    assert_eq!(out, split[ow + kvh * group * hd..][..group * hd], "{what}");
                }
            }
        }
    }

    /// Short spans, prompts and one-thread pools keep the tiles.
    #[test]
    fn short_spans_prompts_and_one_thread_are_not_split() {
        let mut rng = Rng::new(3);
        let (n_head, n_head_kv, hd) = (6, 2, 16);
        let c = case(&mut rng, 900, n_head, n_head_kv, hd);
        let (k_pages, v_pages) = (
            paged(&c.k_old, n_head_kv * hd),
            paged(&c.v_old, n_head_kv * hd),
        );
        let args = |old: usize, n: usize| {
            plain_args(
                (&c.q, &c.k_new, &c.v_new),
                (Paged::F32(&k_pages), Paged::F32(&v_pages)),
                (old, n),
                (n_head, n_head_kv, hd),
            )
        };
        let (one, two) = (ThreadPool::new(1), ThreadPool::new(2));
        let mut out = vec![0.0; n_head * hd];
        let mut split = |pool: &ThreadPool, args| {
            attend_by_keys(pool, &AttnJob { args, row0: 0 }, &mut out, None)
        };
        assert!(!split(&two, args(MIN_KEYS - 2, 1)));
        assert!(split(&two, args(MIN_KEYS - 1, 1)));
        assert!(!split(&one, args(900, 1)));
        // A prompt of one token's worth of queries but two rows of its own keys is n = 2.
        let q2 = [c.q.clone(), c.q.clone()].concat();
        let k2 = [c.k_new.clone(), c.k_new.clone()].concat();
        let v2 = [c.v_new.clone(), c.v_new.clone()].concat();
        let prompt = AttnArgs {
            q: &q2,
            k_new: &k2,
            v_new: &v2,
            ..args(900, 2)
        };
        let mut out2 = vec![0.0; 2 * n_head * hd];
        let job = AttnJob {
            args: prompt,
            row0: 0,
        };
        assert!(!attend_by_keys(&two, &job, &mut out2, None));
    }
}
