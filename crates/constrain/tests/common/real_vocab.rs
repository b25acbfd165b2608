//! Real model vocabularies for tests, read by the engine's tokenizer (a dev-dependency
//! only: the crate itself knows nothing of models), exactly as the server builds them.
#![allow(dead_code)]

use llamay_constrain::Vocabulary;
use llamay_engine::GgufFile;
use llamay_engine::Tokenizer;
use llamay_testdata::RealModel;
use std::sync::Arc;

/// A model's tokenizer and the constraint vocabulary built from it.
pub struct RealVocab {
    pub tokenizer: Tokenizer,
    pub vocab: Arc<Vocabulary>,
    /// The first end-of-generation token (what a sampler would pick to stop).
    pub eog: u32,
}

pub fn load(m: RealModel) -> RealVocab {
    let f = GgufFile::open(llamay_testdata::real_model(m)).expect("test model opens");
    let tokenizer = Tokenizer::from_gguf(&f).expect("tokenizer loads");
    let vocab = Arc::new(Vocabulary::new(
        tokenizer.vocab_bytes(),
        tokenizer.eog_ids(),
        &tokenizer.control_ids(),
    ));
    let eog = *tokenizer
        .eog_ids()
        .first()
        .expect("an end-of-generation token");
    RealVocab {
        tokenizer,
        vocab,
        eog,
    }
}

/// Tokens by their bytes (the lowest id where several share them), non-special only.
pub fn ids_by_bytes(v: &Vocabulary) -> std::collections::HashMap<Vec<u8>, u32> {
    let mut map = std::collections::HashMap::new();
    for t in 0..v.len() as u32 {
        if !v.is_special(t) {
            if let Some(b) = v.token_bytes(t).filter(|b| !b.is_empty()) {
                map.entry(b.to_vec()).or_insert(t);
            }
        }
    }
    map
}
