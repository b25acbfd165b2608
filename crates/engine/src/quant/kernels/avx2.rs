//! AVX2 + FMA + F16C kernels (x86-64). Same arithmetic as the portable kernels, in
//! vectors: 32 quants per 256-bit register, products of u8×i8 pairs with `maddubs`
//! (signed×signed goes through the sign trick: |w| × (a with w's sign)).
//!
//! Every function here is only reachable through `avx2_table::TABLE`, which
//! [`super::Backend::avx2`] hands out only after detecting the CPU features; that is
//! what makes the safe wrappers sound. The helpers at the top of the second half
//! (`hsum_epi32`, `load256`, `dot_u8_i8`, ...) serve the other AVX2 files too; the
//! table has a file of its own so that no kernel file needs another's kernels.

use std::arch::x86_64::*;

/// Whether this copy of the kernels may use AVX-512 VNNI dot products (the build script
/// compiles a second copy of this file with the wider feature set and this set to true).
pub(super) const VNNI: bool = false;
use crate::quant::act_blocks::{Q8Block, Q8KBlock};
use crate::quant::layout::{
    e8m0_half, k4_scales_mins, q2_k, q2_k_scales_mins, q3_k, q3_k_scales, q4_k, q5_k, q6_k,
    IQ4_NL_VALUES, MXFP4_VALUES,
};

/// Wraps an AVX2 kernel in a safe function that can go into the table.
macro_rules! safe {
    ($name:ident, $inner:path, $act:ty) => {
        pub(super) fn $name<const N: usize>(w: &[u8], a: [&[$act]; N], scales: &[f32]) -> [f32; N] {
            // SAFETY: see the module docs: the table is only used on AVX2+FMA+F16C CPUs.
            unsafe { $inner(w, a, scales) }
        }
    };
}
pub(super) use safe;

safe!(f32_rows, f32_rows_avx2, f32);
safe!(f16_rows, f16_rows_avx2, f32);
safe!(bf16_rows, bf16_rows_avx2, f32);
safe!(q4_0, q4_0_avx2, Q8Block);
safe!(q4_1, q4_1_avx2, Q8Block);
safe!(q5_0, q5_0_avx2, Q8Block);
safe!(q5_1, q5_1_avx2, Q8Block);
safe!(q8_0, q8_0_avx2, Q8Block);
safe!(q4_k, q4_k_avx2, Q8KBlock);
safe!(q5_k, q5_k_avx2, Q8KBlock);
safe!(q6_k, q6_k_avx2, Q8KBlock);
safe!(iq4_nl, iq4_nl_avx2, Q8Block);
safe!(iq4_xs, iq4_xs_avx2, Q8KBlock);
safe!(q3_k, q3_k_avx2, Q8KBlock);
safe!(q2_k, q2_k_avx2, Q8KBlock);
safe!(mxfp4, mxfp4_avx2, Q8Block);

// ---- helpers -------------------------------------------------------------------------

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum_ps(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn hsum_epi32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// The f16 at `p` as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn f16_at(p: *const u8) -> f32 {
    let bits = u16::from_le_bytes([*p, *p.add(1)]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn load256(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

/// 16 bytes of nibble pairs at `p` -> 32 bytes 0..=15: low nibbles then high nibbles.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn nibbles32(p: *const u8) -> __m256i {
    let x = _mm_loadu_si128(p as *const __m128i);
    let both = _mm256_set_m128i(_mm_srli_epi16(x, 4), x);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
}

/// A 16-value codebook's values of 32 indices 0..=15 (IQ4_NL, MXFP4): one byte shuffle
/// per 16 lanes, the codebook in both halves of the table register.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn codebook_values(book: &[i8; 16], idx: __m256i) -> __m256i {
    let book = _mm_loadu_si128(book.as_ptr() as *const __m128i);
    _mm256_shuffle_epi8(_mm256_set_m128i(book, book), idx)
}

/// Byte j = 0xFF where bit j of `bits` is set, else 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bits_to_bytes(bits: u32) -> __m256i {
    // Byte j takes byte j/8 of `bits`; OR-ing every bit but bit j%8 makes it all-ones
    // exactly when that bit was set.
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_set_epi64x(
            0x0303030303030303,
            0x0202020202020202,
            0x0101010101010101,
            0,
        ),
    );
    let others = _mm256_set1_epi64x(0x7FBF_DFEF_F7FB_FDFE_u64 as i64);
    _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi8(-1))
}

