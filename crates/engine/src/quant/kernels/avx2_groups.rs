//! Kernels for interleaved weights (see `quant::interleave`): one group of 8 rows
//! against `N` tokens. A 32-byte load holds the same 4 elements of the 8 rows; each
//! token's 4 matching activations are broadcast to every lane and one dot-product
//! instruction advances all 8 rows. The lanes are rows, so the block's scales (one per
//! row) are applied with vector arithmetic: no horizontal sums anywhere.
//!
//! Signed formats are shifted to unsigned quants (`u = q + offset`, which the
//! unsigned side of `vpdpbusd`/`maddubs` needs) and the shift is taken back through the
//! activation block sum: `Σ q·a = Σ u·a − offset·Σ a`, `d·Σ a` being the block's `s`.
//!
//! Only reachable through [`GROUP_KERNELS`], handed out with the AVX2 tables.

use std::arch::x86_64::*;

use super::avx2::{codebook_values, load256, VNNI};
use super::{tiles, GroupKernels};
use crate::quant::act_blocks::{Q8Block, Q8KBlock};
use crate::quant::layout::{IQ4_NL_VALUES, MXFP4_VALUES};

/// Wraps a kernel into a safe function for the table.
macro_rules! safe {
    ($name:ident, $inner:ident, $act:ty) => {
        fn $name<const N: usize>(g: &[u8], a: [&[$act]; N], scales: &[f32]) -> [[f32; 8]; N] {
            // SAFETY: the table is only handed out on CPUs with the features.
            unsafe { $inner(g, a, scales) }
        }
    };
}

safe!(q4_0, q4_0_groups, Q8Block);
safe!(q4_1, q4_1_groups, Q8Block);
safe!(q5_0, q5_0_groups, Q8Block);
safe!(q5_1, q5_1_groups, Q8Block);
safe!(q8_0, q8_0_groups, Q8Block);
safe!(q4_k, q4_k_groups, Q8KBlock);
safe!(q6_k, q6_k_groups, Q8KBlock);
safe!(iq4_nl, iq4_nl_groups, Q8Block);
safe!(iq4_xs, iq4_xs_groups, Q8KBlock);
safe!(mxfp4, mxfp4_groups, Q8Block);
safe!(q2_k, q2_k_groups, Q8KBlock);
safe!(q3_k, q3_k_groups, Q8KBlock);

pub(crate) static GROUP_KERNELS: GroupKernels = GroupKernels {
    q4_0: tiles!(group q4_0),
    q4_1: tiles!(group q4_1),
    q5_0: tiles!(group q5_0),
    q5_1: tiles!(group q5_1),
    q8_0: tiles!(group q8_0),
    q4_k: tiles!(group q4_k),
    q6_k: tiles!(group q6_k),
    iq4_nl: tiles!(group iq4_nl),
    iq4_xs: tiles!(group iq4_xs),
    mxfp4: tiles!(group mxfp4),
    q2_k: tiles!(group q2_k),
    q3_k: tiles!(group q3_k),
};

/// The 8 rows' f16 values at `p` as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16x8(p: *const u8) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
}

/// The 8 quant words of a 4- or 5-bit block (`Wk`: elements `4k..4k + 4` of each row,
/// 0..=31) from its nibbles at `x` and, for 5-bit formats, its fifth bits at `h`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibble_words(x: *const u8, h: Option<*const u8>) -> [__m256i; 8] {
    let low4 = _mm256_set1_epi8(0x0F);
    let mut w = [_mm256_setzero_si256(); 8];
    for j in 0..4 {
        let xj = load256(x.add(32 * j));
        w[j] = _mm256_and_si256(xj, low4);
        w[4 + j] = _mm256_and_si256(_mm256_srli_epi16(xj, 4), low4);
    }
    if let Some(h) = h {
        // Bit k of each byte of H goes to bit 4 of word k (16-bit shifts: the bits that
        // cross into the neighbouring byte are masked off).
        let hv = load256(h);
        let bit4 = _mm256_set1_epi8(0x10);
        for (k, wk) in w.iter_mut().enumerate() {
            let moved = if k <= 4 {
                _mm256_sll_epi16(hv, _mm_cvtsi32_si128(4 - k as i32))
            } else {
                _mm256_srl_epi16(hv, _mm_cvtsi32_si128(k as i32 - 4))
            };
            *wk = _mm256_or_si256(*wk, _mm256_and_si256(moved, bit4));
        }
    }
    w
}

