//! The tiny models' weights, quantized by llama.cpp from the same float originals per
//! architecture: dequantizing a quantized file must land near its unquantized (or more
//! finely quantized) sibling, with the RMS error each format's step size implies (measured: Q4_0 0.085, Q4_1 0.078, Q4_K 0.074,
//! Q5_0 0.043, Q5_1 0.038), and a
//! misread layout must not. Also checks the matmul kernels on llama.cpp-made blocks.

use llamay_engine::internals::{dequantize_row, quantize_acts, QMatrix, QuantizedActs};
use llamay_engine::{Backend, GgmlType, GgufFile, TensorInfo};
use llamay_testdata::ref_path;

mod common;
use common::acts::dequantized;

fn open(name: &str) -> GgufFile {
    GgufFile::open(ref_path(&format!("tiny/{name}.gguf"))).expect("tiny model opens")
}

fn dequantize(f: &GgufFile, t: &TensorInfo) -> Vec<f32> {
    let mut out = vec![0f32; t.n_elements() as usize];
    dequantize_row(t.ggml_type, f.tensor_data(t), &mut out).expect("dequantizes");
    out
}

fn rms(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x * x, n + 1));
    (s / n as f64).sqrt()
}

/// RMS of (test − reference) relative to the RMS of the reference.
fn rel_rms(test: &[f32], reference: &[f32]) -> f64 {
    let err = rms(test.iter().zip(reference).map(|(a, b)| (*a - *b) as f64));
    err / rms(reference.iter().map(|&v| v as f64))
}

/// The same values read with the two 16-element halves of every 32-element group
/// swapped: what confusing low and high nibbles (or sub-blocks) would give.
fn misread(v: &[f32]) -> Vec<f32> {
    v.chunks(32)
        .flat_map(|c| c[16..].iter().chain(&c[..16]).copied())
        .collect()
}

/// Expected relative RMS error band of a format on Gaussian weights. A b-bit block
/// format with step ≈ (block range)/(2^b − 1) has an RMS error near step/√12; the bands
/// leave a factor of about 2 either way.
fn band(ty: GgmlType) -> (f64, f64) {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q4_K => (0.04, 0.15),
        GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q5_K => (0.02, 0.075),
        GgmlType::Q6_K => (0.01, 0.04),
        GgmlType::Q8_0 => (0.002, 0.01),
        other => panic!("no band for {other}"),
    }
}

/// Compares every quantized 2-D tensor of `quant` with the same tensor of `reference`
/// and returns how many were compared.
fn compare(quant: &str, reference: &str, ref_is_exact: bool) -> usize {
    let (q, r) = (open(quant), open(reference));
    let mut compared = 0;
    for t in q
        .tensors()
        .iter()
        .filter(|t| t.dims.len() == 2 && t.ggml_type != GgmlType::F32)
    {
        let rt = r.require_tensor(&t.name).expect("sibling has the tensor");
        assert_eq!(rt.dims, t.dims, "{}", t.name);
        let (qv, rv) = (dequantize(&q, t), dequantize(&r, rt));
        let err = rel_rms(&qv, &rv);
        let (lo, hi) = band(t.ggml_type);
        // Against a coarser-quantized sibling, its own error adds (independently).
        let (lo, hi) = if ref_is_exact {
            (lo, hi)
        } else {
            (lo, hi * 1.5)
        };
        assert!(
            (lo..hi).contains(&err),
            "{quant} {} ({}) vs {reference}: relative RMS {err:.4} outside {lo}..{hi}",
            t.name,
            t.ggml_type
        );
        eprintln!(
            "{quant} {} ({}): relative RMS {err:.4}",
            t.name, t.ggml_type
        );
        let wrong = rel_rms(&misread(&qv), &rv);
        assert!(wrong > 0.5, "a misread layout went unnoticed: {wrong}");
        compared += 1;
    }
    compared
}

#[test]
fn q4_0_against_f32_originals() {
    assert_eq!(compare("tiny-llama-Q4_0", "tiny-llama-F32", true), 16);
}

#[test]
fn q4_1_against_bf16() {
    assert_eq!(compare("tiny-qwen3-Q4_1", "tiny-qwen3-BF16", true), 16);
}

#[test]
fn q5_1_against_f16() {
    assert_eq!(compare("tiny-gemma2-Q5_1", "tiny-gemma2-F16", true), 15);
}

#[test]
fn finer_quantizations_as_references() {
    // No float sibling exists for these: the finer format stands in for the original.
    assert_eq!(compare("tiny-qwen2-Q5_0", "tiny-qwen2-Q8_0", false), 15);
    assert_eq!(compare("tiny-gemma3-Q4_K", "tiny-gemma3-Q6_K", false), 29);
    assert_eq!(compare("tiny-phi3-Q4_K_M", "tiny-phi3-Q5_K", false), 10);
}

/// Every quantized matrix of every tiny model, through every backend, against f64
/// arithmetic on its dequantized weights and the quantized activations.
#[test]
fn matmul_on_llama_cpp_blocks() {
    let mut checked = 0;
    for path in llamay_testdata::tiny_models() {
        let f = GgufFile::open(&path).unwrap();
        for t in f.tensors().iter().filter(|t| t.dims.len() == 2) {
            let (cols, rows) = (t.dims[0] as usize, t.dims[1] as usize);
            let w = QMatrix::new(t.ggml_type, f.tensor_data(t), rows, cols).unwrap();
            let wf = dequantize(&f, t);
            let n_tokens = 5;
            let x: Vec<f32> = (0..n_tokens * cols)
                .map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0)
                .collect();
            let mut acts = QuantizedActs::new();
            quantize_acts(t.ggml_type, &x, n_tokens, cols, &mut acts).unwrap();
            let xq = dequantized(&acts);
            for backend in Backend::available() {
                let mut out = vec![0f32; n_tokens * rows];
                backend.matmul_rows(&w, &acts, &mut out, 0..rows).unwrap();
                for tok in 0..n_tokens {
                    let xt = &xq[tok * cols..(tok + 1) * cols];
                    for r in (0..rows).step_by(7) {
                        let wr = &wf[r * cols..(r + 1) * cols];
                        let want: f64 = wr.iter().zip(xt).map(|(&w, &x)| w as f64 * x).sum();
                        let mag: f64 = wr.iter().zip(xt).map(|(&w, &x)| (w as f64 * x).abs()).sum();
                        let got = out[tok * rows + r] as f64;
                        assert!(
                            (got - want).abs() <= 1e-4 * mag + 1e-6,
                            "{} {} {:?} row {r} token {tok}: {got} vs {want}",
                            path.display(),
                            t.name,
                            backend.set()
                        );
                    }
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 150, "only {checked} matrices");
}
