//! Hand-built blocks of every supported type with known values, plus the matmul's
//! output layout and error paths on small exact cases.

use llamay_engine::internals::{
    dequantize_row, interleave_rows, interleaved_row_bytes, matmul_rows, matmul_view,
    quantize_acts, OutView, QMatrix, QuantizedActs,
};
use llamay_engine::{Backend, GgmlType, QuantError};

fn f16_bytes(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_bits().to_le_bytes()
}

fn dequant(ty: GgmlType, block: &[u8], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    dequantize_row(ty, block, &mut out).unwrap();
    out
}

/// Nibble pairs with element j low = j, element j+16 = 15 - j.
fn ramp_nibbles() -> Vec<u8> {
    (0..16u8).map(|j| j | ((15 - j) << 4)).collect()
}

#[test]
fn float_types() {
    let f32s: Vec<u8> = [1.5f32, -2.0, 0.1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(dequant(GgmlType::F32, &f32s, 3), [1.5, -2.0, 0.1]);
    // 0x3C00 = 1.0, 0xC000 = -2.0, 0x3555 = 0.333251953125, 0x0001 = 2^-24 (subnormal).
    let f16s = [0x00, 0x3C, 0x00, 0xC0, 0x55, 0x35, 0x01, 0x00];
    assert_eq!(
        dequant(GgmlType::F16, &f16s, 4),
        [1.0, -2.0, 0.333_251_95, 5.960_464_5e-8]
    );
    // bf16 0x3F80 = 1.0, 0xC040 = -3.0, 0x3E20 = 0.15625.
    let bf16s = [0x80, 0x3F, 0x40, 0xC0, 0x20, 0x3E];
    assert_eq!(dequant(GgmlType::BF16, &bf16s, 3), [1.0, -3.0, 0.15625]);
}

#[test]
fn q4_0_block() {
    let mut b = f16_bytes(0.5).to_vec();
    b.extend(ramp_nibbles());
    let got = dequant(GgmlType::Q4_0, &b, 32);
    assert_eq!(&got[..4], [-4.0, -3.5, -3.0, -2.5]);
    assert_eq!(got[8], 0.0);
    assert_eq!(got[15], 3.5);
    assert_eq!(got[16], 3.5); // 15 - 8
    assert_eq!(got[31], -4.0); // 0 - 8
}

#[test]
fn q4_1_block() {
    let mut b = f16_bytes(0.25).to_vec();
    b.extend(f16_bytes(-1.0));
    b.extend(ramp_nibbles());
    let got = dequant(GgmlType::Q4_1, &b, 32);
    assert_eq!(&got[..3], [-1.0, -0.75, -0.5]);
    assert_eq!(got[15], 2.75);
    assert_eq!(got[16], 2.75);
    assert_eq!(got[31], -1.0);
}

#[test]
fn q5_0_block() {
    // All nibbles: low 1, high 2. High bits: element 0 and element 16 only.
    let mut b = f16_bytes(0.5).to_vec();
    b.extend(0x0001_0001u32.to_le_bytes());
    b.extend([0x21u8; 16]);
    let got = dequant(GgmlType::Q5_0, &b, 32);
    assert_eq!(got[0], 0.5); // 17 - 16
    assert_eq!(got[1], -7.5); // 1 - 16
    assert_eq!(got[15], -7.5);
    assert_eq!(got[16], 1.0); // 18 - 16
    assert_eq!(got[17], -7.0); // 2 - 16
}

#[test]
fn q5_1_block() {
    let mut b = f16_bytes(1.0).to_vec();
    b.extend(f16_bytes(0.5));
    b.extend(0x8000_0001u32.to_le_bytes());
    b.extend([0x21u8; 16]);
    let got = dequant(GgmlType::Q5_1, &b, 32);
    assert_eq!(got[0], 17.5);
    assert_eq!(got[1], 1.5);
    assert_eq!(got[16], 2.5);
    assert_eq!(got[31], 18.5);
}

#[test]
fn q8_0_block() {
    let mut b = f16_bytes(0.25).to_vec();
    b.extend((0..32).map(|j: i32| (j * 8 - 128) as i8 as u8));
    let got = dequant(GgmlType::Q8_0, &b, 32);
    assert_eq!(got[0], -32.0);
    assert_eq!(got[16], 0.0);
    assert_eq!(got[31], 30.0);
}

/// Packed K-quant scales with sc = [1,2,3,4,33,0,3,4], mins = [0,1,2,3,18,0,1,15]
/// (sub-blocks 4..8 take their top two bits from bytes 0..8).
const K_SCALES: [u8; 12] = [0x81, 2, 3, 4, 0x40, 1, 2, 3, 0x21, 0x00, 0x13, 0xF4];
const K_SC: [f32; 8] = [1.0, 2.0, 3.0, 4.0, 33.0, 0.0, 3.0, 4.0];
const K_MN: [f32; 8] = [0.0, 1.0, 2.0, 3.0, 18.0, 0.0, 1.0, 15.0];

#[test]
fn q4_k_block() {
    let mut b = f16_bytes(1.0).to_vec();
    b.extend(f16_bytes(0.5));
    b.extend(K_SCALES);
    b.extend([0x53u8; 128]); // even sub-blocks q = 3, odd ones q = 5
    let got = dequant(GgmlType::Q4_K, &b, 256);
    for (e, v) in got.iter().enumerate() {
        let s = e / 32;
        let q = if s % 2 == 0 { 3.0 } else { 5.0 };
        assert_eq!(*v, K_SC[s] * q - 0.5 * K_MN[s], "element {e}");
    }
    assert_eq!(got[128], 99.0 - 9.0);
    assert_eq!(got[255], 20.0 - 7.5);
}

#[test]
fn q5_k_block() {
    let mut b = f16_bytes(1.0).to_vec();
    b.extend(f16_bytes(0.5));
    b.extend(K_SCALES);
    let mut qh = [0u8; 32];
    qh[0] = 0x01; // fifth bit of element 0 (sub-block 0, l = 0)
    qh[1] = 0x80; // fifth bit of element 7*32 + 1 (sub-block 7, l = 1)
    b.extend(qh);
    b.extend([0x53u8; 128]);
    let got = dequant(GgmlType::Q5_K, &b, 256);
    assert_eq!(got[0], 1.0 * 19.0);
    assert_eq!(got[1], 1.0 * 3.0);
    assert_eq!(got[225], 4.0 * 21.0 - 7.5);
    assert_eq!(got[224], 4.0 * 5.0 - 7.5);
    assert_eq!(got[128], 33.0 * 3.0 - 9.0);
}

#[test]
fn q6_k_block() {
    let mut b = vec![0x21u8; 128]; // ql: low nibble 1, high nibble 2
    b.extend([0xE4u8; 64]); // qh: quarters get high bits 0, 1, 2, 3
    let scales: Vec<i8> = (0..16)
        .map(|g| if g % 2 == 0 { g + 1 } else { -g })
        .collect();
    b.extend(scales.iter().map(|&s| s as u8));
    b.extend(f16_bytes(0.5));
    let got = dequant(GgmlType::Q6_K, &b, 256);
    // Per 32-element quarter: 1-32, 1+16-32, 2+32-32, 2+48-32.
    let q = [-31.0, -15.0, 2.0, 18.0];
    for (e, v) in got.iter().enumerate() {
        let want = 0.5 * scales[e / 16] as f32 * q[(e % 128) / 32];
        assert_eq!(*v, want, "element {e}");
    }
    assert_eq!(got[0], -15.5);
    assert_eq!(got[40], 0.5 * 3.0 * -15.0);
}

#[test]
fn iq4_nl_block() {
    // Index j low, 15 - j high: the codebook in order, then backwards.
    let mut b = f16_bytes(0.5).to_vec();
    b.extend(ramp_nibbles());
    let got = dequant(GgmlType::IQ4_NL, &b, 32);
    assert_eq!(&got[..4], [-63.5, -52.0, -41.5, -32.5]);
    assert_eq!(got[8], 0.5);
    assert_eq!(got[15], 56.5);
    assert_eq!(got[16], 56.5);
    assert_eq!(got[31], -63.5);
}

#[test]
fn iq4_xs_block() {
    // d 0.25; sub-block s has scale (s + 30) - 32: low nibbles 30 & 15 = 14 and high
    // bits 30 >> 4 = 1 for s = 0, up to 37 for s = 7.
    let scales: Vec<u8> = (0..8u16).map(|s| (s + 30) as u8).collect();
    let high: u16 = (0..8)
        .map(|s| ((scales[s] >> 4) as u16 & 3) << (2 * s))
        .sum();
    let mut b = f16_bytes(0.25).to_vec();
    b.extend(high.to_le_bytes());
    b.extend((0..4).map(|k| (scales[2 * k] & 15) | ((scales[2 * k + 1] & 15) << 4)));
    for _ in 0..8 {
        b.extend(ramp_nibbles());
    }
    assert_eq!(b.len(), 136);
    let got = dequant(GgmlType::IQ4_XS, &b, 256);
    // Sub-block 0, scale -2: codebook index 0 (-127), then index 15 (113) at 16.
    assert_eq!(got[0], 63.5);
    assert_eq!(got[16], -56.5);
    // Sub-block 2, scale 0: nothing.
    assert!(got[64..96].iter().all(|&v| v == 0.0));
    // Sub-block 7, scale 5: index 8 (1) at element 8, index 15 (113) at 15.
    assert_eq!(got[224 + 8], 1.25);
    assert_eq!(got[224 + 15], 141.25);
}

#[test]
fn mxfp4_block() {
    // Two blocks of the ramp: scale 2^(130 - 127) = 8, then 2^(1 - 127), where ggml's
    // half scale is subnormal. Codes 0..8 are E2M1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4,
    // 6; bit 3 is the sign.
    let mut b = vec![130u8];
    b.extend(ramp_nibbles());
    b.push(1);
    b.extend(ramp_nibbles());
    let got = dequant(GgmlType::MXFP4, &b, 64);
    assert_eq!(&got[..4], [0.0, 4.0, 8.0, 12.0]);
    assert_eq!(got[7], 48.0);
    assert_eq!(got[15], -48.0);
    assert_eq!(got[16], -48.0);
    assert_eq!(got[31], 0.0);
    assert_eq!(got[32 + 1], f32::MIN_POSITIVE / 2.0);
    assert_eq!(got[32 + 7], 6.0 * f32::MIN_POSITIVE);
}

/// 2-bit quants for Q2_K and Q3_K: in the first half, chunk j of 32 elements has value
/// j for l < 16 and 3 - j above; the second half the other way round.
fn two_bit_ramps() -> Vec<u8> {
    (0..64)
        .map(|k| {
            if (k % 32 < 16) == (k < 32) {
                0xE4
            } else {
                0x1B
            }
        })
        .collect()
}

#[test]
fn q2_k_block() {
    // Group g: scale g, min 15 - g.
    let mut b: Vec<u8> = (0..16u8).map(|g| g | ((15 - g) << 4)).collect();
    b.extend(two_bit_ramps());
    b.extend(f16_bytes(0.5));
    b.extend(f16_bytes(0.25));
    assert_eq!(b.len(), 84);
    let got = dequant(GgmlType::Q2_K, &b, 256);
    assert_eq!(got[0], -3.75); // 0 - 0.25·15
    assert_eq!(got[16], -2.0); // 0.5·1·3 - 0.25·14
    assert_eq!(got[40], -2.25); // 0.5·2·1 - 0.25·13
    assert_eq!(got[130], 10.25); // 0.5·8·3 - 0.25·7
    assert_eq!(got[255], 22.5); // 0.5·15·3
}

/// Sixteen 6-bit scales packed as Q3_K keeps them: low nibbles in bytes 0..8 (low
/// nibble for scales 0..8, high for 8..16), high 2 bits of scale i in bits 2·(i/4) of
/// byte 8 + i%4.
fn q3_k_scale_bytes(scales: [u8; 16]) -> [u8; 12] {
    let mut b = [0u8; 12];
    for (i, s) in scales.into_iter().enumerate() {
        b[i % 8] |= (s & 15) << (4 * (i / 8));
        b[8 + i % 4] |= (s >> 4) << (2 * (i / 4));
    }
    b
}

#[test]
fn q3_k_block() {
    // hmask: for l < 16 bits set in even 32-element chunks, for l >= 16 in odd ones.
    let mut b: Vec<u8> = (0..32).map(|l| if l < 16 { 0x55 } else { 0xAA }).collect();
    b.extend(two_bit_ramps());
    // Group g has scale 2g + 17, centred 2g - 15.
    b.extend(q3_k_scale_bytes(std::array::from_fn(|g| 2 * g as u8 + 17)));
    b.extend(f16_bytes(0.5));
    assert_eq!(b.len(), 110);
    let got = dequant(GgmlType::Q3_K, &b, 256);
    // Element 16: value 3, bit clear (-1), scale -13.
    assert_eq!(got[16], 6.5);
    // Element 32: value 1, bit clear (-3), scale -11.
    assert_eq!(got[32], 16.5);
    // Element 200: second half, chunk 2: value 1, bit set, scale 9.
    assert_eq!(got[200], 4.5);
    // Element 239: value 0, bit clear (-4), scale 13.
    assert_eq!(got[239], -26.0);
    assert_eq!(got[0], 0.0);
}

#[test]
fn unsupported_types_and_bad_lengths_are_errors() {
    let mut out = [0f32; 32];
    assert_eq!(
        dequantize_row(GgmlType::IQ2_XXS, &[0; 66], &mut [0f32; 256]),
        Err(QuantError::UnsupportedType(GgmlType::IQ2_XXS))
    );
    assert!(matches!(
        dequantize_row(GgmlType::Q4_0, &[0; 17], &mut out),
        Err(QuantError::LengthMismatch { .. })
    ));
    assert!(matches!(
        dequantize_row(GgmlType::Q4_0, &[0; 18], &mut out[..31]),
        Err(QuantError::NotBlockAligned { .. })
    ));
    assert!(QMatrix::new(GgmlType::Q4_0, &[0; 36], 2, 32).is_ok());
    assert!(QMatrix::new(GgmlType::Q4_0, &[0; 35], 2, 32).is_err());
    assert!(QMatrix::new(GgmlType::Q4_0, &[0; 36], 2, 33).is_err());
    assert!(QMatrix::new(GgmlType::Q4_0, &[], usize::MAX, 64).is_err());
    let mut acts = QuantizedActs::new();
    assert!(quantize_acts(GgmlType::Q4_K, &[0.0; 32], 1, 32, &mut acts).is_err());
    assert!(quantize_acts(GgmlType::Q4_0, &[0.0; 32], 2, 32, &mut acts).is_err());
}

/// A Q8_0 matrix whose products are exact: weights d = 1, activations whose block
/// maximum is 127 (so they quantize exactly).
fn exact_q8_case(rows: usize, n_tokens: usize) -> (Vec<u8>, Vec<f32>, Vec<f32>) {
    let cols = 64;
    let wq = |r: usize, c: usize| ((r * 7 + c * 3) % 41) as i32 - 20;
    let xq = |t: usize, c: usize| {
        if c.is_multiple_of(32) {
            127
        } else {
            ((t * 5 + c) % 51) as i32 - 25
        }
    };
    let mut data = Vec::new();
    for r in 0..rows {
        for blk in 0..2 {
            data.extend(f16_bytes(1.0));
            data.extend((0..32).map(|c| wq(r, blk * 32 + c) as i8 as u8));
        }
    }
    let x: Vec<f32> = (0..n_tokens * cols)
        .map(|i| xq(i / cols, i % cols) as f32)
        .collect();
    let want: Vec<f32> = (0..n_tokens * rows)
        .map(|i| {
            let (t, r) = (i / rows, i % rows);
            (0..cols).map(|c| wq(r, c) * xq(t, c)).sum::<i32>() as f32
        })
        .collect();
    (data, x, want)
}

#[test]
fn matmul_writes_token_major_output_and_only_its_rows() {
    let (rows, n_tokens) = (37, 9); // row groups of 16 + remainder; tiles of 4 + 1 token
    let (data, x, want) = exact_q8_case(rows, n_tokens);
    let w = QMatrix::new(GgmlType::Q8_0, &data, rows, 64).unwrap();
    let mut acts = QuantizedActs::new();
    quantize_acts(GgmlType::Q8_0, &x, n_tokens, 64, &mut acts).unwrap();
    for backend in Backend::available() {
        let mut out = vec![f32::NAN; n_tokens * rows];
        backend.matmul_rows(&w, &acts, &mut out, 0..rows).unwrap();
        assert_eq!(out, want, "{backend:?}");

        let mut part = vec![f32::NAN; n_tokens * rows];
        backend.matmul_rows(&w, &acts, &mut part, 5..20).unwrap();
        for (i, v) in part.iter().enumerate() {
            if (5..20).contains(&(i % rows)) {
                assert_eq!(*v, want[i]);
            } else {
                assert!(v.is_nan(), "cell {i} outside the row range was written");
            }
        }
        assert!(backend.matmul_rows(&w, &acts, &mut part, 30..38).is_err());
        assert!(backend
            .matmul_rows(&w, &acts, &mut part[1..], 0..rows)
            .is_err());
    }
}

#[test]
fn split_views_cover_disjoint_rows_across_threads() {
    let (rows, n_tokens) = (50, 6);
    let (data, x, want) = exact_q8_case(rows, n_tokens);
    let w = QMatrix::new(GgmlType::Q8_0, &data, rows, 64).unwrap();
    let mut acts = QuantizedActs::new();
    quantize_acts(GgmlType::Q8_0, &x, n_tokens, 64, &mut acts).unwrap();
    let mut out = vec![f32::NAN; n_tokens * rows];
    let parts = OutView::new(&mut out, n_tokens, rows).unwrap().split(3);
    let ranges: Vec<_> = parts.iter().map(|p| p.rows()).collect();
    assert_eq!(ranges, [0..16, 16..33, 33..50]);
    std::thread::scope(|s| {
        for mut part in parts {
            let (w, acts) = (&w, &acts);
            s.spawn(move || matmul_view(w, acts, &mut part).unwrap());
        }
    });
    assert_eq!(out, want);
}

#[test]
fn matmul_refuses_acts_for_another_format() {
    let (data, x, _) = exact_q8_case(2, 1);
    let w = QMatrix::new(GgmlType::Q8_0, &data, 2, 64).unwrap();
    let mut acts = QuantizedActs::new();
    quantize_acts(GgmlType::F32, &x, 1, 64, &mut acts).unwrap();
    let mut out = [0f32; 2];
    assert!(matches!(
        matmul_rows(&w, &acts, &mut out, 0..2),
        Err(QuantError::ActsMismatch { .. })
    ));
}

#[test]
fn embedding_row_lookup() {
    let (data, _, _) = exact_q8_case(3, 1);
    let w = QMatrix::new(GgmlType::Q8_0, &data, 3, 64).unwrap();
    let mut row = vec![0f32; 64];
    w.row_to_f32(2, &mut row).unwrap();
    let want: Vec<f32> = (0..64)
        .map(|c: i32| ((2 * 7 + c * 3) % 41 - 20) as f32)
        .collect();
    assert_eq!(row, want);
    assert!(w.row_to_f32(3, &mut row).is_err());
    assert!(w.row_to_f32(0, &mut row[..32]).is_err());
}

#[test]
fn tapered_views_shrink_and_cover_every_row_once() {
    let (rows, n_tokens) = (8 * 100, 2);
    let mut out = vec![0f32; n_tokens * rows];
    for n in [1, 2, 5, 8] {
        let view = OutView::new(&mut out, n_tokens, rows).unwrap();
        let ranges: Vec<_> = view.split_tapered(n, 8).iter().map(|p| p.rows()).collect();
        assert_eq!(ranges.len(), n);
        assert_eq!(ranges[0].start, 0);
        assert_eq!(ranges[n - 1].end, rows);
        for (a, b) in ranges.iter().zip(&ranges[1..]) {
            assert_eq!(a.end, b.start, "{ranges:?}");
            assert!(a.len() >= b.len(), "sizes fall off: {ranges:?}");
        }
        assert!(ranges.iter().all(|r| r.start % 8 == 0), "{ranges:?}");
    }
    // 8 parts of 800 rows: cuts after 8, 15, 21, 26, 30, 33, 35 of 36 shares (at
    // 177.8, 333.3, 466.7, 577.8, 666.7, 733.3, 777.8), rounded down to groups of 8.
    let view = OutView::new(&mut out, n_tokens, rows).unwrap();
    let sizes: Vec<_> = view
        .split_tapered(8, 8)
        .iter()
        .map(|p| p.rows().len())
        .collect();
    assert_eq!(sizes, [176, 152, 136, 112, 88, 64, 48, 24]);
}

#[test]
fn adding_views_add_the_product_to_what_the_output_holds() {
    // A residual connection is computed as `x += w·a`: both store paths (row by row,
    // and the interleaved groups' 8 rows at a time), split across threads.
    let (rows, n_tokens) = (48, 5);
    let (data, x, want) = exact_q8_case(rows, n_tokens);
    let mut packed = vec![0u8; rows * interleaved_row_bytes(GgmlType::Q8_0, 64).unwrap()];
    interleave_rows(GgmlType::Q8_0, &data, 64, &mut packed).unwrap();
    let mut layouts = vec![QMatrix::new(GgmlType::Q8_0, &data, rows, 64).unwrap()];
    if Backend::active().interleaves(GgmlType::Q8_0) {
        layouts.push(QMatrix::new_interleaved(GgmlType::Q8_0, &packed, rows, 64).unwrap());
    }
    let mut acts = QuantizedActs::new();
    quantize_acts(GgmlType::Q8_0, &x, n_tokens, 64, &mut acts).unwrap();
    let before: Vec<f32> = (0..n_tokens * rows)
        .map(|i| (i % 13) as f32 - 6.0)
        .collect();
    for w in &layouts {
        let mut out = before.clone();
        let parts = OutView::adding_to(&mut out, n_tokens, rows)
            .unwrap()
            .split_aligned(3, 8);
        std::thread::scope(|s| {
            for mut part in parts {
                let acts = &acts;
                s.spawn(move || matmul_view(w, acts, &mut part).unwrap());
            }
        });
        let expected: Vec<f32> = before.iter().zip(&want).map(|(b, p)| b + p).collect();
        assert_eq!(out, expected, "interleaved: {}", w.is_interleaved());
    }
}