/// How far ahead of the block being computed the weights are asked for.
const PREFETCH_BYTES: usize = 2048;

/// Asks for the `len` bytes [`PREFETCH_BYTES`] after `p` (a block's worth of the
/// weight stream, which may run past the group: prefetches never fault). Non-temporal:
/// a weight is read once per step, and keeping it would push out the activations and
/// KV rows that are read again within the step.
#[inline(always)]
unsafe fn prefetch_ahead(p: *const u8, len: usize) {
    let ahead = p.wrapping_add(PREFETCH_BYTES) as *const i8;
    let mut off = 0;
    while off < len {
        _mm_prefetch::<_MM_HINT_NTA>(ahead.wrapping_add(off));
        off += 64;
    }
}

/// The dword at `p` (4 activations), in every lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn broadcast_word(p: *const u8) -> __m256i {
    _mm256_set1_epi32(std::ptr::read_unaligned(p as *const i32))
}

/// Independent sums a block's dot product is split into for a tile of `n` tokens. One
/// token needs four to hide the dot-product latency; a wide tile's tokens are
/// independent already, and fewer chains cost fewer additions (measured in-cache:
/// 8-token Q8_0 and Q4_K tiles +7-12% with two).
const fn chains(n: usize) -> usize {
    if n >= 4 {
        2
    } else {
        4
    }
}

/// Σ over the block of unsigned words × one token's 32 i8 activations at `y`, per row,
/// for a tile of `N` tokens.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_words<const N: usize>(w: &[__m256i; 8], y: *const i8) -> __m256i {
    let y = y as *const u8;
    let mut s = [_mm256_setzero_si256(); 4];
    for (k, &wk) in w.iter().enumerate() {
        let a = broadcast_word(y.add(4 * k));
        let c = k % chains(N);
        s[c] = if VNNI {
            _mm256_dpbusd_epi32(s[c], wk, a)
        } else {
            let p = _mm256_maddubs_epi16(wk, a);
            _mm256_add_epi32(s[c], _mm256_madd_epi16(p, _mm256_set1_epi16(1)))
        };
    }
    let s = &s[..chains(N)];
    s[1..].iter().fold(s[0], |x, &y| _mm256_add_epi32(x, y))
}

/// [`dot_words`] for signed words without VNNI: `maddubs` would saturate on the
/// 255·127 pairs of offset Q8_0 quants, so the signs move to the activations.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_signed_words(w: &[__m256i; 8], y: *const i8) -> __m256i {
    let y = y as *const u8;
    let mut s = _mm256_setzero_si256();
    for (k, &wk) in w.iter().enumerate() {
        let a = _mm256_sign_epi8(broadcast_word(y.add(4 * k)), wk);
        let p = _mm256_maddubs_epi16(_mm256_sign_epi8(wk, wk), a);
        s = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
    }
    s
}

/// What signed weight words (Q8_0's quants, codebook values) are shifted by before
/// [`signed_dot`]: to unsigned for `vpdpbusd`; not at all for the sign trick.
const SIGNED_OFFSET: i32 = if VNNI { 128 } else { 0 };

/// Signed weight bytes made ready for [`signed_dot`] (shifted by [`SIGNED_OFFSET`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn signed_ready(w: __m256i) -> __m256i {
    if VNNI {
        _mm256_xor_si256(w, _mm256_set1_epi8(-128))
    } else {
        w
    }
}

