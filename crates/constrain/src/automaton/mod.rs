//! The byte-level pushdown automaton: the IR lowered to a program of positions
//! ([`program`]), configurations of hash-consed parse stacks ([`config`]), the JSON string
//! decoder ([`jsonstr`]), and the per-matcher state table with cached transitions
//! ([`states`]).

pub(crate) mod config;
pub(crate) mod jsonstr;
pub(crate) mod program;
pub(crate) mod states;
