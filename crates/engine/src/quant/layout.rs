//! Block layouts of the GGML quantized formats: sizes, offsets and the small field
//! readers shared by dequantization and the dot-product kernels.
//!
//! All multi-byte fields are little-endian. Layouts (bytes):
//! - Q4_0 (18): d f16, qs\[16\] (element j low nibble of qs\[j\], element j+16 high nibble)
//! - Q4_1 (20): d f16, m f16, qs\[16\]
//! - Q5_0 (22): d f16, qh\[4\] (u32, bit j = 5th bit of element j), qs\[16\]
//! - Q5_1 (24): d f16, m f16, qh\[4\], qs\[16\]
//! - Q8_0 (34): d f16, qs\[32\] i8
//! - Q4_K (144): d f16, dmin f16, scales\[12\] (8 six-bit scales and mins), qs\[128\]
//! - Q5_K (176): d f16, dmin f16, scales\[12\], qh\[32\], qs\[128\]
//! - Q6_K (210): ql\[128\], qh\[64\], scales\[16\] i8, d f16
//! - IQ4_NL (18): d f16, qs\[16\] (as Q4_0, each nibble an index into
//!   [`IQ4_NL_VALUES`] instead of a value minus 8)
//! - IQ4_XS (136): d f16, scales_h u16 (2 high bits per sub-block), scales_l\[4\] (a low
//!   nibble per sub-block), qs\[128\] (per sub-block of 32, IQ4_NL's 16 nibble bytes)
//! - MXFP4 (17): e u8 (an E8M0 power of two, see [`e8m0_half`]), qs\[16\] (as IQ4_NL,
//!   each nibble an index into [`MXFP4_VALUES`])
//! - Q2_K (84): scales\[16\] (per 16 elements: scale in the low nibble, min in the
//!   high), qs\[64\] (2-bit quants, see [`two_bit`]), d f16, dmin f16
//! - Q3_K (110): hmask\[32\] (third bit of each quant), qs\[64\] (low 2 bits, see
//!   [`two_bit`]), scales\[12\] (sixteen 6-bit scales, one per 16 elements), d f16

use half::{bf16, f16};

/// Elements per legacy block (Q4_0 .. Q8_0).
pub(super) const QK: usize = 32;
/// Elements per K-quant super-block.
pub(super) const QK_K: usize = 256;

