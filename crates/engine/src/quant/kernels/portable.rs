//! Portable kernels: the reference every faster kernel is tested against. Each decodes
//! a weight block once into integers, then takes integer dot products with every
//! activation row of the tile. The dot products go through [`IntDot`], so another
//! instruction set (NEON) reuses everything else and supplies only those.

use super::{tiles, KernelSet, KernelTable};
use crate::quant::act_blocks::{Q8Block, Q8KBlock};
use crate::quant::layout::*;

pub(crate) static TABLE: KernelTable = KernelTable {
    set: KernelSet::Portable,
    quantize: &crate::quant::act_blocks::PORTABLE_QUANTIZERS,
    groups: None,
    f32: tiles!(f32_rows),
    f16: tiles!(f16_rows),
    bf16: tiles!(bf16_rows),
    q4_0: tiles!(q4_0, Scalar),
    q4_1: tiles!(q4_1, Scalar),
    q5_0: tiles!(q5_0, Scalar),
    q5_1: tiles!(q5_1, Scalar),
    q8_0: tiles!(q8_0, Scalar),
    q4_k: tiles!(q4_k, Scalar),
    q5_k: tiles!(q5_k, Scalar),
    q6_k: tiles!(q6_k, Scalar),
    iq4_nl: tiles!(iq4_nl, Scalar),
    iq4_xs: tiles!(iq4_xs, Scalar),
    q3_k: tiles!(q3_k, Scalar),
    q2_k: tiles!(q2_k, Scalar),
    mxfp4: tiles!(mxfp4, Scalar),
};

/// The integer dot products of one weight block's quants with one activation block's.
pub(super) trait IntDot {
    fn i8_i8(q: &[i8; QK], a: &[i8; QK]) -> i32;
    fn u8_i8(q: &[u8; QK], a: &[i8; QK]) -> i32;
    /// Q6_K's groups of 16.
    fn i8_i8_16(q: &[i8; 16], a: &[i8; 16]) -> i32;
}

/// Plain Rust dot products.
pub(super) struct Scalar;

impl IntDot for Scalar {
    fn i8_i8(q: &[i8; QK], a: &[i8; QK]) -> i32 {
        idot(q, a)
    }
    fn u8_i8(q: &[u8; QK], a: &[i8; QK]) -> i32 {
        idot(q, a)
    }
    fn i8_i8_16(q: &[i8; 16], a: &[i8; 16]) -> i32 {
        idot(q, a)
    }
}

#[inline(always)]
fn idot<Q: Copy + Into<i32>, A: Copy + Into<i32>, const L: usize>(q: &[Q; L], a: &[A; L]) -> i32 {
    let mut s = 0i32;
    for k in 0..L {
        s += q[k].into() * a[k].into();
    }
    s
}

/// The `L` elements of `v` from `at` as an array reference.
#[inline(always)]
fn sub<T, const L: usize>(v: &[T], at: usize) -> &[T; L] {
    v[at..at + L].try_into().expect("in bounds")
}

/// Elements decoded at a time in the float kernels.
const CHUNK: usize = 32;

#[inline(always)]
fn float_rows<const N: usize, const EB: usize>(
    w: &[u8],
    a: [&[f32]; N],
    decode: impl Fn(&[u8]) -> f32,
) -> [f32; N] {
    let mut acc = [0f32; N];
    let mut buf = [0f32; CHUNK];
    for (ci, chunk) in w.chunks(EB * CHUNK).enumerate() {
        let n = chunk.len() / EB;
        for (v, b) in buf.iter_mut().zip(chunk.chunks_exact(EB)) {
            *v = decode(b);
        }
        for t in 0..N {
            let x = &a[t][ci * CHUNK..ci * CHUNK + n];
            // Eight partial sums so the compiler can keep them in one vector register.
            let mut lanes = [0f32; 8];
            let (wc, xc) = (buf[..n].chunks_exact(8), x.chunks_exact(8));
            let tail: f32 = wc
                .remainder()
                .iter()
                .zip(xc.remainder())
                .map(|(w, x)| w * x)
                .sum();
            for (wc, xc) in wc.zip(xc) {
                for k in 0..8 {
                    lanes[k] += wc[k] * xc[k];
                }
            }
            acc[t] += lanes.iter().sum::<f32>() + tail;
        }
    }
    acc
}

