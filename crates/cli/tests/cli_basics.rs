//! The `llamay` binary's foundation commands, run as a user runs them.

use std::io::Write;
use std::process::{Command, Stdio};

use llamay_testdata::{real_model, ref_path, RealModel};

fn llamay() -> Command {
    Command::new(env!("CARGO_BIN_EXE_llamay"))
}

fn tokenize(model: &std::path::Path, args: &[&str], input: &[u8]) -> (bool, String, String) {
    let mut child = llamay()
        .arg("tokenize")
        .arg("-m")
        .arg(model)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn tokenize_prints_llama_cpp_ids() {
    let model = real_model(RealModel::SmolLM2);
    let r: serde_json::Value = serde_json::from_slice(
        &std::fs::read(ref_path(&format!(
            "tokenize/{}.json",
            RealModel::SmolLM2.stem()
        )))
        .unwrap(),
    )
    .unwrap();
    let case = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["text"].as_str() == Some("<|im_start|>user\nHi<|im_end|>"))
        .or_else(|| {
            r["cases"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["category"] == "special_strings")
        })
        .unwrap();
    let text = case["text"].as_str().unwrap();
    for (flag, variant) in [(None, "plain"), (Some("-special"), "special")] {
        let args: Vec<&str> = flag.into_iter().chain(["-no-bos"]).collect();
        let (ok, out, err) = tokenize(&model, &args, text.as_bytes());
        assert!(ok, "{err}");
        let want: Vec<String> = case[variant]["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect();
        assert_eq!(out.trim(), format!("[{}]", want.join(", ")), "{variant}");
    }
    let (ok, out, _) = tokenize(&model, &["-json"], b"Hello world");
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let joined: String = v["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["text"].as_str().unwrap())
        .collect();
    assert_eq!(joined, "Hello world");
}

#[test]
fn show_describes_a_tiny_model_and_json_parses() {
    let path = ref_path("tiny/tiny-gemma3-Q4_K.gguf");
    let out = llamay().arg("show").arg(&path).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("gemma3"), "{text}");
    assert!(text.contains("Q4_K 29"), "{text}");
    let out = llamay()
        .arg("show")
        .arg(&path)
        .arg("-json")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["architecture"], "gemma3");
    assert_eq!(v["vocab_size"], 512);
    assert_eq!(v["block_count"], 4);
    assert_eq!(v["chat_template"], false);
    assert_eq!(v["tensor_types"]["F32"], 25);
}

#[test]
fn bad_files_give_one_line_errors() {
    let dir = std::env::temp_dir().join(format!("llamay-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.gguf");
    std::fs::write(&bad, b"GGUF\x03\x00\x00\x00truncated").unwrap();
    for args in [
        vec!["show".to_string(), bad.display().to_string()],
        vec!["tokenize".into(), "-m".into(), bad.display().to_string()],
        vec!["show".into(), "/definitely/not/here.gguf".into()],
    ] {
        let out = llamay().args(&args).stdin(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.starts_with("llamay: "), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn show_names_experts_and_a_broken_expert_file_is_one_line() {
    let moe = llamay_testdata::moe_model("gpt-oss-Q8_0");
    let out = llamay().arg("show").arg(&moe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("8 (2 used per token)"), "{text}");
    assert!(text.contains("Q8_0 16"), "{text}");
    let out = llamay().args(["show", "-json"]).arg(&moe).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["expert_count"].as_u64(), v["expert_used_count"].as_u64()),
        (Some(8), Some(2))
    );
    let bad = llamay_testdata::moe_model("qwen3moe-bad-count");
    let out = llamay()
        .arg("run")
        .arg("-m")
        .arg(&bad)
        .args(["hello", "-n", "2"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("blk.0.ffn_gate_exps.weight"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
