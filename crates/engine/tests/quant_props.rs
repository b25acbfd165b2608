//! Property tests of the quant kernels over random blocks of every supported type:
//! - dequantize_row matches an independent element-by-element f64 reading of the
//!   documented block layouts;
//! - every backend's matmul agrees with f64 (dequantized weights × unquantized
//!   activations) within the activation-quantization error bound, and the backends
//!   agree with each other within float rounding.

use half::f16;
use llamay_engine::internals::{
    dequantize_row, quantize_acts, serial, ActFormat, ParallelFor, QMatrix, QuantizedActs,
};
use llamay_engine::{Backend, GgmlType, KernelSet};
use proptest::prelude::*;

mod common;
use common::acts::dequantized;

const TYPES: [GgmlType; 16] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::Q3_K,
    GgmlType::Q2_K,
    GgmlType::MXFP4,
];

// ---- an independent f64 reader of the layouts ----------------------------------------

/// IEEE half, decoded by hand (not through `half`).
fn f16_ref(b: &[u8], at: usize) -> f64 {
    let h = u16::from_le_bytes([b[at], b[at + 1]]);
    let sign = if h >> 15 == 1 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 31) as i32;
    let man = (h & 1023) as f64;
    sign * match exp {
        0 => man * 2f64.powi(-24),
        31 => f64::NAN,
        _ => (1.0 + man / 1024.0) * 2f64.powi(exp - 15),
    }
}

fn bf16_ref(b: &[u8], at: usize) -> f64 {
    f32::from_bits((u16::from_le_bytes([b[at], b[at + 1]]) as u32) << 16) as f64
}

fn nibble(byte: u8, high: bool) -> i64 {
    if high {
        (byte >> 4) as i64
    } else {
        (byte & 15) as i64
    }
}

/// (scale, min) of sub-block s from the 12 packed K-quant scale bytes.
fn k_scale_min_ref(s: &[u8], j: usize) -> (i64, i64) {
    if j < 4 {
        ((s[j] & 63) as i64, (s[j + 4] & 63) as i64)
    } else {
        let sc = (s[j + 4] & 15) as i64 + 16 * (s[j - 4] >> 6) as i64;
        let mn = (s[j + 4] >> 4) as i64 + 16 * (s[j] >> 6) as i64;
        (sc, mn)
    }
}