pub(super) fn f32_rows<const N: usize>(w: &[u8], a: [&[f32]; N], _scales: &[f32]) -> [f32; N] {
    float_rows::<N, 4>(w, a, |b| f32_at(b, 0))
}

pub(super) fn f16_rows<const N: usize>(w: &[u8], a: [&[f32]; N], _scales: &[f32]) -> [f32; N] {
    float_rows::<N, 2>(w, a, |b| f16_at(b, 0))
}

pub(super) fn bf16_rows<const N: usize>(w: &[u8], a: [&[f32]; N], _scales: &[f32]) -> [f32; N] {
    float_rows::<N, 2>(w, a, |b| bf16_at(b, 0))
}

/// Legacy blocks against Q8 activations: `Σ d_w·d_a·Σq·a`.
#[inline(always)]
fn symmetric<const N: usize, const BB: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8Block]; N],
    decode: impl Fn(&[u8]) -> (f32, [i8; QK]),
) -> [f32; N] {
    let mut acc = [0f32; N];
    for (i, b) in w.chunks_exact(BB).enumerate() {
        let (d, q) = decode(b);
        for t in 0..N {
            let ab = &a[t][i];
            acc[t] += d * ab.d * D::i8_i8(&q, &ab.qs) as f32;
        }
    }
    acc
}

/// Legacy blocks with a minimum against Q8 activations: `Σ d_w·d_a·Σq·a + m_w·s_a`.
#[inline(always)]
fn with_min<const N: usize, const BB: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8Block]; N],
    decode: impl Fn(&[u8]) -> (f32, f32, [u8; QK]),
) -> [f32; N] {
    let mut acc = [0f32; N];
    for (i, b) in w.chunks_exact(BB).enumerate() {
        let (d, m, q) = decode(b);
        for t in 0..N {
            let ab = &a[t][i];
            acc[t] += d * ab.d * D::u8_i8(&q, &ab.qs) as f32 + m * ab.s;
        }
    }
    acc
}

pub(super) fn q4_0<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8Block]; N],
    _scales: &[f32],
) -> [f32; N] {
    symmetric::<N, 18, D>(w, a, |b| (f16_at(b, 0), unpack_q4_0(b)))
}

pub(super) fn iq4_nl<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8Block]; N],
    _scales: &[f32],
) -> [f32; N] {
    symmetric::<N, 18, D>(w, a, |b| (f16_at(b, 0), unpack_iq4_nl(b)))
}

pub(super) fn mxfp4<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8Block]; N],
    _scales: &[f32],
) -> [f32; N] {
    symmetric::<N, 17, D>(w, a, |b| (e8m0_half(b[0]), unpack_mxfp4(b)))
}

pub(super) fn q4_1<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8Block]; N],
    _scales: &[f32],
) -> [f32; N] {
    with_min::<N, 20, D>(w, a, |b| (f16_at(b, 0), f16_at(b, 2), unpack_q4_1(b)))
}

pub(super) fn q5_0<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8Block]; N],
    _scales: &[f32],
) -> [f32; N] {
    symmetric::<N, 22, D>(w, a, |b| (f16_at(b, 0), unpack_q5_0(b)))
}

pub(super) fn q5_1<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8Block]; N],
    _scales: &[f32],
) -> [f32; N] {
    with_min::<N, 24, D>(w, a, |b| (f16_at(b, 0), f16_at(b, 2), unpack_q5_1(b)))
}

pub(super) fn q8_0<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8Block]; N],
    _scales: &[f32],
) -> [f32; N] {
    symmetric::<N, 34, D>(w, a, |b| (f16_at(b, 0), unpack_q8_0(b)))
}

/// Q4_K/Q5_K: `d_a·(d·Σ_s scale_s·Σq·a − dmin·Σ_s min_s·Σa)`, with Σa from the bsums.
#[inline(always)]
fn k_scale_min<const N: usize, const BB: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8KBlock]; N],
    unpack: impl Fn(&[u8]) -> [u8; QK_K],
) -> [f32; N] {
    let mut acc = [0f32; N];
    for (i, b) in w.chunks_exact(BB).enumerate() {
        let d = f16_at(b, q4_k::D);
        let dmin = f16_at(b, q4_k::DMIN);
        let (sc, mn) = k4_scales_mins(&b[q4_k::SCALES..q4_k::SCALES + 12]);
        let q = unpack(b);
        for t in 0..N {
            let ab = &a[t][i];
            let mut isum = 0i32;
            let mut msum = 0i32;
            for s in 0..8 {
                isum += sc[s] as i32 * D::u8_i8(sub(&q, 32 * s), sub(&ab.qs, 32 * s));
                msum += mn[s] as i32 * (ab.bsums[2 * s] as i32 + ab.bsums[2 * s + 1] as i32);
            }
            acc[t] += ab.d * (d * isum as f32 - dmin * msum as f32);
        }
    }
    acc
}

