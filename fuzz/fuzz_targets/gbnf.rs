//! GBNF front-end on arbitrary text: parse, compile to a constraint for a small
//! vocabulary, walk it. Must not panic; the walk checks the matcher's invariants (no
//! dead end, end token exactly when accepting, allowed tokens commit, a finished text
//! is accepted again byte by byte).
//!
//! The same text is also read as the two other user-written constraint languages: a
//! lexicon file (a finished walk must be one of its lines) and a whole-output regex.
//!
//! Input: grammar text, optionally a NUL byte and the walk's token choices.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llamay_constrain::{parse_gbnf, Constraint, Lexicon};
use llamay_fuzz::{split_input, vocab, walk};

fuzz_target!(|data: &[u8]| {
    let (text, choices) = split_input(data);
    if let Ok(l) = Lexicon::parse("fuzz", text) {
        let _ = l.json_dfa();
        let c = Constraint::from_lexicon(&l, vocab().clone()).expect("a lexicon compiles");
        let w = walk(&c, choices, 256);
        if w.finished {
            let term = w.bytes.as_slice();
            let is_line = text
                .split(|&b| b == b'\n')
                .any(|l| l.strip_suffix(b"\r").unwrap_or(l) == term);
            assert!(is_line, "{:?} is no line of the lexicon", String::from_utf8_lossy(term));
        }
    }
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    if let Ok(c) = Constraint::from_regex(text, vocab().clone()) {
        walk(&c, choices, 256);
    }
    let Ok(g) = parse_gbnf(text) else {
        return;
    };
    let _ = g.to_string();
    let Ok(c) = Constraint::from_grammar(&g, vocab().clone()) else {
        return;
    };
    walk(&c, choices, 256);
});
