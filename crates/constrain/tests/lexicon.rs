//! Lexicons: the whole output, or a schema string's value, is exactly one term; walks
//! through the masks only ever produce terms, and every term is reachable.

mod common;

use common::{accepts_tokens, random_walk, synthetic_vocab, Rng};
use llamay_constrain::{schema_grammar_with, Constraint, Lexicon, Sources};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::Arc;

/// Deterministic terms: words, numbers, spaces, quotes, backslashes, non-ASCII.
fn terms(n: usize) -> Vec<String> {
    let stems = [
        "Paris",
        "Saint-Étienne",
        "new york",
        "say \"hi\"",
        r"C:\dir",
        "名古屋",
        "a",
    ];
    (0..n)
        .map(|i| format!("{}{}", stems[i % stems.len()], i / stems.len()))
        .collect()
}

#[test]
fn whole_output_walks_are_terms() {
    let (vocab, eog, special) = synthetic_vocab(&["Par", "is", "Saint", " york", "1"]);
    let words = terms(500);
    let lex = Lexicon::from_terms("t", &words).unwrap();
    assert_eq!(lex.len(), 500);
    let c = Constraint::from_lexicon(&lex, vocab).unwrap();
    let set: HashSet<&str> = words.iter().map(String::as_str).collect();
    let mut rng = Rng::new(24);
    for _ in 0..200 {
        let w = random_walk(&c, eog, special, &mut rng, 20, 200, &|_| true);
        assert!(
            w.finished,
            "walk did not finish: {:?}",
            String::from_utf8_lossy(&w.bytes)
        );
        let out = String::from_utf8(w.bytes).unwrap();
        assert!(set.contains(out.as_str()), "{out:?} is not a term");
    }
    for t in words.iter().step_by(37) {
        assert!(
            accepts_tokens(&c, eog, t.as_bytes()).is_ok(),
            "{t:?} refused"
        );
    }
    for t in ["Paris", "Paris00", "Paris0 ", "", "Xyz1"] {
        assert!(
            accepts_tokens(&c, eog, t.as_bytes()).is_err(),
            "{t:?} accepted"
        );
    }
}

fn with_lexicon(lex: Lexicon) -> Sources {
    let mut s = Sources::none();
    s.lexicons.insert(lex.name().to_string(), Arc::new(lex));
    s
}

#[test]
fn a_schema_string_is_one_term_in_its_json_spelling() {
    let words = terms(300);
    let sources = with_lexicon(Lexicon::from_terms("cities", &words).unwrap());
    let s = json!({"type": "object", "properties": {"city": {"type": "string", "x-llamay-lexicon": "cities"},
        "n": {"type": "integer"}}, "required": ["city", "n"]});
    let (g, report) = schema_grammar_with(&s, &sources).unwrap();
    assert!(report.is_fully_enforced(), "{report}");
    assert_eq!(
        report.lexicons,
        vec!["cities at properties.city".to_string()]
    );
    let (vocab, eog, special) = synthetic_vocab(&[]);
    let c = Constraint::from_grammar(&g, vocab).unwrap();
    let set: HashSet<&str> = words.iter().map(String::as_str).collect();
    let mut rng = Rng::new(7);
    let mut finished = 0;
    for _ in 0..100 {
        let w = random_walk(&c, eog, special, &mut rng, 40, 400, &|t| t.contains(&b'}'));
        if !w.finished {
            continue;
        }
        finished += 1;
        let v: Value = serde_json::from_slice(&w.bytes).unwrap();
        let city = v["city"].as_str().unwrap();
        assert!(set.contains(city), "{city:?} is not a term");
    }
    assert!(finished >= 50, "only {finished} of 100 walks finished");
    let doc = json!({"city": "say \"hi\"3", "n": 1}).to_string();
    assert!(accepts_tokens(&c, eog, doc.as_bytes()).is_ok());
    let off = json!({"city": "say \"hi\"", "n": 1}).to_string();
    assert!(accepts_tokens(&c, eog, off.as_bytes()).is_err());
}

#[test]
fn lexicon_refusals_name_the_schema_part() {
    let sources = with_lexicon(Lexicon::from_terms("cities", &terms(5)).unwrap());
    let missing = json!({"properties": {"c": {"type": "string", "x-llamay-lexicon": "towns"}}});
    let e = schema_grammar_with(&missing, &sources).unwrap_err();
    assert!(
        e.to_string()
            .contains("\"towns\", which is not loaded (loaded: cities)"),
        "{e}"
    );
    let mixed = json!({"type": "string", "x-llamay-lexicon": "cities", "maxLength": 3});
    let e = schema_grammar_with(&mixed, &sources).unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot be combined with minLength/maxLength"),
        "{e}"
    );
    let bad = json!({"type": "string", "x-llamay-lexicon": 3});
    assert!(schema_grammar_with(&bad, &sources).is_err());
}
