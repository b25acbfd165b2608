//! The interleaved weight layout: groups of 8 rows of a legacy format (Q4_0, Q4_1,
//! Q5_0, Q5_1, Q8_0) stored so that one 32-byte load holds the same 4 elements of all
//! 8 rows. A dot-product instruction then works on 8 rows at once against one token's
//! 4 activations broadcast to every lane: the lanes are rows, so a block's scales are
//! applied to 8 rows with one multiply-add, where the row-by-row layout needs a
//! horizontal reduction and a multiply-add per row. The same bytes, reordered: a
//! group of 8 rows takes exactly 8 rows' space.
//!
//! Group layout, block after block (block `i` of all 8 rows, then block `i + 1`):
//! - `d`: the 8 rows' f16 scales (16 bytes; MXFP4: their E8M0 exponent bytes, 8
//!   bytes); then `m`, their f16 mins (Q4_1, Q5_1);
//! - Q5 formats: `H`, 32 bytes: byte `4r + e` holds in bit `k` the fifth bit of
//!   element `4k + e` of row `r`;
//! - 4- and 5-bit formats (and the codebook formats IQ4_NL and MXFP4, whose nibbles
//!   are indices): `X0..X3`, 32 bytes each: `Xj` holds bytes `4j..4j + 4` of
//!   each row's nibbles (`qs`), row after row, so its low nibbles are elements
//!   `4j..4j + 4` and its high nibbles elements `16 + 4j..16 + 4j + 4`;
//! - Q8_0: `W0..W7`, 32 bytes each: `Wk` holds elements `4k..4k + 4` of each row.
//!
//! Q4_K and Q6_K are converted on the way in (see [`q4_k`] and [`q6_k`]): their rows
//! take 24 and 40 bytes per 32 elements instead of 18 and 26.25. IQ4_XS, Q2_K and Q3_K
//! are regrouped by super-block (see [`regroup`]), as many bytes as in the file.

mod q4_k;
mod q6_k;
mod regroup;

use regroup::{Iq4Xs, Q2K, Q3K};

/// A K-quant's conversion into groups of blocks of 32.
struct Conversion {
    /// Bytes per row and super-block of 256 in the group layout.
    super_bytes: usize,
    /// GGUF bytes per row of `cols` elements.
    src_row_bytes: fn(usize) -> usize,
    /// One group of 8 GGUF rows (rows of the given bytes) into the group layout.
    pack_group: fn(&[u8], usize, &mut [u8]),
    /// Row `r` of a converted group as f32.
    row_to_f32: fn(&[u8], usize, &mut [f32]),
}

fn conversion(ty: GgmlType) -> Option<Conversion> {
    match ty {
        GgmlType::Q4_K => Some(Conversion {
            super_bytes: 8 * q4_k::BLOCK,
            src_row_bytes: q4_k::src_row_bytes,
            pack_group: q4_k::pack_group,
            row_to_f32: q4_k::row_to_f32,
        }),
        GgmlType::Q6_K => Some(Conversion {
            super_bytes: 8 * q6_k::BLOCK,
            src_row_bytes: q6_k::src_row_bytes,
            pack_group: q6_k::pack_group,
            row_to_f32: q6_k::row_to_f32,
        }),
        GgmlType::IQ4_XS => Some(regrouped::<Iq4Xs>()),
        GgmlType::Q2_K => Some(regrouped::<Q2K>()),
        GgmlType::Q3_K => Some(regrouped::<Q3K>()),
        _ => None,
    }
}

/// The [`Conversion`] of a format regrouped by super-block.
fn regrouped<R: regroup::Regrouped>() -> Conversion {
    Conversion {
        super_bytes: R::SUPER,
        src_row_bytes: regroup::src_row_bytes::<R>,
        pack_group: regroup::pack_group::<R>,
        row_to_f32: regroup::row_to_f32::<R>,
    }
}

use super::error::QuantError;
use crate::ggml_type::GgmlType;

/// Rows per interleaved group.
pub(crate) const GROUP_ROWS: usize = 8;

/// Where the fields of one interleaved block of 8 rows lie, and how big it is.
#[derive(Clone, Copy, Debug)]
struct GroupBlock {
    /// Bytes of one row's block in GGUF.
    row_block: usize,
    /// Bytes of one row's scale (2 for an f16, 1 for MXFP4's exponent byte), first in
    /// the GGUF block.
    d_bytes: usize,
    /// Offsets in the GGUF block: the min, the fifth bits, the quants.
    src_m: Option<usize>,
    src_qh: Option<usize>,
    src_qs: usize,
    /// Offsets in the interleaved block.
    m: Option<usize>,
    h: Option<usize>,
    qs: usize,
}

