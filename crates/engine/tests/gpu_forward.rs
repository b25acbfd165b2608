//! The GPU backend against the CPU engine, which stays the reference: every tiny
//! reference model and both real test models, logits at every prompt position and
//! over 16 greedy steps, within shared/ref/README.md §6's tolerances (table A for the
//! tiny files by weight type, table B for the real ones), the argmax equal wherever
//! the CPU's margin is at least the table's greedy margin.
//!
//! The adapter is `LLAMAY_TEST_GPU` (a `-device` value), by default `gpu:llvmpipe`:
//! Mesa's lavapipe, Vulkan on the CPU, which `.ci/run` installs.
#![cfg(feature = "gpu")]

use llamay_engine::{BatchItem, DeviceChoice, KvType, LoadOptions, LogitsWanted, Model};
use llamay_testdata::RealModel;
use serde_json::Value;

mod common;
use common::reference::{argmax, ids, logits_in_steps, table_a_atol};

fn gpu_choice() -> DeviceChoice {
    let s = std::env::var("LLAMAY_TEST_GPU").unwrap_or_else(|_| "gpu:llvmpipe".into());
    s.parse().expect("LLAMAY_TEST_GPU is a -device value")
}

fn load(path: &std::path::Path, device: DeviceChoice) -> std::sync::Arc<Model> {
    let opts = LoadOptions {
        n_ctx: Some(1024),
        kv_type: KvType::F16,
        device,
        ..Default::default()
    };
    Model::load(path, &opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// How two rows of logits may differ.
struct Tolerance {
    /// Largest |Δ| over the compared ids.
    max: f32,
    /// Largest mean |Δ| over the compared ids.
    mean: f32,
    /// Compare only the CPU's top this many ids (None: every id).
    top: Option<usize>,
    /// The argmax must agree where the CPU's top-1 − top-2 is at least this.
    margin: f32,
}

fn top_ids(row: &[f32], k: usize) -> Vec<usize> {
    let mut ids: Vec<usize> = (0..row.len()).collect();
    ids.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    ids.truncate(k);
    ids
}

#[derive(Default, Debug)]
struct Seen {
    rows: usize,
    worst: f32,
    argmax_checked: usize,
}

fn compare(cpu: &[f32], gpu: &[f32], tol: &Tolerance, what: &str, seen: &mut Seen) {
    assert_eq!(cpu.len(), gpu.len(), "{what}: row length");
    let ids = match tol.top {
        Some(k) => top_ids(cpu, k),
        None => (0..cpu.len()).collect(),
    };
    let diffs: Vec<f32> = ids.iter().map(|&i| (cpu[i] - gpu[i]).abs()).collect();
    let max = diffs.iter().cloned().fold(0.0, f32::max);
    let mean = diffs.iter().sum::<f32>() / diffs.len() as f32;
    assert!(
        max <= tol.max && mean <= tol.mean && max.is_finite(),
        "{what}: max |Δ| {max} (≤ {}), mean {mean} (≤ {})",
        tol.max,
        tol.mean
    );
    let top2 = top_ids(cpu, 2);
    if cpu[top2[0]] - cpu[top2[1]] >= tol.margin {
        assert_eq!(argmax(gpu), top2[0], "{what}: argmax differs");
        seen.argmax_checked += 1;
    }
    seen.rows += 1;
    seen.worst = seen.worst.max(max);
}

/// One prompt on both backends: all its positions' logits in one step, then 16
/// greedy steps on the CPU's choices (so both see the same tokens).
fn run_prompt(
    cpu: &Model,
    gpu: &Model,
    prompt: &[u32],
    tol: &Tolerance,
    name: &str,
) -> (Seen, [llamay_engine::ItemLogits; 2]) {
    let (mut sc, mut sg) = (cpu.new_sequence(), gpu.new_sequence());
    let mut seen = Seen::default();
    let step = |sc: &mut _, sg: &mut _, tokens: &[u32], want| {
        let c = cpu
            .forward(&mut [BatchItem {
                seq: sc,
                tokens,
                want_logits: want,
            }])
            .unwrap();
        let g = gpu
            .forward(&mut [BatchItem {
                seq: sg,
                tokens,
                want_logits: want,
            }])
            .unwrap();
        (c.into_iter().next().unwrap(), g.into_iter().next().unwrap())
    };
    let (c, g) = step(&mut sc, &mut sg, prompt, LogitsWanted::All);
    assert_eq!(c.n_rows(), prompt.len());
    for r in 0..c.n_rows() {
        compare(
            c.row(r),
            g.row(r),
            tol,
            &format!("{name} position {r}"),
            &mut seen,
        );
    }
    let mut next = argmax(c.last().unwrap()) as u32;
    for s in 0..16 {
        let (c, g) = step(&mut sc, &mut sg, &[next], LogitsWanted::Last);
        let what = format!("{name} step {s}");
        compare(c.last().unwrap(), g.last().unwrap(), tol, &what, &mut seen);
        next = argmax(c.last().unwrap()) as u32;
    }
    assert_eq!(sg.len(), prompt.len() + 16);
    (seen, [c, g])
}

#[test]
fn tiny_models_match_the_cpu_engine() {
    for path in llamay_testdata::tiny_models() {
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        let atol = table_a_atol(&stem);
        let tol = Tolerance {
            max: atol,
            mean: atol,
            top: None,
            margin: 2.0 * atol,
        };
        let cpu = load(&path, DeviceChoice::Cpu);
        let gpu = load(&path, gpu_choice());
        assert!(gpu.device().is_some() && cpu.device().is_none());
        let refs = llamay_testdata::ref_path(&format!("logits/{stem}.json"));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(refs).unwrap()).unwrap();
        for (name, seq) in v["sequences"].as_object().unwrap() {
            let prompt = ids(&seq["token_ids"]);
            let (seen, _) = run_prompt(&cpu, &gpu, &prompt, &tol, &format!("{stem} {name}"));
            eprintln!("{stem} {name}: {seen:?}");
            assert!(
                seen.argmax_checked > 0,
                "{stem} {name}: no argmax was decisive"
            );
        }
    }
}

/// The device's results do not depend on how a prompt is cut into steps: one step of
/// 12 tokens (a whole 8-token tile and a part) and 12 steps of one give the same
/// bits, so continuous batching and the prefix cache cannot change a greedy reply.
/// (The CPU engine is held to 1e-3 by forward_tiny; docs/gpu.md has where the two
/// backends part.)
#[test]
fn a_prompt_in_one_step_gives_the_bits_of_one_token_at_a_time() {
    let n = 12;
    for path in llamay_testdata::tiny_models() {
        let gpu = load(&path, gpu_choice());
        let nv = gpu.n_vocab();
        let tokens: Vec<u32> = (0..n)
            .map(|i| ((i * 131 + 7) % nv.min(500)) as u32)
            .collect();
        let run = |ends: &[usize]| {
            let mut seq = gpu.new_sequence_with(KvType::F16, 1024);
            logits_in_steps(&gpu, &mut seq, &tokens, ends, LogitsWanted::All)
        };
        let whole = run(&[n]);
        let singles = run(&(1..=n).collect::<Vec<_>>());
        assert_eq!(whole.len(), n * nv);
        for t in 0..n {
            let (a, b) = (&whole[t * nv..(t + 1) * nv], &singles[t * nv..(t + 1) * nv]);
            let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "{}: row {t} differs", path.display());
        }
    }
}

