//! The check of a family of tiny random-weight files against llama.cpp's records
//! (scripts/moe-reference's format): each file loaded and checked to be the one
//! llama.cpp read, every prompt position, every logit of the last, 16 teacher-forced
//! greedy steps; and a batch of eight sequences against each sequence alone.

// Each test binary that includes `common` uses its own part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use llamay_engine::{BatchItem, ItemLogits, KvType, LoadOptions, LogitsWanted, Model, SeqState};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::reference::{check_sequence, ids, table_a_atol, Worst};

/// A reference document of tests/data.
pub fn reference(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The model `entry` describes, found by `path_of` (which builds it if missing) and
/// checked to be the very file llama.cpp read (`remake`: what rewrites the reference).
pub fn load(entry: &Value, path_of: fn(&str) -> PathBuf, remake: &str) -> Arc<Model> {
    let name = entry["name"].as_str().unwrap();
    let path = path_of(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let sha: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        sha,
        entry["file_sha256"].as_str().unwrap(),
        "{name}: {} is not the file the reference was made from \
         (rerun {remake} after changing the script that makes it)",
        path.display()
    );
    let opts = LoadOptions {
        n_threads: Some(2),
        ..Default::default()
    };
    Model::load(&path, &opts).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Every model of `doc` (which must hold one of each of `families`) against its
/// records, within table A's tolerance for its weight type; the worst differences per
/// file and prompt are printed.
pub fn check_families(doc: &Value, families: &[&str], path_of: fn(&str) -> PathBuf, remake: &str) {
    let models = doc["models"].as_array().unwrap();
    let names: Vec<&str> = models.iter().map(|m| m["name"].as_str().unwrap()).collect();
    for f in families {
        assert!(
            names.iter().any(|n| n.starts_with(&format!("{f}-"))),
            "{f} is in the reference"
        );
    }
    for entry in models {
        let name = entry["name"].as_str().unwrap();
        let model = load(entry, path_of, remake);
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
    seqs: &mut [SeqState],
    tokens: &[Vec<u32>],
    want_logits: LogitsWanted,
) -> Vec<ItemLogits> {
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

/// Every model of `doc`: eight sequences in one step give each the logits it gets
/// alone (see [`eight_in_one_step_vs_alone`]).
pub fn check_batches(doc: &Value, path_of: fn(&str) -> PathBuf, remake: &str) {
    for entry in doc["models"].as_array().unwrap() {
        let name = entry["name"].as_str().unwrap();
        let model = load(entry, path_of, remake);
        let worst = eight_in_one_step_vs_alone(&model, entry);
        // Rows are computed alike whatever else shares the step, up to the order of
        // float sums in the kernels' multi-token tiles.
        assert!(
            worst <= 1e-4,
            "{name}: batched differs from alone by {worst}"
        );
        println!("{name}: batch of 8 vs alone: max |d| {worst:.2e}");
    }
}

/// Eight sequences of different lengths (rotations of `entry`'s 40-token prompt) in
/// one step give each the logits it gets alone, for the prompt and for a decode step
/// of all eight; returns the largest difference.
pub fn eight_in_one_step_vs_alone(model: &Model, entry: &Value) -> f32 {
    let base = ids(&entry["sequences"]["seq40"]["token_ids"]);
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
            let mut seq = [model.new_sequence()];
            let out = step(model, &mut seq, std::slice::from_ref(p), LogitsWanted::All);
            let next = step(model, &mut seq, &[vec![p[0]]], LogitsWanted::Last);
            (out[0].data.clone(), next[0].data.clone())
        })
        .collect();
    let mut seqs: Vec<_> = (0..8).map(|_| model.new_sequence()).collect();
    let together = step(model, &mut seqs, &prompts, LogitsWanted::All);
    let firsts: Vec<Vec<u32>> = prompts.iter().map(|p| vec![p[0]]).collect();
    let next = step(model, &mut seqs, &firsts, LogitsWanted::Last);
    let mut worst = 0f32;
    for (i, (p, n)) in alone.iter().enumerate() {
        assert_eq!(p.len(), together[i].data.len());
        for (a, b) in p
            .iter()
            .zip(&together[i].data)
            .chain(n.iter().zip(&next[i].data))
        {
            worst = worst.max((a - b).abs());
        }
    }
    worst
}
