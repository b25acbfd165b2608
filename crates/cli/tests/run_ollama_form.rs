//! `llamay run` as Ollama users type it: `run MODEL [PROMPT]`, the prompt piped on
//! stdin, `--format`, and the help and completions a serious CLI ships.

mod common;

use std::process::Command;

use common::run::*;
use llamay_testdata::{real_model, RealModel};

fn llamay(args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_llamay"))
        .args(args)
        .output()
        .unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn validates(schema_path: &std::path::Path, doc: &str) {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(doc.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {doc:?}"));
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&v), "{v} does not fit {schema}");
}

#[test]
fn a_piped_document_with_a_schema_prints_a_valid_document() {
    let model = real_model(RealModel::SmolLM2);
    let schema =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/server.schema.json");
    let out = run(
        &[
            model.to_str().unwrap(),
            "-schema",
            schema.to_str().unwrap(),
            "-n",
            "120",
        ],
        b"Give me a JSON object describing a local web server.\n",
    );
    out.assert_ok();
    validates(&schema, &out.stdout);
}

#[test]
fn the_ollama_form_is_a_chat_and_matches_the_flag_form() {
    let model = real_model(RealModel::SmolLM2);
    let m = model.to_str().unwrap();
    let knobs = ["-n", "16", "--temp", "0"];
    let mut ollama = vec![m, "What is the capital of France?"];
    ollama.extend(knobs);
    let mut flags = vec!["-m", m, "-chat", "-p", "What is the capital of France?"];
    flags.extend(knobs);
    let mut raw = vec!["-m", m, "-p", "What is the capital of France?"];
    raw.extend(knobs);
    let (a, b, c) = (run(&ollama, b""), run(&flags, b""), run(&raw, b""));
    a.assert_ok();
    b.assert_ok();
    c.assert_ok();
    assert!(!a.stdout.trim().is_empty());
    assert_eq!(a.stdout, b.stdout, "the Ollama form is not the chat form");
    // And the chat template really is in play: the raw prompt continues differently.
    assert_ne!(a.stdout, c.stdout);
    assert_ne!(
        a.summary().split(" in ").next(),
        c.summary().split(" in ").next()
    );
}

#[test]
fn format_is_an_alias_of_json_and_schema() {
    let model = real_model(RealModel::SmolLM2);
    let m = model.to_str().unwrap();
    let schema =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/server.schema.json");
    let inline = std::fs::read_to_string(&schema).unwrap();
    let base = [
        "-m",
        m,
        "-chat",
        "-n",
        "80",
        "--temp",
        "0",
        "-p",
        SEED_JSON_PROMPT,
    ];
    let by_flag = run(
        &[&base[..], &["-schema", schema.to_str().unwrap()]].concat(),
        b"",
    );
    let by_format = run(&[&base[..], &["--format", inline.as_str()]].concat(), b"");
    by_flag.assert_ok();
    by_format.assert_ok();
    validates(&schema, &by_format.stdout);
    assert_eq!(by_flag.stdout, by_format.stdout);
    let json = run(&[&base[..], &["--format", "json"]].concat(), b"");
    let dash_json = run(&[&base[..], &["-json"]].concat(), b"");
    json.assert_ok();
    serde_json::from_str::<serde_json::Value>(json.stdout.trim()).unwrap();
    assert_eq!(json.stdout, dash_json.stdout);
}

#[test]
fn prompts_given_twice_or_not_at_all_are_usage_errors() {
    let both = run(&["some-model", "a prompt", "-p", "another"], b"");
    assert_eq!(both.code, Some(2), "{}", both.stderr);
    assert!(
        both.stderr.contains("give the prompt once"),
        "{}",
        both.stderr
    );
    let none = run(&["some-model"], b"");
    assert_eq!(none.code, Some(2), "{}", none.stderr);
    assert!(none.stderr.contains("no prompt"), "{}", none.stderr);
    let two_formats = run(&["some-model", "hi", "--format", "json", "-json"], b"");
    assert_eq!(two_formats.code, Some(2), "{}", two_formats.stderr);
    let bad_format = run(&["some-model", "hi", "--format", "yaml"], b"");
    assert_eq!(bad_format.code, Some(2), "{}", bad_format.stderr);
    assert!(
        bad_format.stderr.contains("--format"),
        "{}",
        bad_format.stderr
    );
}

#[test]
fn help_lists_every_command_with_an_example() {
    let help = llamay(&["--help"]);
    assert_eq!(help.code, Some(0));
    let commands: Vec<String> = help
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 15, "{}", help.stdout);
    let examples: Vec<&str> = help
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Examples:"))
        .collect();
    for c in &commands {
        let shown = format!("llamay {c} ");
        assert!(
            examples
                .iter()
                .any(|l| l.trim_start().starts_with(&shown) || l.contains(&format!("| {shown}"))),
            "no example of {c} in --help:\n{}",
            help.stdout
        );
    }
}

#[test]
fn completions_are_scripts_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef llamay"),
        ("fish", "complete -c llamay"),
    ] {
        let out = llamay(&["completions", shell]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        assert!(
            out.stdout.contains(marker),
            "{shell}: {}",
            &out.stdout[..out.stdout.len().min(300)]
        );
        // The subcommands are in it.
        assert!(
            out.stdout.contains("serve") && out.stdout.contains("stop"),
            "{shell}"
        );
    }
    let bad = llamay(&["completions", "cmd.exe"]);
    assert_eq!(bad.code, Some(2));
}