/// Σ per row of weight words made by [`signed_ready`] × one token's 32 activations at
/// `y` (less `SIGNED_OFFSET·Σ a`, which the caller takes back).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn signed_dot<const N: usize>(w: &[__m256i; 8], y: *const i8) -> __m256i {
    if VNNI {
        dot_words::<N>(w, y)
    } else {
        dot_signed_words(w, y)
    }
}

/// Codebook indices (IQ4_NL, MXFP4 nibble words) as their values, ready for
/// [`signed_dot`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn codebook_words(book: &[i8; 16], idx: [__m256i; 8]) -> [__m256i; 8] {
    idx.map(|i| signed_ready(codebook_values(book, i)))
}

/// The 8 rows' MXFP4 scales `2^(e − 128)` from their E8M0 bytes at `p`, as
/// `layout::e8m0_half` reads one: a normal float from `e = 2` on, subnormal below.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn e8m0_half_x8(p: *const u8) -> __m256 {
    let e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p as *const __m128i));
    let one = _mm256_set1_epi32(1);
    let normal = _mm256_slli_epi32(_mm256_sub_epi32(e, one), 23);
    let subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x0020_0000), e);
    let is_normal = _mm256_cmpgt_epi32(e, one);
    _mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, is_normal))
}

/// The integer sum of an activation block's quants, where kernels need it.
trait QuantSum {
    fn quant_sum(&self) -> i32;
}

impl QuantSum for Q8Block {
    fn quant_sum(&self) -> i32 {
        self.isum
    }
}

/// Q8_K partners (Q4_K) have no offset to take back.
impl QuantSum for Q8KBlock {
    fn quant_sum(&self) -> i32 {
        0
    }
}

/// A group kernel. `$decode` turns the interleaved block at `$g` into `(d, m, w)`:
/// every row's weights are `d·(w − $offset) + m` (`m` is `None` for the symmetric
/// formats); `$dot` is the per-row integer dot product of `$w` with the activation
/// block `$ab`, scaled by the tile table's `(d, s)`. The offset is taken back in
/// integers (`Σ w·a − offset·Σ a`, with the block's `isum`), so block sums are exact;
/// the minimum pairs with the block's `s`.
macro_rules! group_kernel {
    ($name:ident, $bb:expr, $act:ty, offset $offset:expr, |$g:ident| $decode:expr, |$w:ident, $ab:ident| $dot:expr) => {
        group_kernel!($name, $bb, $act, units 1, offset $offset, |$g| $decode, |$w, $ab, _sub| $dot);
    };
    ($name:ident, $bb:expr, $act:ty, units $units:expr, offset $offset:expr, |$g:ident| $decode:expr, |$w:ident, $ab:ident, $sub:ident| $dot:expr) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $name<const N: usize>(
            group: &[u8],
            a: [&[$act]; N],
            scales: &[f32],
        ) -> [[f32; 8]; N] {
            const GB: usize = 8 * $bb;
            let nb = group.len() / GB;
            assert_eq!(group.len(), nb * GB);
            // Activation units per block of 32 weights (Q8_K: one super-block per 8).
            let units: usize = $units;
            for x in a {
                assert_eq!(x.len() * units, nb);
            }
            assert_eq!(scales.len(), 2 * N * nb);
            let mut acc = [_mm256_setzero_ps(); N];
            for i in 0..nb {
                let $g = group.as_ptr().add(i * GB);
                // Single tokens too: on an AVX2-only EPYC, Qwen 2.5's decode ran ~10%
                // faster with it (docs/benchmarks.md), batches were already faster.
                prefetch_ahead($g, GB);
                let (d, m, $w): (__m256, Option<__m256>, _) = $decode;
                let sp = scales.as_ptr().add(2 * N * i);
                for t in 0..N {
                    let $ab = a[t].get_unchecked(i / units);
                    let $sub: usize = i % units;
                    let mut s: __m256i = $dot;
                    let offset: i32 = $offset;
                    if offset != 0 {
                        s = _mm256_sub_epi32(s, _mm256_set1_epi32(offset * $ab.quant_sum()));
                    }
                    let dd = _mm256_mul_ps(d, _mm256_set1_ps(*sp.add(t)));
                    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), dd, acc[t]);
                    if let Some(m) = m {
                        acc[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(*sp.add(N + t)), acc[t]);
                    }
                }
            }
            let mut out = [[0f32; 8]; N];
            for t in 0..N {
                _mm256_storeu_ps(out[t].as_mut_ptr(), acc[t]);
            }
            out
        }
    };
}