fn group_block(ty: GgmlType) -> Option<GroupBlock> {
    use GgmlType::*;
    // IQ4_NL is Q4_0 with codebook indices for nibbles; MXFP4 too, with a byte scale.
    let (row_block, src_m, src_qh, src_qs) = match ty {
        Q4_0 | IQ4_NL => (18, None, None, 2),
        MXFP4 => (17, None, None, 1),
        Q4_1 => (20, Some(2), None, 4),
        Q5_0 => (22, None, Some(2), 6),
        Q5_1 => (24, Some(2), Some(4), 8),
        Q8_0 => (34, None, None, 2),
        _ => return None,
    };
    let d_bytes = if ty == MXFP4 { 1 } else { 2 };
    let m = src_m.map(|_| 8 * d_bytes);
    let after_m = 8 * d_bytes * if m.is_some() { 2 } else { 1 };
    let h = src_qh.map(|_| after_m);
    let qs = after_m + if h.is_some() { 32 } else { 0 };
    Some(GroupBlock {
        row_block,
        d_bytes,
        src_m,
        src_qh,
        src_qs,
        m,
        h,
        qs,
    })
}

/// Whether weights of type `ty` have an interleaved layout.
pub fn interleavable(ty: GgmlType) -> bool {
    conversion(ty).is_some() || group_block(ty).is_some()
}

/// Bytes of one row of `cols` elements of type `ty` in the interleaved layout (`None`
/// if `ty` has none or `cols` is not a whole number of its blocks).
pub fn interleaved_row_bytes(ty: GgmlType, cols: usize) -> Option<usize> {
    if let Some(c) = conversion(ty) {
        return cols
            .is_multiple_of(crate::quant::layout::QK_K)
            .then(|| cols / crate::quant::layout::QK_K * c.super_bytes);
    }
    let g = group_block(ty)?;
    cols.is_multiple_of(32).then(|| cols / 32 * g.row_block)
}

fn src_row_bytes(ty: GgmlType, cols: usize) -> Option<usize> {
    match conversion(ty) {
        Some(c) => Some((c.src_row_bytes)(cols)),
        None => interleaved_row_bytes(ty, cols),
    }
}

fn not_interleavable(ty: GgmlType) -> QuantError {
    QuantError::UnsupportedType(ty)
}

/// Checks that `rows` rows of type `ty` make a whole number of groups.
pub(crate) fn whole_groups(ty: GgmlType, rows: usize) -> Result<(), QuantError> {
    if !rows.is_multiple_of(GROUP_ROWS) {
        return Err(QuantError::NotBlockAligned {
            ty,
            cols: rows,
            block: GROUP_ROWS,
        });
    }
    Ok(())
}

/// The legacy format `ty`'s group layout.
fn legacy_layout(ty: GgmlType) -> Result<GroupBlock, QuantError> {
    group_block(ty).ok_or_else(|| not_interleavable(ty))
}

/// Interleaves the row-major GGUF rows `src` (a whole number of groups of 8 rows of
/// `cols` elements) into `dst`, which holds as many rows in the interleaved layout.
pub fn interleave_rows(
    ty: GgmlType,
    src: &[u8],
    cols: usize,
    dst: &mut [u8],
) -> Result<(), QuantError> {
    let (Some(src_row), Some(dst_row)) = (src_row_bytes(ty, cols), interleaved_row_bytes(ty, cols))
    else {
        return Err(not_interleavable(ty));
    };
    let rows = src.len().checked_div(src_row).unwrap_or(0);
    if src_row == 0 || rows * src_row != src.len() || dst.len() != rows * dst_row {
        return Err(QuantError::LengthMismatch {
            what: "interleaved rows",
            expected: rows * dst_row,
            got: dst.len(),
        });
    }
    whole_groups(ty, rows)?;
    let groups = src
        .chunks_exact(GROUP_ROWS * src_row)
        .zip(dst.chunks_exact_mut(GROUP_ROWS * dst_row));
    if let Some(c) = conversion(ty) {
        groups.for_each(|(s, d)| (c.pack_group)(s, src_row, d));
        return Ok(());
    }
    let g = legacy_layout(ty)?;
    let nb = src_row / g.row_block;
    for (s, d) in groups {
        for i in 0..nb {
            let out = &mut d[i * GROUP_ROWS * g.row_block..(i + 1) * GROUP_ROWS * g.row_block];
            for r in 0..GROUP_ROWS {
                let b = &s[r * src_row + i * g.row_block..][..g.row_block];
                pack_block(&g, ty, b, r, out);
            }
        }
    }
    Ok(())
}

