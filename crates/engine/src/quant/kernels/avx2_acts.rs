//! AVX2 activation quantization: the same arithmetic as the portable quantizers in
//! `quant::acts`, eight lanes at a time, so the results are bit for bit the same (the
//! backend-equality tests check it). It runs on the calling thread between matmuls,
//! where every other thread waits, so its speed is on the critical path.
//!
//! Only reachable through [`QUANTIZERS`], which a table hands out only on CPUs with the
//! features (see `avx2.rs`).

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use super::avx2::hsum_epi32;
use super::Quantizers;
use crate::quant::acts::{needs_i16, Q16Block, Q8Block, Q8KBlock};
use crate::quant::layout::{QK, QK_K};

pub(crate) static QUANTIZERS: Quantizers = Quantizers {
    q8: |x, out| {
        // SAFETY: see the module docs.
        unsafe { q8_all(x, out) }
    },
    q16: |x, out| {
        // SAFETY: see the module docs.
        unsafe { q16_all(x, out) }
    },
    q8k: |x, out| {
        // SAFETY: see the module docs.
        unsafe { q8k_all(x, out) }
    },
};

/// The row loops, with the block quantizers inlined so that blocks are written in place.
/// The output was last touched a layer ago and is out of the caches by now: its lines
/// are asked for, for writing, a few blocks ahead, or every store would wait for one.
macro_rules! fill_all {
    ($name:ident, $one:ident, $block:ty, $len:expr) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $name(x: &[f32], out: &mut [MaybeUninit<$block>]) {
            const AHEAD: usize = 4;
            assert_eq!(x.len(), out.len() * $len);
            let base = out.as_ptr() as *const i8;
            let bytes = std::mem::size_of_val(out);
            let mut asked = 0;
            for (i, (slot, c)) in out.iter_mut().zip(x.chunks_exact($len)).enumerate() {
                let upto = ((i + AHEAD + 1) * std::mem::size_of::<$block>()).min(bytes);
                while asked < upto {
                    _mm_prefetch::<_MM_HINT_ET0>(base.add(asked));
                    asked += 64;
                }
                slot.write($one(c));
            }
        }
    };
}

fill_all!(q8_all, q8_avx2, Q8Block, QK);
fill_all!(q16_all, q16_avx2, Q16Block, QK);
fill_all!(q8k_all, q8k_avx2, Q8KBlock, QK_K);

/// The largest |x| (x a whole number of 8-lane groups). `max_ps` returns its second
/// operand when the first is NaN, so NaNs are skipped as the portable fold skips them.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn abs_max(x: &[f32]) -> f32 {
    let sign = _mm256_set1_ps(-0.0);
    let mut m = _mm256_setzero_ps();
    for c in x.chunks_exact(8) {
        m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(c.as_ptr())), m);
    }
    let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let m = _mm_max_ss(m, _mm_movehdup_ps(m));
    _mm_cvtss_f32(m)
}

/// The block's step and its reciprocal, as the portable quantizer computes them.
#[inline]
fn step(amax: f32, levels: i32) -> (f32, f32) {
    let d = amax / levels as f32;
    (d, if d != 0.0 { 1.0 / d } else { 0.0 })
}

/// Eight values at `p` times `id`, rounded and clamped to ±`levels` as the portable
/// `round_clamped` does (a NaN becomes 0).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn round8(p: *const f32, id: __m256, levels: f32) -> __m256i {
    const MAGIC: f32 = 12_582_912.0;
    let magic = _mm256_set1_ps(MAGIC);
    let v = _mm256_mul_ps(_mm256_loadu_ps(p), id);
    let r = _mm256_sub_ps(_mm256_add_ps(v, magic), magic);
    let r = _mm256_and_ps(r, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
    let r = _mm256_min_ps(
        _mm256_max_ps(r, _mm256_set1_ps(-levels)),
        _mm256_set1_ps(levels),
    );
    _mm256_cvttps_epi32(r)
}

