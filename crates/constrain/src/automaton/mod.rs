//! The byte-level pushdown automaton.
//!
//! - [`program`]: the IR lowered to a flat program of positions (byte edges, splits,
//!   calls/returns, and single nodes for budgeted whitespace, regex DFAs, JSON strings and
//!   unordered members, whose own state rides in the parse item's `aux` word).
//! - [`config`]: configurations = sorted sets of `(position, aux, stack)` items over
//!   hash-consed stacks, with the epsilon closure and the byte step.
//! - [`jsonstr`]: the JSON string decoder (escapes decoded before the pattern/length
//!   checks, every step checked for a way to finish).
//! - [`states`]: the per-matcher state table: configurations interned lazily as small
//!   integers (bounded, cleared when full), byte transitions cached per state.
//! - [`local`]: stack-free string masks shared across matchers.
//!
//! How a mask is computed (in [`crate::Matcher`]): walk the vocabulary trie from the
//! state, pruning a subtree the moment its prefix dies. Two shortcuts make repeated work
//! rare: a state that is one item inside a JSON string takes the string's stack-free mask
//! (keyed by the string's count-relative state, shared by every matcher, and for plain
//! strings by every grammar on the vocabulary) plus walks below the tokens that close the
//! string; any other state whose items share one stack is walked once with that stack
//! replaced by a placeholder ("detached"), and only the subtrees where a prefix returns
//! into the real stack are walked again. Masks themselves are cached per state.

pub(crate) mod config;
pub(crate) mod jsonstr;
pub(crate) mod local;
pub(crate) mod program;
pub(crate) mod states;