/// The recorded positions of one llama.cpp prompt against our rows (table B: max
/// and mean |Δ| over its top-40 ids).
fn against_llamacpp(entry: &Value, rows: &llamay_engine::ItemLogits, who: &str) {
    for pos in entry["positions"].as_array().unwrap() {
        let at = pos["pos"].as_u64().unwrap() as usize;
        let top = common::reference::pairs(&pos["top"]);
        let d: Vec<f32> = top
            .iter()
            .map(|&(id, l)| (rows.row(at)[id] - l).abs())
            .collect();
        let max = d.iter().cloned().fold(0.0, f32::max);
        let mean = d.iter().sum::<f32>() / d.len() as f32;
        eprintln!("{who} position {at} vs llama.cpp: max {max:.3} mean {mean:.3}");
        assert!(
            max <= 2.0 && mean <= 1.0,
            "{who} position {at}: max {max} mean {mean}"
        );
    }
}

/// The GPU against the CPU on the real model's prompts (all of them with
/// `LLAMAY_GPU_PROMPTS=all`; by default the short `plain` one, lavapipe being slow),
/// and both against llama.cpp's recorded positions.
///
/// Table B bounds one engine's distance from llama.cpp. Between the two backends the
/// max and argmax bounds are table B's own; the mean is allowed twice table B's
/// (1.0 + 1.0): the CPU quantizes activations to Q8 as llama.cpp does and the GPU
/// keeps them f32, so their errors add where they point apart (measured: SmolLM2's
/// chat prompt, position 19, mean 1.16 between them while the GPU is at 0.37 from
/// llama.cpp and the CPU at 0.81).
fn real_model_matches(m: RealModel) {
    let path = llamay_testdata::real_model(m);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(m.logits_ref()).unwrap()).unwrap();
    let tol = Tolerance {
        max: 2.0,
        mean: 2.0,
        top: Some(40),
        margin: 0.75,
    };
    let cpu = load(&path, DeviceChoice::Cpu);
    let gpu = load(&path, gpu_choice());
    assert!(gpu.device().is_some());
    let all = std::env::var("LLAMAY_GPU_PROMPTS").is_ok_and(|p| p == "all");
    let entries: Vec<&Value> = v["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| all || p["name"] == "plain")
        .collect();
    assert!(!entries.is_empty());
    for entry in entries {
        let name = entry["name"].as_str().unwrap();
        let prompt = ids(&entry["token_ids"]);
        let who = format!("{} {name}", m.stem());
        let (seen, [c, g]) = run_prompt(&cpu, &gpu, &prompt, &tol, &who);
        eprintln!("{who}: {seen:?}");
        assert!(seen.argmax_checked > 0);
        against_llamacpp(entry, &g, &format!("{who} gpu"));
        against_llamacpp(entry, &c, &format!("{who} cpu"));
    }
}

