//! Every attention path against the portable one, and batches against one sequence at
//! a time.

use super::tiles::{axpy, dot, one_query, QUERY_BLOCK};
use super::*;
use crate::kv_cache::rows::Paged;
use crate::kv_cache::KV_BLOCK_TOKENS;
use crate::sampler::Rng;

/// `n` values uniform in [-1, 1).
fn uniform(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.next_f64() as f32 * 2.0 - 1.0).collect()
}

/// Rows from position 0 (`width` values each) cut into per-block slices, as
/// `KvCache::history` hands them to attention.
pub(super) fn paged<E>(rows: &[E], width: usize) -> Vec<&[E]> {
    rows.chunks(KV_BLOCK_TOKENS * width).collect()
}

/// Attention of `n` queries from position `start` over every cached position
/// (`old_start` 0), heads of `hd` values, no window, soft-cap or f16 rounding.
pub(super) fn plain_args<'a>(
    (q, k_new, v_new): (&'a [f32], &'a [f32], &'a [f32]),
    (k_old, v_old): (Paged<'a>, Paged<'a>),
    (start, n): (usize, usize),
    (n_head, n_head_kv, hd): (usize, usize, usize),
) -> AttnArgs<'a> {
    AttnArgs {
        q,
        k_new,
        v_new,
        k_old,
        v_old,
        old_start: 0,
        start,
        n,
        n_head,
        n_head_kv,
        head_dim_k: hd,
        head_dim_v: hd,
        window: None,
        softcap: None,
        f16_probs: false,
        sinks: None,
        token_tiles: false,
        non_causal: false,
    }
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
            let (old_start, start) = (3, 2 * KV_BLOCK_TOKENS + 11);
            let old = start;
            let (q, k_new, v_new) = (
                rand(n * n_head * hk),
                rand(n * n_head_kv * hk),
                rand(n * n_head_kv * hv),
            );
            let (k_old, v_old) = (rand(old * n_head_kv * hk), rand(old * n_head_kv * hv));
            let half = halves;
            let (k_half, v_half) = (half(&k_old), half(&v_old));
            let (k_pages, v_pages) = (paged(&k_old, n_head_kv * hk), paged(&v_old, n_head_kv * hv));
            let (k_hpages, v_hpages) = (
                paged(&k_half, n_head_kv * hk),
                paged(&v_half, n_head_kv * hv),
            );
            let (k_rows, v_rows) = if f16_cache {
                (Paged::F16(&k_hpages), Paged::F16(&v_hpages))
            } else {
                (Paged::F32(&k_pages), Paged::F32(&v_pages))
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
                sinks: None,
                token_tiles: false,
                non_causal: false,
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
            let old = 7 + 13 * i;
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
    let pages: Vec<_> = seqs
        .iter()
        .map(|(_, _, _, _, k_old, v_old)| {
            (paged(k_old, n_head_kv * hd), paged(v_old, n_head_kv * hd))
        })
        .collect();
    let args: Vec<AttnArgs> = seqs
        .iter()
        .zip(&pages)
        .map(
            |(((old, n), q, k_new, v_new, _, _), (k_old, v_old))| AttnArgs {
                f16_probs: true,
                sinks: None,
                token_tiles: false,
                non_causal: false,
                ..plain_args(
                    (q, k_new, v_new),
                    (Paged::F16(k_old), Paged::F16(v_old)),
                    (*old, *n),
                    (n_head, n_head_kv, hd),
                )
            },
        )
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
        .flat_map(|(j, a)| (0..n_head_kv).flat_map(move |kvh| (0..a.n).map(move |t| (j, kvh, t))))
        .collect();
    let got: Vec<_> = calls.iter().map(|c| (c.0, c.1, c.2)).collect();
    assert_eq!(got, want);
    let group_cols = (n_head / n_head_kv) * hd;
    for (j, kvh, t, out) in &calls {
        let at = (row0s[*j] + t) * ow + kvh * group_cols;
        assert_eq!(&out[..], &together[at..at + group_cols]);
    }
}