/// Σ u·s over each group of 4 bytes, as 8 i32 (u unsigned, s signed, |u·s pair| < 2^15).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_u8_i8(u: __m256i, s: __m256i) -> __m256i {
    if VNNI {
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
    } else {
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    }
}

/// Σ u·s with each 16-bit pair-sum weighted by `scales` (i16 lanes), as 8 i32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_u8_i8_scaled(u: __m256i, s: __m256i, scales: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scales)
}

// ---- float weights -------------------------------------------------------------------

/// Float rows, 16 elements per step in two accumulators per token; `load8` turns 8
/// stored elements into f32.
macro_rules! float_kernel {
    ($name:ident, $eb:expr, |$p:ident| $load8:expr, |$b:ident| $scalar:expr) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $name<const N: usize>(w: &[u8], a: [&[f32]; N], _scales: &[f32]) -> [f32; N] {
            let n = w.len() / $eb;
            for x in a {
                assert_eq!(x.len(), n);
            }
            let wp = w.as_ptr();
            let mut acc0 = [_mm256_setzero_ps(); N];
            let mut acc1 = [_mm256_setzero_ps(); N];
            let mut i = 0;
            while i + 16 <= n {
                let w0 = {
                    let $p = wp.add(i * $eb);
                    $load8
                };
                let w1 = {
                    let $p = wp.add((i + 8) * $eb);
                    $load8
                };
                for t in 0..N {
                    let x = a[t].as_ptr().add(i);
                    acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x), acc0[t]);
                    acc1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x.add(8)), acc1[t]);
                }
                i += 16;
            }
            let mut out = [0f32; N];
            for t in 0..N {
                out[t] = hsum_ps(_mm256_add_ps(acc0[t], acc1[t]));
            }
            for j in i..n {
                let wv = {
                    let $b = &w[j * $eb..(j + 1) * $eb];
                    $scalar
                };
                for t in 0..N {
                    out[t] += wv * a[t][j];
                }
            }
            out
        }
    };
}

float_kernel!(
    f32_rows_avx2,
    4,
    |p| _mm256_loadu_ps(p as *const f32),
    |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])
);
float_kernel!(
    f16_rows_avx2,
    2,
    |p| _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)),
    |b| f16_at(b.as_ptr())
);
float_kernel!(
    bf16_rows_avx2,
    2,
    |p| _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i)),
        16
    )),
    |b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16)
);

// ---- legacy quants against Q8 blocks -------------------------------------------------

/// Block `i`'s activation scales in a tile's scale table: the `d`s, then the `s`s.
#[inline(always)]
fn block_scales<const N: usize>(scales: &[f32], i: usize) -> (&[f32; N], &[f32; N]) {
    let (d, s) = scales[2 * N * i..2 * N * (i + 1)].split_at(N);
    (d.try_into().unwrap(), s.try_into().unwrap())
}

/// Each token's product of the weight scale `d` with its activation scale, kept in
/// memory so each FMA broadcasts its own from there.
#[inline(always)]
fn scale_products<const N: usize>(d: f32, ad: &[f32; N]) -> [f32; N] {
    let mut dd = [0f32; N];
    for t in 0..N {
        dd[t] = d * ad[t];
    }
    dd
}

/// Adds one symmetric block (scale `d`, signed quants `q`) times block `i` of every
/// activation row (scales `ad`) to `acc`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn signed_step<const N: usize>(
    d: f32,
    q: __m256i,
    a: &[&[Q8Block]; N],
    i: usize,
    ad: &[f32; N],
    acc: &mut [__m256; N],
) {
    let uq = _mm256_sign_epi8(q, q);
    let dd = scale_products(d, ad);
    for t in 0..N {
        let y = load256(a[t].get_unchecked(i).qs.as_ptr() as *const u8);
        let s = dot_u8_i8(uq, _mm256_sign_epi8(y, q));
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dd[t]), _mm256_cvtepi32_ps(s), acc[t]);
    }
}

/// Adds one offset block (scale `d`, min `m`, unsigned quants `q`) times block `i` of
/// every activation row (scales `ad`, sums `as_`): the quants into `acc`, the min into
/// `offs`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn unsigned_step<const N: usize>(
    (d, m): (f32, f32),
    q: __m256i,
    a: &[&[Q8Block]; N],
    i: usize,
    (ad, as_): (&[f32; N], &[f32; N]),
    acc: &mut [__m256; N],
    offs: &mut [f32; N],
) {
    let dd = scale_products(d, ad);
    for t in 0..N {
        offs[t] += m * as_[t];
    }
    for t in 0..N {
        let y = load256(a[t].get_unchecked(i).qs.as_ptr() as *const u8);
        let s = dot_u8_i8(q, y);
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dd[t]), _mm256_cvtepi32_ps(s), acc[t]);
    }
}

