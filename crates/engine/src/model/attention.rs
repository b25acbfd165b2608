//! Causal multi-head attention with grouped KV heads, an optional sliding window and
//! an optional logit soft-cap, for one sequence's share of a batch.

use std::cell::RefCell;

use super::attention_keys::attend_by_keys;
use super::ops::{round_to_f16, softcap, softmax};
#[cfg(target_arch = "x86_64")]
use crate::kv_cache::rows::Elem;
use crate::kv_cache::rows::{Row, Rows};
use crate::pool::{SyncPtr, ThreadPool};

/// Queries processed by one task (prompts are split by head and by query block).
const QUERY_BLOCK: usize = 32;
/// How far ahead (in positions) attention asks for cache rows.
#[cfg(target_arch = "x86_64")]
pub(super) const PREFETCH_ROWS: usize = 12;
/// Most queries that share each key and value load on the AVX2 path. Tiles are as wide
/// as the heads sharing a KV head when that is fewer (SmolLM2 has three), so a tile never
/// computes a query twice.
const TILE: usize = 4;

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

thread_local! {
    /// Scores and output tiles of the task running on this thread: reused, so a decode
    /// step allocates nothing here.
    static SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Writes `n × n_head·head_dim_v` attention outputs into `out`.
#[cfg(test)]
pub(crate) fn attend(pool: &ThreadPool, a: &AttnArgs, out: &mut [f32]) {
    assert_eq!(out.len(), a.n * a.n_head * a.head_dim_v);
    attend_batch(pool, &[AttnJob { args: *a, row0: 0 }], out, None);
}

/// Work on a task's results in the thread that computed them: `then(job, kvh, t, out)`
/// for each token `t` of the task, `out` being that token's outputs of the heads that
/// share KV head `kvh` (side by side in the output row).
pub(crate) type TaskEpilogue<'a> = &'a (dyn Fn(usize, usize, usize, &[f32]) + Sync);

/// The attention of every job in one pool run (one synchronisation per layer however
/// many sequences decode together), split by sequence, query block and (unless the batch
/// has two sequences per thread) KV head. All jobs share the head layout; `out` holds
/// `n_head·head_dim_v` values per batch row.
pub(crate) fn attend_batch(
    pool: &ThreadPool,
    jobs: &[AttnJob],
    out: &mut [f32],
    then: Option<TaskEpilogue>,
) {
    let Some(first) = jobs.first() else { return };
    if let [only] = jobs {
        if attend_by_keys(pool, only, out, then) {
            return;
        }
    }
    let ow = first.args.n_head * first.args.head_dim_v;
    // A task is one KV head of one query block: the heads sharing that KV head (and
    // the block's tokens) go through the tiles together, so each cached key and value
    // row is read once per tile of four queries, not once per query. With at least two
    // sequences per thread, a task takes every KV head of its block instead: it then
    // asks for whole cache rows, one run of memory per layer rather than a stride of
    // pieces, which the memory system serves faster (+3% at batch 8 on SmolLM2, where
    // reading the cache is a sixth of a decoding step).
    let whole_rows = jobs.len() >= 2 * pool.n_threads();
    let heads_per_task = |j: &AttnJob| if whole_rows { j.args.n_head_kv } else { 1 };
    let tasks_of =
        |j: &AttnJob| j.args.n_head_kv / heads_per_task(j) * j.args.n.div_ceil(QUERY_BLOCK);
    for j in jobs {
        assert!(j.args.n_head * j.args.head_dim_v == ow && (j.row0 + j.args.n) * ow <= out.len());
    }
    let total: usize = jobs.iter().map(tasks_of).sum();
    let out_ptr = SyncPtr::new(out);
    let wide = has_avx2();
    pool.run(total, &|mut task| {
        let mut jobs = jobs.iter().enumerate();
        let (job_index, job) = loop {
            let (i, j) = jobs.next().expect("task index below the total");
            if task < tasks_of(j) {
                break (i, j);
            }
            task -= tasks_of(j);
        };
        let a = &job.args;
        let per_task = heads_per_task(job);
        let per_block = a.n_head_kv / per_task;
        let qb = task / per_block;
        let tokens = qb * QUERY_BLOCK..((qb + 1) * QUERY_BLOCK).min(a.n);
        let first_head = task % per_block * per_task;
        let to = TaskOut {
            out: out_ptr,
            row0: job.row0,
            then: then.map(|f| (f, job_index)),
        };
        for kvh in first_head..first_head + per_task {
            // Whole rows are asked for once per position, by the task's first head; the
            // other heads' own prefetches then find their lines in L2 (cheap), and
            // still help when a long context has pushed the rows out again.
            let fetch = if per_task > 1 && kvh == first_head {
                Fetch::WholeRows
            } else {
                Fetch::OwnHead
            };
            // SAFETY: the jobs' rows lie in `out` (asserted above) and are disjoint, and
            // each (row, head) cell belongs to one task: its query block and KV head.
            unsafe { one_kv_head(a, kvh, tokens.clone(), (fetch, wide), &to) };
        }
    });
}

/// Where a task's outputs go: the batch's output (`n_head·head_dim_v` values per row;
/// the job's rows start at `row0`), then the epilogue with the job's index.
struct TaskOut<'a> {
    out: SyncPtr<f32>,
    row0: usize,
    then: Option<(TaskEpilogue<'a>, usize)>,
}

/// The task body of [`attend_batch`] for one KV head: the queries of `tokens` whose
/// heads share KV head `kvh`, through the AVX2 tiles if `wide`.
///
/// # Safety
/// `to.out` holds the rows of the job from `to.row0` (each `n_head·head_dim_v` values),
/// and no other thread reads or writes the cells of these tokens and heads meanwhile.
unsafe fn one_kv_head(
    a: &AttnArgs,
    kvh: usize,
    tokens: std::ops::Range<usize>,
    (fetch, wide): (Fetch, bool),
    to: &TaskOut,
) {
    #[cfg(not(target_arch = "x86_64"))]
    let _ = fetch;
    let (out_ptr, row0) = (to.out, to.row0);
    let ow = a.n_head * a.head_dim_v;
    let (hv, group) = (a.head_dim_v, a.n_head / a.n_head_kv);
    // Queries (token, head), token-major, all reading KV head `kvh`.
    let n_queries = tokens.len() * group;
    let query = |i: usize| (tokens.start + i / group, kvh * group + i % group);
    SCRATCH.with(|scratch| {
        let (scores, acc) = &mut *scratch.borrow_mut();
        acc.resize(TILE * hv, 0.0);
        let mut i = 0;
        while i < n_queries {
            let rows = if wide && n_queries > 1 {
                // A short last tile repeats its last query (same result, no extra reads).
                #[cfg(target_arch = "x86_64")]
                {
                    let last = n_queries - 1;
                    // SAFETY: the CPU supports AVX2, FMA and F16C (checked by `has_avx2`).
                    unsafe {
                        if group == 3 {
                            let tile = std::array::from_fn(|r| query((i + r).min(last)));
                            query_tile_avx2::<3>(a, tile, scores, acc, fetch)
                        } else {
                            let tile = std::array::from_fn(|r| query((i + r).min(last)));
                            query_tile_avx2::<TILE>(a, tile, scores, acc, fetch)
                        }
                    };
                }
                (if group == 3 { 3 } else { TILE }).min(n_queries - i)
            } else {
                let (t, h) = query(i);
                if wide {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: as above.
                    unsafe {
                        one_query_avx2(a, h, t, scores, &mut acc[..hv])
                    };
                } else {
                    one_query(a, h, t, scores, &mut acc[..hv], dot, axpy);
                }
                1
            };
            for r in 0..rows {
                let (t, h) = query(i + r);
                // SAFETY: this call's own cells (see the function's contract).
                let dst = unsafe { out_ptr.slice((row0 + t) * ow + h * hv, hv) };
                dst.copy_from_slice(&acc[r * hv..(r + 1) * hv]);
            }
            i += rows;
        }
    });
    if let Some((then, job_index)) = to.then {
        for t in tokens {
            let at = (row0 + t) * ow + kvh * group * hv;
            // SAFETY: the cells this task wrote above, read by it alone.
            then(job_index, kvh, t, unsafe { out_ptr.slice(at, group * hv) });
        }
    }
}

/// Which cache lines a tile asks for ahead of use.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fetch {
    /// Its own KV head's piece of each row.
    OwnHead,
    /// Each row whole (every KV head's piece), into L2.
    WholeRows,
}

