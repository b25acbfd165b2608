//! The register tiles of [`super::attention`]: AVX-512 where the CPU has it and the
//! head width is whole vectors of 8; else plain loops, compiled for AVX2 + FMA where
//! the CPU has those (the same sums, in another order).

use crate::model::ops::exp_fast;

/// Keys per score tile: two vectors of 16 (AVX-512), or two passes of two of 8.
pub(super) const KEY_TILE: usize = 32;

/// Which tiles run.
#[derive(Clone, Copy)]
pub(super) enum Kernels {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Portable,
}

impl Kernels {
    /// The fastest tiles for heads of `d` values on this CPU.
    pub(super) fn detect(d: usize) -> Kernels {
        #[cfg(target_arch = "x86_64")]
        if d.is_multiple_of(8)
            && std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
        {
            if std::is_x86_feature_detected!("avx512f") {
                return Kernels::Avx512;
            }
            return Kernels::Avx2;
        }
        let _ = d;
        Kernels::Portable
    }
}

/// Row `i`'s scores against a tile of [`KEY_TILE`] keys (`tile`: `d` rows of the
/// tile's keys), times `scale`, into `out[i·stride..][..KEY_TILE]`.
pub(super) fn scores_tile<const N: usize>(
    k: Kernels,
    q: [&[f32]; N],
    tile: &[f32],
    scale: f32,
    out: &mut [f32],
    stride: usize,
) {
    let d = q[0].len();
    assert!(tile.len() == d * KEY_TILE && q.iter().all(|r| r.len() == d));
    assert!(out.len() >= (N - 1) * stride + KEY_TILE);
    match k {
        // SAFETY: the CPU has AVX-512F (`Kernels::detect`); the lengths are checked.
        #[cfg(target_arch = "x86_64")]
        Kernels::Avx512 => unsafe { x86::scores512(q, tile, scale, out, stride) },
        // SAFETY: the CPU has AVX2 and FMA (`Kernels::detect`).
        #[cfg(target_arch = "x86_64")]
        Kernels::Avx2 => unsafe { x86::scores_avx2(q, tile, scale, out, stride) },
        Kernels::Portable => scores_plain(q, tile, scale, out, stride),
    }
}

/// [`scores_tile`] in plain loops (32 lanes a key row, which vectorize).
#[inline(always)]
fn scores_plain<const N: usize>(
    q: [&[f32]; N],
    tile: &[f32],
    scale: f32,
    out: &mut [f32],
    stride: usize,
) {
    for (i, qi) in q.iter().enumerate() {
        let o = &mut out[i * stride..][..KEY_TILE];
        o.fill(0.0);
        for (&x, keys) in qi.iter().zip(tile.chunks_exact(KEY_TILE)) {
            o.iter_mut().zip(keys).for_each(|(o, &kv)| *o += x * kv);
        }
        o.iter_mut().for_each(|o| *o *= scale);
    }
}

/// A row of scores to `e^(x - max)` in place, returning their sum: a softmax whose
/// division is left to the caller, who divides the row's d outputs instead of its
/// thousands of probabilities. Compiled for the tiles' ISA (the default build's code
/// for it is SSE, 4 lanes).
pub(super) fn exp_row(k: Kernels, row: &mut [f32]) -> f32 {
    match k {
        // SAFETY: the CPU has AVX-512F (`Kernels::detect`).
        #[cfg(target_arch = "x86_64")]
        Kernels::Avx512 => unsafe { x86::exp_row_avx512(row) },
        // SAFETY: the CPU has AVX2 and FMA (`Kernels::detect`).
        #[cfg(target_arch = "x86_64")]
        Kernels::Avx2 => unsafe { x86::exp_row_avx2(row) },
        Kernels::Portable => exp_row_plain(row),
    }
}

/// [`exp_row`]'s code: max and sum in 16 lanes (one running value does not vectorize).
#[inline(always)]
fn exp_row_plain(row: &mut [f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 16];
    let mut chunks = row.chunks_exact(16);
    for c in &mut chunks {
        lanes.iter_mut().zip(c).for_each(|(l, &v)| *l = l.max(v));
    }
    let max = chunks
        .remainder()
        .iter()
        .chain(&lanes)
        .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    let mut sums = [0f32; 16];
    let mut chunks = row.chunks_exact_mut(16);
    for c in &mut chunks {
        for (s, v) in sums.iter_mut().zip(c) {
            *v = exp_fast(*v - max);
            *s += *v;
        }
    }
    let mut sum = 0.0;
    for v in chunks.into_remainder() {
        *v = exp_fast(*v - max);
        sum += *v;
    }
    sum + sums.iter().sum::<f32>()
}

