//! Portable kernels: the reference every faster kernel is tested against. Each decodes
//! a weight block once into integers, then takes integer dot products with every
//! activation row of the tile.

use super::{tiles, KernelSet, KernelTable};
use crate::quant::acts::{Q16Block, Q8Block, Q8KBlock};
use crate::quant::layout::*;

pub(crate) static TABLE: KernelTable = KernelTable {
    set: KernelSet::Portable,
    quantize: &crate::quant::acts::PORTABLE_QUANTIZERS,
    groups: None,
    f32: tiles!(f32_rows),
    f16: tiles!(f16_rows),
    bf16: tiles!(bf16_rows),
    q4_0: tiles!(q4_0),
    q4_1: tiles!(q4_1),
    q5_0: tiles!(q5_0),
    q5_1: tiles!(q5_1),
    q8_0: tiles!(q8_0),
    q4_k: tiles!(q4_k),
    q5_k: tiles!(q5_k),
    q6_k: tiles!(q6_k),
};

#[inline(always)]
fn idot<Q: Copy + Into<i32>, A: Copy + Into<i32>, const L: usize>(q: &[Q; L], a: &[A; L]) -> i32 {
    let mut s = 0i32;
    for k in 0..L {
        s += q[k].into() * a[k].into();
    }
    s
}

/// What the legacy kernel needs of an activation block: its scale, its sum term and
/// its integer dot product with a block of weight quants.
trait LegacyActs {
    fn d(&self) -> f32;
    fn s(&self) -> f32;
    fn dot<Q: Copy + Into<i32>>(&self, q: &[Q; QK]) -> i32;
}

macro_rules! legacy_acts {
    ($($block:ty),*) => {$(
        impl LegacyActs for $block {
            fn d(&self) -> f32 {
                self.d
            }
            fn s(&self) -> f32 {
                self.s
            }
            fn dot<Q: Copy + Into<i32>>(&self, q: &[Q; QK]) -> i32 {
                idot(q, &self.qs)
            }
        }
    )*};
}

legacy_acts!(Q8Block, Q16Block);

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

fn f32_rows<const N: usize>(w: &[u8], a: [&[f32]; N], _scales: &[f32]) -> [f32; N] {
    float_rows::<N, 4>(w, a, |b| f32_at(b, 0))
}

fn f16_rows<const N: usize>(w: &[u8], a: [&[f32]; N], _scales: &[f32]) -> [f32; N] {
    float_rows::<N, 2>(w, a, |b| f16_at(b, 0))
}

fn bf16_rows<const N: usize>(w: &[u8], a: [&[f32]; N], _scales: &[f32]) -> [f32; N] {
    float_rows::<N, 2>(w, a, |b| bf16_at(b, 0))
}

/// Legacy blocks: `Σ d_w·d_a·Σq·a + m_w·s_a` (m_w = 0 for the symmetric formats).
#[inline(always)]
fn legacy<const N: usize, const BB: usize, Q: Copy + Into<i32>, A: LegacyActs>(
    w: &[u8],
    a: [&[A]; N],
    decode: impl Fn(&[u8]) -> (f32, f32, [Q; QK]),
) -> [f32; N] {
    let mut acc = [0f32; N];
    for (i, b) in w.chunks_exact(BB).enumerate() {
        let (d, m, q) = decode(b);
        for t in 0..N {
            let ab = &a[t][i];
            acc[t] += d * ab.d() * ab.dot(&q) as f32 + m * ab.s();
        }
    }
    acc
}

fn q4_0<const N: usize>(w: &[u8], a: [&[Q8Block]; N], _scales: &[f32]) -> [f32; N] {
    legacy::<N, 18, i8, _>(w, a, |b| (f16_at(b, 0), 0.0, unpack_q4_0(b)))
}

fn q4_1<const N: usize>(w: &[u8], a: [&[Q16Block]; N], _scales: &[f32]) -> [f32; N] {
    legacy::<N, 20, u8, _>(w, a, |b| (f16_at(b, 0), f16_at(b, 2), unpack_q4_1(b)))
}

fn q5_0<const N: usize>(w: &[u8], a: [&[Q8Block]; N], _scales: &[f32]) -> [f32; N] {
    legacy::<N, 22, i8, _>(w, a, |b| (f16_at(b, 0), 0.0, unpack_q5_0(b)))
}

fn q5_1<const N: usize>(w: &[u8], a: [&[Q16Block]; N], _scales: &[f32]) -> [f32; N] {
    legacy::<N, 24, u8, _>(w, a, |b| (f16_at(b, 0), f16_at(b, 2), unpack_q5_1(b)))
}

fn q8_0<const N: usize>(w: &[u8], a: [&[Q8Block]; N], _scales: &[f32]) -> [f32; N] {
    legacy::<N, 34, i8, _>(w, a, |b| (f16_at(b, 0), 0.0, unpack_q8_0(b)))
}

/// Q4_K/Q5_K: `d_a·(d·Σ_s scale_s·Σq·a − dmin·Σ_s min_s·Σa)`, with Σa from the bsums.
#[inline(always)]
fn k_scale_min<const N: usize, const BB: usize>(
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
                isum += sc[s] as i32 * idot::<u8, i8, 32>(sub(&q, 32 * s), sub(&ab.qs, 32 * s));
                msum += mn[s] as i32 * (ab.bsums[2 * s] as i32 + ab.bsums[2 * s + 1] as i32);
            }
            acc[t] += ab.d * (d * isum as f32 - dmin * msum as f32);
        }
    }
    acc
}

fn q4_k<const N: usize>(w: &[u8], a: [&[Q8KBlock]; N], _scales: &[f32]) -> [f32; N] {
    k_scale_min::<N, 144>(w, a, unpack_q4_k)
}

fn q5_k<const N: usize>(w: &[u8], a: [&[Q8KBlock]; N], _scales: &[f32]) -> [f32; N] {
    k_scale_min::<N, 176>(w, a, unpack_q5_k)
}

fn q6_k<const N: usize>(w: &[u8], a: [&[Q8KBlock]; N], _scales: &[f32]) -> [f32; N] {
    let mut acc = [0f32; N];
    for (i, b) in w.chunks_exact(210).enumerate() {
        let d = f16_at(b, q6_k::D);
        let sc = q6_k_scales(b);
        let q = unpack_q6_k(b);
        for t in 0..N {
            let ab = &a[t][i];
            let isum: i32 = (0..16)
                .map(|g| sc[g] as i32 * idot::<i8, i8, 16>(sub(&q, 16 * g), sub(&ab.qs, 16 * g)))
                .sum();
            acc[t] += d * ab.d * isum as f32;
        }
    }
    acc
}