// Field offsets: see the layout in `quant::interleave` (d at 0, then m, H, quants).
group_kernel!(
    q4_0_groups,
    18,
    Q8Block,
    offset 8,
    |g| (f16x8(g), None, nibble_words(g.add(16), None)),
    |w, ab| dot_words::<N>(&w, ab.qs.as_ptr())
);
group_kernel!(
    q5_0_groups,
    22,
    Q8Block,
    offset 16,
    |g| (f16x8(g), None, nibble_words(g.add(48), Some(g.add(16)))),
    |w, ab| dot_words::<N>(&w, ab.qs.as_ptr())
);
group_kernel!(
    q8_0_groups,
    34,
    Q8Block,
    offset SIGNED_OFFSET,
    |g| {
        let mut w = [_mm256_setzero_si256(); 8];
        for (k, wk) in w.iter_mut().enumerate() {
            *wk = signed_ready(load256(g.add(16 + 32 * k)));
        }
        (f16x8(g), None, w)
    },
    |w, ab| signed_dot::<N>(&w, ab.qs.as_ptr())
);
// IQ4_NL and MXFP4: Q4_0's layout (MXFP4 with one exponent byte per row for the f16),
// each nibble word turned into codebook values by a byte shuffle, then Q8_0's dot.
group_kernel!(
    iq4_nl_groups,
    18,
    Q8Block,
    offset SIGNED_OFFSET,
    |g| (f16x8(g), None, codebook_words(&IQ4_NL_VALUES, nibble_words(g.add(16), None))),
    |w, ab| signed_dot::<N>(&w, ab.qs.as_ptr())
);
group_kernel!(
    mxfp4_groups,
    17,
    Q8Block,
    offset SIGNED_OFFSET,
    |g| (e8m0_half_x8(g), None, codebook_words(&MXFP4_VALUES, nibble_words(g.add(8), None))),
    |w, ab| signed_dot::<N>(&w, ab.qs.as_ptr())
);
group_kernel!(
    q4_1_groups,
    20,
    Q8Block,
    offset 0,
    |g| (f16x8(g), Some(f16x8(g.add(16))), nibble_words(g.add(32), None)),
    |w, ab| dot_words::<N>(&w, ab.qs.as_ptr())
);
group_kernel!(
    q5_1_groups,
    24,
    Q8Block,
    offset 0,
    |g| {
        let w = nibble_words(g.add(64), Some(g.add(32)));
        (f16x8(g), Some(f16x8(g.add(16))), w)
    },
    |w, ab| dot_words::<N>(&w, ab.qs.as_ptr())
);
// Q4_K converted at load: f32 scales and offsets per block of 32, nibbles as Q4_1's,
// against Q8_K activations (as llama.cpp pairs them), read 32 quants at a time.
group_kernel!(
    q4_k_groups,
    24,
    Q8KBlock,
    units 8,
    offset 0,
    |g| (
        _mm256_loadu_ps(g as *const f32),
        Some(_mm256_loadu_ps(g.add(32) as *const f32)),
        nibble_words(g.add(64), None)
    ),
    |w, ab, sub| dot_words::<N>(&w, ab.qs.as_ptr().add(32 * sub))
);