#[test]
fn smollm2_matches_the_cpu_engine() {
    real_model_matches(RealModel::SmolLM2);
}

#[test]
fn gemma3_matches_the_cpu_engine() {
    real_model_matches(RealModel::Gemma3);
}

/// The dense families of scripts/make-dense-models on the device as the CPU runs them,
/// over a 40-token prompt and 16 greedy steps: Gemma 1 (one key head for four query
/// heads of 64 values), Mistral 3 (the file's YaRN keys, the attention temperature
/// across two of its floors) and GLM-4 (RoPE on half of each head, Q/K/V biases,
/// post-norms, fused gate and up: 1.2e-3 on lavapipe) within table A, and SmolLM3's
/// fourth layer without RoPE.
/// SmolLM3's F32 file has sharp attention, under which the f16 cache's rounding
/// shows: the CPU engine is within 6e-4 of llama.cpp (with an f32 cache, 1e-2), the
/// device 0.017 (its last bits differ, and a key or value rounded to the other f16
/// neighbour moves a sharp softmax), so the backends differ by up to 0.014; a device
/// rotating that layer is 0.16 to 0.31 away, hence 0.05.
#[test]
fn dense_families_match_the_cpu_engine() {
    let f32_atol = table_a_atol("F32");
    let files = [
        ("gemma-F32", f32_atol),
        ("mistral3-F32", f32_atol),
        ("smollm3-F32", 0.05),
        ("glm4-F32", f32_atol),
    ];
    for (name, atol) in files {
        let path = llamay_testdata::dense_model(name);
        let tol = Tolerance {
            max: atol,
            mean: atol,
            top: None,
            margin: 2.0 * atol,
        };
        let (cpu, gpu) = (load(&path, DeviceChoice::Cpu), load(&path, gpu_choice()));
        let prompt: Vec<u32> = (0..40).map(|i| (i * 37 + 11) % 500).collect();
        let (seen, _) = run_prompt(&cpu, &gpu, &prompt, &tol, name);
        eprintln!("{name}: {seen:?}");
        assert!(seen.argmax_checked > 0, "{name}: no argmax was decisive");
    }
}

