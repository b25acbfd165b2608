//! Q4_K in groups: each 256-element super-block becomes 8 blocks of 32 with their own
//! f32 scale `d·sc` and f32 offset `−dmin·min`, nibbles packed as Q4_1's, so that Q4_K
//! runs through the same group kernels as the legacy formats, still against Q8_K
//! activations. The values are exactly the GGUF ones: f16 × 6-bit products are exact
//! in f32. (Q8 activations in blocks of 32 would be finer, but they move Gemma 3's
//! logits away from llama.cpp's by up to a unit on the reference prompts.)
//!
//! Group block (8 rows × 32 elements, 192 bytes): `d` 8 × f32, `m` 8 × f32, then
//! `X0..X3` as in the legacy layout (see the parent module).

use super::GROUP_ROWS;
use crate::quant::layout::{f16_at, k4_scales_mins, q4_k, unpack_q4_k, QK, QK_K};

/// Bytes per row and block of 32 in the group layout.
pub(super) const BLOCK: usize = 24;
/// Bytes of one GGUF Q4_K super-block.
const SUPER: usize = 144;
const GROUP_BLOCK: usize = GROUP_ROWS * BLOCK;

/// One GGUF super-block as 8 blocks: (scale, offset, 32 quants 0..=15).
fn sub_blocks(b: &[u8]) -> [(f32, f32, [u8; QK]); 8] {
    let d = f16_at(b, q4_k::D);
    let dmin = f16_at(b, q4_k::DMIN);
    let (sc, mn) = k4_scales_mins(&b[q4_k::SCALES..q4_k::SCALES + 12]);
    let q = unpack_q4_k(b);
    std::array::from_fn(|s| {
        let quants: [u8; QK] = q[QK * s..QK * (s + 1)].try_into().unwrap();
        (d * sc[s] as f32, -(dmin * mn[s] as f32), quants)
    })
}

/// Converts one group of 8 GGUF rows (`src`, rows of `src_row` bytes) into `dst`.
pub(super) fn pack_group(src: &[u8], src_row: usize, dst: &mut [u8]) {
    for r in 0..GROUP_ROWS {
        let row = &src[r * src_row..(r + 1) * src_row];
        for (i, sb) in row.chunks_exact(SUPER).enumerate() {
            for (s, (d, m, q)) in sub_blocks(sb).into_iter().enumerate() {
                let out = &mut dst[(8 * i + s) * GROUP_BLOCK..][..GROUP_BLOCK];
                out[4 * r..4 * r + 4].copy_from_slice(&d.to_le_bytes());
                out[32 + 4 * r..32 + 4 * r + 4].copy_from_slice(&m.to_le_bytes());
                for j in 0..4 {
                    for e in 0..4 {
                        let k = 4 * j + e;
                        out[64 + 32 * j + 4 * r + e] = q[k] | (q[k + 16] << 4);
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
        let (d, m) = (f(4 * r), f(32 + 4 * r));
        for j in 0..4 {
            for e in 0..4 {
                let byte = blk[64 + 32 * j + 4 * r + e];
                let k = 4 * j + e;
                y[k] = d * (byte & 0x0F) as f32 + m;
                y[k + 16] = d * (byte >> 4) as f32 + m;
            }
        }
    }
}

/// GGUF bytes per row of `cols` elements.
pub(super) fn src_row_bytes(cols: usize) -> usize {
    cols / QK_K * SUPER
}
