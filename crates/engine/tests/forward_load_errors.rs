//! Loading refuses malformed or unsupported models with an error that names the
//! problem (key, tensor, architecture), never a panic.

mod common;

use common::gguf_writer::{Gguf, Tensor, V};
use llamay_engine::{GgufError, GgufFile, LoadOptions, Model, ModelError};

fn hparams(arch: &'static str) -> Vec<(&'static str, V)> {
    vec![
        ("general.architecture", V::Str(arch)),
        ("llama.block_count", V::U32(1)),
        ("llama.context_length", V::U32(64)),
        ("llama.embedding_length", V::U32(32)),
        ("llama.feed_forward_length", V::U32(64)),
        ("llama.attention.head_count", V::U32(2)),
        ("llama.attention.head_count_kv", V::U32(1)),
        ("llama.attention.layer_norm_rms_epsilon", V::F32(1e-5)),
        ("llama.vocab_size", V::U32(8)),
    ]
}

fn load(kv: Vec<(&'static str, V)>, tensors: Vec<Tensor>, data_len: usize) -> ModelError {
    let g = Gguf {
        kv,
        tensors,
        data_len,
        ..Gguf::default()
    };
    let file = GgufFile::from_bytes(g.build()).expect("well-formed GGUF");
    Model::from_gguf(file, &LoadOptions::default()).expect_err("must not load")
}

#[test]
fn unsupported_architecture() {
    let e = load(vec![("general.architecture", V::Str("mamba"))], vec![], 0);
    assert!(
        matches!(&e, ModelError::UnsupportedArch(a) if a == "mamba"),
        "{e}"
    );
    assert!(e.to_string().contains("mamba"));
}

#[test]
fn missing_hyper_parameter_names_the_key() {
    let mut kv = hparams("llama");
    kv.retain(|(k, _)| *k != "llama.block_count");
    let e = load(kv, vec![], 0);
    assert!(
        matches!(&e, ModelError::Gguf(GgufError::MissingKey { key }) if key == "llama.block_count"),
        "{e}"
    );
    assert!(e.to_string().contains("llama.block_count"));
}

#[test]
fn inconsistent_heads_and_zero_sizes() {
    let mut kv = hparams("llama");
    kv.push(("llama.attention.head_count_kv", V::U32(3)));
    kv.remove(6);
    assert!(matches!(load(kv, vec![], 0), ModelError::Invalid(_)));
    let mut kv = hparams("llama");
    kv[4] = ("llama.feed_forward_length", V::U32(0));
    assert!(matches!(load(kv, vec![], 0), ModelError::Invalid(_)));
    let mut kv = hparams("llama");
    kv[5] = ("llama.attention.head_count", V::Str("two"));
    assert!(matches!(
        load(kv, vec![], 0),
        ModelError::Gguf(GgufError::WrongType { .. })
    ));
}

#[test]
fn missing_wrong_shaped_or_uncomputable_tensors() {
    let e = load(hparams("llama"), vec![], 0);
    assert!(
        matches!(&e, ModelError::Gguf(GgufError::MissingTensor { name }) if name == "token_embd.weight"),
        "{e}"
    );
    let embd = |dims: Vec<u64>, type_id: u32| Tensor {
        name: "token_embd.weight",
        dims,
        type_id,
        offset: 0,
    };
    // [embd, vocab] = [32, 8] expected; [32, 9] is refused.
    let e = load(hparams("llama"), vec![embd(vec![32, 9], 0)], 32 * 9 * 4);
    assert!(
        matches!(&e, ModelError::Invalid(m) if m.contains("token_embd")),
        "{e}"
    );
    // IQ2_XXS (id 16): 256-element blocks of 66 bytes; 32 columns is not even a block,
    // so use 256 columns in a file claiming embedding 256.
    let mut kv = hparams("llama");
    kv[3] = ("llama.embedding_length", V::U32(256));
    let e = load(kv, vec![embd(vec![256, 8], 16)], 66 * 8);
    assert!(
        matches!(&e, ModelError::UnsupportedType { tensor, .. } if tensor == "token_embd.weight"),
        "{e}"
    );
}

#[test]
fn bad_rope_scaling_is_refused_by_name() {
    for (key, value, says) in [
        (
            "llama.rope.scaling.type",
            V::Str("ntk"),
            "rope.scaling.type \"ntk\"",
        ),
        (
            "llama.rope.scaling.factor",
            V::F32(-2.0),
            "rope.scaling.factor -2",
        ),
        (
            "llama.rope.scaling.factor",
            V::F32(f32::NAN),
            "rope.scaling.factor NaN",
        ),
        (
            "llama.rope.scaling.attn_factor",
            V::F32(f32::INFINITY),
            "attn_factor inf",
        ),
    ] {
        let mut kv = hparams("llama");
        kv.push((key, value));
        let e = load(kv, vec![], 0);
        assert!(matches!(&e, ModelError::Invalid(_)), "{key}: {e}");
        assert!(e.to_string().contains(says), "{key}: {e}");
    }
}

/// The tiny file of `name` (scripts/make-dense-models) with the name `from` (a key or
/// tensor name in its header) renamed to `to`, of the same length: what is missing or
/// renamed is all that differs from a file that loads.
fn renamed(name: &str, from: &str, to: &str) -> ModelError {
    assert_eq!(from.len(), to.len());
    let mut bytes = std::fs::read(llamay_testdata::dense_model(name)).unwrap();
    let at = bytes
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .unwrap_or_else(|| panic!("{from} is in {name}"));
    bytes[at..at + to.len()].copy_from_slice(to.as_bytes());
    let file = GgufFile::from_bytes(bytes).expect("well-formed GGUF");
    Model::from_gguf(file, &LoadOptions::default()).expect_err("must not load")
}

/// Gemma 4 and GLM-4 files missing a tensor or key of their own are refused naming it.
#[test]
fn gemma4_and_glm4_name_what_is_missing() {
    let missing = |e: &ModelError, want: &str| {
        assert!(
            matches!(e, ModelError::Gguf(GgufError::MissingTensor { name }) if name == want),
            "{e}"
        );
    };
    let e = renamed(
        "gemma4-F32",
        "blk.1.inp_gate.weight",
        "blk.1.inp_gatX.weight",
    );
    missing(&e, "blk.1.inp_gate.weight");
    let e = renamed("gemma4-F32", "per_layer_token_embd", "per_layer_token_embX");
    missing(&e, "per_layer_token_embd.weight");
    // Without the key, every layer has a cache of its own: the last ones lack keys.
    let e = renamed("gemma4-F32", "shared_kv_layers", "shared_kv_layerX");
    missing(&e, "blk.4.attn_k.weight");
    let key = "gemma4.attention.sliding_window_pattern";
    let e = renamed("gemma4-F32", key, "gemma4.attention.sliding_window_patterX");
    assert!(
        matches!(&e, ModelError::Gguf(GgufError::MissingKey { key: k }) if k == key),
        "{e}"
    );
    // The window's key comes first in the file, before the flags' (whose name it
    // begins).
    let key = "gemma4.attention.sliding_window";
    let e = renamed("gemma4-F32", key, "gemma4.attention.sliding_windoX");
    assert!(
        matches!(&e, ModelError::Gguf(GgufError::MissingKey { key: k }) if k == key),
        "{e}"
    );
    let e = renamed("glm4-F32", "blk.1.post_ffw_norm", "blk.1.post_ffw_norX");
    missing(&e, "blk.1.post_ffw_norm.weight");
}
