//! Budget-aware closing: `min_bytes_to_accept` on small grammars (values worked out by
//! hand), and over the schema corpus, after random walks: the distance is a lower bound
//! (no live byte shortens it by more than one), it is reached (repeatedly taking any
//! closing-mask token ends accepting after exactly that many bytes, so in at most that
//! many tokens), and the closed document parses and validates.

mod common;
#[path = "common/corpus.rs"]
mod corpus;

use common::{synthetic_vocab, Rng};
use llamay_constrain::{Constraint, Matcher, TokenMask, Vocabulary};
use serde_json::{json, Value};
use std::sync::Arc;

fn schema(v: &Arc<Vocabulary>, s: Value) -> Constraint {
    let (g, _) = llamay_constrain::schema_grammar(&s).unwrap();
    Constraint::from_grammar(&g, v.clone()).unwrap()
}

/// The distance after committing `text`.
fn distance_after(c: &Constraint, text: &str) -> Option<usize> {
    let mut m = c.matcher();
    m.commit_bytes(text.as_bytes()).unwrap();
    m.min_bytes_to_accept()
}

/// Closes `m` by always taking the lowest closing-mask token (the single bytes come
/// first in the synthetic vocabulary), checking the distance drops by each token's
/// length; returns the bytes written.
fn close(m: &mut Matcher, vocab: &Vocabulary, eog: u32) -> Vec<u8> {
    let mut mask = TokenMask::new(vocab.len());
    let mut out = Vec::new();
    let mut d = m.min_bytes_to_accept().unwrap();
    loop {
        m.closing_mask(&mut mask);
        let t = mask.allowed().next().expect("a closing token");
        if t == eog {
            assert_eq!(d, 0);
            assert!(m.is_accepting());
            return out;
        }
        let bytes = vocab.token_bytes(t).unwrap();
        assert_eq!(m.min_bytes_after(t), Some(d - bytes.len()));
        m.commit(t).unwrap();
        out.extend_from_slice(bytes);
        d = m.min_bytes_to_accept().unwrap();
    }
}

#[test]
fn distances_on_small_schemas() {
    let (vocab, eog, _) = synthetic_vocab(&[]);
    // (schema, distances after prefixes, the document the lowest closing tokens write)
    type Case = (Value, &'static [(&'static str, usize)], &'static str);
    let cases: Vec<Case> = vec![
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
            &[
                ("", 7),
                ("{", 6),
                ("{\"a\"", 3),
                ("{\"a\": ", 2),
                ("{\"a\":12", 1),
            ],
            "{\"a\":0}",
        ),
        (
            json!({"type": "array", "items": {"type": "integer"}}),
            &[
                ("", 2),
                ("[", 1),
                ("[1", 1),
                ("[1,", 2),
                ("[1, -", 2),
                ("[1]", 0),
            ],
            "[]",
        ),
        (
            json!({"type": "array", "items": {"type": "boolean"}, "minItems": 2}),
            &[("", 11), ("[true", 6), ("[true,", 5)],
            "[true,true]",
        ),
        (
            json!({"type": "string", "minLength": 3}),
            &[("", 5), ("\"", 4), ("\"ab", 2), ("\"abcd", 1), ("\"a\\", 3)],
            "\"   \"",
        ),
        (
            json!({"type": "object", "properties": {
                "p": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
                "r": {"type": "integer"}
            }, "required": ["p"]}),
            &[
                ("", 14),
                ("{\"r\":5", 14),
                ("{\"p\":{", 8),
                ("{\"p\":{\"q\":\"x", 3),
            ],
            "{\"p\":{\"q\":\"\"}}",
        ),
        (
            json!({"type": "string", "pattern": "^[a-z]{2}-[0-9]+$"}),
            &[("", 6), ("\"a", 4), ("\"ab-", 2)],
            "\"aa-0\"",
        ),
    ];
    for (s, points, shortest) in cases {
        let c = schema(&vocab, s.clone());
        for &(prefix, d) in points {
            assert_eq!(distance_after(&c, prefix), Some(d), "{s} after {prefix:?}");
        }
        let mut m = c.matcher();
        let doc = close(&mut m, &vocab, eog);
        assert_eq!(String::from_utf8(doc).unwrap(), shortest, "{s}");
    }
}