pub(super) fn q4_k<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8KBlock]; N],
    _scales: &[f32],
) -> [f32; N] {
    k_scale_min::<N, 144, D>(w, a, unpack_q4_k)
}

pub(super) fn q5_k<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8KBlock]; N],
    _scales: &[f32],
) -> [f32; N] {
    k_scale_min::<N, 176, D>(w, a, unpack_q5_k)
}

pub(super) fn iq4_xs<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8KBlock]; N],
    _scales: &[f32],
) -> [f32; N] {
    let mut acc = [0f32; N];
    for (i, b) in w.chunks_exact(136).enumerate() {
        let d = f16_at(b, 0);
        let (sc, q) = unpack_iq4_xs(b);
        for t in 0..N {
            let ab = &a[t][i];
            let isum: i32 = (0..8)
                .map(|s| sc[s] as i32 * D::i8_i8(sub(&q, 32 * s), sub(&ab.qs, 32 * s)))
                .sum();
            acc[t] += d * ab.d * isum as f32;
        }
    }
    acc
}

/// A K-quant super-block with a scale per 16 elements, decoded.
struct Groups16 {
    d: f32,
    sc: [i8; 16],
    q: [i8; QK_K],
    /// Q2_K's `dmin` and group mins.
    mins: Option<(f32, [i8; 16])>,
}

/// Q2_K/Q3_K/Q6_K: `d·d_a·Σ_g sc_g·Σq·a` over the 16 groups of 16, less
/// `dmin·d_a·Σ_g min_g·Σa` (Σa from the bsums) where the format has mins.
#[inline(always)]
fn groups16<const N: usize, const BB: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8KBlock]; N],
    decode: impl Fn(&[u8]) -> Groups16,
) -> [f32; N] {
    let mut acc = [0f32; N];
    for (i, b) in w.chunks_exact(BB).enumerate() {
        let Groups16 { d, sc, q, mins } = decode(b);
        for t in 0..N {
            let ab = &a[t][i];
            let isum: i32 = (0..16)
                .map(|g| sc[g] as i32 * D::i8_i8_16(sub(&q, 16 * g), sub(&ab.qs, 16 * g)))
                .sum();
            acc[t] += match mins {
                None => d * ab.d * isum as f32,
                Some((dmin, mn)) => {
                    let msum: i32 = (0..16).map(|g| mn[g] as i32 * ab.bsums[g] as i32).sum();
                    ab.d * (d * isum as f32 - dmin * msum as f32)
                }
            };
        }
    }
    acc
}

pub(super) fn q2_k<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8KBlock]; N],
    _scales: &[f32],
) -> [f32; N] {
    groups16::<N, 84, D>(w, a, |b| {
        let (sc, mn) = q2_k_scales_mins(b);
        Groups16 {
            d: f16_at(b, q2_k::D),
            sc,
            q: unpack_q2_k(b),
            mins: Some((f16_at(b, q2_k::DMIN), mn)),
        }
    })
}

pub(super) fn q3_k<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8KBlock]; N],
    _scales: &[f32],
) -> [f32; N] {
    groups16::<N, 110, D>(w, a, |b| Groups16 {
        d: f16_at(b, q3_k::D),
        sc: q3_k_scales(b),
        q: unpack_q3_k(b),
        mins: None,
    })
}

pub(super) fn q6_k<const N: usize, D: IntDot>(
    w: &[u8],
    a: [&[Q8KBlock]; N],
    _scales: &[f32],
) -> [f32; N] {
    groups16::<N, 210, D>(w, a, |b| Groups16 {
        d: f16_at(b, q6_k::D),
        sc: q6_k_scales(b),
        q: unpack_q6_k(b),
        mins: None,
    })
}
