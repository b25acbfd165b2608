//! What one sequence's attention reads, and which keys each of its queries sees.

use crate::kv_cache::rows::Rows;

#[cfg(target_arch = "x86_64")]
use super::simd;

/// One sequence's attention inputs for one layer. Keys come in two runs: those already
/// in the cache (`k_old`, positions `old_start..start`) and the batch's own (`k_new`,
/// positions `start..start + n`).
#[derive(Clone, Copy)]
pub(crate) struct AttnArgs<'a> {
    /// `n × n_head·head_dim_k`, RoPE applied and pre-scaled.
    pub q: &'a [f32],
    pub k_new: &'a [f32],
    pub v_new: &'a [f32],
    pub k_old: Rows<'a>,
    pub v_old: Rows<'a>,
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
    /// Where `old_start` is in `k_old` and `v_old`: `None`, their first row, the rest
    /// following in order; `Some((first, rows))`, row `first` of a ring of `rows` (a
    /// sliding layer's cache, read in place after it has wrapped around).
    pub old_ring: Option<(usize, usize)>,
}

impl AttnArgs<'_> {
    /// The row of `k_old` and `v_old` holding cached position `j`.
    #[inline(always)]
    pub(super) fn old_row(&self, j: usize) -> usize {
        let i = j - self.old_start;
        match self.old_ring {
            None => i,
            Some((first, rows)) if first + i >= rows => first + i - rows,
            Some((first, _)) => first + i,
        }
    }

    /// Cached positions `from..to` as at most two runs of consecutive rows, `(first row,
    /// count)`: a ring's wrap-around splits them.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn old_runs(&self, from: usize, to: usize) -> [(usize, usize); 2] {
        if from >= to {
            return [(0, 0); 2];
        }
        let (first, n) = (self.old_row(from), to - from);
        let before_wrap = match self.old_ring {
            Some((_, rows)) => rows - first,
            None => n,
        };
        if n <= before_wrap {
            [(first, n), (0, 0)]
        } else {
            [(first, before_wrap), (0, n - before_wrap)]
        }
    }

    /// KV head `kvh`'s values of positions `keys`, for `simd::weighted_sum_n`: the cached
    /// ones from `v_old` (the element type the cache stores) as at most two runs, then the
    /// batch's own from `v_new`. The caller has checked that the rows lie in the slices.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn value_runs<V>(
        &self,
        v_old: &[V],
        kvh: usize,
        keys: std::ops::Range<usize>,
    ) -> ([simd::RowRun<V>; 2], simd::RowRun<f32>) {
        let vw = self.n_head_kv * self.head_dim_v;
        let col = kvh * self.head_dim_v;
        let own = keys.start.max(self.start)..keys.end;
        let old = self
            .old_runs(keys.start, keys.end.min(self.start))
            .map(|(row, len)| simd::RowRun {
                first: v_old.as_ptr().wrapping_add(row * vw + col),
                stride: vw,
                len,
            });
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

    /// Rows `k_old` and `v_old` must hold for cached positions up to `end`.
    #[cfg(target_arch = "x86_64")]
    pub(super) fn old_rows_needed(&self, end: usize) -> usize {
        match self.old_ring {
            Some((_, rows)) => rows,
            None => end.saturating_sub(self.old_start),
        }
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

/// Visible key positions `lo..=pos` of query `t`.
#[inline(always)]
pub(super) fn visible(a: &AttnArgs, t: usize) -> (usize, usize) {
    let pos = a.start + t;
    let lo = match a.window {
        Some(w) => (pos + 1).saturating_sub(w).max(a.old_start),
        None => a.old_start,
    };
    (lo, pos)
}
