//! Mixture-of-experts families (Qwen 3 MoE, Qwen 2 MoE with its gated shared expert,
//! Mixtral as Llama with experts) against llama.cpp: tiny random-weight files from
//! `scripts/make-moe-models`, logits from `scripts/moe-reference`
//! (tests/data/moe_families.json), compared as shared/ref/README.md §6 table A says
//! (every prompt position, every logit of the last, 16 teacher-forced greedy steps).

use std::path::Path;

use llamay_engine::{BatchItem, KvType, LoadOptions, LogitsWanted, Model};
use serde_json::Value;
use sha2::{Digest, Sha256};

mod common;
use common::reference::{check_sequence, ids, table_a_atol, Worst};

fn reference() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/moe_families.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The model `entry` describes, checked to be the very file llama.cpp read.
fn load(entry: &Value) -> std::sync::Arc<Model> {
    let name = entry["name"].as_str().unwrap();
    let path = llamay_testdata::moe_model(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let sha: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        sha,
        entry["file_sha256"].as_str().unwrap(),
        "{name}: {} is not the file the reference was made from \
         (rerun scripts/moe-reference after changing scripts/make-moe-models)",
        path.display()
    );
    let opts = LoadOptions {
        n_threads: Some(2),
        ..Default::default()
    };
    Model::load(&path, &opts).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn expert_families_match_llama_cpp() {
    let doc = reference();
    let models = doc["models"].as_array().unwrap();
    let families: Vec<&str> = models.iter().map(|m| m["name"].as_str().unwrap()).collect();
    for f in ["qwen3moe", "qwen2moe", "mixtral", "gpt-oss", "granitemoe"] {
        assert!(
            families.iter().any(|n| n.starts_with(f)),
            "{f} is in the reference"
        );
    }
    for entry in models {
        let name = entry["name"].as_str().unwrap();
        let model = load(entry);
        let atol = table_a_atol(name);
        // With the f16 cache llama.cpp ran with: an f32 cache moves these logits (a
        // spread of about 0.5) by up to 3e-3 from llama.cpp's, which rounds K and V.
        for seq in ["seq8", "seq40"] {
            let mut w = Worst::default();
            let what = format!("{name}/{seq}");
            let r = &entry["sequences"][seq];
            check_sequence(&model, &what, r, atol, KvType::F16, &mut w);
            println!(
                "{what:20} max|d| last {:.2e} top10 {:.2e} greedy {:.2e} (atol {atol:.1e}); argmax checked {}, greedy agree {}/16",
                w.last, w.top10, w.greedy, w.checked_argmax, w.greedy_agree
            );
        }
    }
}

/// One step of `seqs`, each fed its `tokens`.
fn step(
    model: &Model,
    seqs: &mut [llamay_engine::SeqState],
    tokens: &[Vec<u32>],
    want_logits: LogitsWanted,
) -> Vec<llamay_engine::ItemLogits> {
    let mut batch: Vec<BatchItem> = seqs
        .iter_mut()
        .zip(tokens)
        .map(|(seq, t)| BatchItem {
            seq,
            tokens: t,
            want_logits,
        })
        .collect();
    model.forward(&mut batch).unwrap()
}

/// Eight sequences in one step (their tokens grouped by expert together) give each
/// the logits it gets alone, for the prompt and for a decode step of all eight.
#[test]
fn eight_sequences_in_one_step_equal_each_alone() {
    let doc = reference();
    for entry in doc["models"].as_array().unwrap() {
        let name = entry["name"].as_str().unwrap();
        let model = load(entry);
        let base = ids(&entry["sequences"]["seq40"]["token_ids"]);
        // Different lengths and contents: rotations of the reference prompt.
        let prompts: Vec<Vec<u32>> = (0..8)
            .map(|i| {
                let mut p = base.clone();
                p.rotate_left(5 * i);
                p.truncate(12 + 3 * i);
                p
            })
            .collect();
        let alone: Vec<(Vec<f32>, Vec<f32>)> = prompts
            .iter()
            .map(|p| {
                let mut seq = model.new_sequence();
                let out = model
                    .forward(&mut [BatchItem {
                        seq: &mut seq,
                        tokens: p,
                        want_logits: LogitsWanted::All,
                    }])
                    .unwrap();
                let next = model
                    .forward(&mut [BatchItem {
                        seq: &mut seq,
                        tokens: &[p[0]],
                        want_logits: LogitsWanted::Last,
                    }])
                    .unwrap();
                (out[0].data.clone(), next[0].data.clone())
            })
            .collect();
        let mut seqs: Vec<_> = (0..8).map(|_| model.new_sequence()).collect();
        let together = step(&model, &mut seqs, &prompts, LogitsWanted::All);
        let firsts: Vec<Vec<u32>> = prompts.iter().map(|p| vec![p[0]]).collect();
        let next = step(&model, &mut seqs, &firsts, LogitsWanted::Last);
        let mut worst = 0f32;
        for (i, (p, n)) in alone.iter().enumerate() {
            for (a, b) in p
                .iter()
                .zip(&together[i].data)
                .chain(n.iter().zip(&next[i].data))
            {
                worst = worst.max((a - b).abs());
            }
            assert_eq!(p.len(), together[i].data.len());
        }
        // Rows are computed alike whatever else shares the step, up to the order of
        // float sums in the kernels' multi-token tiles.
        assert!(
            worst <= 1e-4,
            "{name}: batched differs from alone by {worst}"
        );
        println!("{name}: batch of 8 vs alone: max |d| {worst:.2e}");
    }
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