/// Element `e` of block `b`: (value, magnitude), where the magnitude is the sum of the
/// absolute values of the terms the value is made of (for rounding bounds).
fn elem_ref(ty: GgmlType, b: &[u8], e: usize) -> (f64, f64) {
    let plain = |v: f64| (v, v.abs());
    match ty {
        GgmlType::F32 => plain(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
        GgmlType::F16 => plain(f16_ref(b, 0)),
        GgmlType::BF16 => plain(bf16_ref(b, 0)),
        GgmlType::Q4_0 => plain(f16_ref(b, 0) * (nibble(b[2 + e % 16], e >= 16) - 8) as f64),
        GgmlType::Q4_1 => {
            let (d, m) = (f16_ref(b, 0), f16_ref(b, 2));
            let t = d * nibble(b[4 + e % 16], e >= 16) as f64;
            (t + m, t.abs() + m.abs())
        }
        GgmlType::Q5_0 | GgmlType::Q5_1 => {
            let legacy1 = ty == GgmlType::Q5_1;
            let at = if legacy1 { 4 } else { 2 };
            let qh = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
            let q = nibble(b[at + 4 + e % 16], e >= 16) + 16 * ((qh >> e) & 1) as i64;
            let d = f16_ref(b, 0);
            if legacy1 {
                let (t, m) = (d * q as f64, f16_ref(b, 2));
                (t + m, t.abs() + m.abs())
            } else {
                plain(d * (q - 16) as f64)
            }
        }
        GgmlType::Q8_0 => plain(f16_ref(b, 0) * (b[2 + e] as i8) as f64),
        GgmlType::IQ4_NL => {
            // The format's codebook (ggml's `kvalues_iq4nl`), written out here again.
            const BOOK: [i64; 16] = [
                -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
            ];
            plain(f16_ref(b, 0) * BOOK[nibble(b[2 + e % 16], e >= 16) as usize] as f64)
        }
        GgmlType::IQ4_XS => {
            const BOOK: [i64; 16] = [
                -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
            ];
            let (s, l) = (e / 32, e % 32);
            let low = nibble(b[4 + s / 2], s % 2 == 1);
            let high = ((u16::from_le_bytes([b[2], b[3]]) >> (2 * s)) & 3) as i64;
            let q = BOOK[nibble(b[8 + 16 * s + l % 16], l >= 16) as usize];
            plain(f16_ref(b, 0) * ((low + 16 * high - 32) * q) as f64)
        }
        GgmlType::Q4_K | GgmlType::Q5_K => {
            let (d, dmin) = (f16_ref(b, 0), f16_ref(b, 2));
            let s = e / 32;
            let (sc, mn) = k_scale_min_ref(&b[4..16], s);
            let qs_at = if ty == GgmlType::Q4_K { 16 } else { 48 };
            let l = e % 32;
            let mut q = nibble(b[qs_at + 32 * (e / 64) + l], s % 2 == 1);
            if ty == GgmlType::Q5_K {
                q += 16 * ((b[16 + l] >> s) & 1) as i64;
            }
            let (t, m) = (d * (sc * q) as f64, dmin * mn as f64);
            (t - m, t.abs() + m.abs())
        }
        GgmlType::Q6_K => {
            let (n, r) = (e / 128, e % 128);
            let (k, l) = (r / 32, r % 32);
            let low = nibble(b[64 * n + 32 * (k % 2) + l], k >= 2);
            let high = ((b[128 + 32 * n + l] >> (2 * k)) & 3) as i64;
            let sc = b[192 + e / 16] as i8 as i64;
            plain(f16_ref(b, 208) * (sc * (low + 16 * high - 32)) as f64)
        }
        GgmlType::MXFP4 => {
            // e (the E8M0 scale 2^(e - 127)), then Q4_0's nibble order of FP4 (E2M1)
            // codes, written from the OCP format here: bit 3 the sign, bits 0..3 the
            // magnitude.
            const E2M1: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
            let code = nibble(b[1 + e % 16], e >= 16);
            let sign = if code >= 8 { -1.0 } else { 1.0 };
            plain(2f64.powi(b[0] as i32 - 127) * sign * E2M1[(code & 7) as usize])
        }
        GgmlType::Q2_K => {
            // scales[16] (scale in the low nibble, min in the high), qs[64], d, dmin:
            // the 2-bit quant of element 128h + 32j + l in bits 2j.. of qs[32h + l].
            let (h, j, l) = (e / 128, e % 128 / 32, e % 32);
            let q = ((b[16 + 32 * h + l] >> (2 * j)) & 3) as i64;
            let g = b[e / 16];
            let t = f16_ref(b, 80) * (nibble(g, false) * q) as f64;
            let m = f16_ref(b, 82) * nibble(g, true) as f64;
            (t - m, t.abs() + m.abs())
        }
        GgmlType::Q3_K => {
            // hmask[32], qs[64], scales[12], d: 2 low bits of element 128h + 32j + l
            // in bits 2j.. of qs[32h + l], its third bit in bit e/32 of hmask[l], 4
            // taken off where that bit is clear.
            let (h, j, l) = (e / 128, e % 128 / 32, e % 32);
            let low = ((b[32 + 32 * h + l] >> (2 * j)) & 3) as i64;
            let high = ((b[l] >> (e / 32)) & 1) as i64;
            let g = e / 16;
            let sc_low = nibble(b[96 + g % 8], g >= 8);
            let sc_high = ((b[104 + g % 4] >> (2 * (g / 4))) & 3) as i64;
            let q = low - 4 * (1 - high);
            plain(f16_ref(b, 108) * ((sc_low + 16 * sc_high - 32) * q) as f64)
        }
        _ => unreachable!("not a computable type"),
    }
}

/// A whole row through [`elem_ref`].
fn row_ref(ty: GgmlType, row: &[u8]) -> Vec<(f64, f64)> {
    let (bb, be) = (ty.block_bytes() as usize, ty.block_elems() as usize);
    row.chunks_exact(bb)
        .flat_map(|b| (0..be).map(move |e| elem_ref(ty, b, e)))
        .collect()
}

// ---- random data ---------------------------------------------------------------------

/// Offsets of the f16 scale fields in a block (patched to finite values).
fn f16_fields(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::F16
        | GgmlType::Q4_0
        | GgmlType::Q5_0
        | GgmlType::Q8_0
        | GgmlType::IQ4_NL
        | GgmlType::IQ4_XS => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        GgmlType::Q3_K => &[108],
        GgmlType::Q2_K => &[80, 82],
        _ => &[],
    }
}

