//! Structured-output constraints for llamay.
//!
//! Compiles a JSON Schema, a GBNF grammar or a regular expression into a byte-level
//! pushdown automaton, and answers, for each decoding step, which tokens of a
//! vocabulary keep it alive (a bitset mask). It knows nothing of models or HTTP: the
//! vocabulary arrives as plain byte strings, so the crate could be published alone.

pub mod schema;
