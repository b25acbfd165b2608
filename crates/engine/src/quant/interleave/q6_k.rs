//! Q6_K in groups: each 256-element super-block becomes 8 blocks of 32, each with the
//! f32 scales of its two halves of 16 (`d·sc`, exact in f32) and its quants as bytes
//! (`q + 32`, 0..=63), so the group kernels read them with no unpacking. 40 bytes per
//! row and block instead of 26.25: the price of skipping the bit-plane reassembly for
//! every token. Still against Q8_K activations, whose sums of 16 take the +32 back.
//!
//! Group block (8 rows × 32 elements, 320 bytes): `d_lo` 8 × f32 (elements 0..16),
//! `d_hi` 8 × f32 (16..32), then `W0..W7`, 32 bytes each: `Wk` holds elements
//! `4k..4k + 4` of each row, row after row.

use super::GROUP_ROWS;
use crate::quant::layout::{f16_at, q6_k, q6_k_scales, unpack_q6_k, QK, QK_K};

/// Bytes per row and block of 32 in the group layout.
pub(super) const BLOCK: usize = 40;
/// Bytes of one GGUF Q6_K super-block.
const SUPER: usize = 210;
const GROUP_BLOCK: usize = GROUP_ROWS * BLOCK;

/// Converts one group of 8 GGUF rows (`src`, rows of `src_row` bytes) into `dst`.
pub(super) fn pack_group(src: &[u8], src_row: usize, dst: &mut [u8]) {
    for r in 0..GROUP_ROWS {
        let row = &src[r * src_row..(r + 1) * src_row];
        for (i, sb) in row.chunks_exact(SUPER).enumerate() {
            let d = f16_at(sb, q6_k::D);
            let sc = q6_k_scales(sb);
            let q = unpack_q6_k(sb);
            for s in 0..QK_K / QK {
                let out = &mut dst[(8 * i + s) * GROUP_BLOCK..][..GROUP_BLOCK];
                let (lo, hi) = (d * sc[2 * s] as f32, d * sc[2 * s + 1] as f32);
                out[4 * r..4 * r + 4].copy_from_slice(&lo.to_le_bytes());
                out[32 + 4 * r..32 + 4 * r + 4].copy_from_slice(&hi.to_le_bytes());
                for k in 0..8 {
                    for e in 0..4 {
                        out[64 + 32 * k + 4 * r + e] = (q[QK * s + 4 * k + e] + 32) as u8;
                    }
                }
            }
        }
    }
}

/// Row `r` of a converted group (`group`, all its blocks) as f32 into `dst`.
pub(super) fn row_to_f32(group: &[u8], r: usize, dst: &mut [f32]) {
    for (blk, y) in group
        .chunks_exact(GROUP_BLOCK)
        .zip(dst.chunks_exact_mut(QK))
    {
        let f = |at: usize| f32::from_le_bytes(blk[at..at + 4].try_into().unwrap());
        let (lo, hi) = (f(4 * r), f(32 + 4 * r));
        for (i, v) in y.iter_mut().enumerate() {
            let q = blk[64 + 32 * (i / 4) + 4 * r + i % 4] as i32 - 32;
            *v = if i < 16 { lo } else { hi } * q as f32;
        }
    }
}

/// GGUF bytes per row of `cols` elements.
pub(super) fn src_row_bytes(cols: usize) -> usize {
    cols / QK_K * SUPER
}
