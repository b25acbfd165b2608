//! `llamay run` as a command: flags in both spellings, the prompt from stdin, usage
//! errors (exit code 2) decided before the model loads, determinism, and Ctrl-C.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::run::*;
use llamay_testdata::{real_model, RealModel};

const NO_MODEL: &str = "/nonexistent/dir/model.gguf";

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("llamay-run-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `llamay run -m NO_MODEL <args> -p x`: flags that must be judged before any
/// model is looked for.
fn run_without_model(args: &[&str]) -> Out {
    let mut all = vec!["-m", NO_MODEL];
    all.extend_from_slice(args);
    all.extend(["-p", "x"]);
    run(&all, b"")
}

/// A usage error: exit code 2, the message on stderr, nothing on stdout, and no sign
/// that a model was looked for.
fn assert_usage_error(out: &Out, wanted: &str) {
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr.contains(wanted),
        "{:?} not in {}",
        wanted,
        out.stderr
    );
    assert!(
        !out.stderr.contains("nonexistent"),
        "the model was looked for: {}",
        out.stderr
    );
}

#[test]
fn a_schema_and_a_grammar_together_are_refused_before_loading() {
    let grammar = shared("grammars/list.gbnf");
    let schema = shared("corpus/seed/order.schema.json");
    let out = run_without_model(&[
        "-schema",
        schema.to_str().unwrap(),
        "-grammar-file",
        grammar.to_str().unwrap(),
    ]);
    assert_usage_error(&out, "exclusive");
    let out = run_without_model(&["--json", "--schema", schema.to_str().unwrap()]);
    assert_usage_error(&out, "exclusive");
}