/// Q6_K converted at load (see `quant::interleave`): quants as bytes 0..=63 and two
/// f32 scales per block of 32 (one per half), against Q8_K activations, whose sums of
/// 16 (`bsums`) take the +32 back in integers.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_groups<const N: usize>(
    group: &[u8],
    a: [&[Q8KBlock]; N],
    scales: &[f32],
) -> [[f32; 8]; N] {
    const GB: usize = 8 * 40;
    let nb = group.len() / GB;
    assert_eq!(group.len(), nb * GB);
    for x in a {
        assert_eq!(x.len() * 8, nb);
    }
    assert_eq!(scales.len(), 2 * N * nb);
    let mut acc = [_mm256_setzero_ps(); N];
    for i in 0..nb {
        let g = group.as_ptr().add(i * GB);
        prefetch_ahead(g, GB);
        let d_lo = _mm256_loadu_ps(g as *const f32);
        let d_hi = _mm256_loadu_ps(g.add(32) as *const f32);
        let mut w = [_mm256_setzero_si256(); 8];
        for (k, wk) in w.iter_mut().enumerate() {
            *wk = load256(g.add(64 + 32 * k));
        }
        let (sb, sub) = (i / 8, i % 8);
        let sp = scales.as_ptr().add(2 * N * i);
        for t in 0..N {
            let ab = a[t].get_unchecked(sb);
            let (lo, hi) = dot_halves(&w, ab.qs.as_ptr().add(32 * sub));
            let shift = |h: usize| _mm256_set1_epi32(32 * ab.bsums[2 * sub + h] as i32);
            let (lo, hi) = (
                _mm256_sub_epi32(lo, shift(0)),
                _mm256_sub_epi32(hi, shift(1)),
            );
            let da = _mm256_set1_ps(*sp.add(t));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), _mm256_mul_ps(d_lo, da), acc[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), _mm256_mul_ps(d_hi, da), acc[t]);
        }
    }
    let mut out = [[0f32; 8]; N];
    for t in 0..N {
        _mm256_storeu_ps(out[t].as_mut_ptr(), acc[t]);
    }
    out
}

/// [`dot_words`] split by halves: the sums over words 0..4 (elements 0..16) and 4..8.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_halves(w: &[__m256i; 8], y: *const i8) -> (__m256i, __m256i) {
    let y = y as *const u8;
    let mut s = [_mm256_setzero_si256(); 4];
    for (k, &wk) in w.iter().enumerate() {
        let a = broadcast_word(y.add(4 * k));
        // Two chains per half; words are 0..=63, so maddubs pairs stay below 2^14.
        let c = (k / 4) * 2 + k % 2;
        s[c] = if VNNI {
            _mm256_dpbusd_epi32(s[c], wk, a)
        } else {
            let p = _mm256_maddubs_epi16(wk, a);
            _mm256_add_epi32(s[c], _mm256_madd_epi16(p, _mm256_set1_epi16(1)))
        };
    }
    (_mm256_add_epi32(s[0], s[1]), _mm256_add_epi32(s[2], s[3]))
}

/// A group kernel over super-blocks of 256 (`$sb` bytes per row) against Q8_K
/// activations: checks the shapes, walks the group's super-blocks (`$g` points at
/// super-block `$i` of the 8 rows) and returns the `N` tokens' 8-row sums `$acc` that
/// `$body` accumulates.
macro_rules! super_group_kernel {
    ($name:ident, $sb:expr, |$g:ident, $i:ident, $a:ident, $acc:ident| $body:block) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $name<const N: usize>(
            group: &[u8],
            $a: [&[Q8KBlock]; N],
            _scales: &[f32],
        ) -> [[f32; 8]; N] {
            const GS: usize = 8 * $sb;
            let ns = group.len() / GS;
            assert_eq!(group.len(), ns * GS);
            for x in $a {
                assert_eq!(x.len(), ns);
            }
            let mut $acc = [_mm256_setzero_ps(); N];
            for $i in 0..ns {
                let $g = group.as_ptr().add($i * GS);
                prefetch_ahead($g, GS);
                $body
            }
            let mut out = [[0f32; 8]; N];
            for t in 0..N {
                _mm256_storeu_ps(out[t].as_mut_ptr(), $acc[t]);
            }
            out
        }
    };
}

