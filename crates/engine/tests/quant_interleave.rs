//! The interleaved weight layout (groups of 8 rows, see `quant::interleave`): the
//! layout round-trips, and every backend with group kernels computes the same products
//! from interleaved weights as the row-by-row kernels do from the GGUF rows.

use half::f16;
use llamay_engine::internals::{
    deinterleave_row, interleavable, interleave_rows, interleaved_row_bytes, quantize_acts,
    quantize_acts_as, QMatrix, QuantizedActs,
};
use llamay_engine::{Backend, GgmlType};
use proptest::prelude::*;

mod common;
use common::acts::dequantized;

/// The types whose GGUF rows are only reordered block by block (and so rebuilt).
const LEGACY: [GgmlType; 7] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::IQ4_NL,
    GgmlType::MXFP4,
];
/// Every interleavable type: the legacy ones, the codebook ones in the legacy layout
/// (IQ4_NL, MXFP4), Q4_K and Q6_K (converted), IQ4_XS, Q2_K and Q3_K (regrouped).
const TYPES: [GgmlType; 12] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_NL,
    GgmlType::MXFP4,
    GgmlType::IQ4_XS,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
];

/// Elements per block of `ty`.
fn block_elems(ty: GgmlType) -> usize {
    ty.block_elems() as usize
}

/// Random GGUF rows of `ty` with sane f16 scales (and mins) in every block.
fn rows_of(ty: GgmlType, rows: usize, cols: usize, bytes: &[u8], scales: &[f32]) -> Vec<u8> {
    let bb = ty.block_bytes() as usize;
    let len = rows * cols / block_elems(ty) * bb;
    let mut data: Vec<u8> = bytes.iter().cycle().take(len).copied().collect();
    let mut s = scales.iter().cycle();
    let f16_fields: &[usize] = match ty {
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        GgmlType::MXFP4 => &[],
        _ => &[0],
    };
    for b in data.chunks_exact_mut(bb) {
        if ty == GgmlType::MXFP4 {
            // E8M0 exponents around 2^0, and now and then a subnormal one (below 2).
            let e = (s.next().unwrap() * 12.0) as i32 + 124;
            b[0] = if e < 116 { (e & 1) as u8 } else { e as u8 };
        }
        for &at in f16_fields {
            let v = f16::from_f32(s.next().unwrap() * 0.1);
            b[at..at + 2].copy_from_slice(&v.to_bits().to_le_bytes());
        }
    }
    data
}

/// The minimum of every block of Q4_1/Q5_1 `data`; `None` for formats without one.
fn block_mins(ty: GgmlType, data: &[u8]) -> Option<Vec<f64>> {
    let at_min = |bb: usize| {
        let mins = data
            .chunks_exact(bb)
            .map(|b| f16::from_le_bytes([b[2], b[3]]).to_f64());
        Some(mins.collect())
    };
    match ty {
        GgmlType::Q4_1 => at_min(20),
        GgmlType::Q5_1 => at_min(24),
        _ => None,
    }
}

