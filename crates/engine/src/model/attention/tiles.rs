//! Attention by query tiles: each task takes the queries of one KV head (or of all, for
//! batches of many sequences) and block of tokens, and reads every cached key and value
//! row once per tile of queries.

use std::cell::RefCell;

#[cfg(target_arch = "x86_64")]
use super::args::VALUE_CHUNK;
use super::args::{visible, AttnArgs, AttnJob, TaskEpilogue};
#[cfg(target_arch = "x86_64")]
use super::simd::{self, PREFETCH_ROWS};
use crate::kv_cache::rows::Row;
#[cfg(target_arch = "x86_64")]
use crate::kv_cache::rows::{paged_row, Elem, Paged};
use crate::model::ops::{round_to_f16, softcap, softmax_with_sink};
use crate::pool::{SyncPtr, ThreadPool};

/// Queries processed by one task (prompts are split by head and by query block).
pub(super) const QUERY_BLOCK: usize = 32;
/// Most queries that share each key and value load on the AVX2 path. Tiles are as wide
/// as the heads sharing a KV head when that is fewer (SmolLM2 has three), so a tile never
/// computes a query twice.
const TILE: usize = 4;

thread_local! {
    /// Scores and output tiles of the task running on this thread: reused, so a decode
    /// step allocates nothing here.
    static SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// [`attend_batch`](super::attend_batch) through the query tiles: every job in one pool
/// run, split by sequence, query block and (unless the batch has two sequences per
/// thread) KV head.
pub(super) fn attend_tiles(
    pool: &ThreadPool,
    jobs: &[AttnJob],
    out: &mut [f32],
    then: Option<TaskEpilogue>,
) {
    let Some(first) = jobs.first() else { return };
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

/// The task body of [`attend_tiles`] for one KV head: the queries of `tokens` whose
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
        // Outputs of a tile, then room for one chunk's value sums.
        acc.resize(2 * TILE * hv, 0.0);
        let mut i = 0;
        while i < n_queries {
            // The last query this tile may take: its token's last, when rows must not
            // depend on their neighbours (see `AttnArgs::token_tiles`).
            let (last, span) = match a.token_tiles {
                true => ((i / group * group + group - 1).min(n_queries - 1), group),
                false => (n_queries - 1, n_queries),
            };
            let rows = if wide && span > 1 {
                // A short last tile repeats its last query (same result, no extra reads).
                #[cfg(target_arch = "x86_64")]
                {
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
                (if group == 3 { 3 } else { TILE }).min(last + 1 - i)
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
        (Paged::F32(k), Paged::F32(v)) => query_tile_of(a, (k, v), tile, scores, acc, fetch),
        (Paged::F16(k), Paged::F16(v)) => query_tile_of(a, (k, v), tile, scores, acc, fetch),
        (Paged::F32(k), Paged::F16(v)) => query_tile_of(a, (k, v), tile, scores, acc, fetch),
        (Paged::F16(k), Paged::F32(v)) => query_tile_of(a, (k, v), tile, scores, acc, fetch),
    }
}

/// [`query_tile_avx2`] with the cache's element types known, so that rows are found by
/// pointer arithmetic rather than by a dispatch per position: the cached positions
/// (`lo..split`) first, then the batch's own (`split..=hi`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn query_tile_of<K: Elem, V: Elem, const T: usize>(
    a: &AttnArgs,
    (k_old, v_old): (&[&[K]], &[&[V]]),
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
    assert!(split == lo || a.holds_old(split));
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
    let k_old_at = |j: usize| paged_row(k_old, j, kw).add(kvh * hk);
    let v_old_at = |j: usize| paged_row(v_old, j, vw).add(kvh * hv);
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
            let k_row = paged_row(k_old, j, kw);
            let v_row = paged_row(v_old, j, vw);
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
    for (r, &(_, h)) in tile.iter().enumerate() {
        softmax_with_sink(&mut scores[r * span..(r + 1) * span], a.sink(h));
    }
    if a.f16_probs {
        round_to_f16(scores);
    }
    // The value sums go by chunks of VALUE_CHUNK keys from `lo`, each chunk's sum
    // added to the total in order: the association the split by keys uses, so a
    // decoding token gets the same bits whichever path (alone or in a batch) ran it.
    // `acc` has room for the chunk's sums after the total (see `one_kv_head`).
    let (acc, part) = acc.split_at_mut(T * hv);
    let part = &mut part[..T * hv];
    acc.fill(0.0);
    let mut from = lo;
    while from <= hi {
        let to = (from + VALUE_CHUNK).min(hi + 1);
        let (old, new) = a.value_runs(v_old, kvh, from..to);
        simd::weighted_sum_n::<T, V>(part, &scores[from - lo..], span, old, new);
        acc.iter_mut().zip(part.iter()).for_each(|(o, p)| *o += p);
        from = to;
    }
}

/// Attention of query `t`, head `h`: the weighted sum of visible values into `acc`.
/// `dot` and `axpy` (`o += p·v`) are the inner kernels.
#[inline(always)]
pub(super) fn one_query(
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
        scores.push(dot(q, a.k_old.row(j, kw).slice(kvh * hk, hk)));
    }
    for i in new_rows.clone() {
        scores.push(dot(q, Row::F32(&a.k_new[i * kw + kvh * hk..][..hk])));
    }
    if let Some(cap) = a.softcap {
        softcap(scores, cap);
    }
    softmax_with_sink(scores, a.sink(h));
    if a.f16_probs {
        round_to_f16(scores);
    }
    acc.fill(0.0);
    let mut p = scores.iter();
    for j in old {
        axpy(
            acc,
            *p.next().unwrap(),
            a.v_old.row(j, vw).slice(kvh * hv, hv),
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
pub(super) fn dot(a: &[f32], b: Row) -> f32 {
    a.iter().enumerate().map(|(i, x)| x * b.get(i)).sum()
}

pub(super) fn axpy(o: &mut [f32], p: f32, v: Row) {
    o.iter_mut()
        .enumerate()
        .for_each(|(i, o)| *o += p * v.get(i));
}