/// A legacy-format kernel. Blocks go alternately to two sets of accumulators so that a
/// single-token call is not bound by the latency of one FMA chain.
macro_rules! legacy_kernel {
    ($name:ident, $bb:expr, |$p:ident| $decode:expr, signed) => {
        legacy_kernel!(@ $name, $bb, Q8Block, |$p, acc, offs, a, i, sc| {
            let (d, q): (f32, __m256i) = $decode;
            signed_step(d, q, &a, i, sc.0, acc);
            let _ = offs;
        });
    };
    ($name:ident, $bb:expr, |$p:ident| $decode:expr, unsigned) => {
        legacy_kernel!(@ $name, $bb, Q8Block, |$p, acc, offs, a, i, sc| {
            let (d, m, q): (f32, f32, __m256i) = $decode;
            unsigned_step((d, m), q, &a, i, sc, acc, offs);
        });
    };
    (@ $name:ident, $bb:expr, $act:ty, |$p:ident, $acc:ident, $offs:ident, $a:ident, $i:ident, $sc:ident| $step:block) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $name<const N: usize>(w: &[u8], $a: [&[$act]; N], scales: &[f32]) -> [f32; N] {
            let nb = w.len() / $bb;
            for x in $a {
                assert_eq!(x.len(), nb);
            }
            assert_eq!(scales.len(), 2 * N * nb);
            let mut accs = [[_mm256_setzero_ps(); N]; 2];
            let mut offss = [[0f32; N]; 2];
            let mut start = 0;
            while start < nb {
                for k in 0..2 {
                    let $i = start + k;
                    if $i < nb {
                        let $p = w.as_ptr().add($i * $bb);
                        let $acc = &mut accs[k];
                        let $offs = &mut offss[k];
                        let $sc = block_scales::<N>(scales, $i);
                        $step
                    }
                }
                start += 2;
            }
            let mut out = [0f32; N];
            for t in 0..N {
                out[t] = hsum_ps(_mm256_add_ps(accs[0][t], accs[1][t])) + offss[0][t] + offss[1][t];
            }
            out
        }
    };
}

/// IQ4_XS: per super-block, eight sub-blocks of 32 codebook values, each with its own
/// 6-bit scale applied to the integer dot product before the one float scale.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq4_xs_avx2<const N: usize>(w: &[u8], a: [&[Q8KBlock]; N], _scales: &[f32]) -> [f32; N] {
    let nb = w.len() / 136;
    for x in a {
        assert_eq!(x.len(), nb);
    }
    let mut acc = [_mm256_setzero_ps(); N];
    for i in 0..nb {
        let p = w.as_ptr().add(i * 136);
        let d = f16_at(p);
        let high = u16::from_le_bytes([*p.add(2), *p.add(3)]) as i32;
        let mut q = [_mm256_setzero_si256(); 8];
        let mut uq = [_mm256_setzero_si256(); 8];
        let mut sc = [_mm256_setzero_si256(); 8];
        for s in 0..8 {
            q[s] = codebook_values(&IQ4_NL_VALUES, nibbles32(p.add(8 + 16 * s)));
            uq[s] = _mm256_sign_epi8(q[s], q[s]);
            let low = ((*p.add(4 + s / 2) >> (4 * (s % 2))) & 0x0F) as i32;
            sc[s] = _mm256_set1_epi32((low | (((high >> (2 * s)) & 3) << 4)) - 32);
        }
        for t in 0..N {
            let ab = a[t].get_unchecked(i);
            let mut isum = _mm256_setzero_si256();
            for s in 0..8 {
                let y = load256(ab.qs.as_ptr().add(32 * s) as *const u8);
                let dot = dot_u8_i8(uq[s], _mm256_sign_epi8(y, q[s]));
                isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(dot, sc[s]));
            }
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * ab.d), _mm256_cvtepi32_ps(isum), acc[t]);
        }
    }
    let mut out = [0f32; N];
    for t in 0..N {
        out[t] = hsum_ps(acc[t]);
    }
    out
}