#[test]
fn an_unsupported_schema_keyword_is_the_error_even_with_no_model() {
    let schema = temp_file(
        "not.json",
        r#"{"type":"object","properties":{"a":{"not":{"type":"string"}}}}"#,
    );
    let out = run_without_model(&["-schema", schema.to_str().unwrap()]);
    assert_usage_error(&out, r#"properties.a uses "not""#);
}

#[test]
fn bad_grammars_and_unreadable_files_are_usage_errors() {
    let bad = shared("grammars/bad-left-recursion.gbnf");
    let out = run_without_model(&["-grammar-file", bad.to_str().unwrap()]);
    assert_usage_error(&out, "left-recursive");
    let out = run_without_model(&["-schema", "/nonexistent/s.json"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("cannot read schema"), "{}", out.stderr);
    let not_json = temp_file("bad.json", "{\"type\": ");
    let out = run_without_model(&["-schema", not_json.to_str().unwrap()]);
    assert_usage_error(&out, "is not valid JSON");
    let out = run(&["-m", NO_MODEL, "-p", "x", "-no-such-flag"], b"");
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let out = run(&["-m", NO_MODEL], b"");
    assert_eq!(out.code, Some(2), "a missing prompt: {}", out.stderr);
}

#[test]
fn the_capital_of_france_and_the_same_seed_twice() {
    let model = real_model(RealModel::SmolLM2);
    let args = [
        "-p",
        "The capital of France is",
        "-n",
        "16",
        "-temp",
        "0.8",
        "-seed",
        "11",
    ];
    let a = run_model(&model, &args);
    a.assert_ok();
    assert!(a.stdout.contains("Paris"), "{:?}", a.stdout);
    let b = run_model(&model, &args);
    b.assert_ok();
    assert_eq!(a.stdout, b.stdout, "the same seed gave different text");
    // And the seed matters: some other seed writes something else.
    let others: Vec<String> = ["12", "13", "14"]
        .iter()
        .map(|s| {
            let mut args = args.to_vec();
            args[7] = s;
            run_model(&model, &args).stdout
        })
        .collect();
    assert!(others.iter().any(|o| *o != a.stdout), "{others:?}");
}

#[test]
fn every_flag_in_both_spellings_gives_the_same_run() {
    let model = real_model(RealModel::SmolLM2);
    let m = model.to_str().unwrap();
    let single = run(
        &[
            "-m",
            m,
            "-p",
            "Name a colour.",
            "-chat",
            "-system",
            "Be brief.",
            "-json",
            "-n",
            "40",
            "-temp",
            "0.7",
            "-top-k",
            "20",
            "-top-p",
            "0.9",
            "-min-p",
            "0.1",
            "-seed",
            "5",
            "-threads",
            "2",
            "-ctx",
            "512",
            "-stats",
        ],
        b"",
    );
    single.assert_ok();
    let double = run(
        &[
            "--model",
            m,
            "--prompt",
            "Name a colour.",
            "--chat",
            "--system",
            "Be brief.",
            "--json",
            "--n-predict",
            "40",
            "--temp",
            "0.7",
            "--top-k",
            "20",
            "--top-p",
            "0.9",
            "--min-p",
            "0.1",
            "--seed",
            "5",
            "--threads",
            "2",
            "--ctx",
            "512",
            "--stats",
        ],
        b"",
    );
    double.assert_ok();
    assert_eq!(single.stdout, double.stdout);
    assert!(
        single.stderr.contains("2 threads · ctx 512"),
        "{}",
        single.stderr
    );
    assert_eq!(single.stop(), double.stop());
}

#[test]
fn the_prompt_can_come_from_stdin() {
    let model = real_model(RealModel::SmolLM2);
    let m = model.to_str().unwrap();
    let args = ["-m", m, "-chat", "-n", "12", "-temp", "0"];
    let mut from_flag = args.to_vec();
    from_flag.extend(["-p", "Say hi."]);
    let mut from_stdin = args.to_vec();
    from_stdin.extend(["-p", "-"]);
    let a = run(&from_flag, b"");
    let b = run(&from_stdin, b"Say hi.\n");
    a.assert_ok();
    b.assert_ok();
    assert!(!a.stdout.trim().is_empty());
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(
        a.summary().split(" in ").next(),
        b.summary().split(" in ").next()
    );
}

/// `llamay run -m SmolLM2 <args> -p "Once upon a time"` with its output piped, once it
/// has written its first byte: the child, the rest of its stdout, and that byte.
fn run_until_first_byte(args: &[&str]) -> (std::process::Child, std::process::ChildStdout, u8) {
    let model = real_model(RealModel::SmolLM2);
    let mut child = Command::new(env!("CARGO_BIN_EXE_llamay"))
        .args(["run", "-m", model.to_str().unwrap()])
        .args(args)
        .args(["-p", "Once upon a time"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    (child, stdout, first[0])
}

#[test]
fn ctrl_c_stops_cleanly_with_the_statistics() {
    // Wait for the first text, so the signal lands mid-generation.
    let (child, mut stdout, first) = run_until_first_byte(&["-n", "4000", "-ctx", "4096"]);
    let sent = Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        sent.elapsed() < Duration::from_secs(10),
        "took {:?} to stop",
        sent.elapsed()
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("prompt "))
        .unwrap_or("");
    assert!(line.ends_with("stop: cancelled"), "{stderr}");
    // Whole characters only, even when cut short.
    assert!(String::from_utf8([&[first][..], &rest].concat()).is_ok());
}

/// `llamay run … | head -c 1`: the reader goes away mid-generation, and the run still
/// ends as a run does, with its statistics, rather than in a panic.
#[test]
fn a_reader_that_goes_away_ends_the_run_without_a_panic() {
    let (child, stdout, _) = run_until_first_byte(&["--local", "-n", "24"]);
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.lines().any(|l| l.starts_with("prompt ")), "{stderr}");
}

#[test]
fn a_draft_model_changes_nothing_but_must_share_the_vocabulary() {
    let model = real_model(RealModel::SmolLM2);
    let m = model.to_str().unwrap();
    let args = [
        "-p",
        "Write a haiku about rain.",
        "-n",
        "24",
        "-temp",
        "0",
        "-stats",
    ];
    let plain = run_model(&model, &[&args[..], &["-no-spec"]].concat());
    plain.assert_ok();
    let drafted = run_model(&model, &[&args[..], &["-draft", m]].concat());
    drafted.assert_ok();
    assert_eq!(drafted.stdout, plain.stdout);
    // The model drafting for itself: every draft is taken.
    let line = drafted
        .stderr
        .lines()
        .find(|l| l.starts_with("speculation:"))
        .unwrap_or_else(|| panic!("no speculation line: {}", drafted.stderr));
    assert!(line.ends_with("(100%)"), "{line}");
    let other = real_model(RealModel::Qwen25);
    let out = run_model(
        &model,
        &[&args[..], &["-draft", other.to_str().unwrap()]].concat(),
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("another vocabulary"), "{}", out.stderr);
}

/// `-mmproj` and `-image`: the picture read from its file, placed at the prompt's
/// marker, encoded and fed as libmtmd lays it out — the text the runtime's own image
/// path writes (which `runtime/tests/vision_generate.rs` checks against llama.cpp);
/// another picture gives another text; `-image` on a model without a projector is one
/// line naming the capability and the flag. Sampled with a seed, not greedy: the tiny
/// random model's greedy text hardly depends on the picture, its sampled text (the
/// same seed, the same logits) does.
#[test]
fn an_image_prompt_reads_the_picture() {
    use llamay_runtime::{generate_pieces, GenerationParams, LoadedModel, MediaPrompt};
    let text_model = llamay_testdata::ref_path("tiny/tiny-gemma3-Q6_K.gguf");
    let projector = llamay_testdata::vision_model("gemma3-F32");
    let images = llamay_testdata::vision_reference().join("images");
    let prompt = "<start_of_turn>user\n<__media__>What is in this picture?<end_of_turn>\n\
                  <start_of_turn>model\n";
    let cli = |picture: &str| {
        let image = images.join(picture);
        let args = [
            "-m",
            text_model.to_str().unwrap(),
            "-mmproj",
            projector.to_str().unwrap(),
            "-image",
            image.to_str().unwrap(),
            "-p",
            prompt,
            "-n",
            "16",
            "-temp",
            "1",
            "-seed",
            "3",
            "-threads",
            "2",
        ];
        let out = run(&args, b"");
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        out.stdout.trim_end_matches('\n').to_string()
    };
    let opts = llamay_engine::LoadOptions {
        n_threads: Some(2),
        ..Default::default()
    };
    let lm = LoadedModel::load(&text_model, &opts)
        .unwrap()
        .with_vision(&projector, &opts)
        .unwrap();
    let bytes = std::fs::read(images.join("square-rgb.png")).unwrap();
    let media =
        MediaPrompt::encode(&lm.tokenizer, lm.vision().unwrap(), prompt, &[&bytes[..]]).unwrap();
    // `run`'s defaults besides the temperature and the seed.
    let params = GenerationParams {
        max_tokens: 16,
        sampler: llamay_engine::SamplerConfig {
            temperature: 1.0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            seed: 3,
            ..Default::default()
        },
        ..Default::default()
    };
    let g = generate_pieces(
        &lm.model,
        &lm.tokenizer,
        &media.pieces(),
        (&params, None),
        &std::sync::atomic::AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap();
    let square = cli("square-rgb.png");
    assert_eq!(
        square,
        String::from_utf8_lossy(&g.text).trim_end_matches('\n')
    );
    assert_ne!(square, cli("gif.gif"), "the picture changes nothing");

    let out = run(
        &[
            "-m",
            text_model.to_str().unwrap(),
            "-image",
            images.join("square-rgb.png").to_str().unwrap(),
            "-p",
            prompt,
        ],
        b"",
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("vision") && out.stderr.contains("-mmproj"),
        "{}",
        out.stderr
    );
}
