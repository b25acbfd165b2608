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
