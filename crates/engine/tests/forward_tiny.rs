//! The forward pass of every tiny reference model against llama.cpp's logits
//! (shared/ref/logits, README §6 table A) and, for the float-weight files whose
//! activations stay f32, against the float64 reference (shared/ref/exact, table C).

use llamay_engine::batch::{BatchItem, LogitsWanted};
use llamay_engine::kv_cache::KvType;
use llamay_engine::model::{LoadOptions, Model};
use serde_json::Value;

/// Table A's tolerance for a file, by its weight type (the stem's suffix).
fn table_a_atol(stem: &str) -> f32 {
    match stem.rsplit('-').next().unwrap() {
        "F32" | "F16" => 2e-3,
        "BF16" => 1e-2,
        _ => 7.5e-2,
    }
}

/// Files whose weights are float: the kernels keep activations in f32 for them.
fn f32_activations(stem: &str) -> bool {
    matches!(stem.rsplit('-').next().unwrap(), "F32" | "F16" | "BF16")
}

fn pairs(v: &Value) -> Vec<(usize, f32)> {
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

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn argmax(x: &[f32]) -> usize {
    // Ties go to the lowest id, as in the reference.
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    best
}

/// Worst differences seen for one file.
#[derive(Default, Debug)]
struct Worst {
    last: f32,
    top10: f32,
    greedy: f32,
    checked_argmax: usize,
    greedy_agree: usize,
}

/// Compares ids' logits in `ours` with the reference pairs; checks the argmax where the
/// reference margin allows. Returns the max abs difference.
fn compare_top(ours: &[f32], top: &[(usize, f32)], atol: f32, what: &str, w: &mut Worst) -> f32 {
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
fn check_sequence(model: &Model, name: &str, r: &Value, atol: f32, kv: KvType, w: &mut Worst) {
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
    let last_ref: Vec<f32> = r["last_logits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
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
            let out = model
                .forward(&mut [BatchItem {
                    seq: &mut seq,
                    tokens: &greedy[s - 1..s],
                    want_logits: LogitsWanted::Last,
                }])
                .unwrap();
            step_logits = out[0].last().unwrap().to_vec();
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

fn load(path: &std::path::Path) -> std::sync::Arc<Model> {
    Model::load(
        path,
        &LoadOptions {
            n_threads: Some(2),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn tiny_models_match_llama_cpp_table_a() {
    let models = llamay_testdata::tiny_models();
    assert_eq!(models.len(), 12);
    for path in &models {
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let refj: Value = serde_json::from_str(
            &std::fs::read_to_string(llamay_testdata::ref_path(&format!("logits/{stem}.json")))
                .unwrap(),
        )
        .unwrap();
        let model = load(path);
        let atol = table_a_atol(stem);
        for seq in ["seq8", "seq40"] {
            for kv in [KvType::F32, KvType::F16] {
                let mut w = Worst::default();
                check_sequence(
                    &model,
                    &format!("{stem}/{seq}/{kv:?}"),
                    &refj["sequences"][seq],
                    atol,
                    kv,
                    &mut w,
                );
                println!(
                    "A {stem:22} {seq:5} kv {kv:?}: max|d| last {:.2e} top10 {:.2e} greedy {:.2e} (atol {atol:.1e}); argmax checked {}, greedy agree {}/16",
                    w.last, w.top10, w.greedy, w.checked_argmax, w.greedy_agree
                );
            }
        }
    }
}

#[test]
fn float_weight_tiny_models_match_exact_table_c() {
    let mut n = 0;
    for path in llamay_testdata::tiny_models() {
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        if !f32_activations(&stem) {
            continue;
        }
        n += 1;
        let refj: Value = serde_json::from_str(
            &std::fs::read_to_string(llamay_testdata::ref_path(&format!("exact/{stem}.json")))
                .unwrap(),
        )
        .unwrap();
        let model = load(&path);
        for seq in ["seq8", "seq40"] {
            let mut w = Worst::default();
            check_sequence(
                &model,
                &format!("{stem}/{seq}"),
                &refj["sequences"][seq],
                3e-3,
                KvType::F32,
                &mut w,
            );
            println!(
                "C {stem:22} {seq:5}: max|d| last {:.2e} top10 {:.2e} greedy {:.2e} (atol 3e-3)",
                w.last, w.top10, w.greedy
            );
        }
    }
    assert_eq!(n, 3, "the F32, F16 and BF16 files");
}
