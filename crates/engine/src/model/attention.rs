//! Causal multi-head attention with grouped KV heads, an optional sliding window and
//! an optional logit soft-cap, for one sequence's share of a batch.

use super::ops::{softcap, softmax};
use crate::pool::{SyncPtr, ThreadPool};

/// Queries processed by one task (prompts are split by head and by query block).
const QUERY_BLOCK: usize = 32;

/// One sequence's attention inputs for one layer. Keys come in two runs: those already
/// in the cache (`k_old`, positions `old_start..start`) and the batch's own (`k_new`,
/// positions `start..start + n`).
pub(crate) struct AttnArgs<'a> {
    /// `n × n_head·head_dim_k`, RoPE applied and pre-scaled.
    pub q: &'a [f32],
    pub k_new: &'a [f32],
    pub v_new: &'a [f32],
    pub k_old: &'a [f32],
    pub v_old: &'a [f32],
    pub old_start: usize,
    pub start: usize,
    pub n: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    pub window: Option<usize>,
    pub softcap: Option<f32>,
}

/// Writes `n × n_head·head_dim_v` attention outputs into `out`.
pub(crate) fn attend(pool: &ThreadPool, a: &AttnArgs, out: &mut [f32]) {
    let (hk, hv) = (a.head_dim_k, a.head_dim_v);
    let (kw, vw) = (a.n_head_kv * hk, a.n_head_kv * hv);
    let qw = a.n_head * hk;
    let ow = a.n_head * hv;
    assert_eq!(out.len(), a.n * ow);
    let group = a.n_head / a.n_head_kv;
    let q_blocks = a.n.div_ceil(QUERY_BLOCK);
    let out_ptr = SyncPtr::new(out);
    pool.run(a.n_head * q_blocks, &|task| {
        let h = task % a.n_head;
        let qb = task / a.n_head;
        let kvh = h / group;
        let mut scores = Vec::new();
        let mut acc = vec![0.0f32; hv];
        for t in qb * QUERY_BLOCK..((qb + 1) * QUERY_BLOCK).min(a.n) {
            let pos = a.start + t;
            let lo = match a.window {
                Some(w) => (pos + 1).saturating_sub(w).max(a.old_start),
                None => a.old_start,
            };
            let q = &a.q[t * qw + h * hk..t * qw + (h + 1) * hk];
            let key = |j: usize| -> &[f32] {
                let (buf, i) = if j < a.start {
                    (a.k_old, j - a.old_start)
                } else {
                    (a.k_new, j - a.start)
                };
                &buf[i * kw + kvh * hk..i * kw + (kvh + 1) * hk]
            };
            let value = |j: usize| -> &[f32] {
                let (buf, i) = if j < a.start {
                    (a.v_old, j - a.old_start)
                } else {
                    (a.v_new, j - a.start)
                };
                &buf[i * vw + kvh * hv..i * vw + (kvh + 1) * hv]
            };
            scores.clear();
            scores.extend((lo..=pos).map(|j| dot(q, key(j))));
            if let Some(cap) = a.softcap {
                softcap(&mut scores, cap);
            }
            softmax(&mut scores);
            acc.iter_mut().for_each(|v| *v = 0.0);
            for (j, &p) in (lo..=pos).zip(&scores) {
                for (o, &v) in acc.iter_mut().zip(value(j)) {
                    *o += p * v;
                }
            }
            // SAFETY: each (t, h) cell of `out` is written by exactly one task.
            let dst = unsafe { out_ptr.slice(t * ow + h * hv, hv) };
            dst.copy_from_slice(&acc);
        }
    });
}

#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent sums let the compiler vectorise without reassociating.
    let mut s = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            s[i] += x[i] * y[i];
        }
    }
    let mut tail = 0.0;
    for (x, y) in ra.iter().zip(rb) {
        tail += x * y;
    }
    s.iter().sum::<f32>() + tail
}