/// Five-bit quants 0..=31 from the nibbles at `qs` and the 32 high bits at `qh`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn five_bit(qs: *const u8, qh: *const u8) -> __m256i {
    let bits = u32::from_le_bytes([*qh, *qh.add(1), *qh.add(2), *qh.add(3)]);
    let high = _mm256_and_si256(bits_to_bytes(bits), _mm256_set1_epi8(0x10));
    _mm256_or_si256(nibbles32(qs), high)
}

legacy_kernel!(
    q4_0_avx2,
    18,
    |p| (
        f16_at(p),
        _mm256_sub_epi8(nibbles32(p.add(2)), _mm256_set1_epi8(8))
    ),
    signed
);
legacy_kernel!(
    q5_0_avx2,
    22,
    |p| (
        f16_at(p),
        _mm256_sub_epi8(five_bit(p.add(6), p.add(2)), _mm256_set1_epi8(16))
    ),
    signed
);
legacy_kernel!(q8_0_avx2, 34, |p| (f16_at(p), load256(p.add(2))), signed);
legacy_kernel!(
    iq4_nl_avx2,
    18,
    |p| (
        f16_at(p),
        codebook_values(&IQ4_NL_VALUES, nibbles32(p.add(2)))
    ),
    signed
);
legacy_kernel!(
    mxfp4_avx2,
    17,
    |p| (
        e8m0_half(*p),
        codebook_values(&MXFP4_VALUES, nibbles32(p.add(1)))
    ),
    signed
);
legacy_kernel!(
    q4_1_avx2,
    20,
    |p| (f16_at(p), f16_at(p.add(2)), nibbles32(p.add(4))),
    unsigned
);
legacy_kernel!(
    q5_1_avx2,
    24,
    |p| (f16_at(p), f16_at(p.add(2)), five_bit(p.add(8), p.add(4))),
    unsigned
);

// ---- K-quants against Q8_K blocks ----------------------------------------------------

/// Q4_K/Q5_K; `HIGH_BITS` selects Q5_K's fifth bit from qh.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn k_scale_min<const N: usize, const BB: usize, const HIGH_BITS: bool>(
    w: &[u8],
    a: [&[Q8KBlock]; N],
) -> [f32; N] {
    let nb = w.len() / BB;
    for x in a {
        assert_eq!(x.len(), nb);
    }
    let qs_at = if HIGH_BITS { q5_k::QS } else { q4_k::QS };
    let low4 = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    let mut acc = [_mm256_setzero_ps(); N];
    let mut mins_acc = [0f32; N];
    for i in 0..nb {
        let b = &w[i * BB..(i + 1) * BB];
        let p = b.as_ptr();
        let d = f16_at(p.add(q4_k::D));
        let dmin = f16_at(p.add(q4_k::DMIN));
        let (sc, mn) = k4_scales_mins(&b[q4_k::SCALES..q4_k::SCALES + 12]);
        // Each min pairs with the two bsums (16 quants each) of its 32-element sub-block.
        let mut mins16 = [0i16; 16];
        for (k, m) in mins16.iter_mut().enumerate() {
            *m = mn[k / 2] as i16;
        }
        let mins16 = _mm256_loadu_si256(mins16.as_ptr() as *const __m256i);
        let qh = if HIGH_BITS {
            load256(p.add(q5_k::QH))
        } else {
            _mm256_setzero_si256()
        };
        let mut isum = [_mm256_setzero_si256(); N];
        for c in 0..4 {
            let q4 = load256(p.add(qs_at + 32 * c));
            let mut lo = _mm256_and_si256(q4, low4);
            let mut hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4);
            if HIGH_BITS {
                let bit = |s: usize| {
                    let h = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(s as i32));
                    _mm256_slli_epi16(_mm256_and_si256(h, one), 4)
                };
                lo = _mm256_or_si256(lo, bit(2 * c));
                hi = _mm256_or_si256(hi, bit(2 * c + 1));
            }
            let s_lo = _mm256_set1_epi16(sc[2 * c] as i16);
            let s_hi = _mm256_set1_epi16(sc[2 * c + 1] as i16);
            for t in 0..N {
                let y = a[t].get_unchecked(i).qs.as_ptr().add(64 * c) as *const u8;
                let p_lo = dot_u8_i8_scaled(lo, load256(y), s_lo);
                let p_hi = dot_u8_i8_scaled(hi, load256(y.add(32)), s_hi);
                isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(p_lo, p_hi));
            }
        }
        for t in 0..N {
            let ab = a[t].get_unchecked(i);
            acc[t] = _mm256_fmadd_ps(
                _mm256_set1_ps(d * ab.d),
                _mm256_cvtepi32_ps(isum[t]),
                acc[t],
            );
            mins_acc[t] += dmin * ab.d * bsums_dot(mins16, ab) as f32;
        }
    }
    let mut out = [0f32; N];
    for t in 0..N {
        out[t] = hsum_ps(acc[t]) - mins_acc[t];
    }
    out
}

