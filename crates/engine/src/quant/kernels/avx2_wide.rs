//! Kernels for tiles of 4 and 8 tokens against the legacy formats (blocks of 32 weights
//! with one scale). Each weight block is decoded once into unsigned quants; its integer
//! dot products with the tokens' blocks are reduced across lanes so that the tokens'
//! block sums sit side by side in one vector; the scales are then applied to the whole
//! tile at once. The one-token kernels pay a conversion, a broadcast and a multiply-add
//! per token and block; here that is one of each per block, for every token together.
//!
//! Signed formats are shifted to unsigned quants (`u = q + offset`, which `vpdpbusd`
//! and `maddubs` need on their unsigned side) and the shift is taken back in integers
//! through the activation block's quant sum: `Σ q·a = Σ u·a − offset·Σ a`. Sums are
//! exact integers until the final scaling, as in the other kernels; only the float
//! rounding order differs from theirs.
//!
//! Only reachable through `avx2_table.rs`, on CPUs with the features.

use std::arch::x86_64::*;

use super::avx2::{dot_u8_i8, f16_at, five_bit, load256, nibbles32, safe, VNNI};
use crate::quant::act_blocks::Q8Block;

/// Eight (or four) tokens' 8-lane integer sums, each reduced to one lane: lane `t` of
/// the result holds token `t`'s total (lanes past `N` are unspecified).
#[inline(always)]
unsafe fn reduce<const N: usize>(s: &[__m256i; N]) -> __m256i {
    let p = s.as_ptr();
    let quad = |q: *const __m256i| {
        // [t0 t1 t2 t3] partial sums of each 128-bit half.
        let a = _mm256_hadd_epi32(*q, *q.add(1));
        let b = _mm256_hadd_epi32(*q.add(2), *q.add(3));
        _mm256_hadd_epi32(a, b)
    };
    if N == 8 {
        let (lo4, hi4) = (quad(p), quad(p.add(4)));
        _mm256_add_epi32(
            _mm256_permute2x128_si256(lo4, hi4, 0x20),
            _mm256_permute2x128_si256(lo4, hi4, 0x31),
        )
    } else {
        assert_eq!(N, 4);
        let q = quad(p);
        let sum = _mm_add_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        _mm256_castsi128_si256(sum)
    }
}

/// `N` (8 or 4) consecutive floats at `p` as the low lanes of a vector.
#[inline(always)]
unsafe fn lanes<const N: usize>(p: *const f32) -> __m256 {
    if N == 8 {
        _mm256_loadu_ps(p)
    } else {
        _mm256_castps128_ps256(_mm_loadu_ps(p))
    }
}

/// A wide kernel. `$decode` turns the block at `$p` into `(d, m, u)`: the block is
/// `d·(u − $offset) + m` per weight (`m` is `None` for the symmetric formats); `$dot` is
/// the 8-lane integer dot product of `$u` with the activation block `$ab`. The minimum
/// pairs with the blocks' `s`.
macro_rules! wide_kernel {
    ($name:ident, $bb:expr, $act:ty, offset $offset:expr, |$p:ident| $decode:expr, |$u:ident, $ab:ident| $dot:expr) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $name<const N: usize>(
            w: &[u8],
            a: [&[$act]; N],
            scales: &[f32],
        ) -> [f32; N] {
            let nb = w.len() / $bb;
            for x in a {
                assert_eq!(x.len(), nb);
            }
            assert_eq!(scales.len(), 2 * N * nb);
            let mut acc = _mm256_setzero_ps();
            let mut offs = _mm256_setzero_ps();
            for i in 0..nb {
                let $p = w.as_ptr().add(i * $bb);
                let (d, m, $u): (f32, Option<f32>, __m256i) = $decode;
                let mut s = [_mm256_setzero_si256(); N];
                for t in 0..N {
                    let $ab = a[t].get_unchecked(i);
                    s[t] = $dot;
                    let offset: i32 = $offset;
                    if offset != 0 {
                        // One lane carries the shift: the lanes are summed next.
                        let shift = _mm256_setr_epi32(offset * $ab.isum, 0, 0, 0, 0, 0, 0, 0);
                        s[t] = _mm256_sub_epi32(s[t], shift);
                    }
                }
                let sums = _mm256_cvtepi32_ps(reduce::<N>(&s));
                let sp = scales.as_ptr().add(2 * N * i);
                let dd = _mm256_mul_ps(_mm256_set1_ps(d), lanes::<N>(sp));
                acc = _mm256_fmadd_ps(dd, sums, acc);
                if let Some(m) = m {
                    offs = _mm256_fmadd_ps(_mm256_set1_ps(m), lanes::<N>(sp.add(N)), offs);
                }
            }
            let mut v = [0f32; 8];
            _mm256_storeu_ps(v.as_mut_ptr(), _mm256_add_ps(acc, offs));
            std::array::from_fn(|t| v[t])
        }
    };
}

#[inline(always)]
unsafe fn qs8(ab: &Q8Block) -> __m256i {
    load256(ab.qs.as_ptr() as *const u8)
}

wide_kernel!(
    q4_0_wide,
    18,
    Q8Block,
    offset 8,
    |p| (f16_at(p), None, nibbles32(p.add(2))),
    |u, ab| dot_u8_i8(u, qs8(ab))
);
wide_kernel!(
    q5_0_wide,
    22,
    Q8Block,
    offset 16,
    |p| (f16_at(p), None, five_bit(p.add(6), p.add(2))),
    |u, ab| dot_u8_i8(u, qs8(ab))
);
// Without VNNI, `maddubs` would saturate on 255·127 pairs, so Q8_0 keeps its signs and
// uses the sign trick (|q| × a with q's sign) instead of an offset.
wide_kernel!(
    q8_0_wide,
    34,
    Q8Block,
    offset if VNNI { 128 } else { 0 },
    |p| {
        let q = load256(p.add(2));
        if VNNI {
            (f16_at(p), None, _mm256_xor_si256(q, _mm256_set1_epi8(-128)))
        } else {
            (f16_at(p), None, q)
        }
    },
    |u, ab| if VNNI {
        dot_u8_i8(u, qs8(ab))
    } else {
        dot_u8_i8(_mm256_sign_epi8(u, u), _mm256_sign_epi8(qs8(ab), u))
    }
);
wide_kernel!(
    q4_1_wide,
    20,
    Q8Block,
    offset 0,
    |p| (f16_at(p), Some(f16_at(p.add(2))), nibbles32(p.add(4))),
    |u, ab| dot_u8_i8(u, qs8(ab))
);
wide_kernel!(
    q5_1_wide,
    24,
    Q8Block,
    offset 0,
    |p| (f16_at(p), Some(f16_at(p.add(2))), five_bit(p.add(8), p.add(4))),
    |u, ab| dot_u8_i8(u, qs8(ab))
);

safe!(q4_0_tiles, q4_0_wide, Q8Block);
safe!(q4_1_tiles, q4_1_wide, Q8Block);
safe!(q5_0_tiles, q5_0_wide, Q8Block);
safe!(q5_1_tiles, q5_1_wide, Q8Block);
safe!(q8_0_tiles, q8_0_wide, Q8Block);
