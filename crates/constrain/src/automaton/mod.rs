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
//! - [`quoted`]: those of quoted strings (`x-llamay-quote`), walked directly.
//! - [`distance`]: the fewest bytes that complete the output (budget-aware closing).
//!
//! How a mask is computed (in [`crate::Matcher`]): walk the vocabulary trie from the
//! state, pruning a subtree the moment its prefix dies (bytes no item can take are dead
//! before any transition is looked up). A configuration allows what any of its items
//! allows, so its items are split:
//! - items inside a JSON string, grouped by string and string state, take the string's
//!   stack-free mask (keyed by its count-relative state and shared by every matcher) plus
//!   walks below the tokens that close the string. Unpatterned strings (also those with
//!   only excluded values, e.g. an open object's extra keys) cut that mask, for any
//!   length bounds, from one walk per decoder state kept on the vocabulary; so do
//!   patterned strings whose pattern can no longer refuse a character (an unanchored
//!   pattern's, before and after its match), keeping only the closing tokens that end
//!   on an accepted value. Other patterned strings walk per state, their decoder steps
//!   and first-byte subtrees memoised across walks, and their masks kept on the
//!   vocabulary by the shape of the pattern's remaining tail, which other schemas
//!   often share, and by the whole pattern (equal DFAs share an id there), so a
//!   `format` many schemas write is walked once per state for them all;
//! - the other items are walked on their own.
//!
//! A state with no string items whose items share one stack is walked once with that
//! stack replaced by a placeholder ("detached"), and only the subtrees where a prefix
//! returns into the real stack are walked again. Masks themselves are cached per state.

pub(crate) mod config;
pub(crate) mod distance;
pub(crate) mod jsonstr;
pub(crate) mod local;
pub(crate) mod program;
pub(crate) mod quoted;
pub(crate) mod states;
