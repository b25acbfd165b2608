//! WordPiece (`tokenizer.ggml.model = bert`) against llama.cpp's own test vectors for
//! `ggml-vocab-bert-bge` (the vocabulary all-MiniLM-L6-v2 uses), fetched from
//! llama-cpp-python's sdist by `scripts/fetch-llamacpp-vocab`.

use llamay_engine::{Tokenizer, TokenizerKind};
use llamay_testdata::{llamacpp_vocab, llamacpp_vocab_cases};

mod common;

fn bge() -> (Tokenizer, Vec<(String, Vec<u32>)>) {
    let path = llamacpp_vocab("bert-bge");
    let tok = common::tokenizer::load(&path);
    (tok, llamacpp_vocab_cases(&path))
}

/// Every case gives llama.cpp's ids (its test tokenizes with add_special and
/// parse_special both off).
#[test]
fn every_bge_case_gives_llama_cpp_ids() {
    let (tok, cases) = bge();
    assert_eq!(tok.kind(), TokenizerKind::Wpm);
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (text, want) in &cases {
        let got = tok.encode(text.as_bytes(), false, false);
        if &got != want {
            failures.push(format!("{text:?}: got {got:?}, want {want:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// With special tokens on, a text is framed in CLS .. SEP, and the special ids are
/// llama.cpp's defaults for BERT.
#[test]
fn special_tokens_frame_the_text() {
    let (tok, _) = bge();
    let s = tok.special_ids();
    assert_eq!(
        (s.bos, s.sep, s.unk, s.pad, s.mask),
        (Some(101), Some(102), Some(100), Some(0), Some(103))
    );
    assert!(tok.add_sep());
    assert_eq!(
        tok.encode(b"Hello world", true, false),
        [101, 7592, 2088, 102]
    );
    assert_eq!(tok.encode(b"", true, false), [101, 102]);
    // Written special tokens are tokens only when asked for.
    assert_eq!(tok.encode(b"[SEP]", false, true), [102]);
    assert_ne!(tok.encode(b"[SEP]", false, false), [102]);
}