#[test]
fn distances_on_small_grammars() {
    let (vocab, eog, _) = synthetic_vocab(&[]);
    let gbnf = |g: &str| Constraint::from_gbnf(g, vocab.clone()).unwrap();
    // Recursion: the shortest expression is one digit; an open paren costs its close.
    let c = gbnf(
        "root ::= expr \"=\" [0-9]+\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= [0-9]+ | \"(\" expr \")\"",
    );
    assert_eq!(distance_after(&c, ""), Some(3));
    assert_eq!(distance_after(&c, "(("), Some(5));
    assert_eq!(distance_after(&c, "((1+"), Some(5));
    assert_eq!(distance_after(&c, "1=2"), Some(0));
    assert_eq!(close(&mut c.matcher(), &vocab, eog), b"0=0");
    // Alternatives of different lengths: the shorter wins, until it is ruled out.
    let c = gbnf("root ::= \"abc\" | \"xy\" tail\ntail ::= \"zzzz\"");
    assert_eq!(distance_after(&c, ""), Some(3));
    assert_eq!(distance_after(&c, "x"), Some(5));
    // A regex terminal counts bytes, not characters.
    let c = Constraint::from_regex("é{2}x", vocab.clone()).unwrap();
    assert_eq!(distance_after(&c, ""), Some(5));
    assert_eq!(distance_after(&c, "\u{e9}"), Some(3));
    // Finished: nothing more to write, and only EOG closes.
    let mut m = c.matcher();
    m.commit_bytes("ééx".as_bytes()).unwrap();
    let mut mask = TokenMask::new(vocab.len());
    m.closing_mask(&mut mask);
    assert_eq!(mask.allowed().collect::<Vec<_>>(), vec![eog]);
    assert_eq!(m.stats().closing_steps, 1);
}

/// Random walk, then close: returns the closed document.
fn walk_and_close(c: &Constraint, eog: u32, rng: &mut Rng, walk: usize) -> Result<Vec<u8>, String> {
    let vocab = c.vocab().clone();
    let mut m = c.matcher();
    let mut mask = TokenMask::new(vocab.len());
    let mut text = Vec::new();
    for _ in 0..walk {
        m.mask(&mut mask);
        let allowed: Vec<u32> = mask.allowed().filter(|&t| t != eog).collect();
        if allowed.is_empty() {
            break;
        }
        let t = allowed[rng.below(allowed.len())];
        m.commit(t).unwrap();
        text.extend_from_slice(vocab.token_bytes(t).unwrap());
    }
    let show = |t: &[u8]| String::from_utf8_lossy(t).into_owned();
    let d0 = m.min_bytes_to_accept().ok_or_else(|| {
        let mut fresh = c.matcher();
        fresh.commit_bytes(&text).unwrap();
        format!(
            "no distance after {:?} (fresh {:?}, stats {:?})",
            show(&text),
            fresh.min_bytes_to_accept(),
            m.stats()
        )
    })?;
    let (mut d, mut tokens) = (d0, 0);
    loop {
        if m.is_accepting() != (d == 0) {
            return Err(format!(
                "distance {d} but accepting {}: {}",
                m.is_accepting(),
                show(&text)
            ));
        }
        // A lower bound: no live single byte gets closer by more than itself.
        for b in 0..=255u32 {
            if let Some(after) = m.min_bytes_after(b) {
                if after + 1 < d {
                    return Err(format!(
                        "byte {b} takes {d} to {after} after {}",
                        show(&text)
                    ));
                }
            }
        }
        m.closing_mask(&mut mask);
        let allowed: Vec<u32> = mask.allowed().collect();
        if d == 0 {
            if allowed != [eog] {
                return Err(format!("accepting, closing mask {allowed:?}"));
            }
            break;
        }
        if allowed.is_empty() || allowed.contains(&eog) {
            return Err(format!(
                "closing mask {allowed:?} at {d} after {}",
                show(&text)
            ));
        }
        let t = allowed[rng.below(allowed.len())];
        let bytes = vocab.token_bytes(t).unwrap();
        if m.min_bytes_after(t) != Some(d - bytes.len()) {
            return Err(format!(
                "token {:?} is off the shortest way at {d} after {}",
                show(bytes),
                show(&text)
            ));
        }
        m.commit(t).unwrap();
        text.extend_from_slice(bytes);
        tokens += 1;
        d = m.min_bytes_to_accept().unwrap();
    }
    if tokens > d0 {
        return Err(format!("{tokens} closing tokens for distance {d0}"));
    }
    Ok(text)
}

