//! Dense families with graphs of their own in llama.cpp (Gemma 1, SmolLM3 with its
//! RoPE-less fourth layers, Mistral 3's text model with YaRN's own keys and the
//! attention temperature) against llama.cpp: tiny random-weight files from
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
