//! The grammar IR: a context-free grammar over **bytes**, plus three node kinds that JSON
//! Schema needs and plain CFGs express badly.
//!
//! A [`Grammar`] is a list of [`Rule`]s; a rule is a list of alternatives; an alternative
//! is a sequence of [`Symbol`]s:
//!
//! | symbol | matches |
//! |---|---|
//! | [`Symbol::Literal`] | exactly these bytes |
//! | [`Symbol::Bytes`] | one byte from a [`ByteSet`] |
//! | [`Symbol::Class`] | one Unicode character from a [`CharClass`], as its UTF-8 bytes (the class lowers to byte-range sequences) |
//! | [`Symbol::Rule`] | the referenced rule; recursion is allowed, **left recursion is refused** (direct, indirect, or behind nullable symbols) |
//! | [`Symbol::Group`] | an inline alternation |
//! | [`Symbol::Repeat`] | `?`, `*`, `+`, `{m}`, `{m,}`, `{m,n}`, bounds at most 4096 (bounded counts are unrolled into states) |
//! | [`Symbol::Unordered`] | object members in any order (below) |
//! | [`Symbol::Ws`] | budgeted structural whitespace (below) |
//! | [`Symbol::Regex`] | a whole match of a regex over raw bytes (below) |
//! | [`Symbol::JsonString`] | a JSON string whose decoded value is constrained (below) |
//!
//! ## Unordered members (`{"b":1,"a":2}` as well as `{"a":2,"b":1}`)
//! [`Unordered`] lists members, each starting with a distinct literal key, a separator,
//! and optionally an "additional member" sequence for undeclared keys. Any order, each
//! declared member at most once, separator between members, and the node ends only when
//! every required member has been seen. At run time the parse item carries a `u64`
//! "seen" bitset (hence at most 64 members), not 2^n rules. The node does not include the
//! braces or the whitespace next to them: an object is typically
//! `"{" ws unordered ws "}"` with separator `ws "," ws` and members `"\"key\"" ws ":" ws value`.
//! For the additional member's key, use [`JsonString::excluding`] with the declared
//! keys' decoded values so an extra key can never spell a declared one.
//!
//! ## Budgeted whitespace
//! [`Symbol::Ws`] matches `[ \t\n\r]*`, but every byte it consumes is drawn from one
//! per-document budget ([`Grammar::ws_budget`], default 64). When the budget is spent, Ws
//! matches only the empty string and output continues compact. (Whitespace returns the
//! automaton to where it was; unbudgeted, a model whose best legal token is a space emits
//! spaces until its token limit.) The budget is not part of the interned parse state; the
//! mask cache keys on the budget only up to the most whitespace any token holds.
//!
//! ## Regex terminals
//! [`Symbol::Regex`] holds a [`ByteDfa`] (determinised by `regex-automata`, at most 2,000
//! states by default, states that cannot reach a match pruned so no dead end is ever
//! entered). It matches the whole terminal, anchored at both ends: for numeric formats,
//! and for `from_regex` constraints.
//!
//! ## JSON strings
//! [`Symbol::JsonString`] matches `"` … `"` and constrains the **decoded** value
//! ([`JsonString`]): an optional pattern DFA, min/max length in code points, and a set of
//! excluded values. Escapes are decoded before the checks: `\n`, `\"`, `\/`, `\u00e9` and
//! surrogate pairs all become the one character they stand for, whose UTF-8 bytes are fed
//! to the DFA; raw bytes are UTF-8-validated and fed as they are. So `"caf\u00e9"` matches
//! the pattern `café` and counts 4 characters. Raw control characters and lone surrogates
//! are refused.
//!
//! Build grammars with [`GrammarBuilder`]; [`json::any_json`] is the "any JSON value"
//! grammar built on it.

mod builder;
mod charclass;
mod dfa;
mod display;
mod fixpoint;
mod import;
mod ir;
pub(crate) mod json;
pub(crate) mod shared_dfa;
mod span;

pub use builder::GrammarBuilder;
#[allow(unused_imports)]
pub(crate) use builder::{nullable_rules, seq_nullable, sym_nullable};
pub use charclass::{ByteSet, CharClass};
pub use dfa::ByteDfa;
pub use ir::*;
pub use span::{Normalize, SpanAutomaton, MAX_QUOTE_SOURCE_BYTES};
