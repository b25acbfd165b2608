//! Structured-output constraints for llamay.
//!
//! Compiles a JSON Schema, a GBNF grammar or a regular expression into a byte-level
//! pushdown automaton, and answers, for each decoding step, which tokens of a
//! vocabulary keep it alive (a bitset mask). It knows nothing of models or HTTP: the
//! vocabulary arrives as plain byte strings, so the crate could be published alone.
//!
//! Layers: [`grammar`] (the IR every front-end lowers to), [`gbnf`] (llama.cpp's grammar
//! format), [`schema`] (JSON Schema), the automaton (private), and the public run-time API: [`Vocabulary`],
//! [`Constraint`] (+ [`ConstraintCache`]), [`Matcher`], [`TokenMask`], [`MatcherStats`].
//!
//! For a caller with a token budget, a matcher also knows how far the output is from
//! acceptance ([`Matcher::min_bytes_to_accept`], [`Matcher::min_bytes_after`]) and which
//! tokens close it by a shortest way ([`Matcher::closing_mask`]).
//!
//! ```
//! use std::sync::Arc;
//! use llamay_constrain::{Constraint, TokenMask, Vocabulary};
//! let toks: Vec<Vec<u8>> = ["{", "}", "\"a\"", ":", "1", "</s>"].iter().map(|t| t.as_bytes().to_vec()).collect();
//! let vocab = Arc::new(Vocabulary::new(toks, &[5], &[]));
//! let c = Constraint::any_json(vocab.clone()).unwrap();
//! let mut m = c.matcher();
//! let mut mask = TokenMask::new(vocab.len());
//! m.mask(&mut mask);
//! assert!(mask.is_allowed(0) && !mask.is_allowed(1) && !mask.is_allowed(5));
//! for t in [0, 2, 3, 4, 1] { m.commit(t).unwrap(); }
//! assert!(m.is_accepting() && m.is_finished());
//! ```
#![forbid(unsafe_code)]

mod automaton;
mod cache;
mod constraint;
pub mod error;
pub mod gbnf;
pub mod grammar;
mod heap;
pub mod lexicon;
mod mask;
mod matcher;
mod pool;
pub mod schema;
mod stats;
mod trie;
mod utf8;
mod vocab;

pub use cache::ConstraintCache;
pub use constraint::{Constraint, Limits, DEFAULT_MASK_LIMIT};
pub use error::{Error, Result};
pub use lexicon::Lexicon;
pub use mask::TokenMask;
pub use matcher::{Matcher, MAX_ROLLBACK};
pub use stats::MatcherStats;
pub use vocab::Vocabulary;