// IQ4_XS regrouped by super-block (see `quant::interleave`): per sub-block of 32, the
// 8 rows' 6-bit scales from `L` and `H` with vector shifts, IQ4_NL's codebook words,
// and each token's integer dot times the scale summed in integers (at most
// 8 · 32 · 32 · 127² < 2^31) before the one float scale per super-block, as the
// one-row kernel does.
super_group_kernel!(iq4_xs_groups, 136, |g, i, a, acc| {
    let low = load256(g.add(16));
    let high = _mm256_cvtepu16_epi32(_mm_loadu_si128(g.add(48) as *const __m128i));
    let mut isum = [_mm256_setzero_si256(); N];
    for s in 0..8 {
        let lo = _mm256_srl_epi32(low, _mm_cvtsi32_si128(4 * s as i32));
        let hi = _mm256_srl_epi32(high, _mm_cvtsi32_si128(2 * s as i32));
        let sc = _mm256_sub_epi32(
            _mm256_or_si256(
                _mm256_and_si256(lo, _mm256_set1_epi32(0x0F)),
                _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(3)), 4),
            ),
            _mm256_set1_epi32(32),
        );
        let w = codebook_words(&IQ4_NL_VALUES, nibble_words(g.add(64 + 128 * s), None));
        for t in 0..N {
            let ab = a[t].get_unchecked(i);
            let mut dot = signed_dot::<N>(&w, ab.qs.as_ptr().add(32 * s));
            if SIGNED_OFFSET != 0 {
                let sum = ab.bsums[2 * s] as i32 + ab.bsums[2 * s + 1] as i32;
                dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(SIGNED_OFFSET * sum));
            }
            isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(dot, sc));
        }
    }
    let d = f16x8(g);
    for t in 0..N {
        let dd = _mm256_mul_ps(d, _mm256_set1_ps(a[t].get_unchecked(i).d));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), dd, acc[t]);
    }
});

/// Word `q` of 2-bit sub-block `s` (0..8) of a Q2_K/Q3_K group super-block at `g`
/// (its `Q` field at `at`): the fields `2(s % 4)..` of the half's bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn crumb_words(g: *const u8, at: usize, s: usize) -> [__m256i; 8] {
    let shift = _mm_cvtsi32_si128(2 * (s % 4) as i32);
    let mut w = [_mm256_setzero_si256(); 8];
    for (q, wq) in w.iter_mut().enumerate() {
        let bytes = load256(g.add(at + 256 * (s / 4) + 32 * q));
        *wq = _mm256_and_si256(_mm256_srl_epi16(bytes, shift), _mm256_set1_epi8(3));
    }
    w
}

/// The two halves' dot products of a sub-block (each below 2^15 in magnitude) as the
/// i16 pairs `madd` takes: the low half in the low 16 bits of each row's lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn halves_as_pairs(w: &[__m256i; 8], y: *const i8) -> __m256i {
    let (lo, hi) = dot_halves(w, y);
    _mm256_blend_epi16(lo, _mm256_slli_epi32(hi, 16), 0xAA)
}

/// The activation sums of sub-block `s`'s two halves (`bsums[2s]`, `bsums[2s + 1]`) as
/// one i16 pair in every lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bsum_pair(ab: &Q8KBlock, s: usize) -> __m256i {
    _mm256_set1_epi32(std::ptr::read_unaligned(
        ab.bsums.as_ptr().add(2 * s) as *const i32
    ))
}

