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
    let ow = a.n_head * a.head_dim_v;
    assert_eq!(out.len(), a.n * ow);
    let q_blocks = a.n.div_ceil(QUERY_BLOCK);
    let out_ptr = SyncPtr::new(out);
    let wide = has_avx2();
    pool.run(a.n_head * q_blocks, &|task| {
        let h = task % a.n_head;
        let qb = task / a.n_head;
        let mut scores = Vec::new();
        let mut acc = vec![0.0f32; a.head_dim_v];
        for t in qb * QUERY_BLOCK..((qb + 1) * QUERY_BLOCK).min(a.n) {
            if wide {
                // SAFETY: the CPU supports AVX2 and FMA (checked by `has_avx2`).
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    one_query_avx2(a, h, t, &mut scores, &mut acc)
                };
            } else {
                one_query(a, h, t, &mut scores, &mut acc, dot, axpy);
            }
            // SAFETY: each (t, h) cell of `out` is written by exactly one task.
            let dst = unsafe { out_ptr.slice(t * ow + h * a.head_dim_v, a.head_dim_v) };
            dst.copy_from_slice(&acc);
        }
    });
}

fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`one_query`] with AVX2+FMA dot products and value sums.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn one_query_avx2(a: &AttnArgs, h: usize, t: usize, scores: &mut Vec<f32>, acc: &mut [f32]) {
    one_query(
        a,
        h,
        t,
        scores,
        acc,
        |x, y| simd::dot(x, y),
        |o, p, v| simd::axpy(o, p, v),
    )
}

/// Attention of query `t`, head `h`: the weighted sum of visible values into `acc`.
/// `dot` and `axpy` (`o += p·v`) are the inner kernels.
#[inline(always)]
fn one_query(
    a: &AttnArgs,
    h: usize,
    t: usize,
    scores: &mut Vec<f32>,
    acc: &mut [f32],
    dot: impl Fn(&[f32], &[f32]) -> f32,
    axpy: impl Fn(&mut [f32], f32, &[f32]),
) {
    let (hk, hv) = (a.head_dim_k, a.head_dim_v);
    let (kw, vw) = (a.n_head_kv * hk, a.n_head_kv * hv);
    let qw = a.n_head * hk;
    let kvh = h / (a.n_head / a.n_head_kv);
    let pos = a.start + t;
    let lo = match a.window {
        Some(w) => (pos + 1).saturating_sub(w).max(a.old_start),
        None => a.old_start,
    };
    let q = &a.q[t * qw + h * hk..t * qw + (h + 1) * hk];
    // Visible keys are first the cached run (positions lo..start), then the batch's own.
    let old = lo.min(a.start)..a.start;
    let new = lo.max(a.start)..pos + 1;
    let old_rows = (old.start - a.old_start)..(old.end - a.old_start);
    let new_rows = (new.start - a.start)..(new.end - a.start);
    scores.clear();
    for i in old_rows.clone() {
        scores.push(dot(q, &a.k_old[i * kw + kvh * hk..][..hk]));
    }
    for i in new_rows.clone() {
        scores.push(dot(q, &a.k_new[i * kw + kvh * hk..][..hk]));
    }
    if let Some(cap) = a.softcap {
        softcap(scores, cap);
    }
    softmax(scores);
    acc.fill(0.0);
    let mut p = scores.iter();
    for i in old_rows {
        axpy(acc, *p.next().unwrap(), &a.v_old[i * vw + kvh * hv..][..hv]);
    }
    for i in new_rows {
        axpy(acc, *p.next().unwrap(), &a.v_new[i * vw + kvh * hv..][..hv]);
    }
}

/// Portable kernels.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn axpy(o: &mut [f32], p: f32, v: &[f32]) {
    o.iter_mut().zip(v).for_each(|(o, v)| *o += p * v);
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    /// Requires AVX2 and FMA.
    #[inline(always)]
    pub unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut s0 = _mm256_setzero_ps();
        let mut s1 = _mm256_setzero_ps();
        let mut i = 0;
        while i + 16 <= n {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), s0);
            s1 = _mm256_fmadd_ps(
                _mm256_loadu_ps(pa.add(i + 8)),
                _mm256_loadu_ps(pb.add(i + 8)),
                s1,
            );
            i += 16;
        }
        let s = _mm256_add_ps(s0, s1);
        let lo = _mm256_castps256_ps128(s);
        let hi = _mm256_extractf128_ps(s, 1);
        let q = _mm_add_ps(lo, hi);
        let q = _mm_add_ps(q, _mm_movehl_ps(q, q));
        let q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
        let mut r = _mm_cvtss_f32(q);
        while i < n {
            r += a[i] * b[i];
            i += 1;
        }
        r
    }

    /// `o += p · v`. Requires AVX2 and FMA.
    #[inline(always)]
    pub unsafe fn axpy(o: &mut [f32], p: f32, v: &[f32]) {
        let n = o.len().min(v.len());
        let (po, pv) = (o.as_mut_ptr(), v.as_ptr());
        let pp = _mm256_set1_ps(p);
        let mut i = 0;
        while i + 8 <= n {
            let r = _mm256_fmadd_ps(pp, _mm256_loadu_ps(pv.add(i)), _mm256_loadu_ps(po.add(i)));
            _mm256_storeu_ps(po.add(i), r);
            i += 8;
        }
        while i < n {
            o[i] += p * v[i];
            i += 1;
        }
    }
}