/// `Σ_g w_g·bsum_g` over the 16 activation sums of `ab` (`w` in i16 lanes): what a
/// per-group min (or offset) contributes once multiplied by each group's quants.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bsums_dot(w: __m256i, ab: &Q8KBlock) -> i32 {
    let bsums = _mm256_loadu_si256(ab.bsums.as_ptr() as *const __m256i);
    hsum_epi32(_mm256_madd_epi16(w, bsums))
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_avx2<const N: usize>(w: &[u8], a: [&[Q8KBlock]; N], _scales: &[f32]) -> [f32; N] {
    k_scale_min::<N, 144, false>(w, a)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_k_avx2<const N: usize>(w: &[u8], a: [&[Q8KBlock]; N], _scales: &[f32]) -> [f32; N] {
    k_scale_min::<N, 176, true>(w, a)
}

/// Adds to each token's `isum` the products of 32 unsigned quants `q`, elements
/// `at..at + 32` of super-block `i` (groups `at / 16` and `at / 16 + 1` of 16), with
/// their activations, each group's pair sums weighted by its scale in `sc`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn groups16_step<const N: usize>(
    q: __m256i,
    sc: &[i8; 16],
    at: usize,
    a: &[&[Q8KBlock]; N],
    i: usize,
    isum: &mut [__m256i; N],
) {
    let g = at / 16;
    let scales = _mm256_set_m128i(
        _mm_set1_epi16(sc[g + 1] as i16),
        _mm_set1_epi16(sc[g] as i16),
    );
    for t in 0..N {
        let y = a[t].get_unchecked(i).qs.as_ptr().add(at);
        let s = dot_u8_i8_scaled(q, load256(y as *const u8), scales);
        isum[t] = _mm256_add_epi32(isum[t], s);
    }
}

/// Adds `d·d_a·(isum − 2^SHIFT·Σ_g sc_g·bsum_g)` to each token's `acc`: the quants were
/// decoded shifted up by `2^SHIFT` (to be unsigned for `maddubs`), and the shift times
/// each group's activation sum is taken back here.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn groups16_finish<const N: usize, const SHIFT: i32>(
    d: f32,
    sc: &[i8; 16],
    isum: &[__m256i; N],
    a: &[&[Q8KBlock]; N],
    i: usize,
    acc: &mut [__m256; N],
) {
    let sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(sc.as_ptr() as *const __m128i));
    for t in 0..N {
        let ab = a[t].get_unchecked(i);
        let bsums = _mm256_loadu_si256(ab.bsums.as_ptr() as *const __m256i);
        let offset = _mm256_slli_epi32::<SHIFT>(_mm256_madd_epi16(sc16, bsums));
        let s = _mm256_sub_epi32(isum[t], offset);
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * ab.d), _mm256_cvtepi32_ps(s), acc[t]);
    }
}

/// The four 2-bit fields (0..=3) of 32 bytes at `p`, bits `2j..2j + 2` in the `j`th.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn two_bit_quarters(p: *const u8) -> [__m256i; 4] {
    let (x, low2) = (load256(p), _mm256_set1_epi8(0x03));
    let field = |j: i32| _mm256_and_si256(_mm256_srl_epi16(x, _mm_cvtsi32_si128(2 * j)), low2);
    [field(0), field(1), field(2), field(3)]
}

