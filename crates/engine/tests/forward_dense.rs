//! Dense families with graphs of their own in llama.cpp (Gemma 1, SmolLM3 with its
//! RoPE-less fourth layers, Mistral 3's text model with YaRN's own keys and the
//! attention temperature, GLM-4 with its partial RoPE and fused gate/up, Gemma 4 with
//! shared-KV layers, per-layer inputs and heads of two sizes) against llama.cpp: tiny random-weight files from
//! `scripts/make-dense-models`, logits from `scripts/dense-reference`
//! (tests/data/dense_families.json), compared as shared/ref/README.md §6 table A says
//! (every prompt position, every logit of the last, 16 teacher-forced greedy steps).

use serde_json::Value;

mod common;
use common::families::{check_batches, check_families};

const REMAKE: &str = "scripts/dense-reference";

fn reference() -> Value {
    common::families::reference("dense_families.json")
}

#[test]
fn dense_families_match_llama_cpp() {
    let families = ["gemma", "smollm3", "mistral3", "glm4", "gemma4"];
    check_families(
        &reference(),
        &families,
        llamay_testdata::dense_model,
        REMAKE,
    );
}

/// Eight sequences of different lengths in one step give each the logits it gets
/// alone (their positions, hence their rotations and Mistral 3's temperatures, differ
/// row by row), for the prompt and for a decode step of all eight.
#[test]
fn eight_sequences_in_one_step_equal_each_alone() {
    check_batches(&reference(), llamay_testdata::dense_model, REMAKE);
}

/// Gemma 4's shared-KV layers have no cache of their own: a block holds the first four
/// of its six layers, each row as wide as the widest layer's (64 keys and 64 values:
/// two heads of 32 or one of 64), and a sequence's bytes are those blocks'.
#[test]
fn gemma4_caches_only_the_layers_with_keys_of_their_own() {
    let model = common::families::load(
        &reference()["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "gemma4-F32")
            .unwrap()
            .clone(),
        llamay_testdata::dense_model,
        REMAKE,
    );
    let per_block = llamay_engine::KV_BLOCK_TOKENS * 4 * (64 + 64) * 4;
    assert_eq!(model.kv_block_bytes(), per_block);
    let mut seq = model.new_sequence();
    let tokens: Vec<u32> = (0..20).collect();
    let mut batch = [llamay_engine::BatchItem {
        seq: &mut seq,
        tokens: &tokens,
        want_logits: llamay_engine::LogitsWanted::Last,
    }];
    model.forward(&mut batch).unwrap();
    assert_eq!(
        seq.kv_bytes(),
        20usize.div_ceil(llamay_engine::KV_BLOCK_TOKENS) * per_block
    );
}
