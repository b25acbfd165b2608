//! A GGUF file's tokenizer, for the tests that need only the vocabulary.

// Each test binary that includes `common` uses its own part of it.
#![allow(dead_code)]

use std::path::Path;

use llamay_engine::{GgufFile, Tokenizer};

/// The tokenizer of the GGUF file at `path`; a failure panics naming the file.
pub fn load(path: impl AsRef<Path>) -> Tokenizer {
    let path = path.as_ref();
    let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