fn interleaved(ty: GgmlType, data: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    let mut out = vec![0u8; rows * interleaved_row_bytes(ty, cols).unwrap()];
    interleave_rows(ty, data, cols, &mut out).unwrap();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn interleaving_round_trips_every_row(
        ty in (0..LEGACY.len()).prop_map(|i| LEGACY[i]),
        groups in 1usize..=3,
        blocks in 1usize..=4,
        bytes in prop::collection::vec(any::<u8>(), 64..512),
    ) {
        let row_bytes = blocks * ty.block_bytes() as usize;
        let data: Vec<u8> = bytes.iter().cycle().take(8 * groups * row_bytes).copied().collect();
        let packed = interleaved(ty, &data, 8 * groups, 32 * blocks);
        for g in 0..groups {
            let group = &packed[g * 8 * row_bytes..(g + 1) * 8 * row_bytes];
            for r in 0..8 {
                let mut row = vec![0u8; row_bytes];
                deinterleave_row(ty, group, r, &mut row).unwrap();
                let want = &data[(8 * g + r) * row_bytes..(8 * g + r + 1) * row_bytes];
                prop_assert_eq!(&row[..], want, "group {} row {}", g, r);
            }
        }
    }

    /// Every backend with group kernels computes, from interleaved weights, the exact
    /// product of the dequantized weights and the activations it was given to float
    /// rounding, for token counts covering every tile
    /// width, the tails and more than one chunk of tokens.
    #[test]
    fn group_kernels_compute_the_dequantized_product(
        ty in (0..TYPES.len()).prop_map(|i| TYPES[i]),
        groups in 1usize..=3,
        blocks in 1usize..=6,
        n_tokens in prop_oneof![1usize..=19, Just(67usize)],
        bytes in prop::collection::vec(any::<u8>(), 300..600),
        scales in prop::collection::vec(-1.0f32..1.0, 37),
        x_seed in prop::collection::vec(-1.0f32..1.0, 97),
    ) {
        let rows = 8 * groups;
        let k_quant = matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K | GgmlType::IQ4_XS | GgmlType::Q2_K | GgmlType::Q3_K);
        let cols = if k_quant { 256 * blocks.div_ceil(2) } else { 32 * blocks };
        let data = rows_of(ty, rows, cols, &bytes, &scales);
        let packed = interleaved(ty, &data, rows, cols);
        let plain = QMatrix::new(ty, &data, rows, cols).unwrap();
        let groups_m = QMatrix::new_interleaved(ty, &packed, rows, cols).unwrap();
        // Outliers in some tokens, as real activations have.
        let x: Vec<f32> = (0..n_tokens * cols)
            .map(|i| x_seed[i % x_seed.len()] * if i % 41 == 0 { 300.0 } else { 1.0 })
            .collect();
        let format = groups_m.act_format().unwrap();
        let mut acts = QuantizedActs::new();
        quantize_acts_as(format, &x, n_tokens, cols, &mut acts).unwrap();
        let a = dequantized(&acts);
        let mut w = vec![0f32; cols];
        let mut want = vec![0f64; n_tokens * rows];
        let mut mag = vec![0f64; n_tokens * rows];
        let mins = block_mins(ty, &data);
        for r in 0..rows {
            plain.row_to_f32(r, &mut w).unwrap();
            for t in 0..n_tokens {
                let at = &a[t * cols..(t + 1) * cols];
                want[t * rows + r] = w.iter().zip(at).map(|(&w, &a)| w as f64 * a).sum();
                // The kernels sum d·q·a and m·a apart: rounding scales with both terms.
                mag[t * rows + r] = w.iter().zip(at).enumerate().map(|(i, (&w, &a))| {
                    let m = mins.as_ref().map_or(0.0, |m| m[r * cols / 32 + i / 32]);
                    ((w as f64 - m).abs() + m.abs()) * a.abs()
                }).sum();
            }
        }
        let backends: Vec<Backend> =
            Backend::available().into_iter().filter(|b| b.interleaves(ty)).collect();
        for &backend in &backends {
            let mut got = vec![f32::NAN; n_tokens * rows];
            backend.matmul_rows(&groups_m, &acts, &mut got, 0..rows).unwrap();
            for i in 0..n_tokens * rows {
                prop_assert!((got[i] as f64 - want[i]).abs() <= 1e-5 * mag[i] + 1e-6,
                    "{:?} {} token {} row {}: {} vs {}", backend, ty, i / rows, i % rows, got[i], want[i]);
            }
            // A group-aligned slice of the rows writes only those rows.
            if groups > 1 {
                let mut part = vec![f32::NAN; n_tokens * rows];
                backend.matmul_rows(&groups_m, &acts, &mut part, 8..16).unwrap();
                for (i, v) in part.iter().enumerate() {
                    prop_assert_eq!((8..16).contains(&(i % rows)), !v.is_nan());
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            prop_assert!(!backends.is_empty(), "no backend ran the group kernels");
        }
        // Embedding lookups read the same rows from either layout.
        let (mut p, mut q) = (vec![0f32; cols], vec![0f32; cols]);
        for r in [0, rows - 1] {
            plain.row_to_f32(r, &mut p).unwrap();
            groups_m.row_to_f32(r, &mut q).unwrap();
            prop_assert_eq!(&p, &q);
        }
    }
}

#[test]
fn only_legacy_formats_in_whole_groups_interleave() {
    assert!(TYPES.iter().all(|&t| interleavable(t)));
    for ty in [GgmlType::Q5_K, GgmlType::F16, GgmlType::F32] {
        assert!(!interleavable(ty));
        assert!(QMatrix::new_interleaved(ty, &[], 0, 256).is_err());
    }
    let row = [0u8; 18];
    let seven_rows = row.repeat(7);
    let mut out = vec![0u8; seven_rows.len()];
    assert!(interleave_rows(GgmlType::Q4_0, &seven_rows, 32, &mut out).is_err());
    assert!(QMatrix::new_interleaved(GgmlType::Q4_0, &seven_rows, 7, 32).is_err());
    let eight_rows = row.repeat(8);
    let m = QMatrix::new_interleaved(GgmlType::Q4_0, &eight_rows, 8, 32).unwrap();
    assert!(m.is_interleaved());
    // A view that splits a group is refused, not computed wrong.
    let mut acts = QuantizedActs::new();
    quantize_acts(GgmlType::Q4_0, &[1.0; 32], 1, 32, &mut acts).unwrap();
    let mut out = vec![0f32; 8];
    for b in Backend::available()
        .into_iter()
        .filter(|b| b.interleaves(GgmlType::Q4_0))
    {
        assert!(b.matmul_rows(&m, &acts, &mut out, 0..4).is_err());
        assert!(b.matmul_rows(&m, &acts, &mut out, 0..8).is_ok());
    }
}