/// Random bytes for `n_elems` of `ty`, with every float field finite (scales in ±0.1,
/// or up to 1 for MXFP4's powers of two; float elements in ±1).
fn make_row(ty: GgmlType, bytes: &[u8], floats: &[f32], n_elems: usize) -> Vec<u8> {
    let len = ty.bytes_for(n_elems as u64).unwrap() as usize;
    let mut row = bytes[..len].to_vec();
    let mut fl = floats.iter().cycle();
    for b in row.chunks_exact_mut(ty.block_bytes() as usize) {
        match ty {
            GgmlType::F32 => b.copy_from_slice(&fl.next().unwrap().to_le_bytes()),
            GgmlType::BF16 => {
                let v = half::bf16::from_f32(*fl.next().unwrap());
                b.copy_from_slice(&v.to_bits().to_le_bytes());
            }
            // An E8M0 scale of 2^-9..2^0, as the f16 scales.
            GgmlType::MXFP4 => b[0] = 118 + (fl.next().unwrap().abs() * 10.0) as u8,
            _ => {
                for &at in f16_fields(ty) {
                    let scale = if ty == GgmlType::F16 { 1.0 } else { 0.1 };
                    let v = f16::from_f32(fl.next().unwrap() * scale);
                    b[at..at + 2].copy_from_slice(&v.to_bits().to_le_bytes());
                }
            }
        }
    }
    row
}

fn ty_strategy() -> impl Strategy<Value = GgmlType> {
    (0..TYPES.len()).prop_map(|i| TYPES[i])
}

/// Columns: 1..=3 blocks of 256 for K-quants, 1..=12 blocks of 32 otherwise (and odd
/// widths for the float types).
fn cols_strategy(ty: GgmlType) -> BoxedStrategy<usize> {
    match ty.block_elems() {
        256 => (1usize..=3).prop_map(|n| n * 256).boxed(),
        1 => (1usize..=300).boxed(),
        _ => (1usize..=12).prop_map(|n| n * 32).boxed(),
    }
}

const MAX_BYTES: usize = 5 * 3 * 210 * 2;

fn f32_close(got: f32, want: f64, mag: f64) -> bool {
    (got as f64 - want).abs() <= 1e-6 * mag + 1e-30
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn dequantize_matches_layout_reading(
        (ty, cols) in ty_strategy().prop_flat_map(|t| (Just(t), cols_strategy(t))),
        bytes in prop::collection::vec(any::<u8>(), MAX_BYTES),
        floats in prop::collection::vec(-1.0f32..1.0, 64),
    ) {
        let row = make_row(ty, &bytes, &floats, cols);
        let mut got = vec![0f32; cols];
        dequantize_row(ty, &row, &mut got).unwrap();
        for (i, (g, (want, mag))) in got.iter().zip(row_ref(ty, &row)).enumerate() {
            prop_assert!(f32_close(*g, want, mag), "{ty} elem {i}: got {g}, want {want}");
        }
    }

    #[test]
    fn matmul_matches_f64_within_activation_quantization(
        (ty, cols) in ty_strategy().prop_flat_map(|t| (Just(t), cols_strategy(t))),
        rows in 1usize..=5,
        n_tokens in 1usize..=9,
        bytes in prop::collection::vec(any::<u8>(), MAX_BYTES),
        floats in prop::collection::vec(-1.0f32..1.0, 64),
        x_seed in prop::collection::vec(-1.0f32..1.0, 9 * 768),
        token_scale in prop::collection::vec(0.01f32..100.0, 9),
    ) {
        let w_rows: Vec<Vec<u8>> = (0..rows)
            .map(|r| make_row(ty, &bytes[r * 7..], &floats[r..], cols))
            .collect();
        let data = w_rows.concat();
        let w = QMatrix::new(ty, &data, rows, cols).unwrap();
        let x: Vec<f32> = (0..n_tokens * cols)
            .map(|i| x_seed[i % x_seed.len()] * token_scale[i / cols])
            .collect();
        let mut acts = QuantizedActs::new();
        quantize_acts(ty, &x, n_tokens, cols, &mut acts).unwrap();

        let format = ActFormat::for_weights(ty).unwrap();
        let act_block = format.block_elems();
        let mut outs = Vec::new();
        for backend in Backend::available() {
            let mut out = vec![f32::NAN; n_tokens * rows];
            backend.matmul_rows(&w, &acts, &mut out, 0..rows).unwrap();
            outs.push((backend.set(), out));
        }
        for r in 0..rows {
            let wr = row_ref(ty, &w_rows[r]);
            for t in 0..n_tokens {
                let xt = &x[t * cols..(t + 1) * cols];
                let exact: f64 = wr.iter().zip(xt).map(|((w, _), &x)| w * x as f64).sum();
                let mag: f64 = wr.iter().zip(xt).map(|((_, m), &x)| m * x.abs() as f64).sum();
                // |x - d·q| <= d/2 = amax/(2·127) per activation block, when quantized.
                let quant_bound: f64 = if act_block == 1 {
                    0.0
                } else {
                    wr.chunks(act_block).zip(xt.chunks(act_block)).map(|(wb, xb)| {
                        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
                        amax / (2.0 * 127.0) * wb.iter().map(|(w, _)| w.abs()).sum::<f64>()
                    }).sum()
                };
                let float_tol = 2e-5 * mag + 1e-30;
                // Against the activations as quantized, only float rounding remains.
                let xq = &dequantized(&acts)[t * cols..(t + 1) * cols];
                let exact_q: f64 = wr.iter().zip(xq).map(|((w, _), x)| w * x).sum();
                for (set, out) in &outs {
                    let got = out[t * rows + r] as f64;
                    prop_assert!(
                        (got - exact_q).abs() <= float_tol,
                        "{ty} {set:?} row {r} token {t}: got {got}, with quantized acts {exact_q}"
                    );
                    prop_assert!(
                        (got - exact).abs() <= 1.001 * quant_bound + float_tol,
                        "{ty} {set:?} row {r} token {t}: got {got}, exact {exact}, bound {quant_bound}"
                    );
                }
                let base = outs[0].1[t * rows + r] as f64;
                for (set, out) in &outs[1..] {
                    let got = out[t * rows + r] as f64;
                    prop_assert!(
                        (got - base).abs() <= float_tol,
                        "{ty} {set:?} vs portable row {r} token {t}: {got} vs {base}"
                    );
                }
            }
        }
    }
}