/// Reads the little-endian f16 at `b[at..at + 2]` as f32.
#[inline(always)]
pub(super) fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Reads the little-endian bf16 at `b[at..at + 2]` as f32.
#[inline(always)]
pub(super) fn bf16_at(b: &[u8], at: usize) -> f32 {
    bf16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Reads the little-endian f32 at `b[at..at + 4]`.
#[inline(always)]
pub(super) fn f32_at(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The 8 six-bit scales and 8 six-bit mins packed into the 12 `scales` bytes of a
/// Q4_K/Q5_K block: sub-blocks 0..4 keep theirs in the low 6 bits of bytes 0..4 (scales)
/// and 4..8 (mins); sub-blocks 4..8 split theirs between a nibble of bytes 8..12 and the
/// top 2 bits of bytes 0..8.
#[inline(always)]
pub(super) fn k4_scales_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
    }
    for j in 4..8 {
        sc[j] = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        mn[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
    (sc, mn)
}

/// Byte offsets inside a Q4_K block.
pub(super) mod q4_k {
    pub(crate) const D: usize = 0;
    pub(crate) const DMIN: usize = 2;
    pub(crate) const SCALES: usize = 4;
    pub(crate) const QS: usize = 16;
}

/// Byte offsets inside a Q5_K block (d, dmin and scales sit where Q4_K's do).
pub(super) mod q5_k {
    pub(crate) const QH: usize = 16;
    pub(crate) const QS: usize = 48;
}

/// Byte offsets inside a Q6_K block.
pub(super) mod q6_k {
    pub(crate) const QL: usize = 0;
    pub(crate) const QH: usize = 128;
    pub(crate) const SCALES: usize = 192;
    pub(crate) const D: usize = 208;
}

/// Byte offsets inside a Q2_K block.
pub(super) mod q2_k {
    pub(crate) const SCALES: usize = 0;
    pub(crate) const QS: usize = 16;
    pub(crate) const D: usize = 80;
    pub(crate) const DMIN: usize = 82;
}

/// Byte offsets inside a Q3_K block.
pub(super) mod q3_k {
    pub(crate) const HMASK: usize = 0;
    pub(crate) const QS: usize = 32;
    pub(crate) const SCALES: usize = 96;
    pub(crate) const D: usize = 108;
}

/// The 32 quants of a Q4_0 block, centred (-8..=7), in element order.
#[inline(always)]
pub(super) fn unpack_q4_0(b: &[u8]) -> [i8; QK] {
    let qs = &b[2..18];
    let mut q = [0i8; QK];
    for j in 0..16 {
        q[j] = (qs[j] & 0x0F) as i8 - 8;
        q[j + 16] = (qs[j] >> 4) as i8 - 8;
    }
    q
}

/// The 32 quants of a Q4_1 block (0..=15), in element order.
#[inline(always)]
pub(super) fn unpack_q4_1(b: &[u8]) -> [u8; QK] {
    let qs = &b[4..20];
    let mut q = [0u8; QK];
    for j in 0..16 {
        q[j] = qs[j] & 0x0F;
        q[j + 16] = qs[j] >> 4;
    }
    q
}

/// Five-bit quants (0..=31) from 16 nibble bytes and the 32 high bits of `qh`.
#[inline(always)]
fn five_bit(qs: &[u8], qh: u32) -> [u8; QK] {
    let mut q = [0u8; QK];
    for j in 0..16 {
        let h0 = ((qh >> j) & 1) as u8;
        let h1 = ((qh >> (j + 16)) & 1) as u8;
        q[j] = (qs[j] & 0x0F) | (h0 << 4);
        q[j + 16] = (qs[j] >> 4) | (h1 << 4);
    }
    q
}

/// IQ4_NL's codebook: a 4-bit index stands for one of these 16 non-uniformly spaced
/// values (denser near zero, where weights cluster), times the block scale.
pub(super) const IQ4_NL_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// MXFP4's codebook: the 16 FP4 (E2M1) values, doubled so that they are integers (bit
/// 3 of the index is the sign); [`e8m0_half`] halves the scale to match, as ggml does.
pub(super) const MXFP4_VALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Half the E8M0 scale `2^(e − 127)`, i.e. `2^(e − 128)`, exactly as ggml's
/// `GGML_E8M0_TO_FP32_HALF`: the f32 with exponent field `e − 1`, or for `e` < 2 the
/// subnormal with that value (ggml gives no NaN for e = 255 either).
#[inline(always)]
pub(super) fn e8m0_half(e: u8) -> f32 {
    if e < 2 {
        f32::from_bits(0x0020_0000 << e)
    } else {
        f32::from_bits((e as u32 - 1) << 23)
    }
}

/// 32 codebook values from 16 nibble bytes (element j low nibble of `qs[j]`, element
/// j + 16 its high nibble, as Q4_0).
#[inline(always)]
fn codebook_nibbles(qs: &[u8], book: &[i8; 16]) -> [i8; QK] {
    let mut q = [0i8; QK];
    for j in 0..16 {
        q[j] = book[(qs[j] & 0x0F) as usize];
        q[j + 16] = book[(qs[j] >> 4) as usize];
    }
    q
}

/// The 32 quants of an IQ4_NL block (codebook values), in element order.
#[inline(always)]
pub(super) fn unpack_iq4_nl(b: &[u8]) -> [i8; QK] {
    codebook_nibbles(&b[2..18], &IQ4_NL_VALUES)
}

/// The 32 quants of an MXFP4 block (doubled FP4 values), in element order.
#[inline(always)]
pub(super) fn unpack_mxfp4(b: &[u8]) -> [i8; QK] {
    codebook_nibbles(&b[1..17], &MXFP4_VALUES)
}

/// The eight 6-bit sub-block scales of an IQ4_XS block, centred (-32..=31), and its 256
/// quants (codebook values) in element order.
#[inline(always)]
pub(super) fn unpack_iq4_xs(b: &[u8]) -> ([i8; 8], [i8; QK_K]) {
    let high = u16::from_le_bytes([b[2], b[3]]);
    let mut scales = [0i8; 8];
    for (s, scale) in scales.iter_mut().enumerate() {
        let low = (b[4 + s / 2] >> (4 * (s % 2))) & 0x0F;
        let hi = ((high >> (2 * s)) & 3) as u8;
        *scale = (low | (hi << 4)) as i8 - 32;
    }
    let mut q = [0i8; QK_K];
    for (s, sub) in q.chunks_exact_mut(QK).enumerate() {
        sub.copy_from_slice(&codebook_nibbles(&b[8 + 16 * s..], &IQ4_NL_VALUES));
    }
    (scales, q)
}

/// The 32 quants of a Q5_0 block, centred (-16..=15), in element order.
#[inline(always)]
pub(super) fn unpack_q5_0(b: &[u8]) -> [i8; QK] {
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    five_bit(&b[6..22], qh).map(|v| v as i8 - 16)
}

/// The 32 quants of a Q5_1 block (0..=31), in element order.
#[inline(always)]
pub(super) fn unpack_q5_1(b: &[u8]) -> [u8; QK] {
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    five_bit(&b[8..24], qh)
}

/// The 32 quants of a Q8_0 block.
#[inline(always)]
pub(super) fn unpack_q8_0(b: &[u8]) -> [i8; QK] {
    let mut q = [0i8; QK];
    for (d, s) in q.iter_mut().zip(&b[2..34]) {
        *d = *s as i8;
    }
    q
}

/// The 256 quants of a Q4_K block (0..=15), in element order: each 64-element chunk c
/// takes the low nibbles of qs\[32c..32c+32\] then their high nibbles.
#[inline(always)]
pub(super) fn unpack_q4_k(b: &[u8]) -> [u8; QK_K] {
    let qs = &b[q4_k::QS..q4_k::QS + 128];
    let mut q = [0u8; QK_K];
    for c in 0..4 {
        for l in 0..32 {
            let v = qs[32 * c + l];
            q[64 * c + l] = v & 0x0F;
            q[64 * c + 32 + l] = v >> 4;
        }
    }
    q
}

/// The 256 quants of a Q5_K block (0..=31): Q4_K's nibbles plus a fifth bit, taken for
/// sub-block s (32 elements) from bit s of qh\[l\].
#[inline(always)]
pub(super) fn unpack_q5_k(b: &[u8]) -> [u8; QK_K] {
    let qs = &b[q5_k::QS..q5_k::QS + 128];
    let qh = &b[q5_k::QH..q5_k::QH + 32];
    let mut q = [0u8; QK_K];
    for c in 0..4 {
        for l in 0..32 {
            let v = qs[32 * c + l];
            let lo_bit = (qh[l] >> (2 * c)) & 1;
            let hi_bit = (qh[l] >> (2 * c + 1)) & 1;
            q[64 * c + l] = (v & 0x0F) | (lo_bit << 4);
            q[64 * c + 32 + l] = (v >> 4) | (hi_bit << 4);
        }
    }
    q
}

/// The 256 quants of a Q6_K block, centred (-32..=31). Each 128-element half n uses
/// ql\[64n..64n+64\] (low nibbles, then high nibbles) and qh\[32n..32n+32\] (2 bits per
/// 32-element quarter).
#[inline(always)]
pub(super) fn unpack_q6_k(b: &[u8]) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for n in 0..2 {
        let ql = &b[q6_k::QL + 64 * n..q6_k::QL + 64 * n + 64];
        let qh = &b[q6_k::QH + 32 * n..q6_k::QH + 32 * n + 32];
        let y = &mut q[128 * n..128 * n + 128];
        for l in 0..32 {
            let h = qh[l];
            y[l] = ((ql[l] & 0x0F) | ((h & 3) << 4)) as i8 - 32;
            y[l + 32] = ((ql[l + 32] & 0x0F) | (((h >> 2) & 3) << 4)) as i8 - 32;
            y[l + 64] = ((ql[l] >> 4) | (((h >> 4) & 3) << 4)) as i8 - 32;
            y[l + 96] = ((ql[l + 32] >> 4) | (((h >> 6) & 3) << 4)) as i8 - 32;
        }
    }
    q
}

/// The 2-bit fields of the 64 `qs` bytes of a Q2_K or Q3_K block (0..=3), in element
/// order: element `128h + 32j + l` is bits `2j..2j + 2` of `qs[32h + l]`.
#[inline(always)]
fn two_bit(qs: &[u8]) -> [u8; QK_K] {
    let mut q = [0u8; QK_K];
    for h in 0..2 {
        for j in 0..4 {
            for l in 0..32 {
                q[128 * h + 32 * j + l] = (qs[32 * h + l] >> (2 * j)) & 3;
            }
        }
    }
    q
}

/// The 256 quants of a Q2_K block (0..=3), in element order.
#[inline(always)]
pub(super) fn unpack_q2_k(b: &[u8]) -> [i8; QK_K] {
    two_bit(&b[q2_k::QS..q2_k::QS + 64]).map(|q| q as i8)
}

/// The 16 scales and 16 mins of a Q2_K block (0..=15 each; signed, as the other
/// formats' scales per 16 elements): the low and high nibbles of `scales[g]`.
#[inline(always)]
pub(super) fn q2_k_scales_mins(b: &[u8]) -> ([i8; 16], [i8; 16]) {
    let s = &b[q2_k::SCALES..q2_k::SCALES + 16];
    (
        std::array::from_fn(|g| (s[g] & 0x0F) as i8),
        std::array::from_fn(|g| (s[g] >> 4) as i8),
    )
}

/// The 256 quants of a Q3_K block (-4..=3), in element order: the 2-bit field, less 4
/// where the element's bit in hmask is clear (bit `e / 32` of `hmask[e % 32]`).
#[inline(always)]
pub(super) fn unpack_q3_k(b: &[u8]) -> [i8; QK_K] {
    let low = two_bit(&b[q3_k::QS..q3_k::QS + 64]);
    let hmask = &b[q3_k::HMASK..q3_k::HMASK + 32];
    std::array::from_fn(|e| {
        let high = (hmask[e % 32] >> (e / 32)) & 1;
        low[e] as i8 - if high == 1 { 0 } else { 4 }
    })
}

/// The 16 scales of a Q3_K block, centred (-32..=31). Scale i keeps its low 4 bits in
/// a nibble of `scales[i % 8]` (low for i < 8, high above) and its high 2 bits in bits
/// `2·(i / 4)..` of `scales[8 + i % 4]`.
#[inline(always)]
pub(super) fn q3_k_scales(b: &[u8]) -> [i8; 16] {
    let s = &b[q3_k::SCALES..q3_k::SCALES + 12];
    std::array::from_fn(|i| {
        let low = (s[i % 8] >> (4 * (i / 8))) & 0x0F;
        let high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        (low | (high << 4)) as i8 - 32
    })
}

/// The 16 signed scales of a Q6_K block (one per 16 elements).
#[inline(always)]
pub(super) fn q6_k_scales(b: &[u8]) -> [i8; 16] {
    let mut s = [0i8; 16];
    for (d, v) in s.iter_mut().zip(&b[q6_k::SCALES..q6_k::SCALES + 16]) {
        *d = *v as i8;
    }
    s
}
