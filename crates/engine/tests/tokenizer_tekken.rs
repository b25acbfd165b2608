//! Mistral's tekken (tiktoken-style) vocabulary as a GGUF carries it (`gpt2` BPE with
//! merges derived from the ranks, `pre = tekken`), against mistral-common's own
//! tokenizer. `scripts/make-tekken-vocab` builds both from mistral-common's wheel: the
//! vocabulary-only GGUF of Mistral Nemo's `tekken_240718.json` and the ids that
//! `Tekkenizer.encode(text, bos=False, eos=False)` gives for every case (SmolLM2's
//! reference strings, llama.cpp's tokenizer test inputs, seeded random strings), with
//! the words the tekken pattern splits each into (Python's `regex`).

use llamay_engine::PreTokenizer;
use llamay_testdata::tekken_vocab;

mod common;

use common::tokenizer::{assert_cases_encode, assert_cases_split, reference};

#[test]
fn every_case_gives_mistral_common_ids() {
    let (gguf, reference_path) = tekken_vocab();
    let r = reference(&reference_path);
    let tok = common::tokenizer::load(&gguf);
    assert_eq!(tok.n_vocab() as u64, r["n_words"].as_u64().unwrap());
    let cases = r["cases"].as_array().expect("cases");
    assert_cases_encode(&tok, cases, &["smollm2", "llamacpp", "random"]);
}

#[test]
fn every_case_splits_into_the_patterns_words() {
    let r = reference(&tekken_vocab().1);
    let pre = PreTokenizer::from_name("tekken").expect("tekken is known");
    assert_cases_split(pre, r["cases"].as_array().expect("cases"));
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