#[test]
fn closing_masks_finish_corpus_schemas_within_the_distance() {
    let (vocab, eog, _) = synthetic_vocab(&[]);
    let cases = corpus::cases();
    // A deterministic spread over the corpus (`LLAMAY_CLOSING=all` for every schema).
    let stride = if corpus::everything("LLAMAY_CLOSING") {
        1
    } else {
        12
    };
    let mut rng = Rng::new(0xC105E);
    let (mut closed, mut validated, mut failures) = (0, 0, Vec::new());
    for case in cases.iter().step_by(stride) {
        let Ok((g, report)) = llamay_constrain::schema_grammar(&case.schema) else {
            continue;
        };
        let Ok(c) = Constraint::from_grammar(&g, vocab.clone()) else {
            continue;
        };
        let validator = corpus::judged(&report)
            .then(|| {
                jsonschema::options()
                    .should_validate_formats(false)
                    .build(&case.schema)
                    .ok()
            })
            .flatten();
        for walk in [0, 3 + rng.below(40)] {
            match walk_and_close(&c, eog, &mut rng, walk) {
                Err(e) => failures.push(format!("{} (walk {walk}): {e}", case.name)),
                Ok(doc) => {
                    closed += 1;
                    let v: Value = match serde_json::from_slice(&doc) {
                        Ok(v) => v,
                        Err(e) => {
                            failures.push(format!(
                                "{}: {e}: {}",
                                case.name,
                                String::from_utf8_lossy(&doc)
                            ));
                            continue;
                        }
                    };
                    if let Some(val) = &validator {
                        if !val.is_valid(&v) {
                            failures.push(format!("{}: invalid {v}", case.name));
                        }
                        validated += 1;
                    }
                }
            }
        }
    }
    eprintln!("{closed} walks closed, {validated} of them on judged schemas");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(closed >= 250, "only {closed} walks closed");
}

#[test]
fn a_long_chain_of_rules_is_measured_exactly() {
    // Each rule's cost waits on the next one's: the shortest-path search settles every
    // position once, however deep the chain.
    let (vocab, eog, _) = synthetic_vocab(&[]);
    let n = 2000;
    let mut g = String::from("root ::= r0\n");
    for i in 0..n - 1 {
        g.push_str(&format!("r{i} ::= r{} \"a\" | \"a\" r{i}\n", i + 1));
    }
    g.push_str(&format!("r{} ::= \"b\"\n", n - 1));
    let c = Constraint::from_gbnf(&g, vocab.clone()).unwrap();
    assert_eq!(distance_after(&c, ""), Some(n));
    assert_eq!(distance_after(&c, "aa"), Some(n));
    let doc = close(&mut c.matcher(), &vocab, eog);
    assert_eq!(doc, [b"b".to_vec(), b"a".repeat(n - 1)].concat());
}
