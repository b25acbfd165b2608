//! IQ4_XS in groups: the bytes of each 256-element super-block of 8 rows regrouped so
//! that one load holds a field of all 8 rows, as many bytes as in the file (no value
//! is converted, so nothing grows and nothing rounds). The kernels decode the 6-bit
//! sub-block scales of 8 rows with a few vector shifts, and each sub-block's nibbles
//! are the legacy layout's `X0..X3`.
//!
//! Group super-block (8 rows × 256 elements, 1,088 bytes): `d` 8 × f16; `L` 8 × u32
//! (row `r`'s `scales_l`: sub-block `s`'s low 4 bits at bit `4s`); `H` 8 × u16 (its
//! `scales_h`: the high 2 bits at bit `2s`); then per sub-block `s` of 32, `X0..X3`
//! (128 bytes, see the parent module) of its 16 nibble bytes.

use super::GROUP_ROWS;
use crate::ggml_type::GgmlType;
use crate::quant::layout::QK_K;

/// Bytes per row and block of 32 in the group layout (as in the file: 136 / 8).
pub(super) const BLOCK: usize = 17;
/// Bytes of one GGUF IQ4_XS super-block.
const SUPER: usize = 136;
const GROUP_SUPER: usize = GROUP_ROWS * SUPER;
/// Where the fields of a group super-block start.
const L: usize = 16;
const H: usize = 48;
const QS: usize = 64;

/// For each GGUF byte range of a row's super-block, where the group layout keeps it:
/// `(src, len, dst)`, the destination of row `r` being `dst(r)`.
fn places(r: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let fields = [(0, 2, 2 * r), (2, 2, H + 2 * r), (4, 4, L + 4 * r)];
    let quants =
        (0..8).flat_map(move |s| (0..4).map(move |j| (8 + 16 * s + 4 * j, 4, QS + 128 * s + 32 * j + 4 * r)));
    fields.into_iter().chain(quants)
}

/// Converts one group of 8 GGUF rows (`src`, rows of `src_row` bytes) into `dst`.
pub(super) fn pack_group(src: &[u8], src_row: usize, dst: &mut [u8]) {
    for r in 0..GROUP_ROWS {
        let row = &src[r * src_row..(r + 1) * src_row];
        for (sb, out) in row.chunks_exact(SUPER).zip(dst.chunks_exact_mut(GROUP_SUPER)) {
            for (from, len, to) in places(r) {
                out[to..to + len].copy_from_slice(&sb[from..from + len]);
            }
        }
    }
}

/// Row `r` of a converted group (`group`, all its super-blocks) as f32 into `dst`:
/// its GGUF bytes rebuilt, then dequantized as the file's.
pub(super) fn row_to_f32(group: &[u8], r: usize, dst: &mut [f32]) {
    let mut row = vec![0u8; dst.len() / QK_K * SUPER];
    for (blk, sb) in group.chunks_exact(GROUP_SUPER).zip(row.chunks_exact_mut(SUPER)) {
        for (to, len, from) in places(r) {
            sb[to..to + len].copy_from_slice(&blk[from..from + len]);
        }
    }
    crate::quant::dequantize_row(GgmlType::IQ4_XS, &row, dst)
        .expect("a whole number of IQ4_XS super-blocks");
}

/// GGUF bytes per row of `cols` elements.
pub(super) fn src_row_bytes(cols: usize) -> usize {
    cols / QK_K * SUPER
}
