//! AVX2 activation quantization: the same arithmetic as the portable quantizers in
//! `quant::act_blocks`, eight lanes at a time, so the results are bit for bit the same (the
//! backend-equality tests check it). It runs on the calling thread between matmuls,
//! where every other thread waits, so its speed is on the critical path.
//!
//! Only reachable through [`QUANTIZERS`], which a table hands out only on CPUs with the
//! features (see `avx2.rs`).

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use super::avx2::hsum_epi32;
use crate::quant::act_blocks::{step, Q8Block, Q8KBlock, Quantizers};
use crate::quant::layout::{QK, QK_K};

pub(crate) static QUANTIZERS: Quantizers = Quantizers {
    q8: |x, out| {
        // SAFETY: see the module docs.
        unsafe { q8_all(x, out) }
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
