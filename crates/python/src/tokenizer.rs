//! `Tokenizer`: a model's vocabulary as the constraint sees it (token bytes,
//! end-of-generation and special ids), built once and shared between threads.

use crate::hf;
use llamay_constrain::Vocabulary;
use llamay_engine::{GgufFile, Tokenizer};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::Arc;

/// A vocabulary for constraints. Immutable, so one instance serves every thread.
#[pyclass(name = "Tokenizer", module = "llamay", frozen)]
pub struct PyTokenizer {
    pub vocab: Arc<Vocabulary>,
}

impl PyTokenizer {
    fn new(tokens: Vec<Vec<u8>>, eos: &[u32], special: &[u32]) -> Self {
        PyTokenizer {
            vocab: Arc::new(Vocabulary::new(tokens, eos, special)),
        }
    }
}

#[pymethods]
impl PyTokenizer {
    /// The vocabulary of a GGUF model, read exactly as `llamay serve` reads it
    /// (control tokens are special, end-of-generation tokens end the output).
    #[staticmethod]
    fn from_gguf(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        py.detach(|| {
            let f = GgufFile::open(&path)
                .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?;
            let t = Tokenizer::from_gguf(&f)
                .map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))?;
            Ok(Self::new(t.vocab_bytes(), t.eog_ids(), &t.control_ids()))
        })
    }

    /// A vocabulary given as each token's bytes (index = token id), with the ids that
    /// end generation and the ids that are never grammar text.
    #[staticmethod]
    #[pyo3(signature = (tokens, eos_ids, special_ids = None))]
    fn from_bytes(
        py: Python<'_>,
        tokens: Vec<Vec<u8>>,
        eos_ids: Vec<u32>,
        special_ids: Option<Vec<u32>>,
    ) -> Self {
        let special = special_ids.unwrap_or_default();
        py.detach(|| Self::new(tokens, &eos_ids, &special))
    }

    /// A vocabulary from a Hugging Face `tokenizer.json` text (byte-level BPE, or
    /// SentencePiece-style with `▁` and byte fallback). `vocab_size` pads the vocabulary
    /// to the model's logits width; added tokens marked special are never grammar text.
    #[staticmethod]
    #[pyo3(signature = (tokenizer_json, eos_ids, special_ids = None, vocab_size = None))]
    fn from_hf_json(
        py: Python<'_>,
        tokenizer_json: &str,
        eos_ids: Vec<u32>,
        special_ids: Option<Vec<u32>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
        py.detach(|| {
            let mut v = hf::vocab_from_tokenizer_json(tokenizer_json)
                .map_err(|e| PyValueError::new_err(format!("tokenizer.json: {e}")))?;
            if let Some(n) = vocab_size {
                if n < v.tokens.len() {
                    return Err(PyValueError::new_err(format!(
                        "vocab_size {n} is smaller than the tokenizer's {} tokens",
                        v.tokens.len()
                    )));
                }
                v.tokens.resize(n, Vec::new());
            }
            v.special.extend(special_ids.unwrap_or_default());
            Ok(Self::new(v.tokens, &eos_ids, &v.special))
        })
    }

    /// A vocabulary from `tokenizer.json` text or a transformers fast tokenizer
    /// (see `llamay.tokenizer_from_hf`): eos ids default to the tokenizer's, and
    /// `vocab_size` pads to the model's logits width.
    #[staticmethod]
    #[pyo3(signature = (tokenizer, eos_ids = None, vocab_size = None))]
    fn from_hf<'py>(
        py: Python<'py>,
        tokenizer: &Bound<'py, PyAny>,
        eos_ids: Option<Vec<u32>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        py.import("llamay.bitmask")?
            .getattr("tokenizer_from_hf")?
            .call1((tokenizer, eos_ids, vocab_size))
    }

    /// Number of token ids (the mask covers `ceil(vocab_size / 32)` int32 words).
    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The end-of-generation token ids.
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.vocab.eog().to_vec()
    }

    /// The bytes of a token (empty for an id outside the vocabulary).
    fn token_bytes<'py>(&self, py: Python<'py>, token: u32) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.vocab.token_bytes(token).unwrap_or_default())
    }

    /// Whether a token is special (never allowed as grammar text).
    fn is_special(&self, token: u32) -> bool {
        self.vocab.is_special(token)
    }

    fn __len__(&self) -> usize {
        self.vocab.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Tokenizer(vocab_size={}, eos_token_ids={:?})",
            self.vocab.len(),
            self.vocab.eog()
        )
    }
}
