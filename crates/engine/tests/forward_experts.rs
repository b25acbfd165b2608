//! Mixture-of-experts families (Qwen 3 MoE, Qwen 2 MoE with its gated shared expert,
//! Mixtral as Llama with experts) against llama.cpp: tiny random-weight files from
//! `scripts/make-moe-models`, logits from `scripts/moe-reference`
//! (tests/data/moe_families.json), compared as shared/ref/README.md §6 table A says
//! (every prompt position, every logit of the last, 16 teacher-forced greedy steps).

use llamay_engine::{BatchItem, LoadOptions, LogitsWanted, Model};
use serde_json::Value;

mod common;
use common::families::{check_batches, check_families};
use common::reference::ids;

const REMAKE: &str = "scripts/moe-reference";

fn reference() -> Value {
    common::families::reference("moe_families.json")
}

#[test]
fn expert_families_match_llama_cpp() {
    let families = ["qwen3moe", "qwen2moe", "mixtral", "gpt-oss", "granitemoe"];
    check_families(&reference(), &families, llamay_testdata::moe_model, REMAKE);
}

/// Eight sequences in one step (their tokens grouped by expert together) give each
/// the logits it gets alone, for the prompt and for a decode step of all eight.
#[test]
fn eight_sequences_in_one_step_equal_each_alone() {
    check_batches(&reference(), llamay_testdata::moe_model, REMAKE);
}

/// Files whose expert keys disagree with their tensors are refused with an error that
/// names what is wrong, never a panic.
#[test]
fn broken_expert_files_are_refused_by_name() {
    let opts = LoadOptions {
        n_threads: Some(1),
        ..Default::default()
    };
    // expert_count 6 for tensors of 8 experts: the first expert tensor's shape.
    let e = Model::load(llamay_testdata::moe_model("qwen3moe-bad-count"), &opts)
        .expect_err("6 experts claimed, 8 stored");
    let msg = e.to_string();
    assert!(
        msg.contains("blk.0.ffn_gate_inp.weight") || msg.contains("blk.0.ffn_gate_exps.weight"),
        "{msg}"
    );
    assert!(msg.contains('6') && msg.contains('8'), "{msg}");
    // More experts used per token than there are.
    let e = Model::load(llamay_testdata::moe_model("qwen3moe-bad-used"), &opts)
        .expect_err("9 of 8 experts used");
    assert!(e.to_string().contains("9 used"), "{e}");
}

/// gpt-oss as Ollama's library stores it (architecture `gptoss`, `attn_out`,
/// `attn_sinks`, `ffn_norm`, no expert width, no scaling type) loads, and gives the
/// logits of the same weights in llama.cpp's layout (which the test above checks).
#[test]
fn ollamas_gpt_oss_layout_gives_the_same_logits() {
    let opts = LoadOptions {
        n_threads: Some(2),
        ..Default::default()
    };
    let load = |name: &str| {
        Model::load(llamay_testdata::moe_model(name), &opts)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let (ollama, ours) = (load("gpt-oss-ollama"), load("gpt-oss-F32"));
    let doc = reference();
    let entry = doc["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "gpt-oss-F32")
        .unwrap();
    let prompt = ids(&entry["sequences"]["seq40"]["token_ids"]);
    let logits = |m: &Model| {
        let mut seq = m.new_sequence();
        let out = m
            .forward(&mut [BatchItem {
                seq: &mut seq,
                tokens: &prompt,
                want_logits: LogitsWanted::All,
            }])
            .unwrap();
        out[0].data.clone()
    };
    // The 40 positions pass the 8-position window and the YaRN the file leaves unnamed.
    assert_eq!(logits(&ollama), logits(&ours));
}