pub(super) fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
            && std::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`one_query`] with AVX2+FMA dot products and value sums.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
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

/// `T` (up to four) queries `(token, head)` whose heads share one KV head, at once: each key and
/// value row is loaded once for the four (attention is bound by these loads). Keys a
/// query may not see get a score of -inf; `acc` receives the four outputs in order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn query_tile_avx2<const T: usize>(
    a: &AttnArgs,
    tile: [(usize, usize); T],
    scores: &mut Vec<f32>,
    acc: &mut [f32],
    fetch: Fetch,
) {
    match (a.k_old, a.v_old) {
        (Rows::F32(k), Rows::F32(v)) => query_tile_of(a, (k, v), tile, scores, acc, fetch),
        (Rows::F16(k), Rows::F16(v)) => query_tile_of(a, (k, v), tile, scores, acc, fetch),
        (Rows::F32(k), Rows::F16(v)) => query_tile_of(a, (k, v), tile, scores, acc, fetch),
        (Rows::F16(k), Rows::F32(v)) => query_tile_of(a, (k, v), tile, scores, acc, fetch),
    }
}

/// [`query_tile_avx2`] with the cache's element types known, so that rows are found by
/// pointer arithmetic rather than by a dispatch per position: the cached positions
/// (`lo..split`) first, then the batch's own (`split..=hi`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn query_tile_of<K: Elem, V: Elem, const T: usize>(
    a: &AttnArgs,
    (k_old, v_old): (&[K], &[V]),
    tile: [(usize, usize); T],
    scores: &mut Vec<f32>,
    acc: &mut [f32],
    fetch: Fetch,
) {
    let (hk, hv) = (a.head_dim_k, a.head_dim_v);
    let (kw, vw) = (a.n_head_kv * hk, a.n_head_kv * hv);
    let qw = a.n_head * hk;
    let kvh = tile[0].1 / (a.n_head / a.n_head_kv);
    let ranges: [(usize, usize); T] = tile.map(|(t, _)| visible(a, t));
    let lo = ranges.iter().map(|r| r.0).min().unwrap_or(0);
    let hi = ranges.iter().map(|r| r.1).max().unwrap_or(0);
    let span = hi + 1 - lo;
    let split = a.start.clamp(lo, hi + 1);
    // Every row read below lies inside its slice.
    assert!(lo >= a.old_start && a.start >= a.old_start);
    let old_rows = a.old_rows_needed(split);
    assert!(split == lo || (old_rows * kw <= k_old.len() && old_rows * vw <= v_old.len()));
    assert!(
        split > hi
            || ((hi + 1 - a.start) * kw <= a.k_new.len()
                && (hi + 1 - a.start) * vw <= a.v_new.len())
    );
    assert!(
        a.n_head_kv > kvh
            && tile
                .iter()
                .all(|&(t, h)| (t + 1) * qw <= a.q.len() && h < a.n_head)
    );
    let q: [*const f32; T] = tile.map(|(t, h)| a.q.as_ptr().add(t * qw + h * hk));
    let k_old_at = |j: usize| k_old.as_ptr().add(a.old_row(j) * kw + kvh * hk);
    let v_old_at = |j: usize| v_old.as_ptr().add(a.old_row(j) * vw + kvh * hv);
    let k_new_at = |j: usize| a.k_new.as_ptr().add((j - a.start) * kw + kvh * hk);
    scores.clear();
    scores.resize(T * span, f32::NEG_INFINITY);
    let mut record = |j: usize, s: [f32; T]| {
        for r in 0..T {
            if (ranges[r].0..=ranges[r].1).contains(&j) {
                scores[r * span + j - lo] = match a.softcap {
                    Some(cap) => cap * (s[r] / cap).tanh(),
                    None => s[r],
                };
            }
        }
    };
    // The cache rows were last read a whole step ago and are out of every cache by now;
    // they sit a row of all KV heads apart, too far for the hardware prefetcher's taste,
    // so each key and value row is asked for PREFETCH_ROWS keys ahead.
    let prefetch = |j: usize| {
        if j >= split {
            return;
        }
        if fetch == Fetch::WholeRows {
            let k_row = k_old.as_ptr().add(a.old_row(j) * kw);
            let v_row = v_old.as_ptr().add(a.old_row(j) * vw);
            simd::prefetch_lines::<{ simd::L2 }>(k_row as *const u8, kw * size_of::<K>());
            simd::prefetch_lines::<{ simd::L2 }>(v_row as *const u8, vw * size_of::<V>());
        } else {
            simd::prefetch_lines::<{ simd::L1 }>(k_old_at(j) as *const u8, hk * size_of::<K>());
            simd::prefetch_lines::<{ simd::L2 }>(v_old_at(j) as *const u8, hv * size_of::<V>());
        }
    };
    (lo..lo + PREFETCH_ROWS).for_each(prefetch);
    for j in lo..split {
        prefetch(j + PREFETCH_ROWS);
        record(j, simd::dot_n(q, k_old_at(j), hk));
    }
    for j in split..=hi {
        record(j, simd::dot_n(q, k_new_at(j), hk));
    }
    for r in 0..T {
        softmax(&mut scores[r * span..(r + 1) * span]);
    }
    if a.f16_probs {
        round_to_f16(scores);
    }
    let (old, new) = a.value_runs(v_old, kvh, lo..hi + 1);
    simd::weighted_sum_n::<T, V>(&mut acc[..T * hv], scores, span, old, new);
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
    dot: impl Fn(&[f32], Row) -> f32,
    axpy: impl Fn(&mut [f32], f32, Row),
) {
    let (hk, hv) = (a.head_dim_k, a.head_dim_v);
    let (kw, vw) = (a.n_head_kv * hk, a.n_head_kv * hv);
    let qw = a.n_head * hk;
    let kvh = h / (a.n_head / a.n_head_kv);
    let (lo, pos) = visible(a, t);
    let q = &a.q[t * qw + h * hk..t * qw + (h + 1) * hk];
    // Visible keys are first the cached run (positions lo..start), then the batch's own.
    let old = lo.min(a.start)..a.start;
    let new = lo.max(a.start)..pos + 1;
    let new_rows = (new.start - a.start)..(new.end - a.start);
    scores.clear();
    for j in old.clone() {
        scores.push(dot(q, a.k_old.slice(a.old_row(j) * kw + kvh * hk, hk)));
    }
    for i in new_rows.clone() {
        scores.push(dot(q, Row::F32(&a.k_new[i * kw + kvh * hk..][..hk])));
    }
    if let Some(cap) = a.softcap {
        softcap(scores, cap);
    }
    softmax(scores);
    if a.f16_probs {
        round_to_f16(scores);
    }
    acc.fill(0.0);
    let mut p = scores.iter();
    for j in old {
        axpy(
            acc,
            *p.next().unwrap(),
            a.v_old.slice(a.old_row(j) * vw + kvh * hv, hv),
        );
    }
    for i in new_rows {
        axpy(
            acc,
            *p.next().unwrap(),
            Row::F32(&a.v_new[i * vw + kvh * hv..][..hv]),
        );
    }
}

