//! Every vocabulary llama.cpp ships test vectors for (`models/ggml-vocab-*.gguf` with
//! `.inp`/`.out`, fetched from llama-cpp-python's sdist by
//! `scripts/fetch-llamacpp-vocab`): each case gives llama.cpp's ids. The expected ids
//! were written by llama.cpp's own tooling from the Hugging Face tokenizers; its test
//! tokenizes without added or parsed special tokens, and so does this one.

use llamay_engine::{GgufFile, Tokenizer};
use llamay_testdata::{llamacpp_vocab, llamacpp_vocab_cases};

const VOCABS: &[&str] = &[
    "bert-bge",
    "command-r",
    "deepseek-coder",
    "deepseek-llm",
    "falcon",
    "gemma-4",
    "gpt-2",
    "llama-bpe",
    "llama-spm",
    "mpt",
    "phi-3",
    "qwen2",
    "qwen35",
    "refact",
    "starcoder",
];

#[test]
fn every_case_of_every_vocabulary_gives_llama_cpp_ids() {
    let mut table = Vec::new();
    let mut failures = Vec::new();
    for vocab in VOCABS {
        let path = llamacpp_vocab(vocab);
        let cases = llamacpp_vocab_cases(&path);
        assert!(!cases.is_empty(), "{vocab}: no cases");
        let f = GgufFile::open(&path).unwrap_or_else(|e| panic!("{vocab}: {e}"));
        let tok = match Tokenizer::from_gguf(&f) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{vocab}: refused at load: {e}"));
                table.push(format!("{vocab:<16}{:>6}{:>10}", cases.len(), "refused"));
                continue;
            }
        };
        let mut same = 0;
        for (text, want) in &cases {
            let got = tok.encode(text.as_bytes(), false, false);
            if &got == want {
                same += 1;
            } else if failures.iter().filter(|f| f.starts_with(vocab)).count() < 5 {
                failures.push(format!("{vocab}: {text:?}: got {got:?}, want {want:?}"));
            }
        }
        table.push(format!("{vocab:<16}{:>6}{same:>10}", cases.len()));
        if same != cases.len() {
            failures.push(format!("{vocab}: {same} of {} identical", cases.len()));
        }
    }
    let table = format!(
        "{:<16}{:>6}{:>10}\n{}",
        "vocab",
        "cases",
        "identical",
        table.join("\n")
    );
    println!("{table}");
    assert!(failures.is_empty(), "{table}\n\n{}", failures.join("\n"));
}