#[test]
fn this_cpu_runs_its_fastest_backend() {
    // The backend comparisons above are only meaningful where AVX2 runs; say so loudly
    // on a CPU that has it but where detection would be broken.
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        let vnni = std::is_x86_feature_detected!("avx512vnni")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512bw");
        let want = if vnni {
            KernelSet::Avx512Vnni
        } else {
            KernelSet::Avx2
        };
        assert_eq!(Backend::available().len(), if vnni { 3 } else { 2 });
        assert_eq!(Backend::active().set(), want);
    }
    // NEON is baseline on aarch64: the comparisons above run it beside the portable one.
    #[cfg(target_arch = "aarch64")]
    {
        let sets: Vec<KernelSet> = Backend::available().iter().map(|b| b.set()).collect();
        assert_eq!(sets, [KernelSet::Portable, KernelSet::Neon]);
        assert_eq!(Backend::active().set(), KernelSet::Neon);
    }
}

proptest! {
    #[test]
    fn activation_quantization_is_within_half_a_step(
        x in prop::collection::vec(-50.0f32..50.0, 512),
        zero_block in any::<bool>(),
    ) {
        let mut x = x;
        if zero_block {
            x[..256].fill(0.0);
        }
        let mut acts = QuantizedActs::new();
        quantize_acts(GgmlType::Q4_0, &x, 2, 256, &mut acts).unwrap();
        let q4_0 = acts.q8_blocks().to_vec();
        prop_assert_eq!(q4_0.len(), 16);
        for (b, xb) in q4_0.iter().zip(x.chunks(32)) {
            let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
            let sum: i32 = b.qs.iter().map(|&q| q as i32).sum();
            prop_assert_eq!(b.isum, sum);
            prop_assert_eq!(b.d, amax / 127.0);
            prop_assert_eq!(b.s, b.d * sum as f32);
            for (&q, &v) in b.qs.iter().zip(xb) {
                prop_assert!((v - b.d * q as f32).abs() <= b.d * 0.5001 + 1e-30);
            }
        }
        // Q4_1 pairs with the same blocks (as ggml's Q8_1, which has the sum too).
        quantize_acts(GgmlType::Q4_1, &x, 2, 256, &mut acts).unwrap();
        prop_assert_eq!(acts.q8_blocks(), &q4_0[..]);
        quantize_acts(GgmlType::Q6_K, &x, 2, 256, &mut acts).unwrap();
        prop_assert_eq!(acts.q8k_blocks().len(), 2);
        for (b, xb) in acts.q8k_blocks().iter().zip(x.chunks(256)) {
            for (g, s) in b.bsums.iter().enumerate() {
                let want: i32 = b.qs[16 * g..16 * g + 16].iter().map(|&q| q as i32).sum();
                prop_assert_eq!(*s as i32, want);
            }
            for (&q, &v) in b.qs.iter().zip(xb) {
                prop_assert!((v - b.d * q as f32).abs() <= b.d * 0.5001 + 1e-30);
            }
        }
    }
}

