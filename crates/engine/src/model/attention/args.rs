//! What one sequence's attention reads, and which keys each of its queries sees.

use crate::kv_cache::rows::Paged;

#[cfg(target_arch = "x86_64")]
use super::simd;

/// Keys per chunk of the value sums: both attention paths add each chunk's sum to the
/// total in order (the split by keys needs chunks for its tasks), so they agree bit
/// for bit.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) const VALUE_CHUNK: usize = 128;

/// One sequence's attention inputs for one layer. Keys come in two runs: those already
/// in the cache (`k_old`, read from its blocks in place; positions `old_start..start`
/// are visible) and the batch's own (`k_new`, positions `start..start + n`).
#[derive(Clone, Copy)]
pub(crate) struct AttnArgs<'a> {
    /// `n × n_head·head_dim_k`, RoPE applied and pre-scaled.
    pub q: &'a [f32],
    pub k_new: &'a [f32],
    pub v_new: &'a [f32],
    pub k_old: Paged<'a>,
    pub v_old: Paged<'a>,
    pub old_start: usize,
    pub start: usize,
    pub n: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    pub window: Option<usize>,
    pub softcap: Option<f32>,
    /// Round attention probabilities to f16 before weighting the values, as llama.cpp
    /// does with an f16 cache (used with f16 KV, so both engines round alike).
    pub f16_probs: bool,
    /// Per head, a logit that joins its softmax with no value (gpt-oss's sinks).
    pub sinks: Option<&'a [f32]>,
    /// Every row must be the bits a one-token step gives it (the rows of a pass whose
    /// logits are all wanted: speculative decoding checks drafts with them), so the
    /// query tiles never mix two tokens' heads.
    pub token_tiles: bool,
    /// Every query also sees the batch's later rows (llama.cpp's `causal_attn` off).
    pub non_causal: bool,
}

impl AttnArgs<'_> {
    /// Head `h`'s sink logit, if the model has sinks.
    #[inline(always)]
    pub(super) fn sink(&self, h: usize) -> Option<f32> {
        self.sinks.map(|s| s[h])
    }
}

impl AttnArgs<'_> {
    /// KV head `kvh`'s values of positions `keys`, for `simd::weighted_sum_n`: the cached
    /// ones from `v_old` (the element type the cache stores, one slice per block), then
    /// the batch's own from `v_new`. The caller has checked that the rows are held.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn value_runs<'b, V>(
        &self,
        v_old: &'b [&'b [V]],
        kvh: usize,
        keys: std::ops::Range<usize>,
    ) -> (simd::PagedRun<'b, V>, simd::RowRun<f32>) {
        let vw = self.n_head_kv * self.head_dim_v;
        let col = kvh * self.head_dim_v;
        let own = keys.start.max(self.start)..keys.end;
        let cached_end = keys.end.min(self.start);
        let old = simd::PagedRun {
            blocks: v_old,
            from: keys.start,
            len: cached_end.saturating_sub(keys.start),
            stride: vw,
            col,
        };
        let new = simd::RowRun {
            first: self
                .v_new
                .as_ptr()
                .wrapping_add((own.start - self.start) * vw + col),
            stride: vw,
            len: own.len(),
        };
        (old, new)
    }

    /// Whether `k_old` and `v_old` hold every cached position before `end`.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) fn holds_old(&self, end: usize) -> bool {
        let (kw, vw) = (
            self.n_head_kv * self.head_dim_k,
            self.n_head_kv * self.head_dim_v,
        );
        self.k_old.holds(end, kw) && self.v_old.holds(end, vw)
    }
}

/// One sequence's attention in a batch, and the row of the batch's output where its
/// `n` output rows start.
#[derive(Clone, Copy)]
pub(crate) struct AttnJob<'a> {
    pub args: AttnArgs<'a>,
    pub row0: usize,
}

/// Work on a task's results in the thread that computed them: `then(job, kvh, t, out)`
/// for each token `t` of the task, `out` being that token's outputs of the heads that
/// share KV head `kvh` (side by side in the output row).
pub(crate) type TaskEpilogue<'a> = &'a (dyn Fn(usize, usize, usize, &[f32]) + Sync);

/// Visible key positions `lo..=hi` of query `t`: `hi` is its own position, or the
/// batch's last when attention is not causal.
#[inline(always)]
pub(super) fn visible(a: &AttnArgs, t: usize) -> (usize, usize) {
    let pos = a.start + t;
    let lo = match a.window {
        Some(w) => (pos + 1).saturating_sub(w).max(a.old_start),
        None => a.old_start,
    };
    let hi = match a.non_causal {
        true => a.start + a.n.max(1) - 1,
        false => pos,
    };
    (lo, hi)
}