/// Row `r` (0..8) of the interleaved group `group` (8 rows of `cols` elements) as f32.
pub(crate) fn group_row_to_f32(
    ty: GgmlType,
    group: &[u8],
    r: usize,
    dst: &mut [f32],
) -> Result<(), QuantError> {
    let cols = dst.len();
    let row = interleaved_row_bytes(ty, cols).ok_or_else(|| not_interleavable(ty))?;
    if r >= GROUP_ROWS || group.len() != GROUP_ROWS * row {
        return Err(QuantError::LengthMismatch {
            what: "interleaved group",
            expected: GROUP_ROWS * row,
            got: group.len(),
        });
    }
    if let Some(c) = conversion(ty) {
        (c.row_to_f32)(group, r, dst);
        return Ok(());
    }
    let mut bytes = vec![0u8; row];
    deinterleave_row(ty, group, r, &mut bytes)?;
    crate::quant::dequantize_row(ty, &bytes, dst)
}

/// Writes row `r`'s GGUF block `b` into its places in the interleaved block `out`.
fn pack_block(g: &GroupBlock, ty: GgmlType, b: &[u8], r: usize, out: &mut [u8]) {
    let db = g.d_bytes;
    out[db * r..db * (r + 1)].copy_from_slice(&b[..db]);
    if let (Some(sm), Some(m)) = (g.src_m, g.m) {
        out[m + 2 * r..m + 2 * r + 2].copy_from_slice(&b[sm..sm + 2]);
    }
    if let (Some(sq), Some(h)) = (g.src_qh, g.h) {
        let qh = u32::from_le_bytes(b[sq..sq + 4].try_into().unwrap());
        for e in 0..4 {
            let byte = (0..8).fold(0u8, |acc, k| acc | ((((qh >> (4 * k + e)) & 1) as u8) << k));
            out[h + 4 * r + e] = byte;
        }
    }
    let qs = &b[g.src_qs..];
    let words = if ty == GgmlType::Q8_0 { 8 } else { 4 };
    for k in 0..words {
        let at = g.qs + 32 * k + 4 * r;
        out[at..at + 4].copy_from_slice(&qs[4 * k..4 * k + 4]);
    }
}

/// Rebuilds row `r` (0..8) of an interleaved group `group` (`nb` blocks) in its GGUF
/// layout into `dst` (one row's bytes). Legacy formats only: K-quants are converted.
pub fn deinterleave_row(
    ty: GgmlType,
    group: &[u8],
    r: usize,
    dst: &mut [u8],
) -> Result<(), QuantError> {
    let g = legacy_layout(ty)?;
    if r >= GROUP_ROWS
        || !dst.len().is_multiple_of(g.row_block)
        || group.len() != GROUP_ROWS * dst.len()
    {
        return Err(QuantError::LengthMismatch {
            what: "interleaved group",
            expected: GROUP_ROWS * dst.len(),
            got: group.len(),
        });
    }
    let gb = GROUP_ROWS * g.row_block;
    for (blk, b) in group
        .chunks_exact(gb)
        .zip(dst.chunks_exact_mut(g.row_block))
    {
        let db = g.d_bytes;
        b[..db].copy_from_slice(&blk[db * r..db * (r + 1)]);
        if let (Some(sm), Some(m)) = (g.src_m, g.m) {
            b[sm..sm + 2].copy_from_slice(&blk[m + 2 * r..m + 2 * r + 2]);
        }
        if let (Some(sq), Some(h)) = (g.src_qh, g.h) {
            let mut qh = 0u32;
            for e in 0..4 {
                let byte = blk[h + 4 * r + e];
                for k in 0..8 {
                    qh |= (((byte >> k) & 1) as u32) << (4 * k + e);
                }
            }
            b[sq..sq + 4].copy_from_slice(&qh.to_le_bytes());
        }
        let words = if ty == GgmlType::Q8_0 { 8 } else { 4 };
        for k in 0..words {
            let at = g.qs + 32 * k + 4 * r;
            b[g.src_qs + 4 * k..g.src_qs + 4 * k + 4].copy_from_slice(&blk[at..at + 4]);
        }
    }
    Ok(())
}
