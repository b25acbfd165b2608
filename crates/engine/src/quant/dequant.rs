//! Dequantization of one row to f32, with the arithmetic of ggml's `dequantize_row_*`
//! (same operations in the same order, so results are bit-identical).

use super::error::QuantError;
use super::layout::*;
use crate::ggml_type::GgmlType;

/// Checks that `ty` is computable and `n` elements of it take exactly `src_len` bytes.
pub(crate) fn check_row(ty: GgmlType, src_len: usize, n: usize) -> Result<(), QuantError> {
    if !ty.is_supported_for_compute() {
        return Err(QuantError::UnsupportedType(ty));
    }
    let block = ty.block_elems() as usize;
    if !n.is_multiple_of(block) {
        return Err(QuantError::NotBlockAligned { ty, cols: n, block });
    }
    let expected = (n / block)
        .checked_mul(ty.block_bytes() as usize)
        .ok_or(QuantError::ShapeOverflow { rows: 1, cols: n })?;
    if src_len != expected {
        return Err(QuantError::LengthMismatch {
            what: "row bytes",
            expected,
            got: src_len,
        });
    }
    Ok(())
}

/// Dequantizes `dst.len()` elements of type `ty` from `src` (exactly their bytes).
pub fn dequantize_row(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), QuantError> {
    check_row(ty, src.len(), dst.len())?;
    let bb = ty.block_bytes() as usize;
    let be = ty.block_elems() as usize;
    let blocks = src.chunks_exact(bb).zip(dst.chunks_exact_mut(be));
    match ty {
        GgmlType::F32 => blocks.for_each(|(b, y)| y[0] = f32_at(b, 0)),
        GgmlType::F16 => blocks.for_each(|(b, y)| y[0] = f16_at(b, 0)),
        GgmlType::BF16 => blocks.for_each(|(b, y)| y[0] = bf16_at(b, 0)),
        GgmlType::Q4_0 => blocks.for_each(|(b, y)| scale(y, &unpack_q4_0(b), f16_at(b, 0))),
        GgmlType::Q5_0 => blocks.for_each(|(b, y)| scale(y, &unpack_q5_0(b), f16_at(b, 0))),
        GgmlType::IQ4_NL => blocks.for_each(|(b, y)| scale(y, &unpack_iq4_nl(b), f16_at(b, 0))),
        GgmlType::MXFP4 => blocks.for_each(|(b, y)| scale(y, &unpack_mxfp4(b), e8m0_half(b[0]))),
        GgmlType::Q8_0 => blocks.for_each(|(b, y)| scale(y, &unpack_q8_0(b), f16_at(b, 0))),
        GgmlType::Q4_1 => {
            blocks.for_each(|(b, y)| scale_min(y, &unpack_q4_1(b), f16_at(b, 0), f16_at(b, 2)))
        }
        GgmlType::Q5_1 => {
            blocks.for_each(|(b, y)| scale_min(y, &unpack_q5_1(b), f16_at(b, 0), f16_at(b, 2)))
        }
        GgmlType::Q4_K => blocks.for_each(|(b, y)| k_scale_min(y, b, &unpack_q4_k(b))),
        GgmlType::IQ4_XS => blocks.for_each(|(b, y)| {
            let d = f16_at(b, 0);
            let (sc, q) = unpack_iq4_xs(b);
            for (i, v) in y.iter_mut().enumerate() {
                *v = d * sc[i / QK] as f32 * q[i] as f32;
            }
        }),
        GgmlType::Q5_K => blocks.for_each(|(b, y)| k_scale_min(y, b, &unpack_q5_k(b))),
        GgmlType::Q6_K => blocks
            .for_each(|(b, y)| groups16(y, f16_at(b, q6_k::D), &q6_k_scales(b), &unpack_q6_k(b))),
        GgmlType::Q2_K => blocks.for_each(|(b, y)| {
            let (d, dmin) = (f16_at(b, q2_k::D), f16_at(b, q2_k::DMIN));
            let (sc, mn) = q2_k_scales_mins(b);
            let q = unpack_q2_k(b);
            for (i, v) in y.iter_mut().enumerate() {
                *v = d * sc[i / 16] as f32 * q[i] as f32 - dmin * mn[i / 16] as f32;
            }
        }),
        GgmlType::Q3_K => blocks
            .for_each(|(b, y)| groups16(y, f16_at(b, q3_k::D), &q3_k_scales(b), &unpack_q3_k(b))),
        _ => return Err(QuantError::UnsupportedType(ty)),
    }
    Ok(())
}

#[inline(always)]
fn scale<Q: Copy + Into<f32>>(y: &mut [f32], q: &[Q], d: f32) {
    for (v, &q) in y.iter_mut().zip(q) {
        *v = q.into() * d;
    }
}

#[inline(always)]
fn scale_min(y: &mut [f32], q: &[u8], d: f32, m: f32) {
    for (v, &q) in y.iter_mut().zip(q) {
        *v = q as f32 * d + m;
    }
}

/// Q3_K/Q6_K: element i is `(d·scale[i / 16])·q`, in ggml's order.
#[inline(always)]
fn groups16(y: &mut [f32], d: f32, sc: &[i8; 16], q: &[i8]) {
    for (i, v) in y.iter_mut().enumerate() {
        *v = d * sc[i / 16] as f32 * q[i] as f32;
    }
}

/// Q4_K/Q5_K: element of sub-block s is `d*scale[s] * q - dmin*min[s]`.
#[inline(always)]
fn k_scale_min(y: &mut [f32], b: &[u8], q: &[u8]) {
    // Q4_K and Q5_K share the d, dmin and scales offsets.
    let d = f16_at(b, q4_k::D);
    let dmin = f16_at(b, q4_k::DMIN);
    let (sc, mn) = k4_scales_mins(&b[q4_k::SCALES..q4_k::SCALES + 12]);
    for s in 0..8 {
        let d1 = d * sc[s] as f32;
        let m1 = dmin * mn[s] as f32;
        for l in 0..32 {
            y[32 * s + l] = d1 * q[32 * s + l] as f32 - m1;
        }
    }
}
