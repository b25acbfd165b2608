//! GBNF front-end on arbitrary text: parse, compile to a constraint for a small
//! vocabulary, walk it. Must not panic; the walk checks the matcher's invariants (no
//! dead end, end token exactly when accepting, allowed tokens commit, a finished text
//! is accepted again byte by byte).
//!
//! Input: grammar text, optionally a NUL byte and the walk's token choices.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llamay_constrain::{gbnf::parse_gbnf, Constraint};
use llamay_fuzz::{split_input, vocab, walk};

fuzz_target!(|data: &[u8]| {
    let (text, choices) = split_input(data);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let Ok(g) = parse_gbnf(text) else {
        return;
    };
    let _ = g.to_string();
    let Ok(c) = Constraint::from_grammar(&g, vocab().clone()) else {
        return;
    };
    walk(&c, choices, 256);
});
