//! `llamay bench` as a command: the JSON object's shape and figures on the real test
//! models, usage errors before loading, and issue 9's memory bound (peak resident
//! memory ≤ model file + KV cache + 64 MiB).

use std::path::Path;
use std::process::Command;

use llamay_testdata::{real_model, RealModel};
use serde_json::Value;

const MIB: u64 = 1 << 20;

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn bench(args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_llamay"))
        .arg("bench")
        .args(args)
        .output()
        .expect("llamay runs");
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn bench_json(model: &Path, args: &[&str]) -> Value {
    let mut all = vec!["-m", model.to_str().unwrap(), "-json"];
    all.extend_from_slice(args);
    let out = bench(&all);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

fn num(v: &Value, path: &str) -> f64 {
    let mut cur = v;
    for key in path.split('.') {
        cur = &cur[key];
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number in {v}"))
}

/// A `{min, median, max}` of positive, finite tok/s, in order.
fn spread(v: &Value, path: &str) -> (f64, f64, f64) {
    let s = (
        num(v, &format!("{path}.min")),
        num(v, &format!("{path}.median")),
        num(v, &format!("{path}.max")),
    );
    for x in [s.0, s.1, s.2] {
        assert!(x.is_finite() && x > 0.0, "{path}: {s:?}");
    }
    assert!(s.0 <= s.1 && s.1 <= s.2, "{path} out of order: {s:?}");
    s
}

#[test]
fn json_has_every_figure_and_they_are_positive() {
    let model = real_model(RealModel::SmolLM2);
    let v = bench_json(
        &model,
        &[
            "-p", "32", "-n", "8", "-b", "1,2", "-r", "2", "-threads", "2",
        ],
    );
    assert_eq!(v["engine"], "llamay");
    assert_eq!(v["arch"], "llama");
    assert_eq!(num(&v, "threads"), 2.0);
    assert_eq!(num(&v, "reps"), 2.0);
    assert_eq!(num(&v, "n_prompt"), 32.0);
    assert_eq!(num(&v, "n_gen"), 8.0);
    assert_eq!(num(&v, "n_short"), 16.0);
    assert!(num(&v, "parameters") > 1e8, "{v}");
    let file_size = std::fs::metadata(&model).unwrap().len();
    assert_eq!(num(&v, "file_size") as u64, file_size);
    assert!(!v["kernels"].as_str().unwrap().is_empty(), "{v}");
    spread(&v, "pp_tps");
    spread(&v, "tg_tps");

    let batched = v["batched"].as_array().expect("batched is a list");
    assert_eq!(batched.len(), 2, "{v}");
    for (b, wanted) in batched.iter().zip([1.0, 2.0]) {
        assert_eq!(num(b, "batch"), wanted);
        let agg = spread(b, "aggregate_tps");
        let per = spread(b, "per_seq_tps");
        assert!((agg.1 / wanted - per.1).abs() < 1e-6 * agg.1, "{b}");
    }

    // Greedy continuation of bench.py's 16 fixed ids: 8 ids inside the vocabulary.
    let ids = v["first_gen_ids"].as_array().unwrap();
    assert_eq!(ids.len(), 8, "{v}");
    assert!(ids.iter().all(|i| i.as_u64().is_some_and(|i| i < 49152)));

    let rss = num(&v, "memory.peak_rss_bytes");
    let kv = num(&v, "memory.kv_bytes");
    assert!(rss > 0.0 && kv > 0.0, "{v}");
    assert_eq!(
        num(&v, "memory.budget_bytes") as u64,
        file_size + kv as u64 + 64 * MIB
    );
    assert!(v["memory"]["within_budget"].is_boolean(), "{v}");
}

#[test]
fn the_table_names_each_test() {
    let model = real_model(RealModel::SmolLM2);
    let out = bench(&[
        "-m",
        model.to_str().unwrap(),
        "-p",
        "16",
        "-n",
        "4",
        "-b",
        "3",
        "-r",
        "1",
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    for wanted in [
        "prompt 16",
        "decode 4 (after 16)",
        "batch 3 × 4, aggregate",
        "batch 3 × 4, per sequence",
        "peak RSS",
        "kernels ",
    ] {
        assert!(
            out.stdout.contains(wanted),
            "{wanted:?} not in\n{}",
            out.stdout
        );
    }
}

#[test]
fn bad_sizes_are_usage_errors_before_loading() {
    for (args, wanted) in [
        (&["-b", "0"][..], "-b"),
        (&["-b", "1,300"][..], "-b"),
        (&["-r", "0"][..], "-r"),
        (&["-p", "0"][..], "-p"),
        (&["-kv", "q8"][..], "-kv"),
    ] {
        let mut all = vec!["-m", "/nonexistent/model.gguf"];
        all.extend_from_slice(args);
        let out = bench(&all);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(wanted), "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("nonexistent"), "{}", out.stderr);
    }
}

/// Issue 9: peak resident memory ≤ model file + KV cache + 64 MiB, with a long prompt
/// and an 8-sequence batch among the measurements.
#[test]
fn peak_memory_is_within_file_plus_kv_plus_64_mib() {
    for which in [RealModel::SmolLM2, RealModel::Gemma3] {
        let model = real_model(which);
        let v = bench_json(
            &model,
            &[
                "-p", "256", "-n", "8", "-b", "8", "-r", "1", "-threads", "2",
            ],
        );
        let rss = num(&v, "memory.peak_rss_bytes") as u64;
        let file = std::fs::metadata(&model).unwrap().len();
        let kv = num(&v, "memory.kv_bytes") as u64;
        assert!(
            rss <= file + kv + 64 * MIB,
            "{}: peak RSS {rss} > file {file} + KV {kv} + 64 MiB (over by {} bytes)",
            which.stem(),
            rss - (file + kv + 64 * MIB)
        );
    }
}
