//! The x86-64 AVX2 kernels the tiles and the split by keys share: prefetches, dot
//! products and weighted sums of value rows, f32 or f16.

use std::arch::x86_64::*;

use crate::kv_cache::rows::{paged_row, Elem, Row};

/// How far ahead (in positions) attention asks for cache rows.
pub(super) const PREFETCH_ROWS: usize = 12;

pub(super) const L1: i32 = _MM_HINT_T0;
pub(super) const L2: i32 = _MM_HINT_T1;

/// Asks for every cache line of the `bytes` bytes at `p` (`HINT` as `_mm_prefetch`
/// takes it).
#[inline(always)]
pub(super) unsafe fn prefetch_lines<const HINT: i32>(p: *const u8, bytes: usize) {
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
pub(super) unsafe fn dot(a: &[f32], b: Row) -> f32 {
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
pub(super) unsafe fn dot_n<E: Elem, const T: usize>(
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
pub(super) struct RowRun<E> {
    pub first: *const E,
    pub stride: usize,
    pub len: usize,
}

/// `len` cached rows from position `from`, read from per-block slices (`stride`
/// values a row), starting at column `col`.
#[derive(Clone, Copy)]
pub(super) struct PagedRun<'a, E> {
    pub blocks: &'a [&'a [E]],
    pub from: usize,
    pub len: usize,
    pub stride: usize,
    pub col: usize,
}

impl<E> PagedRun<'_, E> {
    /// Row `i` of the run, at its column.
    #[inline(always)]
    unsafe fn row(&self, i: usize) -> *const E {
        paged_row(self.blocks, self.from + i, self.stride).add(self.col)
    }
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
pub(super) unsafe fn weighted_sum_n<const T: usize, V: Elem>(
    acc: &mut [f32],
    scores: &[f32],
    stride: usize,
    old: PagedRun<V>,
    new: RowRun<f32>,
) {
    let n = acc.len() / T;
    let n_old = old.len;
    let span = n_old + new.len;
    assert!(span <= stride && scores.len() >= (T - 1) * stride + span);
    let mut c = 0;
    while c < n {
        let width = if c + 16 <= n { 16 } else { 8.min(n - c) };
        if width < 8 {
            for (r, row) in acc.chunks_exact_mut(n).enumerate() {
                for (k, o) in row[c..].iter_mut().enumerate() {
                    let p = |i: usize| scores[r * stride + i];
                    let old_values = (0..old.len).map(|i| (*old.row(i).add(c + k)).to_f32());
                    let from_old = old_values.enumerate().map(|(i, v)| p(i) * v);
                    let from_new =
                        (0..new.len).map(|i| p(n_old + i) * *new.first.add(i * new.stride + c + k));
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
        for i in 0..old.len {
            let row = old.row(i);
            let v1 = if wide {
                V::load8(row.add(c + 8))
            } else {
                _mm256_setzero_ps()
            };
            add(i, V::load8(row.add(c)), v1);
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
pub(super) unsafe fn axpy(o: &mut [f32], p: f32, v: Row) {
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
