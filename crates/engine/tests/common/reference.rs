//! Reading llama.cpp's recorded logits (shared/ref/logits) in the forward tests.

// Each test binary that includes `common` uses its own part of it.
#![allow(dead_code)]

use llamay_engine::{BatchItem, KvType, LogitsWanted, Model, SeqState};
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

/// Worst differences seen for one file.
#[derive(Default, Debug)]
pub struct Worst {
    pub last: f32,
    pub top10: f32,
    pub greedy: f32,
    pub checked_argmax: usize,
    pub greedy_agree: usize,
}

/// Compares ids' logits in `ours` with the reference pairs; checks the argmax where the
/// reference margin allows. Returns the max abs difference.
pub fn compare_top(
    ours: &[f32],
    top: &[(usize, f32)],
    atol: f32,
    what: &str,
    w: &mut Worst,
) -> f32 {
    let mut worst = 0.0f32;
    for &(id, r) in top {
        let d = (ours[id] - r).abs();
        assert!(
            d <= atol,
            "{what}: id {id} ours {} ref {r} diff {d} > {atol}",
            ours[id]
        );
        worst = worst.max(d);
    }
    let margin = top[0].1 - top[1].1;
    if margin >= 2.0 * atol {
        assert_eq!(
            argmax(ours),
            top[0].0,
            "{what}: argmax differs (ref margin {margin})"
        );
        w.checked_argmax += 1;
    }
    worst
}

/// Runs one reference sequence (prompt in one batch, then teacher-forced decode).
pub fn check_sequence(model: &Model, name: &str, r: &Value, atol: f32, kv: KvType, w: &mut Worst) {
    let prompt = ids(&r["token_ids"]);
    let greedy = ids(r.get("greedy_ids").or(r.get("greedy_ids_fed")).unwrap());
    let mut seq = model.new_sequence_with(kv, 512);
    let out = model
        .forward(&mut [BatchItem {
            seq: &mut seq,
            tokens: &prompt,
            want_logits: LogitsWanted::All,
        }])
        .unwrap();
    let logits = &out[0];
    assert_eq!(logits.n_rows(), prompt.len());
    let last_ref = floats(&r["last_logits"]);
    let last = logits.last().unwrap();
    for (i, (&a, &b)) in last.iter().zip(&last_ref).enumerate() {
        let d = (a - b).abs();
        assert!(
            d <= atol,
            "{name}: last logit {i}: ours {a} ref {b} diff {d} > {atol}"
        );
        w.last = w.last.max(d);
    }
    let top10 = r["top10_per_position"].as_array().unwrap();
    assert_eq!(top10.len(), prompt.len());
    for (p, top) in top10.iter().enumerate() {
        let d = compare_top(
            logits.row(p),
            &pairs(top),
            atol,
            &format!("{name} pos {p}"),
            w,
        );
        w.top10 = w.top10.max(d);
    }
    let steps = r["greedy_steps"].as_array().unwrap();
    assert_eq!(steps.len(), greedy.len());
    let mut free_running = true;
    let mut step_logits = last.to_vec();
    for (s, step) in steps.iter().enumerate() {
        if s > 0 {
            step_logits = forced_step(model, &mut seq, greedy[s - 1]);
        }
        let top5 = pairs(&step["top5"]);
        let d = compare_top(
            &step_logits,
            &top5,
            atol,
            &format!("{name} greedy step {s}"),
            w,
        );
        w.greedy = w.greedy.max(d);
        // Free-running greedy equals teacher forcing until the first near-tie.
        let margin = step["margin"].as_f64().unwrap() as f32;
        if free_running && argmax(&step_logits) == greedy[s] as usize {
            w.greedy_agree += 1;
        } else {
            assert!(
                !free_running || margin < 2.0 * atol,
                "{name}: free-running greedy diverged at step {s} (margin {margin})"
            );
            free_running = false;
        }
    }
}
