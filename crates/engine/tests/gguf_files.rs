//! The GGUF reader on real files: every tiny reference model and both real test
//! models open, and what they say matches the reference README's tables.

use std::collections::BTreeMap;

use llamay_engine::{GgmlType, GgufFile, Value};
use llamay_testdata::{real_model, tiny_models, RealModel};

fn type_histogram(f: &GgufFile) -> BTreeMap<String, usize> {
    let mut h = BTreeMap::new();
    for t in f.tensors() {
        *h.entry(t.ggml_type.name().to_string()).or_insert(0) += 1;
    }
    h
}

#[test]
fn every_tiny_model_opens_with_the_documented_tensor_types() {
    // From shared/ref/README.md §3, "Types".
    let expected: &[(&str, &[(&str, usize)])] = &[
        ("tiny-llama-F32", &[("F32", 21)]),
        ("tiny-llama-Q4_0", &[("Q4_0", 16), ("F32", 5)]),
        ("tiny-qwen2-Q8_0", &[("Q8_0", 15), ("F32", 11)]),
        ("tiny-qwen2-Q5_0", &[("Q5_0", 15), ("F32", 11)]),
        ("tiny-qwen3-BF16", &[("BF16", 16), ("F32", 9)]),
        ("tiny-qwen3-Q4_1", &[("Q4_1", 16), ("F32", 9)]),
        ("tiny-gemma2-F16", &[("F16", 15), ("F32", 9)]),
        ("tiny-gemma2-Q5_1", &[("Q5_1", 15), ("F32", 9)]),
        ("tiny-gemma3-Q4_K", &[("Q4_K", 29), ("F32", 25)]),
        ("tiny-gemma3-Q6_K", &[("Q6_K", 29), ("F32", 25)]),
        ("tiny-phi3-Q5_K", &[("Q5_K", 10), ("F32", 5)]),
        ("tiny-phi3-Q4_K_M", &[("Q4_K", 7), ("Q6_K", 3), ("F32", 5)]),
    ];
    let files = tiny_models();
    assert_eq!(files.len(), expected.len());
    for (stem, types) in expected {
        let path = files
            .iter()
            .find(|p| p.file_stem().unwrap() == *stem)
            .unwrap_or_else(|| panic!("{stem} missing"));
        let f = GgufFile::open(path).unwrap_or_else(|e| panic!("{stem}: {e}"));
        let want: BTreeMap<String, usize> =
            types.iter().map(|(t, n)| (t.to_string(), *n)).collect();
        assert_eq!(type_histogram(&f), want, "{stem}");
        assert_eq!(
            f.get_u32(&f.arch_key("embedding_length").unwrap()).unwrap(),
            256
        );
        assert_eq!(
            f.array_strings("tokenizer.ggml.tokens").unwrap().count(),
            512
        );
        assert_eq!(f.file_size(), std::fs::metadata(path).unwrap().len());
        // Every tensor's bytes are inside the file and of the declared size.
        for t in f.tensors() {
            assert_eq!(f.tensor_data(t).len() as u64, t.size);
        }
    }
}

#[test]
fn tiny_llama_f32_weights_are_readable_numbers() {
    let path = tiny_models()
        .into_iter()
        .find(|p| p.ends_with("tiny-llama-F32.gguf"))
        .unwrap();
    let f = GgufFile::open(path).unwrap();
    let t = f.require_tensor("token_embd.weight").unwrap();
    assert_eq!(t.dims, vec![256, 512]);
    assert_eq!(t.ggml_type, GgmlType::F32);
    let data = f.tensor_data(t);
    let vals: Vec<f32> = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    // N(0, 0.02) weights: finite, centred, with the documented spread.
    let mean = vals.iter().map(|&v| v as f64).sum::<f64>() / vals.len() as f64;
    let var = vals.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / vals.len() as f64;
    assert!(vals.iter().all(|v| v.is_finite()));
    assert!(mean.abs() < 1e-3, "mean {mean}");
    assert!((var.sqrt() - 0.02).abs() < 2e-3, "std {}", var.sqrt());
}

#[test]
fn real_models_open_with_their_documented_facts() {
    let smol = GgufFile::open(real_model(RealModel::SmolLM2)).unwrap();
    assert_eq!(smol.architecture().unwrap(), "llama");
    assert_eq!(
        smol.array_strings("tokenizer.ggml.tokens").unwrap().count(),
        49152
    );
    assert_eq!(smol.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
    assert_eq!(smol.get_str("tokenizer.ggml.pre").unwrap(), "smollm");
    assert!(smol.opt_str("tokenizer.chat_template").unwrap().is_some());
    assert!(smol.tensors().len() > 200);

    let gemma = GgufFile::open(real_model(RealModel::Gemma3)).unwrap();
    assert_eq!(gemma.architecture().unwrap(), "gemma3");
    assert_eq!(
        gemma
            .array_strings("tokenizer.ggml.tokens")
            .unwrap()
            .count(),
        262144
    );
    assert_eq!(gemma.get_str("tokenizer.ggml.model").unwrap(), "llama");
    assert_eq!(
        gemma.array_f32("tokenizer.ggml.scores").unwrap().len(),
        262144
    );
    assert!(gemma.opt_str("tokenizer.chat_template").unwrap().is_none());
    let embd = gemma.require_tensor("token_embd.weight").unwrap();
    assert_eq!(embd.ggml_type, GgmlType::Q8_0);
    assert!(matches!(
        gemma.get("general.architecture"),
        Some(Value::String(s)) if s == b"gemma3"
    ));
}
