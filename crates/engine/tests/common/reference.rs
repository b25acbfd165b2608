//! Reading llama.cpp's recorded logits (shared/ref/logits) in the forward tests.

// Each test binary that includes `common` uses its own part of it.
#![allow(dead_code)]

use llamay_engine::{BatchItem, LogitsWanted, Model, SeqState};
use serde_json::Value;

/// `[[id, logit], …]` as `(id, logit)` pairs.
pub fn pairs(v: &Value) -> Vec<(usize, f32)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_u64().unwrap() as usize,
                p[1].as_f64().unwrap() as f32,
            )
        })
        .collect()
}

/// A list of token ids.
pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// A list of floats (logits), as f32.
pub fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// The index of the largest value; ties go to the lowest id, as in the reference.
pub fn argmax(x: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    best
}

/// Feeds `token` to `seq` and returns the logits of its position: one
/// teacher-forced step through the reference's greedy tokens.
pub fn forced_step(model: &Model, seq: &mut SeqState, token: u32) -> Vec<f32> {
    let out = model
        .forward(&mut [BatchItem {
            seq,
            tokens: &[token],
            want_logits: LogitsWanted::Last,
        }])
        .unwrap();
    out[0].last().unwrap().to_vec()
}

/// The logits `want` asks for of `tokens` fed to `seq` in steps ending at `ends`, one
/// step after another, concatenated.
pub fn logits_in_steps(
    model: &Model,
    seq: &mut SeqState,
    tokens: &[u32],
    ends: &[usize],
    want: LogitsWanted,
) -> Vec<f32> {
    let mut rows = Vec::new();
    let mut at = 0;
    for &end in ends {
        let out = model
            .forward(&mut [BatchItem {
                seq: &mut *seq,
                tokens: &tokens[at..end],
                want_logits: want,
            }])
            .unwrap();
        rows.extend_from_slice(&out[0].data);
        at = end;
    }
    rows
}

/// Table A's tolerance (shared/ref/README.md §6) for a tiny file, by its weight type
/// (the stem's suffix).
pub fn table_a_atol(stem: &str) -> f32 {
    match stem.rsplit('-').next().unwrap() {
        "F32" | "F16" => 2e-3,
        "BF16" => 1e-2,
        _ => 7.5e-2,
    }
}
