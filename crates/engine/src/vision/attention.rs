//! Full attention over one picture's positions as blocked matrix products. Per head and
//! block of [`QUERY_BLOCK`] queries (one pool task): the scores against every key
//! (QKᵀ, register tiles of 6 queries x 32 keys), their softmax, then the probabilities
//! times the values (PV, tiles of 4 queries x up to 80 values, [`KEY_BLOCK`] keys at a
//! time). Keys and values are first packed per head so the tiles read them
//! contiguously; both are padded to whole key blocks with zeros, and the padding's
//! probabilities are zero. The one-dot-at-a-time loop this replaces was the encoder's
//! slowest part at a picture's thousands of positions.

use std::cell::RefCell;

use super::tiles::{exp_row, pv_tile, scores_tile, Kernels, KEY_TILE};
use crate::pool::{SyncPtr, ThreadPool};

/// Queries per task: their scores (`QUERY_BLOCK x` keys) stay in L2.
const QUERY_BLOCK: usize = 36;
/// Keys per PV step: that many rows of values stay in L1 while the query tiles pass.
const KEY_BLOCK: usize = 128;
/// Queries per register tile.
const Q_TILE: usize = 6;

/// Keys and values of every head, packed for the tiles; allocated once per picture.
#[derive(Default)]
pub(super) struct PackedKv {
    /// Per head, per tile of [`KEY_TILE`] keys: `d` rows of the tile's keys (Kᵀ).
    kt: Vec<f32>,
    /// Per head: `n_pad` rows of `d` values.
    v: Vec<f32>,
}

thread_local! {
    /// A task's scores and output rows, reused by every task the thread runs.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The sizes of one attention.
#[derive(Clone, Copy)]
pub(super) struct Shape {
    /// Positions (queries = keys).
    pub n: usize,
    pub n_head: usize,
    /// Values per head.
    pub d: usize,
}

impl Shape {
    fn width(self) -> usize {
        self.n_head * self.d
    }

    /// Keys with the padding to whole key blocks.
    fn n_pad(self) -> usize {
        self.n.div_ceil(KEY_BLOCK) * KEY_BLOCK
    }
}

/// `out` (rows of `n_head` heads of `d` values) = softmax(q·kᵀ / √d)·v per head, for
/// the `n` rows of `q`, `k` and `v` (each `n x n_head·d`).
pub(super) fn attention(
    pool: &ThreadPool,
    s: Shape,
    (q, k, v): (&[f32], &[f32], &[f32]),
    out: &mut [f32],
    packed: &mut PackedKv,
) {
    let (d, n_pad) = (s.d, s.n_pad());
    pack(pool, s, k, v, packed);
    let kernels = Kernels::detect(d);
    let scale = 1.0 / (d as f32).sqrt();
    let n_blocks = s.n.div_ceil(QUERY_BLOCK);
    let ptr = SyncPtr::new(out);
    let (kt, vp) = (&packed.kt[..], &packed.v[..]);
    // Tasks of one head are neighbours, so the threads share its keys and values.
    pool.run(s.n_head * n_blocks, &|task| {
        let (h, b) = (task / n_blocks, task % n_blocks);
        let (i0, i1) = (b * QUERY_BLOCK, ((b + 1) * QUERY_BLOCK).min(s.n));
        let m = i1 - i0;
        let kt = &kt[h * n_pad * d..(h + 1) * n_pad * d];
        let vh = &vp[h * n_pad * d..(h + 1) * n_pad * d];
        SCRATCH.with_borrow_mut(|scratch| {
            scratch.resize(QUERY_BLOCK * (n_pad + d), 0.0);
            let (scores, acc) = scratch.split_at_mut(QUERY_BLOCK * n_pad);
            let query = |i: usize| &q[(i0 + i) * s.width() + h * d..][..d];
            for (t, tile) in kt.chunks_exact(d * KEY_TILE).enumerate() {
                let mut i = 0;
                while i < m {
                    let step = if m - i >= Q_TILE { Q_TILE } else { 1 };
                    let rows = &mut scores[i * n_pad + t * KEY_TILE..];
                    if step == Q_TILE {
                        let qs = std::array::from_fn::<_, Q_TILE, _>(|r| query(i + r));
                        scores_tile(kernels, qs, tile, scale, rows, n_pad);
                    } else {
                        scores_tile(kernels, [query(i)], tile, scale, rows, n_pad);
                    }
                    i += step;
                }
            }
            let mut sums = [0f32; QUERY_BLOCK];
            for (row, sum) in scores.chunks_exact_mut(n_pad).zip(&mut sums).take(m) {
                *sum = exp_row(kernels, &mut row[..s.n]);
                row[s.n..].fill(0.0);
            }
            let acc = &mut acc[..m * d];
            acc.fill(0.0);
            for j0 in (0..n_pad).step_by(KEY_BLOCK) {
                let values = &vh[j0 * d..(j0 + KEY_BLOCK) * d];
                let mut i = 0;
                while i < m {
                    let step = if m - i >= Q_TILE { Q_TILE } else { 1 };
                    let p = &scores[i * n_pad + j0..];
                    pv_tile(kernels, step, p, n_pad, values, &mut acc[i * d..], d);
                    i += step;
                }
            }
            for (i, (row, sum)) in acc.chunks_exact_mut(d).zip(sums).enumerate() {
                // The softmax's division, on the d outputs.
                row.iter_mut().for_each(|v| *v /= sum);
                // SAFETY: row i0 + i's columns of head h belong to this task alone.
                unsafe { ptr.slice((i0 + i) * s.width() + h * d, d) }.copy_from_slice(row);
            }
        });
    });
}

/// Packs each head's keys as tiles of Kᵀ and its values as rows, one task per head;
/// the padding stays zero (written once, when the buffers grow).
fn pack(pool: &ThreadPool, s: Shape, k: &[f32], v: &[f32], packed: &mut PackedKv) {
    let (d, n_pad, e) = (s.d, s.n_pad(), s.width());
    let len = s.n_head * n_pad * d;
    if packed.kt.len() != len {
        packed.kt = vec![0.0; len];
        packed.v = vec![0.0; len];
    }
    let (kp, vp) = (SyncPtr::new(&mut packed.kt), SyncPtr::new(&mut packed.v));
    pool.run(s.n_head, &|h| {
        // SAFETY: head h's part of each packed buffer belongs to this task alone.
        let (kt, vh) = unsafe {
            (
                kp.slice(h * n_pad * d, n_pad * d),
                vp.slice(h * n_pad * d, n_pad * d),
            )
        };
        for j in 0..s.n {
            let (tile, lane) = (j / KEY_TILE, j % KEY_TILE);
            let key = &k[j * e + h * d..][..d];
            for (c, &x) in key.iter().enumerate() {
                kt[(tile * d + c) * KEY_TILE + lane] = x;
            }
            vh[j * d..(j + 1) * d].copy_from_slice(&v[j * e + h * d..][..d]);
        }
    });
}
