//! `llamay._llamay`: the native half of the `llamay` Python package. It wraps
//! `llamay-constrain` (schema/grammar -> token masks) for Python serving engines; the
//! engine crate is used only to read a tokenizer out of a GGUF file.
//!
//! The Python half (`python/llamay`) adds the torch helpers and the integrations
//! (transformers, SGLang, vLLM). Every call that may take long (compiling a grammar
//! for a vocabulary, filling masks) releases the GIL.

mod bitmask;
mod error;
mod grammar;
mod hf;
mod matcher;
mod tokenizer;

use pyo3::prelude::*;

#[pymodule]
fn _llamay(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "ConstraintError",
        m.py().get_type::<error::ConstraintError>(),
    )?;
    m.add_class::<tokenizer::PyTokenizer>()?;
    m.add_class::<grammar::PyGrammar>()?;
    m.add_class::<matcher::PyMatcher>()?;
    m.add_function(wrap_pyfunction!(matcher::fill_next_token_bitmasks, m)?)?;
    m.add_function(wrap_pyfunction!(hf::gguf_to_tokenizer_json, m)?)?;
    m.add("MAX_ROLLBACK", llamay_constrain::MAX_ROLLBACK)?;
    Ok(())
}