// Q2_K regrouped by super-block (see `quant::interleave`): per sub-block of 32, the
// 2-bit words from one shift and mask of each load, the 8 rows' scale and min nibbles
// of its two halves as i16 pairs, so that one `madd` applies both halves' scales to
// the halves' dot products (each below 16 · 3 · 128 < 2^15) and another both mins to
// the activation sums of 16. Integer sums per super-block, then `d` and `dmin`.
super_group_kernel!(q2_k_groups, 84, |g, i, a, acc| {
    let mut isum = [_mm256_setzero_si256(); N];
    let mut msum = [_mm256_setzero_si256(); N];
    for s in 0..8 {
        let pairs = _mm256_cvtepu8_epi16(_mm_loadu_si128(g.add(32 + 16 * s) as *const __m128i));
        let sc = _mm256_and_si256(pairs, _mm256_set1_epi16(0x0F));
        let mn = _mm256_srli_epi16(pairs, 4);
        let w = crumb_words(g, 160, s);
        for t in 0..N {
            let ab = a[t].get_unchecked(i);
            let both = halves_as_pairs(&w, ab.qs.as_ptr().add(32 * s));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(both, sc));
            msum[t] = _mm256_add_epi32(msum[t], _mm256_madd_epi16(bsum_pair(ab, s), mn));
        }
    }
    let (d, dmin) = (f16x8(g), f16x8(g.add(16)));
    for t in 0..N {
        let da = _mm256_set1_ps(a[t].get_unchecked(i).d);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, da), acc[t]);
        acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[t]), _mm256_mul_ps(dmin, da), acc[t]);
    }
});

// Q3_K regrouped by super-block (see `quant::interleave`): Q2_K's words with the third
// bit from `M` (quants `u = q + 4`, 0..=7, the 4 taken back through the activation
// sums of 16 before the scales), and the 8 rows' 6-bit scales of a sub-block's two
// halves rebuilt as i16 pairs from `A` and `B`, applied by one `madd`.
super_group_kernel!(q3_k_groups, 110, |g, i, a, acc| {
    let mut isum = [_mm256_setzero_si256(); N];
    for s in 0..8 {
        let pairs = |at: usize| _mm256_cvtepu8_epi16(_mm_loadu_si128(g.add(at) as *const __m128i));
        let low = pairs(16 + 16 * (s % 4));
        let low = if s < 4 {
            low
        } else {
            _mm256_srli_epi16(low, 4)
        };
        let high = _mm256_srl_epi16(
            pairs(80 + 16 * (s % 2)),
            _mm_cvtsi32_si128(2 * (s / 2) as i32),
        );
        let sc = _mm256_sub_epi16(
            _mm256_or_si256(
                _mm256_and_si256(low, _mm256_set1_epi16(0x0F)),
                _mm256_slli_epi16(_mm256_and_si256(high, _mm256_set1_epi16(3)), 4),
            ),
            _mm256_set1_epi16(32),
        );
        let mut w = crumb_words(g, 368, s);
        let bit = _mm_cvtsi32_si128(s as i32);
        for (q, wq) in w.iter_mut().enumerate() {
            let third = _mm256_and_si256(
                _mm256_srl_epi16(load256(g.add(112 + 32 * q)), bit),
                _mm256_set1_epi8(1),
            );
            *wq = _mm256_or_si256(*wq, _mm256_slli_epi16(third, 2));
        }
        for t in 0..N {
            let ab = a[t].get_unchecked(i);
            let both = halves_as_pairs(&w, ab.qs.as_ptr().add(32 * s));
            // |Σ u·a − 4·Σ a| ≤ 16 · 4 · 128: still an i16.
            let both = _mm256_sub_epi16(both, _mm256_slli_epi16(bsum_pair(ab, s), 2));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(both, sc));
        }
    }
    let d = f16x8(g);
    for t in 0..N {
        let dd = _mm256_mul_ps(d, _mm256_set1_ps(a[t].get_unchecked(i).d));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), dd, acc[t]);
    }
});
