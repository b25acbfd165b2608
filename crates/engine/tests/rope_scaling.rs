//! RoPE scaling as llama.cpp reads it from a GGUF (linear, none, YaRN, Llama 3's
//! `rope_freqs`, Phi-3's LongRoPE long and short factors): the tiny models of
//! shared/ref with scaling metadata added (`scripts/make-rope-variants`) against
//! llama.cpp's logits for the same files (`scripts/rope-reference`,
//! tests/data/rope_scaling.json), at positions mostly past the original context.

use std::path::Path;

use llamay_engine::{BatchItem, KvType, LoadOptions, LogitsWanted, Model};
use serde_json::Value;
use sha2::{Digest, Sha256};

mod common;
use common::reference::{floats, ids};

/// Table A's tolerance (shared/ref/README.md §6) by the base file's weight type.
fn atol(variant: &str) -> f32 {
    if variant.starts_with("llama-") {
        2e-3 // F32 weights
    } else {
        7.5e-2 // quantized
    }
}

/// The file each variant was made from, unscaled.
fn base_of(variant: &str) -> &'static str {
    match variant.split('-').next().unwrap() {
        "llama" => "tiny/tiny-llama-F32.gguf",
        "qwen2" => "tiny/tiny-qwen2-Q8_0.gguf",
        "phi3" => "tiny/tiny-phi3-Q5_K.gguf",
        other => panic!("no base model for {other}"),
    }
}

fn sha256_hex(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every logit of `model` on `tokens`, fed in one step from an empty f16 cache (as
/// llama.cpp was run).
fn logits_of(model: &Path, n_ctx: usize, tokens: &[u32]) -> Vec<Vec<f32>> {
    let model = Model::load(
        model,
        &LoadOptions {
            n_threads: Some(2),
            n_ctx: Some(n_ctx),
            kv_type: KvType::F16,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", model.display()));
    let mut seq = model.new_sequence();
    let out = model
        .forward(&mut [BatchItem {
            seq: &mut seq,
            tokens,
            want_logits: LogitsWanted::All,
        }])
        .unwrap();
    (0..tokens.len()).map(|p| out[0].row(p).to_vec()).collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn scaled_rope_matches_llama_cpp() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/rope_scaling.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 7, "every variant and both LongRoPE sizes");
    for case in cases {
        let variant = case["variant"].as_str().unwrap();
        let n_ctx = case["n_ctx"].as_u64().unwrap() as usize;
        let what = format!("{variant} (n_ctx {n_ctx})");
        let file = llamay_testdata::rope_variant(variant);
        assert_eq!(
            sha256_hex(&file),
            case["file_sha256"].as_str().unwrap(),
            "{what}: {} is not the file the reference was made from \
             (rerun scripts/rope-reference after changing scripts/make-rope-variants)",
            file.display()
        );
        let tokens = ids(&case["token_ids"]);
        let ours = logits_of(&file, n_ctx, &tokens);
        let unscaled = logits_of(&llamay_testdata::ref_path(base_of(variant)), n_ctx, &tokens);
        // LongRoPE with the other factors: the long ones when the context allows more
        // than the original 256 positions (the short case's prompt fits in both).
        let other_factors =
            (variant == "phi3-longrope" && n_ctx <= 256).then(|| logits_of(&file, 512, &tokens));
        let tol = atol(variant);
        let (mut worst, mut scaling_effect, mut wrong_factors) = (0f32, 0f32, 0f32);
        for p in case["positions"].as_array().unwrap() {
            let pos = p["pos"].as_u64().unwrap() as usize;
            let want = floats(&p["logits"]);
            let d = max_diff(&ours[pos], &want);
            assert!(
                d <= tol,
                "{what}: position {pos}: max |logit - llama.cpp's| {d} > {tol}"
            );
            worst = worst.max(d);
            scaling_effect = scaling_effect.max(max_diff(&unscaled[pos], &want));
            if let Some(o) = &other_factors {
                wrong_factors = wrong_factors.max(max_diff(&o[pos], &want));
            }
        }
        if other_factors.is_some() {
            assert!(
                wrong_factors > 3.0 * tol,
                "{what}: the long factors come as close ({wrong_factors}): the choice is untested"
            );
        }
        // The check can fail: ignoring the scaling would miss by several times the
        // tolerance (except where llama.cpp itself ignores it: type none).
        if variant == "llama-none" {
            assert!(
                scaling_effect <= tol,
                "{what}: type none must not scale ({scaling_effect})"
            );
        } else {
            assert!(
                scaling_effect > 3.0 * tol,
                "{what}: the unscaled model is as close ({scaling_effect}), so this case \
                 would not catch a scaling ignored"
            );
        }
        eprintln!("{what}: max diff {worst:.5} (unscaled would be {scaling_effect:.3})");
    }
}
