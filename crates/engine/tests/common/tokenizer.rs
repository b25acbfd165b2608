//! A GGUF file's tokenizer, for the tests that need only the vocabulary, and the checks
//! against the references the vocabulary scripts write.

// Each test binary that includes `common` uses its own part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use llamay_engine::{GgufFile, PreTokenizer, Tokenizer};

/// The tokenizer of the GGUF file at `path`; a failure panics naming the file.
pub fn load(path: impl AsRef<Path>) -> Tokenizer {
    let path = path.as_ref();
    let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A reference JSON written by one of the vocabulary scripts (`make-tekken-vocab`,
/// `make-o200k-vocab`).
pub fn reference(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).expect("reference json")
}

/// A JSON array of token ids.
pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("ids")
        .iter()
        .map(|x| x.as_u64().expect("an id") as u32)
        .collect()
}

/// Every reference case (`text`, `source`, `ids`) encodes to its ids (no BOS, no special
/// parsing). Prints cases and identical ones per corpus (the part of `source` before
/// its first `/`), and fails if any differs or one of `corpora` has no case.
pub fn assert_cases_encode(tok: &Tokenizer, cases: &[serde_json::Value], corpora: &[&str]) {
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
    let rows: Vec<String> = table
        .iter()
        .map(|(k, (n, same))| format!("{k:<10}{n:>6}{same:>10}"))
        .collect();
    let summary = format!(
        "{:<10}{:>6}{:>10}\n{}",
        "corpus",
        "cases",
        "identical",
        rows.join("\n")
    );
    println!("{summary}");
    for corpus in corpora {
        assert!(
            table.get(corpus).is_some_and(|r| r.0 > 0),
            "no {corpus} cases"
        );
    }
    assert!(failures.is_empty(), "{summary}\n\n{}", failures.join("\n"));
}

/// The pre-tokenizer alone: every case splits into the reference's `words`. The ids
/// hide most word boundaries (BPE over a wrongly joined or cut word often gives the
/// same ids), so this is checked on its own.
pub fn assert_cases_split(pre: PreTokenizer, cases: &[serde_json::Value]) {
    let (mut spans, mut scratch) = (Vec::new(), Vec::new());
    let mut failures = Vec::new();
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
