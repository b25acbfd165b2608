//! aarch64 NEON kernels: the portable kernels' structure (block decoding, scaling,
//! accumulation) with their integer dot products done 16 lanes at a time. NEON is part
//! of the aarch64 baseline, so no detection is needed. Float weights and the
//! activation quantizers stay portable.

use std::arch::aarch64::*;

use super::portable::{
    bf16_rows, f16_rows, f32_rows, iq4_nl, iq4_xs, mxfp4, q2_k, q3_k, q4_0, q4_1, q4_k, q5_0, q5_1,
    q5_k, q6_k, q8_0, IntDot,
};
use super::{tiles, KernelSet, KernelTable};
use crate::quant::layout::QK;

pub(crate) static TABLE: KernelTable = KernelTable {
    set: KernelSet::Neon,
    quantize: &crate::quant::act_blocks::PORTABLE_QUANTIZERS,
    groups: None,
    f32: tiles!(f32_rows),
    f16: tiles!(f16_rows),
    bf16: tiles!(bf16_rows),
    q4_0: tiles!(q4_0, Neon),
    q4_1: tiles!(q4_1, Neon),
    q5_0: tiles!(q5_0, Neon),
    q5_1: tiles!(q5_1, Neon),
    q8_0: tiles!(q8_0, Neon),
    q4_k: tiles!(q4_k, Neon),
    q5_k: tiles!(q5_k, Neon),
    q6_k: tiles!(q6_k, Neon),
    iq4_nl: tiles!(iq4_nl, Neon),
    iq4_xs: tiles!(iq4_xs, Neon),
    q3_k: tiles!(q3_k, Neon),
    q2_k: tiles!(q2_k, Neon),
    mxfp4: tiles!(mxfp4, Neon),
};

/// NEON integer dot products: widening multiplies, pairwise-added into 32-bit lanes.
pub(super) struct Neon;

/// Σ q·a over 16 signed bytes, into 4 lanes of `acc`.
#[inline(always)]
unsafe fn i8x16_dot(acc: int32x4_t, q: int8x16_t, a: int8x16_t) -> int32x4_t {
    // 127·128 fits an i16; the sum of two such products does too (2·16256 < 32768).
    let lo = vmull_s8(vget_low_s8(q), vget_low_s8(a));
    let pairs = vmlal_high_s8(lo, q, a);
    vpadalq_s16(acc, pairs)
}

impl IntDot for Neon {
    fn i8_i8(q: &[i8; QK], a: &[i8; QK]) -> i32 {
        // SAFETY: NEON is always present on aarch64; the loads read 32 bytes of each
        // 32-byte array.
        unsafe {
            let mut acc = vdupq_n_s32(0);
            for h in 0..2 {
                let (qv, av) = (
                    vld1q_s8(q.as_ptr().add(16 * h)),
                    vld1q_s8(a.as_ptr().add(16 * h)),
                );
                acc = i8x16_dot(acc, qv, av);
            }
            vaddvq_s32(acc)
        }
    }

    fn u8_i8(q: &[u8; QK], a: &[i8; QK]) -> i32 {
        // SAFETY: as above. The quants are 4- or 5-bit (Q4_1, Q5_1, Q4_K, Q5_K), so they are also
        // valid i8s and the signed product applies.
        unsafe {
            let mut acc = vdupq_n_s32(0);
            for h in 0..2 {
                let qv = vreinterpretq_s8_u8(vld1q_u8(q.as_ptr().add(16 * h)));
                acc = i8x16_dot(acc, qv, vld1q_s8(a.as_ptr().add(16 * h)));
            }
            vaddvq_s32(acc)
        }
    }

    fn i8_i8_16(q: &[i8; 16], a: &[i8; 16]) -> i32 {
        // SAFETY: as above (16 bytes of each).
        unsafe {
            vaddvq_s32(i8x16_dot(
                vdupq_n_s32(0),
                vld1q_s8(q.as_ptr()),
                vld1q_s8(a.as_ptr()),
            ))
        }
    }
}