/// A value for the quantizers: mostly ordinary, sometimes exact halves (rounding ties),
/// any bit pattern (NaN, infinities, subnormals) or zero.
fn quantizer_input() -> impl Strategy<Value = f32> {
    prop_oneof![
        6 => -1000.0f32..1000.0,
        2 => (-64i32..64).prop_map(|k| k as f32 + 0.5),
        1 => any::<u32>().prop_map(f32::from_bits),
        1 => Just(0.0f32),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// The vector quantizers run between matmuls on the hot path; they must give the
    /// portable quantizer's exact bits, or results would depend on the CPU.
    #[test]
    fn every_backend_quantizes_activations_to_the_same_bits(
        x in prop::collection::vec(quantizer_input(), 512),
    ) {
        let bits = |acts: &QuantizedActs| -> Vec<u32> {
            let mut v: Vec<u32> = acts.f32_values().iter().map(|x| x.to_bits()).collect();
            for b in acts.q8_blocks() {
                v.extend([b.d.to_bits(), b.s.to_bits(), b.isum as u32]);
                v.extend(b.qs.iter().map(|&q| q as u8 as u32));
            }
            for b in acts.q8k_blocks() {
                v.push(b.d.to_bits());
                v.extend(b.qs.iter().map(|&q| q as u8 as u32));
                v.extend(b.bsums.iter().map(|&q| q as u16 as u32));
            }
            v
        };
        // Runs on scoped threads, in reverse order: quantization spread over threads
        // gives the same blocks and scale tables as on one.
        let threads = |n: usize, f: &(dyn Fn(usize) + Sync)| {
            std::thread::scope(|s| {
                for i in (0..n).rev() {
                    s.spawn(move || f(i));
                }
            })
        };
        // 2 rows of 256 (too few blocks to spread), and the values 8 times over as 16
        // rows (128 blocks of 32, spread over several runs).
        let big: Vec<f32> = x.iter().cycle().take(8 * x.len()).copied().collect();
        for (ty, rows) in [GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q4_K]
            .into_iter()
            .flat_map(|ty| [(ty, 2), (ty, 16)])
        {
            let x = if rows == 2 { &x[..] } else { &big[..] };
            let cols = 256;
            let mut want = QuantizedActs::new();
            Backend::portable()
                .quantize_acts(ty, x, rows, cols, &mut want, &serial)
                .unwrap();
            for backend in Backend::available() {
                let mut got = QuantizedActs::new();
                backend.quantize_acts(ty, x, rows, cols, &mut got, &serial).unwrap();
                prop_assert_eq!(bits(&got), bits(&want), "{:?} on {}", backend, ty);
                let mut spread = QuantizedActs::new();
                backend
                    .quantize_acts(ty, x, rows, cols, &mut spread, &threads)
                    .unwrap();
                prop_assert_eq!(bits(&spread), bits(&want), "{:?} on {} spread", backend, ty);
                let table_bits = |t: &[f32]| t.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                prop_assert_eq!(table_bits(spread.tile_scales()), table_bits(want.tile_scales()));
                // The same values computed on the way in, a range at a time, on one
                // thread and spread: the same blocks, table and f32 values.
                let asked = std::sync::Mutex::new(Vec::new());
                let source = |start: usize, dst: &mut [f32]| {
                    asked.lock().unwrap().push(start..start + dst.len());
                    dst.copy_from_slice(&x[start..start + dst.len()]);
                };
                for (par, how) in [(&serial as ParallelFor, "serial"), (&threads, "spread")] {
                    asked.lock().unwrap().clear();
                    let mut computed = QuantizedActs::new();
                    backend
                        .quantize_computed(ty, &source, rows, cols, &mut computed, par)
                        .unwrap();
                    prop_assert_eq!(bits(&computed), bits(&want), "{:?} on {} computed {}", backend, ty, how);
                    prop_assert_eq!(table_bits(computed.tile_scales()), table_bits(want.tile_scales()));
                    // Every value was asked for exactly once.
                    let mut ranges = asked.lock().unwrap().clone();
                    ranges.sort_by_key(|r| r.start);
                    let mut at = 0;
                    for r in &ranges {
                        prop_assert_eq!(r.start, at);
                        at = r.end;
                    }
                    prop_assert_eq!(at, x.len());
                }
            }
        }
    }
}
