//! Quantized activations as the kernels use them, for checking kernels in f64.

// Each test binary that includes `common` uses its own part of it.
#![allow(dead_code)]

use llamay_engine::internals::{ActFormat, QuantizedActs};

/// Every activation as the kernels see it (`d·q` per block), token after token.
pub fn dequantized(acts: &QuantizedActs) -> Vec<f64> {
    fn expand<const L: usize>(d: f32, qs: &[i8; L]) -> impl Iterator<Item = f64> + '_ {
        qs.iter().map(move |&q| d as f64 * q as f64)
    }
    match acts.format().unwrap() {
        ActFormat::F32 => acts.f32_values().iter().map(|&v| v as f64).collect(),
        ActFormat::Q8 => acts
            .q8_blocks()
            .iter()
            .flat_map(|b| expand(b.d, &b.qs))
            .collect(),
        ActFormat::Q8K => acts
            .q8k_blocks()
            .iter()
            .flat_map(|b| expand(b.d, &b.qs))
            .collect(),
    }
}
