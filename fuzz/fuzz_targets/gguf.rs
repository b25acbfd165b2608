//! The GGUF reader on arbitrary bytes, then what is built from a file's metadata
//! (model facts, the tokenizer) and a tokenization with the result. Must not panic;
//! an accepted file's tensors and arrays must be readable to their stated sizes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llamay_engine::{GgufFile, ModelFacts, Tokenizer, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(f) = GgufFile::from_bytes(data.to_vec()) else {
        return;
    };
    for t in f.tensors() {
        assert_eq!(f.tensor_data(t).len() as u64, t.size, "tensor {}", t.name);
    }
    for (_, v) in f.metadata() {
        if let Value::Array(a) = v {
            assert_eq!(f.array_items(a).count() as u64, a.len);
        }
    }
    let _ = ModelFacts::from_gguf(&f);
    if let Ok(tok) = Tokenizer::from_gguf(&f) {
        let ids = tok.encode("Hello wörld, <s> 12 345\n\t😀".as_bytes(), true, true);
        for id in ids {
            let _ = tok.token_bytes(id);
        }
    }
});