/// Blocks that lie anywhere in memory (each its own allocation, as shared KV blocks
/// do) give the bits of the same rows cut from one vector: through the tiles, the
/// single-query path and, past 512 keys, the split by keys; with and without a window.
#[test]
fn scattered_blocks_give_the_bits_of_contiguous_rows() {
    let mut rng = Rng::new(23);
    let mut rand = |n: usize| uniform(&mut rng, n);
    let (n_head, n_head_kv, hd) = (6, 2, 16);
    let kw = n_head_kv * hd;
    for (rows, n, window) in [
        (40, 1, None),
        (70, 5, Some(41)),
        (600, 1, Some(301)),
        (700, 1, None),
    ] {
        let (k_old, v_old) = (halves(&rand(rows * kw)), halves(&rand(rows * kw)));
        let (k_line, v_line) = (paged(&k_old, kw), paged(&v_old, kw));
        let own = |pages: &[&[half::f16]]| -> Vec<Vec<half::f16>> {
            pages.iter().map(|p| p.to_vec()).collect()
        };
        let (k_own, v_own) = (own(&k_line), own(&v_line));
        let (k_scattered, v_scattered): (Vec<&[half::f16]>, Vec<&[half::f16]>) = (
            k_own.iter().map(|p| &p[..]).collect(),
            v_own.iter().map(|p| &p[..]).collect(),
        );
        let (q, k_new, v_new) = (rand(n * n_head * hd), rand(n * kw), rand(n * kw));
        let old_start = window.map_or(0, |w: usize| rows.saturating_sub(w - 1));
        let line = AttnArgs {
            q: &q,
            k_new: &k_new,
            v_new: &v_new,
            k_old: Paged::F16(&k_line),
            v_old: Paged::F16(&v_line),
            old_start,
            start: rows,
            n,
            n_head,
            n_head_kv,
            head_dim_k: hd,
            head_dim_v: hd,
            window,
            softcap: None,
            f16_probs: true,
            sinks: None,
            token_tiles: false,
            non_causal: false,
        };
        let scattered = AttnArgs {
            k_old: Paged::F16(&k_scattered),
            v_old: Paged::F16(&v_scattered),
            ..line
        };
        for threads in [1, 2] {
            let pool = ThreadPool::new(threads);
            let (mut a, mut b) = (vec![0.0; n * n_head * hd], vec![0.0; n * n_head * hd]);
            attend(&pool, &line, &mut a);
            attend(&pool, &scattered, &mut b);
            assert_eq!(a, b, "{rows} rows, n {n}, {threads} threads");
            assert!(a.iter().any(|&x| x != 0.0));
        }
        let mut scores = Vec::new();
        let (mut a, mut b) = (vec![0.0; hd], vec![0.0; hd]);
        one_query(&line, 4, n - 1, &mut scores, &mut a, dot, axpy);
        one_query(&scattered, 4, n - 1, &mut scores, &mut b, dot, axpy);
        assert_eq!(a, b, "single query, {rows} rows, n {n}");
    }
}

/// Non-causal attention: every query sees every key of its step (and the cache), the
/// softmax computed here directly; grouped heads, prompt-sized and small steps.
#[test]
fn non_causal_queries_see_the_whole_step() {
    let pool = ThreadPool::new(2);
    let mut rng = Rng::new(11);
    let (n_head, n_head_kv, hd) = (4, 2, 16);
    for (old, n) in [(0, 2), (3, 5), (0, 37)] {
        let (qw, kw) = (n_head * hd, n_head_kv * hd);
        let q = uniform(&mut rng, n * qw);
        let (k_new, v_new) = (uniform(&mut rng, n * kw), uniform(&mut rng, n * kw));
        let (k_old, v_old) = (uniform(&mut rng, old * kw), uniform(&mut rng, old * kw));
        let (ko, vo) = (paged(&k_old, kw), paged(&v_old, kw));
        let a = AttnArgs {
            non_causal: true,
            ..plain_args(
                (&q, &k_new, &v_new),
                (Paged::F32(&ko), Paged::F32(&vo)),
                (old, n),
                (n_head, n_head_kv, hd),
            )
        };
        let mut out = vec![0.0; n * qw];
        attend(&pool, &a, &mut out);
        let keys: Vec<&[f32]> = k_old.chunks(kw).chain(k_new.chunks(kw)).collect();
        let values: Vec<&[f32]> = v_old.chunks(kw).chain(v_new.chunks(kw)).collect();
        for t in 0..n {
            for h in 0..n_head {
                let kvh = h / (n_head / n_head_kv);
                let qh = &q[t * qw + h * hd..][..hd];
                let s: Vec<f32> = (keys.iter())
                    .map(|k| (0..hd).map(|i| qh[i] * k[kvh * hd + i]).sum())
                    .collect();
                let m = s.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                let p: Vec<f32> = s.iter().map(|v| (v - m).exp()).collect();
                let z: f32 = p.iter().sum();
                for i in 0..hd {
                    let want: f32 = (p.iter().zip(&values))
                        .map(|(p, v)| p / z * v[kvh * hd + i])
                        .sum();
                    let got = out[t * qw + h * hd + i];
                    assert!(
                        (got - want).abs() < 1e-4,
                        "old {old} n {n} t {t} h {h}: {got} {want}"
                    );
                }
            }
        }
    }
}