/// `acc[i·d..][..d] += Σ_j p[i·stride + j] · values[j·d..][..d]` for the `n` rows
/// `i` (1 or 6) and the rows `j` of `values`.
pub(super) fn pv_tile(
    k: Kernels,
    n: usize,
    p: &[f32],
    stride: usize,
    values: &[f32],
    acc: &mut [f32],
    d: usize,
) {
    let keys = values.len() / d;
    assert!(n >= 1 && values.len() == keys * d);
    assert!(p.len() >= (n - 1) * stride + keys && acc.len() >= n * d);
    match k {
        #[cfg(target_arch = "x86_64")]
        Kernels::Avx512 => {
            // Rows by 4 (4 x 5 accumulators of 32 registers), then one by one; a row's
            // values in as few passes as possible (5 vectors: 80, enough for 72).
            let mut i = 0;
            while i < n {
                let rows = if n - i >= 4 { 4 } else { 1 };
                let (p, acc) = (&p[i * stride..], &mut acc[i * d..]);
                let mut c0 = 0;
                while c0 < d {
                    let w = (d - c0).div_ceil(16).min(5);
                    // SAFETY: the CPU has AVX-512F (`Kernels::detect`); the lengths are
                    // checked above; lanes past d are masked off.
                    unsafe {
                        match (rows, w) {
                            (4, 5) => x86::pv512::<4, 5>(p, stride, values, d, c0, acc),
                            (4, 4) => x86::pv512::<4, 4>(p, stride, values, d, c0, acc),
                            (4, 3) => x86::pv512::<4, 3>(p, stride, values, d, c0, acc),
                            (4, 2) => x86::pv512::<4, 2>(p, stride, values, d, c0, acc),
                            (4, _) => x86::pv512::<4, 1>(p, stride, values, d, c0, acc),
                            (_, 5) => x86::pv512::<1, 5>(p, stride, values, d, c0, acc),
                            (_, 4) => x86::pv512::<1, 4>(p, stride, values, d, c0, acc),
                            (_, 3) => x86::pv512::<1, 3>(p, stride, values, d, c0, acc),
                            (_, 2) => x86::pv512::<1, 2>(p, stride, values, d, c0, acc),
                            _ => x86::pv512::<1, 1>(p, stride, values, d, c0, acc),
                        }
                    }
                    c0 += 16 * w;
                }
                i += rows;
            }
        }
        // SAFETY: the CPU has AVX2 and FMA (`Kernels::detect`).
        #[cfg(target_arch = "x86_64")]
        Kernels::Avx2 => unsafe { x86::pv_avx2(n, p, stride, values, acc, d) },
        Kernels::Portable => pv_plain(n, p, stride, values, acc, d),
    }
}

