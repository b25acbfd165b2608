//! Round trips, streaming decoding and robustness on the three reference vocabularies.

use std::sync::OnceLock;

use llamay_engine::{PreTokenizer, Tokenizer, TokenizerKind};
use llamay_testdata::{real_model, ref_path, RealModel};
use proptest::prelude::*;
use serde_json::Value;

mod common;
use common::tokenizer::load;

fn tokenizers() -> &'static [(&'static str, Tokenizer)] {
    static T: OnceLock<Vec<(&'static str, Tokenizer)>> = OnceLock::new();
    T.get_or_init(|| {
        vec![
            ("tiny-bpe", load(ref_path("tiny/tiny-llama-F32.gguf"))),
            (
                "SmolLM2-135M-Instruct.Q4_1",
                load(real_model(RealModel::SmolLM2)),
            ),
            ("gemma-3-270m-Q4_K_M", load(real_model(RealModel::Gemma3))),
        ]
    })
}

/// The corpus strings that are valid UTF-8.
fn texts(stem: &str) -> Vec<String> {
    let p = ref_path(&format!("tokenize/{stem}.json"));
    let r: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn kinds_are_recognised() {
    let t = tokenizers();
    assert_eq!(
        t[0].1.kind(),
        TokenizerKind::Bpe {
            pre: PreTokenizer::Default
        }
    );
    assert_eq!(
        t[1].1.kind(),
        TokenizerKind::Bpe {
            pre: PreTokenizer::Smollm
        }
    );
    assert_eq!(t[2].1.kind(), TokenizerKind::Spm);
}

/// The bytes a vocabulary can spell on their own (SmolLM2 has no token for some
/// control bytes; llama.cpp drops such bytes, and so do we).
fn spellable(tok: &Tokenizer) -> [bool; 256] {
    let mut ok = [false; 256];
    for id in 0..tok.n_vocab() as u32 {
        if let [b] = tok.token_bytes(id) {
            ok[*b as usize] |= !tok.is_control(id);
        }
    }
    ok
}

/// decode(encode(text)) == text, byte for byte, for every valid UTF-8 corpus string
/// (none of these vocabularies adds a space prefix), except for bytes the vocabulary
/// has no token for, which disappear.
#[test]
fn decode_inverts_encode() {
    for (stem, tok) in tokenizers() {
        let ok = spellable(tok);
        let (mut n, mut lossy) = (0, 0);
        for text in texts(stem) {
            let want: Vec<u8> = text
                .bytes()
                .filter(|&b| b >= 0x80 || ok[b as usize])
                .collect();
            lossy += usize::from(want.len() != text.len());
            for parse_special in [false, true] {
                let ids = tok.encode(text.as_bytes(), false, parse_special);
                assert_eq!(
                    String::from_utf8_lossy(&tok.decode(&ids)),
                    String::from_utf8_lossy(&want),
                    "{stem} parse_special={parse_special}"
                );
                n += 1;
            }
        }
        assert_eq!(n, 2 * 318, "{stem}: every valid case checked");
        println!(
            "{stem}: {} cases round-trip exactly, {lossy} lose unspellable bytes",
            318 - lossy
        );
    }
}

/// Streaming yields the same bytes as `decode`, and for valid text every chunk is
/// valid UTF-8 on its own.
#[test]
fn streaming_never_splits_a_character() {
    for (stem, tok) in tokenizers() {
        let mut split_chars = 0;
        for text in texts(stem) {
            let ids = tok.encode(text.as_bytes(), false, true);
            let mut dec = tok.stream_decoder(true);
            let mut all = Vec::new();
            for &id in &ids {
                let chunk = dec.push(id);
                assert!(
                    std::str::from_utf8(&chunk).is_ok(),
                    "{stem}: chunk {chunk:?} of {text:?}"
                );
                if std::str::from_utf8(tok.token_bytes(id)).is_err() {
                    split_chars += 1;
                }
                all.extend(chunk);
            }
            all.extend(dec.finish());
            assert_eq!(all, tok.decode(&ids));
        }
        // The corpus does exercise tokens that hold part of a character.
        assert!(split_chars > 0, "{stem}");
    }
}

#[test]
fn stream_decoder_passes_invalid_bytes_and_flushes() {
    let tok = &tokenizers()[2].1;
    let byte = |b: u8| tok.token_id(&format!("<0x{b:02X}>")).unwrap();
    let mut dec = tok.stream_decoder(false);
    assert_eq!(dec.push(byte(0xE2)), b"");
    assert_eq!(dec.push(byte(0x82)), b"");
    assert_eq!(dec.push(byte(0xAC)), "€".as_bytes());
    assert_eq!(dec.push(byte(0xFF)), b"\xff");
    assert_eq!(dec.push(byte(0xF0)), b"");
    assert_eq!(dec.finish(), b"\xf0");
    // Control tokens render as nothing unless asked for.
    assert_eq!(dec.push(tok.bos().unwrap()), b"");
    assert_eq!(tok.stream_decoder(true).push(tok.bos().unwrap()), b"<bos>");
}

/// Where llama.cpp aborts (a sequence above U+10FFFF), BPE sees four invalid bytes.
#[test]
fn above_unicode_range_is_four_replacement_characters() {
    let smol = &tokenizers()[1].1;
    let fffd = smol.encode("\u{FFFD}".as_bytes(), false, false);
    assert_eq!(fffd.len(), 1);
    assert_eq!(
        smol.encode(b"\xf4\x90\x80\x80", false, false),
        vec![fffd[0]; 4]
    );
}

#[test]
fn tokenizer_is_shareable() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Tokenizer>();
    let tok = &tokenizers()[1].1;
    let want = tok.encode(b"Hello from a thread", false, false);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| tok.encode(b"Hello from a thread", false, false)))
            .collect();
        for h in hs {
            assert_eq!(h.join().unwrap(), want);
        }
    });
}