/// Portable kernels.
fn dot(a: &[f32], b: Row) -> f32 {
    a.iter().enumerate().map(|(i, x)| x * b.get(i)).sum()
}

fn axpy(o: &mut [f32], p: f32, v: Row) {
    o.iter_mut()
        .enumerate()
        .for_each(|(i, o)| *o += p * v.get(i));
}

#[cfg(target_arch = "x86_64")]
pub(super) mod simd {
    use std::arch::x86_64::*;

    use super::Row;
    use crate::kv_cache::rows::Elem;

    pub const L1: i32 = _MM_HINT_T0;
    pub const L2: i32 = _MM_HINT_T1;

    /// Asks for every cache line of the `bytes` bytes at `p` (`HINT` as `_mm_prefetch`
    /// takes it).
    #[inline(always)]
    pub unsafe fn prefetch_lines<const HINT: i32>(p: *const u8, bytes: usize) {
        let first = p as usize & !63;
        let last = (p as usize + bytes.max(1) - 1) & !63;
        let mut line = first;
        while line <= last {
            _mm_prefetch::<HINT>(p.wrapping_add(line - p as usize) as *const i8);
            line += 64;
        }
    }

    /// Horizontal sum of eight lanes.
    #[inline(always)]
    unsafe fn hsum(s: __m256) -> f32 {
        let q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
        let q = _mm_add_ps(q, _mm_movehl_ps(q, q));
        _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)))
    }

    /// Requires AVX2, FMA and F16C.
    #[inline(always)]
    pub unsafe fn dot(a: &[f32], b: Row) -> f32 {
        match b {
            Row::F32(b) => dot_of(a, b),
            Row::F16(b) => dot_of(a, b),
        }
    }

    #[inline(always)]
    unsafe fn dot_of<E: Elem>(a: &[f32], b: &[E]) -> f32 {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut s0 = _mm256_setzero_ps();
        let mut s1 = _mm256_setzero_ps();
        let mut i = 0;
        while i + 16 <= n {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), E::load8(pb.add(i)), s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), E::load8(pb.add(i + 8)), s1);
            i += 16;
        }
        let mut r = hsum(_mm256_add_ps(s0, s1));
        while i < n {
            r += a[i] * b[i].to_f32();
            i += 1;
        }
        r
    }

    /// `T` dot products of `n` values against one key, loading the key once. Requires
    /// AVX2, FMA and F16C, and `n` readable values at each pointer.
    #[inline(always)]
    pub unsafe fn dot_n<E: Elem, const T: usize>(
        q: [*const f32; T],
        k: *const E,
        n: usize,
    ) -> [f32; T] {
        let mut s = [_mm256_setzero_ps(); T];
        let mut i = 0;
        while i + 8 <= n {
            let kv = E::load8(k.add(i));
            for r in 0..T {
                s[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q[r].add(i)), kv, s[r]);
            }
            i += 8;
        }
        let mut out = s.map(|v| hsum(v));
        while i < n {
            for r in 0..T {
                out[r] += *q[r].add(i) * (*k.add(i)).to_f32();
            }
            i += 1;
        }
        out
    }

    /// `len` rows, `stride` elements apart from `first`.
    #[derive(Clone, Copy)]
    pub struct RowRun<E> {
        pub first: *const E,
        pub stride: usize,
        pub len: usize,
    }

    /// Eight values from `p` as lanes.
    #[inline(always)]
    unsafe fn load_at<E: Elem>(run: RowRun<E>, i: usize, c: usize) -> __m256 {
        E::load8(run.first.add(i * run.stride + c))
    }

    /// `acc[r] = Σ_j scores[r·stride + j] · value(j)` for `T` rows stored one after the
    /// other in `acc`, the values being the rows of `old[0]`, `old[1]`, then `new`.
    /// The sums stay in registers, 16 columns at a time, while every value row streams
    /// past: storing them back after each row would cost more than the multiplications.
    /// Requires AVX2, FMA and F16C.
    #[inline(always)]
    pub unsafe fn weighted_sum_n<const T: usize, V: Elem>(
        acc: &mut [f32],
        scores: &[f32],
        stride: usize,
        old: [RowRun<V>; 2],
        new: RowRun<f32>,
    ) {
        let n = acc.len() / T;
        let n_old = old[0].len + old[1].len;
        let span = n_old + new.len;
        assert!(span <= stride && scores.len() >= (T - 1) * stride + span);
        let mut c = 0;
        while c < n {
            let width = if c + 16 <= n { 16 } else { 8.min(n - c) };
            if width < 8 {
                for (r, row) in acc.chunks_exact_mut(n).enumerate() {
                    for (k, o) in row[c..].iter_mut().enumerate() {
                        let p = |i: usize| scores[r * stride + i];
                        let old_values = old.iter().flat_map(|run| {
                            (0..run.len)
                                .map(move |i| (*run.first.add(i * run.stride + c + k)).to_f32())
                        });
                        let from_old = old_values.enumerate().map(|(i, v)| p(i) * v);
                        let from_new = (0..new.len)
                            .map(|i| p(n_old + i) * *new.first.add(i * new.stride + c + k));
                        *o = from_old.chain(from_new).sum();
                    }
                }
                break;
            }
            let mut sums = [[_mm256_setzero_ps(); 2]; T];
            let mut add = |i: usize, v0: __m256, v1: __m256| {
                for (r, s) in sums.iter_mut().enumerate() {
                    let p = _mm256_set1_ps(*scores.get_unchecked(r * stride + i));
                    s[0] = _mm256_fmadd_ps(p, v0, s[0]);
                    s[1] = _mm256_fmadd_ps(p, v1, s[1]);
                }
            };
            let wide = width == 16;
            let mut key = 0;
            for run in old {
                for i in 0..run.len {
                    let v1 = if wide {
                        load_at(run, i, c + 8)
                    } else {
                        _mm256_setzero_ps()
                    };
                    add(key, load_at(run, i, c), v1);
                    key += 1;
                }
            }
            for i in 0..new.len {
                let v1 = if wide {
                    load_at(new, i, c + 8)
                } else {
                    _mm256_setzero_ps()
                };
                add(n_old + i, load_at(new, i, c), v1);
            }
            for (r, s) in sums.iter().enumerate() {
                let dst = acc[r * n + c..r * n + c + width].as_mut_ptr();
                _mm256_storeu_ps(dst, s[0]);
                if wide {
                    _mm256_storeu_ps(dst.add(8), s[1]);
                }
            }
            c += width;
        }
    }

    /// `o += p · v`. Requires AVX2, FMA and F16C.
    #[inline(always)]
    pub unsafe fn axpy(o: &mut [f32], p: f32, v: Row) {
        match v {
            Row::F32(v) => axpy_of(o, p, v),
            Row::F16(v) => axpy_of(o, p, v),
        }
    }

    #[inline(always)]
    unsafe fn axpy_of<E: Elem>(o: &mut [f32], p: f32, v: &[E]) {
        let n = o.len().min(v.len());
        let (po, pv) = (o.as_mut_ptr(), v.as_ptr());
        let pp = _mm256_set1_ps(p);
        let mut i = 0;
        while i + 8 <= n {
            let r = _mm256_fmadd_ps(pp, E::load8(pv.add(i)), _mm256_loadu_ps(po.add(i)));
            _mm256_storeu_ps(po.add(i), r);
            i += 8;
        }
        while i < n {
            o[i] += p * v[i].to_f32();
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv_cache::rows::Rows;
    use crate::sampler::Rng;

    /// `n` values uniform in [-1, 1).
    fn uniform(rng: &mut Rng, n: usize) -> Vec<f32> {
        (0..n).map(|_| rng.next_f64() as f32 * 2.0 - 1.0).collect()
    }

    /// The values rounded to f16, as an f16 cache holds them.
    fn halves(x: &[f32]) -> Vec<half::f16> {
        x.iter().map(|&v| half::f16::from_f32(v)).collect()
    }

    /// The AVX2 tile and single-query paths against the portable one, with cached and
    /// new keys, a window, a soft-cap and grouped heads.
    #[test]
    fn every_path_computes_the_same_attention() {
        let mut rng = Rng::new(5);
        let mut rand = |n: usize| uniform(&mut rng, n);
        let (hk, hv) = (24, 28);
        let cases = [(None, None), (Some(5), Some(0.7)), (Some(40), None)];
        // A prompt-sized step and a decode step (one query per head); two, three and four
        // heads per KV head (tiles of 4, 3 and 4 queries).
        // Cached rows as an f32 cache holds them and as an f16 cache does (read in place).
        for ((n_head, n_head_kv), f16_cache) in [(4, 2), (9, 3), (4, 1)]
            .into_iter()
            .flat_map(|h| [(h, false), (h, true)])
        {
            for ((window, softcap), n) in cases.into_iter().flat_map(|c| [(c, 13), (c, 1)]) {
                let (old_start, start) = (3, 11);
                let old = start - old_start;
                let (q, k_new, v_new) = (
                    rand(n * n_head * hk),
                    rand(n * n_head_kv * hk),
                    rand(n * n_head_kv * hv),
                );
                let (k_old, v_old) = (rand(old * n_head_kv * hk), rand(old * n_head_kv * hv));
                let half = halves;
                let (k_half, v_half) = (half(&k_old), half(&v_old));
                let (k_rows, v_rows) = if f16_cache {
                    (Rows::F16(&k_half), Rows::F16(&v_half))
                } else {
                    (Rows::F32(&k_old), Rows::F32(&v_old))
                };
                let a = AttnArgs {
                    q: &q,
                    k_new: &k_new,
                    v_new: &v_new,
                    k_old: k_rows,
                    v_old: v_rows,
                    old_start,
                    start,
                    n,
                    n_head,
                    n_head_kv,
                    head_dim_k: hk,
                    head_dim_v: hv,
                    window,
                    softcap,
                    f16_probs: false,
                    old_ring: None,
                };
                let mut out = vec![0.0; n * n_head * hv];
                attend(&ThreadPool::new(2), &a, &mut out);
                let mut scores = Vec::new();
                let mut acc = vec![0.0; hv];
                for t in 0..n {
                    for h in 0..n_head {
                        one_query(&a, h, t, &mut scores, &mut acc, dot, axpy);
                        let got = &out[t * n_head * hv + h * hv..][..hv];
                        for (x, y) in got.iter().zip(&acc) {
                            assert!(
                                (x - y).abs() < 1e-5,
                                "f16 {f16_cache} t {t} h {h}: {x} vs {y}"
                            );
                        }
                    }
                }
            }
        }
    }
    /// A batch with at least two sequences per thread runs one task per sequence (all
    /// its KV heads, asking for whole rows): the same bits as one sequence at a time
    /// (one task per KV head), and every (sequence, KV head, token) handed to the
    /// epilogue once.
    #[test]
    fn tasks_of_whole_sequences_compute_what_tasks_of_one_head_do() {
        let mut rng = Rng::new(11);
        let mut rand = |n: usize| uniform(&mut rng, n);
        let (n_head, n_head_kv, hd) = (9, 3, 16);
        let pool = ThreadPool::new(2);
        // Four decoding sequences and one prompt of two query blocks (tokens 32.. are the
        // second block's), with different cached lengths, f16 caches.
        let seqs: Vec<_> = [1, 1, QUERY_BLOCK + 3, 1, 1]
            .into_iter()
            .enumerate()
            .map(|(i, n)| {
                let old = 7 + 5 * i;
                let half = |x: Vec<f32>| halves(&x);
                (
                    (old, n),
                    rand(n * n_head * hd),
                    rand(n * n_head_kv * hd),
                    rand(n * n_head_kv * hd),
                    half(rand(old * n_head_kv * hd)),
                    half(rand(old * n_head_kv * hd)),
                )
            })
            .collect();
        let args: Vec<AttnArgs> = seqs
            .iter()
            .map(|((old, n), q, k_new, v_new, k_old, v_old)| AttnArgs {
                q,
                k_new,
                v_new,
                k_old: Rows::F16(k_old),
                v_old: Rows::F16(v_old),
                old_start: 0,
                start: *old,
                n: *n,
                n_head,
                n_head_kv,
                head_dim_k: hd,
                head_dim_v: hd,
                window: None,
                softcap: None,
                f16_probs: true,
                old_ring: None,
            })
            .collect();
        let ow = n_head * hd;
        let row0s: Vec<usize> = args
            .iter()
            .scan(0, |next, a| {
                *next += a.n;
                Some(*next - a.n)
            })
            .collect();
        let jobs: Vec<AttnJob> = args
            .iter()
            .zip(&row0s)
            .map(|(&args, &row0)| AttnJob { args, row0 })
            .collect();
        // Two sequences per thread at least: the tasks take whole sequences.
        assert!(jobs.len() >= 2 * pool.n_threads());
        let rows = row0s.last().unwrap() + args.last().unwrap().n;
        let calls = std::sync::Mutex::new(Vec::new());
        let then = |j: usize, kvh: usize, t: usize, out: &[f32]| {
            calls.lock().unwrap().push((j, kvh, t, out.to_vec()));
        };
        let mut together = vec![0.0; rows * ow];
        attend_batch(&pool, &jobs, &mut together, Some(&then));
        for (i, a) in args.iter().enumerate() {
            let mut alone = vec![0.0; a.n * ow];
            attend(&pool, a, &mut alone);
            let got = &together[row0s[i] * ow..(row0s[i] + a.n) * ow];
            assert_eq!(got, &alone[..], "sequence {i}");
        }
        let mut calls = calls.into_inner().unwrap();
        calls.sort_by_key(|c| (c.0, c.1, c.2));
        let want: Vec<_> = args
            .iter()
            .enumerate()
            .flat_map(|(j, a)| {
                (0..n_head_kv).flat_map(move |kvh| (0..a.n).map(move |t| (j, kvh, t)))
            })
            .collect();
        let got: Vec<_> = calls.iter().map(|c| (c.0, c.1, c.2)).collect();
        assert_eq!(got, want);
        let group_cols = (n_head / n_head_kv) * hd;
        for (j, kvh, t, out) in &calls {
            let at = (row0s[*j] + t) * ow + kvh * group_cols;
            assert_eq!(&out[..], &together[at..at + group_cols]);
        }
    }

    /// A sliding layer's ring read in place (rows rotated, `old_ring` saying where the
    /// oldest is) gives the bits of the same rows in order: through the tiles, the
    /// single-query path and, past 512 keys, the split by keys.
    #[test]
    fn a_wrapped_ring_read_in_place_gives_the_bits_of_its_rows_in_order() {
        let mut rng = Rng::new(23);
        let mut rand = |n: usize| uniform(&mut rng, n);
        let (n_head, n_head_kv, hd) = (6, 2, 16);
        let kw = n_head_kv * hd;
        for (rows, n, window) in [(40, 1, Some(41)), (40, 5, Some(41)), (600, 1, Some(601))] {
            for first in [0, 7, rows - 1] {
                let (k_old, v_old) = (rand(rows * kw), rand(rows * kw));
                let rotate = |x: &[f32]| -> Vec<half::f16> {
                    let mut ring = vec![half::f16::ZERO; x.len()];
                    for i in 0..rows {
                        let at = (first + i) % rows;
                        for c in 0..kw {
                            ring[at * kw + c] = half::f16::from_f32(x[i * kw + c]);
                        }
                    }
                    ring
                };
                let half = halves;
                let (k_ring, v_ring) = (rotate(&k_old), rotate(&v_old));
                let (k_line, v_line) = (half(&k_old), half(&v_old));
                let (q, k_new, v_new) = (rand(n * n_head * hd), rand(n * kw), rand(n * kw));
                let old_start = 1000;
                let line = AttnArgs {
                    q: &q,
                    k_new: &k_new,
                    v_new: &v_new,
                    k_old: Rows::F16(&k_line),
                    v_old: Rows::F16(&v_line),
                    old_start,
                    start: old_start + rows,
                    n,
                    n_head,
                    n_head_kv,
                    head_dim_k: hd,
                    head_dim_v: hd,
                    window,
                    softcap: None,
                    f16_probs: true,
                    old_ring: None,
                };
                let ring = AttnArgs {
                    k_old: Rows::F16(&k_ring),
                    v_old: Rows::F16(&v_ring),
                    old_ring: Some((first, rows)),
                    ..line
                };
                for threads in [1, 2] {
                    let pool = ThreadPool::new(threads);
                    let (mut a, mut b) = (vec![0.0; n * n_head * hd], vec![0.0; n * n_head * hd]);
                    attend(&pool, &line, &mut a);
                    attend(&pool, &ring, &mut b);
                    assert_eq!(a, b, "{rows} rows from {first}, n {n}, {threads} threads");
                }
                let mut scores = Vec::new();
                let (mut a, mut b) = (vec![0.0; hd], vec![0.0; hd]);
                one_query(&line, 4, n - 1, &mut scores, &mut a, dot, axpy);
                one_query(&ring, 4, n - 1, &mut scores, &mut b, dot, axpy);
                assert_eq!(a, b, "single query, {rows} rows from {first}, n {n}");
            }
        }
    }
}
