//! JSON Schema front-end on arbitrary JSON: compile (tree and report), lower to the
//! grammar IR, build the automaton for a small vocabulary and walk it. Must not panic;
//! the walk checks the matcher's invariants, and a finished document must parse as
//! JSON and fit the compiled tree (the schema as llamay enforces it).
//!
//! Input: schema text, optionally a NUL byte and the walk's token choices.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llamay_constrain::{compile_schema, Constraint};
use llamay_fuzz::{numbers_fit_f64, split_input, vocab, walk};

fuzz_target!(|data: &[u8]| {
    let (text, choices) = split_input(data);
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(text) else {
        return;
    };
    let Ok(tree) = compile_schema(&value) else {
        return;
    };
    let _ = tree.report.to_string();
    let Ok(g) = tree.lower() else {
        return;
    };
    let Ok(c) = Constraint::from_grammar(&g, vocab().clone()) else {
        return;
    };
    let w = walk(&c, choices, 256);
    if !w.finished || !numbers_fit_f64(&w.bytes) {
        return;
    }
    let doc: serde_json::Value = serde_json::from_slice(&w.bytes)
        .unwrap_or_else(|e| panic!("{:?} is not JSON: {e}", String::from_utf8_lossy(&w.bytes)));
    if let Err(e) = tree.check(&doc) {
        panic!("walk produced {doc}, which the tree refuses: {e:?}");
    }
});