/// [`pv_tile`] in plain loops (a row of values at a time, which vectorizes).
#[inline(always)]
fn pv_plain(n: usize, p: &[f32], stride: usize, values: &[f32], acc: &mut [f32], d: usize) {
    for i in 0..n {
        let a = &mut acc[i * d..(i + 1) * d];
        for (j, v) in values.chunks_exact(d).enumerate() {
            let pj = p[i * stride + j];
            a.iter_mut().zip(v).for_each(|(a, &v)| *a += pj * v);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{exp_row_plain, pv_plain, scores_plain, KEY_TILE};
    use crate::model::ops::exp_fast;

    /// [`super::scores_tile`]'s plain loops compiled for AVX2.
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn scores_avx2<const N: usize>(
        q: [&[f32]; N],
        tile: &[f32],
        scale: f32,
        out: &mut [f32],
        stride: usize,
    ) {
        scores_plain(q, tile, scale, out, stride)
    }

    /// [`super::pv_tile`]'s plain loops compiled for AVX2.
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn pv_avx2(
        n: usize,
        p: &[f32],
        stride: usize,
        values: &[f32],
        acc: &mut [f32],
        d: usize,
    ) {
        pv_plain(n, p, stride, values, acc, d)
    }

    /// [`super::exp_row`] compiled for AVX2.
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn exp_row_avx2(row: &mut [f32]) -> f32 {
        exp_row_plain(row)
    }

    /// [`super::exp_row`] in AVX-512: [`exp_fast`]'s method (2^n · e^r, e^r by its
    /// degree-7 polynomial) in fused multiply-adds, and 2^n by `scalef`; the exp was
    /// about a fifth of the attention's time before.
    ///
    /// # Safety
    /// AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn exp_row_avx512(row: &mut [f32]) -> f32 {
        let whole = row.len() / 16 * 16;
        let (body, tail) = row.split_at_mut(whole);
        let mut m = _mm512_set1_ps(f32::NEG_INFINITY);
        for c in body.chunks_exact(16) {
            // SAFETY: c holds 16 values.
            m = _mm512_max_ps(m, unsafe { _mm512_loadu_ps(c.as_ptr()) });
        }
        let max = tail.iter().fold(_mm512_reduce_max_ps(m), |a, &b| a.max(b));
        let mx = _mm512_set1_ps(max);
        let mut sum = _mm512_setzero_ps();
        for c in body.chunks_exact_mut(16) {
            // SAFETY: c holds 16 values.
            unsafe {
                let e = exp16(_mm512_sub_ps(_mm512_loadu_ps(c.as_ptr()), mx));
                _mm512_storeu_ps(c.as_mut_ptr(), e);
                sum = _mm512_add_ps(sum, e);
            }
        }
        let mut s = _mm512_reduce_add_ps(sum);
        for v in tail {
            *v = exp_fast(*v - max);
            s += *v;
        }
        s
    }

    /// e^x for x <= 0 (a score less the row's maximum), 0 below -87 as [`exp_fast`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn exp16(x: __m512) -> __m512 {
        let set = _mm512_set1_ps;
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm512_mul_ps(x, set(std::f32::consts::LOG2_E)),
        );
        // ln 2 in two parts, as exp_fast.
        let r = _mm512_fnmadd_ps(n, set(0.693_359_4), x);
        let r = _mm512_fnmadd_ps(n, set(-2.121_944_4e-4), r);
        let mut p = set(1.987_569_1e-4);
        for c in [
            1.398_199_9e-3,
            8.333_352e-3,
            4.166_579_6e-2,
            1.666_666_5e-1,
            0.5,
        ] {
            p = _mm512_fmadd_ps(p, r, set(c));
        }
        let e_r = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, set(1.0)));
        let e = _mm512_scalef_ps(e_r, n);
        _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_GE_OQ>(x, set(-87.0)), e)
    }

    /// [`super::scores_tile`] with AVX-512: the tile's 32 keys in two vectors.
    ///
    /// # Safety
    /// AVX-512F; the lengths [`super::scores_tile`] checks.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn scores512<const N: usize>(
        q: [&[f32]; N],
        tile: &[f32],
        scale: f32,
        out: &mut [f32],
        stride: usize,
    ) {
        let d = q[0].len();
        let t = tile.as_ptr();
        let mut acc = [[_mm512_setzero_ps(); 2]; N];
        for c in 0..d {
            // SAFETY: c·32 + 32 <= d·32 = tile.len(); c < d = each query's length.
            unsafe {
                let k0 = _mm512_loadu_ps(t.add(c * KEY_TILE));
                let k1 = _mm512_loadu_ps(t.add(c * KEY_TILE + 16));
                for (a, qi) in acc.iter_mut().zip(&q) {
                    let x = _mm512_set1_ps(*qi.get_unchecked(c));
                    a[0] = _mm512_fmadd_ps(x, k0, a[0]);
                    a[1] = _mm512_fmadd_ps(x, k1, a[1]);
                }
            }
        }
        let s = _mm512_set1_ps(scale);
        for (i, a) in acc.iter().enumerate() {
            // SAFETY: i·stride + 32 <= out.len() for i < N.
            unsafe {
                let o = out.as_mut_ptr().add(i * stride);
                _mm512_storeu_ps(o, _mm512_mul_ps(a[0], s));
                _mm512_storeu_ps(o.add(16), _mm512_mul_ps(a[1], s));
            }
        }
    }

    /// [`super::pv_tile`] with AVX-512 on values `c0..(c0 + 16·W).min(d)` of each row
    /// (the last vector masked to what is left of the row).
    ///
    /// # Safety
    /// AVX-512F; the lengths [`super::pv_tile`] checks, and c0 + 16·(W - 1) < d.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn pv512<const N: usize, const W: usize>(
        p: &[f32],
        stride: usize,
        values: &[f32],
        d: usize,
        c0: usize,
        acc: &mut [f32],
    ) {
        let keys = values.len() / d;
        let (pp, vp, ap) = (p.as_ptr(), values.as_ptr(), acc.as_mut_ptr());
        let mask: [__mmask16; W] = std::array::from_fn(|w| {
            let left = (d - c0 - 16 * w).min(16);
            if left == 16 {
                0xFFFF
            } else {
                (1u16 << left) - 1
            }
        });
        let mut a = [[_mm512_setzero_ps(); W]; N];
        for (i, ai) in a.iter_mut().enumerate() {
            for (w, x) in ai.iter_mut().enumerate() {
                // SAFETY: the unmasked lanes lie in row i of acc (i·d + c0 + 16w + lane < (i + 1)·d).
                *x =
                    unsafe { _mm512_maskz_loadu_ps(mask[w], ap.wrapping_add(i * d + c0 + 16 * w)) };
            }
        }
        for j in 0..keys {
            // SAFETY: the unmasked lanes lie in row j of values; i·stride + j < p.len().
            unsafe {
                let v: [__m512; W] = std::array::from_fn(|w| {
                    _mm512_maskz_loadu_ps(mask[w], vp.wrapping_add(j * d + c0 + 16 * w))
                });
                for (i, ai) in a.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*pp.add(i * stride + j));
                    for (x2, v) in ai.iter_mut().zip(&v) {
                        *x2 = _mm512_fmadd_ps(x, *v, *x2);
                    }
                }
            }
        }
        for (i, ai) in a.iter().enumerate() {
            for (w, x) in ai.iter().enumerate() {
                // SAFETY: as for the loads.
                unsafe { _mm512_mask_storeu_ps(ap.wrapping_add(i * d + c0 + 16 * w), mask[w], *x) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tile kind this CPU runs, the plain loops last.
    // The pushes depend on the target: not a `vec![…]`.
    #[allow(clippy::vec_init_then_push)]
    fn kinds() -> Vec<Kernels> {
        let mut out = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f") {
                out.push(Kernels::Avx512);
            }
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                out.push(Kernels::Avx2);
            }
        }
        out.push(Kernels::Portable);
        out
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) as f32)
            .map(|v| v / (1 << 24) as f32 - 0.5)
            .collect()
    }

    fn close(a: &[f32], b: &[f32]) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }

    #[test]
    fn every_kind_of_tile_gives_the_sums_written_out() {
        let d = 72;
        let q = values(6 * d, 1);
        let tile = values(d * KEY_TILE, 2);
        let stride = 40;
        let p = values(6 * stride, 3);
        let v = values(stride * d, 4);
        for k in kinds() {
            let mut scores = vec![0f32; 5 * stride + KEY_TILE];
            let rows: [&[f32]; 6] = std::array::from_fn(|i| &q[i * d..(i + 1) * d]);
            scores_tile(k, rows, &tile, 0.5, &mut scores, stride);
            let mut one = vec![0f32; KEY_TILE];
            scores_tile(k, [&q[..d]], &tile, 0.5, &mut one, stride);
            for i in 0..6 {
                let want: Vec<f32> = (0..KEY_TILE)
                    .map(|j| {
                        0.5 * (0..d)
                            .map(|c| q[i * d + c] * tile[c * KEY_TILE + j])
                            .sum::<f32>()
                    })
                    .collect();
                close(&scores[i * stride..][..KEY_TILE], &want);
                if i == 0 {
                    close(&one, &want);
                }
            }
            for n in [1, 6] {
                let mut acc = values(n * d, 5);
                let before = acc.clone();
                pv_tile(k, n, &p, stride, &v, &mut acc, d);
                for i in 0..n {
                    let want: Vec<f32> = (0..d)
                        .map(|c| {
                            before[i * d + c]
                                + (0..stride)
                                    .map(|j| p[i * stride + j] * v[j * d + c])
                                    .sum::<f32>()
                        })
                        .collect();
                    close(&acc[i * d..(i + 1) * d], &want);
                }
            }
            let mut row = values(37, 6);
            let max = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            let want: Vec<f32> = row.iter().map(|x| (x - max).exp()).collect();
            let sum = exp_row(k, &mut row);
            close(&row, &want);
            close(&[sum], &[want.iter().sum()]);
        }
    }
}
