//! The Rust side of the Python package's parity test: seeded random walks over JSON
//! Schemas with a GGUF model's vocabulary, built exactly as `llamay serve` builds it,
//! printing each step's mask as a SHA-256 of its 32-bit words (the layout the Python
//! API writes) and the token taken. `tests/test_parity.py` replays the same tokens
//! through the Python API and compares every step's mask.
//!
//! Usage: `mask_walks MODEL.gguf SEED MAX_STEPS SCHEMA.json...` -> one JSON line each.

use llamay_constrain::{schema_grammar, Constraint, TokenMask, Vocabulary};
use llamay_engine::{GgufFile, Tokenizer};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// xorshift64*, seeded per schema so each walk is reproducible alone.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
}

fn mask_hash(mask: &TokenMask, words: &mut [u32]) -> String {
    mask.write_u32_words(words);
    let mut h = Sha256::new();
    for w in words.iter() {
        h.update(w.to_le_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn walk(c: &Constraint, vocab: &Vocabulary, rng: &mut Rng, max_steps: usize) -> serde_json::Value {
    let mut m = c.matcher();
    let mut mask = TokenMask::new(vocab.len());
    let mut words = vec![0u32; vocab.len().div_ceil(32)];
    let (mut tokens, mut hashes) = (Vec::new(), Vec::new());
    for step in 0..max_steps {
        m.mask(&mut mask);
        hashes.push(mask_hash(&mask, &mut words));
        let allowed: Vec<u32> = mask.allowed().collect();
        if allowed.is_empty() {
            break;
        }
        // Past the first half, end as soon as the grammar allows it.
        let eog = allowed.iter().copied().find(|&t| vocab.is_eog(t));
        let t = match eog {
            Some(e) if step >= max_steps / 2 => e,
            _ => allowed[(rng.next() % allowed.len() as u64) as usize],
        };
        m.commit(t).expect("an allowed token commits");
        tokens.push(t);
        if vocab.is_eog(t) {
            break;
        }
    }
    serde_json::json!({"tokens": tokens, "sha256": hashes})
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, seed, max_steps, files @ ..] = args.as_slice() else {
        eprintln!("usage: mask_walks MODEL.gguf SEED MAX_STEPS SCHEMA.json...");
        std::process::exit(2);
    };
    let seed: u64 = seed.parse().expect("SEED is a number");
    let max_steps: usize = max_steps.parse().expect("MAX_STEPS is a number");
    let f = GgufFile::open(model).expect("the model opens");
    let t = Tokenizer::from_gguf(&f).expect("its tokenizer loads");
    let vocab = Arc::new(Vocabulary::new(
        t.vocab_bytes(),
        t.eog_ids(),
        &t.control_ids(),
    ));
    for (i, file) in files.iter().enumerate() {
        let text = std::fs::read_to_string(file).expect("the schema file reads");
        let doc: serde_json::Value = serde_json::from_str(&text).expect("the file is JSON");
        // A JSONSchemaBench entry wraps its schema with metadata.
        let value = doc.get("schema").cloned().unwrap_or(doc);
        let mut line = match schema_grammar(&value) {
            Err(e) => serde_json::json!({"refused": e.to_string()}),
            Ok((g, _)) => match Constraint::from_grammar(&g, vocab.clone()) {
                Err(e) => serde_json::json!({"refused": e.to_string()}),
                Ok(c) => {
                    let mut rng = Rng((seed ^ (i as u64 + 1)).wrapping_mul(0x9E3779B97F4A7C15) | 1);
                    walk(&c, &vocab, &mut rng, max_steps)
                }
            },
        };
        line["file"] = serde_json::json!(file);
        println!("{line}");
    }
}
