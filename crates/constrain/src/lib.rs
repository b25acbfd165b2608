//! Structured-output constraints for llamay.
//!
//! Compiles a JSON Schema, a GBNF grammar or a regular expression into a byte-level
//! pushdown automaton, and answers, for each decoding step, which tokens of a
//! vocabulary keep it alive (a bitset mask). It knows nothing of models or HTTP: the
//! vocabulary arrives as plain byte strings, so the crate could be published alone.
//!
//! Other crates use the names re-exported here, at the root; the modules are the
//! crate's own. Layers: the front-ends ([`compile_schema`] and [`schema_grammar`] for
//! JSON Schema, [`parse_gbnf`] for llama.cpp's grammars, [`Lexicon`] for term lists),
//! the grammar IR they lower to ([`Grammar`], built with [`GrammarBuilder`]), the
//! automaton (private), and the run-time API: [`Vocabulary`], [`Constraint`] (+
//! [`ConstraintCache`]), [`Matcher`], [`TokenMask`], [`MatcherStats`].
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
// Every `pub` item is reachable from the root (unreachable_pub) and says what it is for
// (missing_docs): the door is all there is, and it is written down.
#![warn(missing_docs, unreachable_pub)]

mod automaton;
mod cache;
mod constraint;
mod error;
mod gbnf;
mod grammar;
mod heap;
mod lexicon;
mod mask;
mod matcher;
mod pool;
mod schema;
mod stats;
mod trie;
mod utf8;
mod vocab;

// The run time: a vocabulary, a constraint compiled for it, a matcher per sequence.
pub use cache::ConstraintCache;
pub use constraint::{Constraint, Limits, DEFAULT_MASK_LIMIT};
pub use error::{Error, Result};
pub use mask::TokenMask;
pub use matcher::{Matcher, MAX_ROLLBACK};
pub use stats::MatcherStats;
pub use vocab::Vocabulary;

// The grammar IR every front-end lowers to, and llama.cpp's GBNF read into it.
pub use gbnf::parse_gbnf;
pub use grammar::{
    ByteDfa, ByteSet, CharClass, Grammar, GrammarBuilder, JsonString, Member, Rule, RuleId, Symbol,
    Unordered,
};

// JSON Schema.
pub use schema::{
    compile_schema, compile_schema_with, schema_grammar, schema_grammar_with,
    schema_grammar_with_options, schema_limits, AdditionalProperties, CompileBudget,
    CompiledSchema, NotEnforced, Pattern, ReportEntry, SchemaError, SchemaLimits, SchemaMismatch,
    SchemaOptions, SchemaReport, ENFORCED_FORMATS,
};

// Quotes (`x-llamay-quote`: a value must be a span of a source text) and lexicons.
pub use grammar::{Normalize, SpanAutomaton, MAX_QUOTE_SOURCE_BYTES};
pub use lexicon::Lexicon;
pub use schema::{Quote, QuoteSource, Sources, QUOTE_KEYWORD};

/// The schema tree's nodes and exact decimals, for the crate's own integration tests,
/// which look inside a [`CompiledSchema`]. Not the API: other crates use the root names,
/// and what is here may change with any commit.
#[doc(hidden)]
pub mod internals {
    pub use crate::schema::{Decimal, IntegerSpec, Node};
}