/// Gemma 4 (per-layer inputs, shared KV layers, heads of two sizes, value norms) has
/// no device kernels: asked for by name, the device refuses it with the reason in one
/// line; under `auto` it runs on the CPU engine.
#[test]
fn gemma4_stays_on_the_cpu_engine() {
    for name in ["gemma4-F32", "gemma4-Q8_0"] {
        let path = llamay_testdata::dense_model(name);
        let opts = LoadOptions {
            device: gpu_choice(),
            ..Default::default()
        };
        let err = Model::load(&path, &opts).expect_err("the device refuses it");
        let line = err.to_string();
        assert!(
            line.contains("CPU engine only") && !line.contains('\n'),
            "{name}: {line}"
        );
        eprintln!("{name}: {line}");
        let auto = load(&path, DeviceChoice::Auto);
        assert!(auto.device().is_none(), "{name} runs on the CPU under auto");
    }
}

/// Continuous batching's shapes on the device: three sequences of different lengths
/// in one step, then batched decode steps, one of them a fork sharing its parent's
/// cache until it writes; each item's logits as the CPU gives them.
#[test]
fn batched_and_forked_sequences_match_the_cpu_engine() {
    let path = llamay_testdata::ref_path("tiny/tiny-qwen2-Q8_0.gguf");
    let (cpu, gpu) = (load(&path, DeviceChoice::Cpu), load(&path, gpu_choice()));
    let tol = Tolerance {
        max: 7.5e-2,
        mean: 7.5e-2,
        top: None,
        margin: 0.15,
    };
    let prompts: [Vec<u32>; 3] = [
        vec![5, 17, 99, 3],
        vec![42],
        (0..37).map(|i| i * 7 % 500).collect(),
    ];
    let mut seen = Seen::default();
    let run = |m: &Model| {
        let mut seqs: Vec<_> = prompts.iter().map(|_| m.new_sequence()).collect();
        let mut out = Vec::new();
        let mut batch: Vec<BatchItem> = seqs
            .iter_mut()
            .zip(&prompts)
            .map(|(seq, p)| BatchItem {
                seq,
                tokens: p,
                want_logits: LogitsWanted::Last,
            })
            .collect();
        out.push(m.forward(&mut batch).unwrap());
        drop(batch);
        let fork = seqs[2].fork();
        seqs.push(fork);
        for step in 0..6u32 {
            let toks: Vec<[u32; 1]> = (0..seqs.len() as u32)
                .map(|i| [(step * 31 + i * 11) % 500])
                .collect();
            let mut batch: Vec<BatchItem> = seqs
                .iter_mut()
                .zip(&toks)
                .map(|(seq, t)| BatchItem {
                    seq,
                    tokens: t,
                    want_logits: LogitsWanted::Last,
                })
                .collect();
            out.push(m.forward(&mut batch).unwrap());
        }
        out
    };
    let (c, g) = (run(&cpu), run(&gpu));
    for (s, (cs, gs)) in c.iter().zip(&g).enumerate() {
        assert_eq!(cs.len(), gs.len());
        for (i, (ci, gi)) in cs.iter().zip(gs).enumerate() {
            let what = format!("step {s} item {i}");
            compare(
                ci.last().unwrap(),
                gi.last().unwrap(),
                &tol,
                &what,
                &mut seen,
            );
        }
    }
    assert_eq!(seen.rows, 3 + 6 * 4);
}