/// 32 values at `p` as i8 quants into `out`; returns the sums of the first and the
/// last 16 quants.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn i8x32(p: *const f32, id: __m256, out: *mut i8) -> (i32, i32) {
    let l = i8::MAX as f32;
    let [a, b, c, d] = [0, 8, 16, 24].map(|k| round8(p.add(k), id, l));
    // packs work within 128-bit halves: the dwords come out as a0 b0 c0 d0 a1 b1 c1 d1.
    let packed = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    _mm256_storeu_si256(
        out as *mut __m256i,
        _mm256_permutevar8x32_epi32(packed, order),
    );
    (
        hsum_epi32(_mm256_add_epi32(a, b)),
        hsum_epi32(_mm256_add_epi32(c, d)),
    )
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_avx2(x: &[f32]) -> Q8Block {
    assert_eq!(x.len(), QK);
    let (d, id) = step(abs_max(x), i8::MAX as i32);
    let mut qs = [0i8; QK];
    let (lo, hi) = i8x32(x.as_ptr(), _mm256_set1_ps(id), qs.as_mut_ptr());
    Q8Block {
        d,
        s: d * (lo + hi) as f32,
        qs,
        isum: lo + hi,
    }
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q16_avx2(x: &[f32]) -> Q16Block {
    assert_eq!(x.len(), QK);
    let l = i16::MAX as i32;
    let (d, id) = step(abs_max(x), l);
    let id = _mm256_set1_ps(id);
    let p = x.as_ptr();
    let [a, b, c, e] = [0, 8, 16, 24].map(|k| round8(p.add(k), id, l as f32));
    let mut qs = [0i16; QK];
    // packs work within 128-bit halves; the qword permute restores element order.
    for (k, (u, v)) in [(a, b), (c, e)].into_iter().enumerate() {
        let packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(u, v), 0b11_01_10_00);
        _mm256_storeu_si256(qs.as_mut_ptr().add(16 * k) as *mut __m256i, packed);
    }
    let (mut lo, mut hi) = ([0u8; QK], [0i8; QK]);
    let low8 = _mm256_set1_epi32(0xFF);
    let lows = [a, b, c, e].map(|v| _mm256_and_si256(v, low8));
    let highs = [a, b, c, e].map(|v| _mm256_srai_epi32(v, 8));
    // Both fit their byte type, so the saturating packs are exact.
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let lo_bytes = _mm256_packus_epi16(
        _mm256_packs_epi32(lows[0], lows[1]),
        _mm256_packs_epi32(lows[2], lows[3]),
    );
    let hi_bytes = _mm256_packs_epi16(
        _mm256_packs_epi32(highs[0], highs[1]),
        _mm256_packs_epi32(highs[2], highs[3]),
    );
    _mm256_storeu_si256(
        lo.as_mut_ptr() as *mut __m256i,
        _mm256_permutevar8x32_epi32(lo_bytes, order),
    );
    _mm256_storeu_si256(
        hi.as_mut_ptr() as *mut __m256i,
        _mm256_permutevar8x32_epi32(hi_bytes, order),
    );
    let sum = hsum_epi32(_mm256_add_epi32(
        _mm256_add_epi32(a, b),
        _mm256_add_epi32(c, e),
    ));
    let narrow = q8_avx2(x);
    Q16Block {
        d,
        s: d * sum as f32,
        qs,
        lo,
        hi,
        q8: narrow.qs,
        d8: narrow.d,
        s8: narrow.s,
        wide: needs_i16_avx2(&narrow.qs),
    }
}

/// [`needs_i16`] on 32 lanes at once.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn needs_i16_avx2(q8: &[i8; QK]) -> bool {
    let v = _mm256_loadu_si256(q8.as_ptr() as *const __m256i);
    // |q| <= 2 exactly when q + 2, as an unsigned byte, is at most 4.
    let shifted = _mm256_add_epi8(v, _mm256_set1_epi8(2));
    let small = _mm256_cmpeq_epi8(_mm256_min_epu8(shifted, _mm256_set1_epi8(4)), shifted);
    let n = (_mm256_movemask_epi8(small) as u32).count_ones() as usize;
    debug_assert_eq!(n >= QK / 4, needs_i16(q8));
    n >= QK / 4
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8k_avx2(x: &[f32]) -> Q8KBlock {
    assert_eq!(x.len(), QK_K);
    let (d, id) = step(abs_max(x), i8::MAX as i32);
    let id = _mm256_set1_ps(id);
    let mut qs = [0i8; QK_K];
    let mut bsums = [0i16; 16];
    for k in 0..QK_K / 32 {
        let (lo, hi) = i8x32(x.as_ptr().add(32 * k), id, qs.as_mut_ptr().add(32 * k));
        bsums[2 * k] = lo as i16;
        bsums[2 * k + 1] = hi as i16;
    }
    Q8KBlock { d, qs, bsums }
}
