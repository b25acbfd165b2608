//! Bit-exactness of `dequantize_row` with ggml's `dequantize_row_*`, on every 2-D tensor
//! of the tiny models (the 11 types they hold, 202 tensors; quant_ggml_dequant.rs checks
//! the others against ggml itself).
//!
//! The expected values are fingerprints of gguf-py 0.19.0's `gguf.quants.dequantize`
//! output (which shared/ref/README.md §5 reports bit-identical to ggml), computed once
//! with numpy as: per tensor `th = Σ_i bits(v_i) · (2i + 1)`, per file
//! `h = Σ_k (k + 1) · th_k` over the 2-D tensors in table order, all mod 2^64. Any
//! changed bit of any value changes the fingerprint.

use llamay_engine::internals::dequantize_row;
use llamay_engine::GgufFile;
use llamay_testdata::ref_path;

const GGUF_PY_FINGERPRINTS: [(&str, usize, u64); 12] = [
    ("tiny-gemma2-F16", 15, 0xffd1200836b9c000),
    ("tiny-gemma2-Q5_1", 15, 0xf6c0b50d7b693100),
    ("tiny-gemma3-Q4_K", 29, 0x7269aa8061455e60),
    ("tiny-gemma3-Q6_K", 29, 0xc50ba9a4b3d353dc),
    ("tiny-llama-F32", 16, 0x3018145a98e8f722),
    ("tiny-llama-Q4_0", 16, 0x85caabd1d59be000),
    ("tiny-phi3-Q4_K_M", 10, 0x0324950b6ea22698),
    ("tiny-phi3-Q5_K", 10, 0x796d68ed4a961800),
    ("tiny-qwen2-Q5_0", 15, 0x609f8a3760b22c00),
    ("tiny-qwen2-Q8_0", 15, 0x28fe5b4704ccc080),
    ("tiny-qwen3-BF16", 16, 0x180ca5a3691b0000),
    ("tiny-qwen3-Q4_1", 16, 0x3251b981e0e69600),
];

fn fingerprint(values: &[f32]) -> u64 {
    values.iter().enumerate().fold(0u64, |h, (i, v)| {
        h.wrapping_add((v.to_bits() as u64).wrapping_mul(2 * i as u64 + 1))
    })
}

#[test]
fn dequantization_is_bit_identical_to_ggml() {
    for (name, n_tensors, want) in GGUF_PY_FINGERPRINTS {
        let f = GgufFile::open(ref_path(&format!("tiny/{name}.gguf"))).unwrap();
        let mut h = 0u64;
        let mut k = 0u64;
        for t in f.tensors().iter().filter(|t| t.dims.len() == 2) {
            let mut v = vec![0f32; t.n_elements() as usize];
            dequantize_row(t.ggml_type, f.tensor_data(t), &mut v).unwrap();
            k += 1;
            h = h.wrapping_add(k.wrapping_mul(fingerprint(&v)));
        }
        assert_eq!(k as usize, n_tensors, "{name}");
        assert_eq!(h, want, "{name}: dequantized values differ from ggml's");
    }
}
