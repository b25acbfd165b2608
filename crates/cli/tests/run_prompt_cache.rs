//! `llamay run -prompt-cache FILE`: the first run writes the prompt's KV, a second
//! run of a prompt sharing it reuses it and prints the same greedy text as a run
//! without the cache; a file of another KV type is set aside with a note.

mod common;

use common::run::*;
use llamay_testdata::{real_model, RealModel};

#[test]
fn a_prompt_cache_is_written_then_reused_without_changing_the_text() {
    let model = real_model(RealModel::SmolLM2);
    let model = model.to_str().unwrap();
    let dir = std::env::temp_dir().join(format!("llamay-prompt-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("p.kv");
    let _ = std::fs::remove_file(&file);
    let file_s = file.to_str().unwrap();
    let prompt: String = (0..60)
        .map(|i| format!("station{i} level {}", i * 7))
        .collect::<Vec<_>>()
        .join(" ")
        + " Which station is last?";
    let base = ["-m", model, "--local", "--temp", "0", "-n", "8", "--stats"];
    let go = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        a.extend(["-p", &prompt]);
        let out = run(&a, b"");
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        out
    };
    let plain = go(&[]);
    let first = go(&["--prompt-cache", file_s]);
    assert!(file.is_file());
    assert!(first.stderr.contains(": 0 of "), "{}", first.stderr);
    let second = go(&["--prompt-cache", file_s]);
    assert!(!second.stderr.contains(": 0 of "), "{}", second.stderr);
    assert_eq!(first.stdout, plain.stdout);
    assert_eq!(second.stdout, plain.stdout);
    // Another KV type cannot read the file: it is not used (and is rewritten).
    let f16 = go(&["--prompt-cache", file_s, "--kv", "f16"]);
    assert!(f16.stderr.contains("is not used"), "{}", f16.stderr);
    assert!(f16.stderr.contains(": 0 of "), "{}", f16.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}
