//! Super-block formats in groups by reordering bytes only: each 256-element
//! super-block of 8 rows is regrouped so that one load holds a field of all 8 rows, as
//! many bytes as in the file (no value is converted, so nothing grows and nothing
//! rounds). The kernels decode the small per-sub-block fields of 8 rows with a few
//! vector shifts.
//!
//! IQ4_XS (8 rows, 1,088 bytes): `d` 8 × f16; `L` 8 × u32 (row `r`'s `scales_l`:
//! sub-block `s`'s low 4 bits at bit `4s`); `H` 8 × u16 (its `scales_h`: the high 2 bits
//! at bit `2s`); then per sub-block `s` of 32, `X0..X3` (128 bytes, see the parent
//! module) of its 16 nibble bytes.
//!
//! Q2_K (8 rows, 672 bytes): `d` 8 × f16, `dmin` 8 × f16; `S`, per sub-block `s` of 32,
//! 16 bytes: row `r`'s `scales[2s]` and `scales[2s + 1]` (its two halves' scale and min
//! nibbles) at `2r`, `2r + 1`; then `Q`, per half `h` of 128 elements and `q` in 0..8,
//! 32 bytes: row `r`'s `qs[32h + 4q..32h + 4q + 4]` at `4r`. Elements `128h + 32j + 4q
//! + e` are the 2-bit fields `2j..` of those bytes, so a shift and a mask of one load
//! give word `q` of sub-block `4h + j`.
//!
//! Q3_K (8 rows, 880 bytes): `d` 8 × f16; `A`, for `p` in 0..4, 16 bytes: row `r`'s
//! `scales[2p..2p + 2]` at `2r` (the low 4 bits of scales `2p, 2p + 1` and, in the high
//! nibbles, of `2p + 8, 2p + 9`); `B`, for `p` in 0..2, 16 bytes: row `r`'s
//! `scales[8 + 2p..10 + 2p]` at `2r` (the high 2 bits); `M`, for `q` in 0..8, 32 bytes:
//! row `r`'s `hmask[4q..4q + 4]` at `4r` (bit `s` is the third bit of word `q` of
//! sub-block `s`); then `Q` as Q2_K's.

use super::GROUP_ROWS;
use crate::ggml_type::GgmlType;
use crate::quant::layout::QK_K;

/// A format regrouped by super-block.
pub(super) trait Regrouped {
    const TY: GgmlType;
    /// Bytes of one GGUF super-block.
    const SUPER: usize;
    /// For each byte range of row `r`'s GGUF super-block, where the group keeps it:
    /// `(src, len, dst)`.
    fn places(r: usize) -> impl Iterator<Item = (usize, usize, usize)>;
}

pub(super) struct Iq4Xs;

impl Regrouped for Iq4Xs {
    const TY: GgmlType = GgmlType::IQ4_XS;
    const SUPER: usize = 136;
    fn places(r: usize) -> impl Iterator<Item = (usize, usize, usize)> {
        let fields = [(0, 2, 2 * r), (2, 2, 48 + 2 * r), (4, 4, 16 + 4 * r)];
        let quants = (0..8).flat_map(move |s| {
            (0..4).map(move |j| (8 + 16 * s + 4 * j, 4, 64 + 128 * s + 32 * j + 4 * r))
        });
        fields.into_iter().chain(quants)
    }
}

pub(super) struct Q2K;

impl Regrouped for Q2K {
    const TY: GgmlType = GgmlType::Q2_K;
    const SUPER: usize = 84;
    fn places(r: usize) -> impl Iterator<Item = (usize, usize, usize)> {
        let fields = [(80, 2, 2 * r), (82, 2, 16 + 2 * r)];
        let scales = (0..8).map(move |s| (2 * s, 2, 32 + 16 * s + 2 * r));
        let quants = (0..16).map(move |hq| (16 + 4 * hq, 4, 160 + 32 * hq + 4 * r));
        fields.into_iter().chain(scales).chain(quants)
    }
}

pub(super) struct Q3K;

impl Regrouped for Q3K {
    const TY: GgmlType = GgmlType::Q3_K;
    const SUPER: usize = 110;
    fn places(r: usize) -> impl Iterator<Item = (usize, usize, usize)> {
        let low = (0..4).map(move |p| (96 + 2 * p, 2, 16 + 16 * p + 2 * r));
        let high = (0..2).map(move |p| (104 + 2 * p, 2, 80 + 16 * p + 2 * r));
        let hmask = (0..8).map(move |q| (4 * q, 4, 112 + 32 * q + 4 * r));
        let quants = (0..16).map(move |hq| (32 + 4 * hq, 4, 368 + 32 * hq + 4 * r));
        let d = [(108, 2, 2 * r)];
        d.into_iter()
            .chain(low)
            .chain(high)
            .chain(hmask)
            .chain(quants)
    }
}

/// Converts one group of 8 GGUF rows (`src`, rows of `src_row` bytes) into `dst`.
pub(super) fn pack_group<R: Regrouped>(src: &[u8], src_row: usize, dst: &mut [u8]) {
    for r in 0..GROUP_ROWS {
        let row = &src[r * src_row..(r + 1) * src_row];
        let group_super = GROUP_ROWS * R::SUPER;
        for (sb, out) in row
            .chunks_exact(R::SUPER)
            .zip(dst.chunks_exact_mut(group_super))
        {
            for (from, len, to) in R::places(r) {
                out[to..to + len].copy_from_slice(&sb[from..from + len]);
            }
        }
    }
}

/// Row `r` of a converted group (`group`, all its super-blocks) as f32 into `dst`:
/// its GGUF bytes rebuilt, then dequantized as the file's.
pub(super) fn row_to_f32<R: Regrouped>(group: &[u8], r: usize, dst: &mut [f32]) {
    let mut row = vec![0u8; dst.len() / QK_K * R::SUPER];
    let group_super = GROUP_ROWS * R::SUPER;
    for (blk, sb) in group
        .chunks_exact(group_super)
        .zip(row.chunks_exact_mut(R::SUPER))
    {
        for (to, len, from) in R::places(r) {
            sb[to..to + len].copy_from_slice(&blk[from..from + len]);
        }
    }
    crate::quant::dequantize_row(R::TY, &row, dst).expect("whole super-blocks");
}

/// GGUF bytes per row of `cols` elements.
pub(super) fn src_row_bytes<R: Regrouped>(cols: usize) -> usize {
    cols / QK_K * R::SUPER
}