#[test]
fn vocabulary_views() {
    for (stem, tok) in tokenizers() {
        let bytes = tok.vocab_bytes();
        assert_eq!(bytes.len(), tok.n_vocab());
        for (id, b) in bytes.iter().enumerate() {
            assert_eq!(b.as_slice(), tok.token_bytes(id as u32));
        }
        let control = tok.control_ids();
        assert!(control.contains(&tok.eos().unwrap()), "{stem}");
        assert!(control.iter().all(|&id| tok.is_control(id)));
        assert!(tok.eog_ids().iter().all(|&id| tok.is_control(id)));
        assert_eq!(tok.token_bytes(u32::MAX), b"");
        assert_eq!(tok.token_id("definitely not a token \u{1}"), None);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any bytes at all: no panic, and only ids inside the vocabulary.
    #[test]
    fn arbitrary_bytes_never_crash(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        for (_, tok) in tokenizers() {
            for ps in [false, true] {
                let ids = tok.encode(&bytes, true, ps);
                prop_assert!(ids.iter().all(|&id| (id as usize) < tok.n_vocab()));
                let _ = tok.detokenize(&ids, true, ps);
            }
        }
    }

    /// Any valid UTF-8 (special-looking pieces included) round-trips.
    #[test]
    fn arbitrary_text_round_trips(text in "(\\PC|[ \\n\\t]|<\\|im_end\\|>|<end_of_turn>|<tool_call>){0,80}") {
        for (_, tok) in tokenizers() {
            for ps in [false, true] {
                let ids = tok.encode(text.as_bytes(), false, ps);
                prop_assert_eq!(tok.decode(&ids), text.as_bytes().to_vec());
            }
        }
    }
}

/// Long runs (many overlapping special-token matches, one huge word, no merge
/// barriers) stay fast and still round-trip.
#[test]
fn pathological_runs_stay_fast() {
    let inputs = [
        "\n".repeat(200_000),
        " ".repeat(200_000),
        "a".repeat(200_000),
        "<|im_end|><end_of_turn>".repeat(10_000),
        "9".repeat(100_000),
    ];
    for (stem, tok) in tokenizers() {
        for text in &inputs {
            let t = std::time::Instant::now();
            let ids = tok.encode(text.as_bytes(), false, true);
            let dt = t.elapsed();
            assert_eq!(tok.decode(&ids), text.as_bytes(), "{stem}");
            assert!(
                dt.as_secs_f64() < 5.0,
                "{stem}: {} bytes took {dt:?}",
                text.len()
            );
            println!(
                "{stem}: {:?}x{} -> {} ids in {dt:?}",
                &text[..1],
                text.len(),
                ids.len()
            );
        }
    }
}