/// Q3_K: quants decoded unsigned, `q + 4` (0..=7: the 2-bit field plus 4 where the
/// hmask bit is set), the offset taken back through the bsums.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q3_k_avx2<const N: usize>(w: &[u8], a: [&[Q8KBlock]; N], _scales: &[f32]) -> [f32; N] {
    const BB: usize = 110;
    let nb = w.len() / BB;
    for x in a {
        assert_eq!(x.len(), nb);
    }
    let one = _mm256_set1_epi8(1);
    let mut acc = [_mm256_setzero_ps(); N];
    for i in 0..nb {
        let b = &w[i * BB..(i + 1) * BB];
        let p = b.as_ptr();
        let sc = q3_k_scales(b);
        let hmask = load256(p.add(q3_k::HMASK));
        let mut isum = [_mm256_setzero_si256(); N];
        for n in 0..2 {
            let low = two_bit_quarters(p.add(q3_k::QS + 32 * n));
            for (j, low) in low.into_iter().enumerate() {
                let bit = _mm256_srl_epi16(hmask, _mm_cvtsi32_si128((4 * n + j) as i32));
                let high = _mm256_slli_epi16(_mm256_and_si256(bit, one), 2);
                let q = _mm256_or_si256(low, high);
                groups16_step(q, &sc, 128 * n + 32 * j, &a, i, &mut isum);
            }
        }
        groups16_finish::<N, 2>(f16_at(p.add(q3_k::D)), &sc, &isum, &a, i, &mut acc);
    }
    let mut out = [0f32; N];
    for t in 0..N {
        out[t] = hsum_ps(acc[t]);
    }
    out
}

/// Q2_K: quants 0..=3 as stored, scaled per group of 16; each group's min meets its
/// activation sum once per super-block, as in Q4_K.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q2_k_avx2<const N: usize>(w: &[u8], a: [&[Q8KBlock]; N], _scales: &[f32]) -> [f32; N] {
    const BB: usize = 84;
    let nb = w.len() / BB;
    for x in a {
        assert_eq!(x.len(), nb);
    }
    let mut acc = [_mm256_setzero_ps(); N];
    let mut mins_acc = [0f32; N];
    for i in 0..nb {
        let b = &w[i * BB..(i + 1) * BB];
        let p = b.as_ptr();
        let (sc, mn) = q2_k_scales_mins(b);
        let mins16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(mn.as_ptr() as *const __m128i));
        let mut isum = [_mm256_setzero_si256(); N];
        for n in 0..2 {
            let quarters = two_bit_quarters(p.add(q2_k::QS + 32 * n));
            for (j, q) in quarters.into_iter().enumerate() {
                groups16_step(q, &sc, 128 * n + 32 * j, &a, i, &mut isum);
            }
        }
        let (d, dmin) = (f16_at(p.add(q2_k::D)), f16_at(p.add(q2_k::DMIN)));
        for t in 0..N {
            let ab = a[t].get_unchecked(i);
            let s = _mm256_cvtepi32_ps(isum[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * ab.d), s, acc[t]);
            mins_acc[t] += dmin * ab.d * bsums_dot(mins16, ab) as f32;
        }
    }
    let mut out = [0f32; N];
    for t in 0..N {
        out[t] = hsum_ps(acc[t]) - mins_acc[t];
    }
    out
}

/// Q6_K: quants are decoded unsigned (0..=63); the −32 offset is applied once per
/// block through the bsums: Σ sc·(q−32)·a = Σ sc·q·a − 32·Σ sc·bsum.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_avx2<const N: usize>(w: &[u8], a: [&[Q8KBlock]; N], _scales: &[f32]) -> [f32; N] {
    const BB: usize = 210;
    let nb = w.len() / BB;
    for x in a {
        assert_eq!(x.len(), nb);
    }
    let low4 = _mm256_set1_epi8(0x0F);
    let low2 = _mm256_set1_epi8(0x03);
    let mut acc = [_mm256_setzero_ps(); N];
    for i in 0..nb {
        let p = w.as_ptr().add(i * BB);
        let sc: [i8; 16] = *(p.add(q6_k::SCALES) as *const [i8; 16]);
        let mut isum = [_mm256_setzero_si256(); N];
        for n in 0..2 {
            let ql0 = load256(p.add(q6_k::QL + 64 * n));
            let ql1 = load256(p.add(q6_k::QL + 64 * n + 32));
            let qh = load256(p.add(q6_k::QH + 32 * n));
            let high = |shift: i32| {
                let h = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(shift));
                _mm256_slli_epi16(_mm256_and_si256(h, low2), 4)
            };
            let quarters = [
                _mm256_or_si256(_mm256_and_si256(ql0, low4), high(0)),
                _mm256_or_si256(_mm256_and_si256(ql1, low4), high(2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), high(4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), high(6)),
            ];
            for (k, q) in quarters.into_iter().enumerate() {
                groups16_step(q, &sc, 128 * n + 32 * k, &a, i, &mut isum);
            }
        }
        groups16_finish::<N, 5>(f16_at(p.add(q6_k::D)), &sc, &isum, &a, i, &mut acc);
    }
    let mut out = [0f32; N];
    for t in 0..N {
        out[t] = hsum_ps(acc[t]);
    }
    out
}
