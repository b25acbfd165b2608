//! Mistral's tekken (tiktoken-style) vocabulary as a GGUF carries it (`gpt2` BPE with
//! merges derived from the ranks, `pre = tekken`), against mistral-common's own
//! tokenizer. `scripts/make-tekken-vocab` builds both from mistral-common's wheel: the
//! vocabulary-only GGUF of Mistral Nemo's `tekken_240718.json` and the ids that
//! `Tekkenizer.encode(text, bos=False, eos=False)` gives for every case (SmolLM2's
//! reference strings, llama.cpp's tokenizer test inputs, seeded random strings), with
//! the words the tekken pattern splits each into (Python's `regex`).

use std::collections::BTreeMap;
use std::path::Path;

use llamay_engine::PreTokenizer;
use llamay_testdata::tekken_vocab;
use serde_json::Value;

mod common;

fn reference(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).expect("reference json")
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("ids")
        .iter()
        .map(|x| x.as_u64().expect("an id") as u32)
        .collect()
}

#[test]
fn every_case_gives_mistral_common_ids() {
    let (gguf, reference_path) = tekken_vocab();
    let r = reference(&reference_path);
    let tok = common::tokenizer::load(&gguf);
    assert_eq!(tok.n_vocab() as u64, r["n_words"].as_u64().unwrap());

    let cases = r["cases"].as_array().expect("cases");
    // Per corpus (the part of `source` before its first `/`): cases, identical.
    let mut table: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for c in cases {
        let (text, source) = (c["text"].as_str().unwrap(), c["source"].as_str().unwrap());
        let want = ids(&c["ids"]);
        let got = tok.encode(text.as_bytes(), false, false);
        let row = table.entry(source.split('/').next().unwrap()).or_default();
        row.0 += 1;
        if got == want {
            row.1 += 1;
        } else if failures.len() < 10 {
            failures.push(format!("{source} {text:?}: got {got:?}, want {want:?}"));
        }
    }
    let summary: Vec<String> = table
        .iter()
        .map(|(k, (n, same))| format!("{k:<10}{n:>6}{same:>10}"))
        .collect();
    let summary = format!(
        "{:<10}{:>6}{:>10}\n{}",
        "corpus",
        "cases",
        "identical",
        summary.join("\n")
    );
    println!("{summary}");
    for corpus in ["smollm2", "llamacpp", "random"] {
        assert!(
            table.get(corpus).is_some_and(|r| r.0 > 0),
            "no {corpus} cases"
        );
    }
    assert!(failures.is_empty(), "{summary}\n\n{}", failures.join("\n"));
}

/// The pre-tokenizer alone: the ids hide most word boundaries (no token crosses a
/// case change, so BPE over a wrongly joined word often gives the same ids).
#[test]
fn every_case_splits_into_the_patterns_words() {
    let r = reference(&tekken_vocab().1);
    let pre = PreTokenizer::from_name("tekken").expect("tekken is known");
    let (mut spans, mut scratch) = (Vec::new(), Vec::new());
    let mut failures = Vec::new();
    let cases = r["cases"].as_array().expect("cases");
    for c in cases {
        let text = c["text"].as_str().unwrap();
        let want: Vec<&str> = c["words"]
            .as_array()
            .expect("words")
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        let chars: Vec<char> = text.chars().collect();
        let cpts: Vec<u32> = chars.iter().map(|&c| c as u32).collect();
        pre.split(&cpts, &mut spans, &mut scratch);
        let got: Vec<String> = spans
            .iter()
            .map(|&(a, b)| chars[a..b].iter().collect())
            .collect();
        if got != want {
            failures.push(format!(
                "{} {text:?}: got {got:?}, want {want:?}",
                c["source"]
            ));
        }
    }
    println!(
        "{} of {} cases split alike",
        cases.len() - failures.len(),
        cases.len()
    );
    failures.truncate(10);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn specials_come_first_and_bos_is_added() {
    let (gguf, reference_path) = tekken_vocab();
    let r = reference(&reference_path);
    let tok = common::tokenizer::load(&gguf);
    let n_special = r["num_special_tokens"].as_u64().unwrap() as u32;
    for (i, s) in r["special_tokens"].as_array().unwrap().iter().enumerate() {
        let i = i as u32;
        assert_eq!(tok.token_text(i), s.as_str().unwrap().as_bytes());
        assert!(tok.is_control(i), "special {i} is a control token");
    }
    // Ordinary tokens start after the specials: rank 0 is the byte 0x00.
    assert_eq!(tok.token_bytes(n_special), b"\0");
    assert!(!tok.is_control(n_special));
    let bos = r["bos_id"].as_u64().unwrap() as u32;
    assert_eq!(tok.bos(), Some(bos));
    assert_eq!(tok.eos(), Some(r["eos_id"].as_u64().unwrap() as u32));
    assert!(tok.add_bos(), "llama.cpp adds BOS for tekken");
    let plain = tok.encode(b"Hello world", false, false);
    let with_bos = tok.encode(b"Hello world", true, false);
    assert_eq!(with_bos[0], bos);
    assert_eq!(&with_bos[1..], &plain[..]);
    // With special parsing on, a control token's text is that token.
    assert_eq!(tok.encode(b"[INST]hi", false, true)[0], 3);
}
