//! `x-llamay-quote`: soundness (every value a constrained walk produces is a span of its
//! source, by a plain substring search that shares nothing with the automaton),
//! completeness (every span, escaped any way JSON allows, is accepted), and refusals.

mod common;

use common::{accepts_chunked, random_walk, synthetic_vocab, Rng};
use llamay_constrain::{schema_grammar_with, Constraint, Sources};
use serde_json::{json, Value};
use std::sync::Arc;

/// Sources with the bytes that JSON must escape, and non-ASCII text.
const SOURCES: &[&str] = &[
    "Invoice INV-2291\nSupplier: Müller & Söhne GmbH\nTotal due: 1.234,50 €\n",
    "He said \"pay by Friday\" \\ or else.\tTab\there. 请付款 😀 ok",
    "aaaa abab \"\"\\\\ \u{1} end",
    "Total:   EUR  99.00\r\n\r\nThanks",
];

fn sources(text: &str) -> Sources {
    let mut s = Sources {
        input: Some(text.to_string()),
        ..Sources::default()
    };
    s.named.insert("doc".into(), text.to_string());
    s
}

fn constraint(schema: &Value, text: &str, vocab: &Arc<llamay_constrain::Vocabulary>) -> Constraint {
    let (g, report) = schema_grammar_with(schema, &sources(text)).unwrap();
    assert!(!report.quotes.is_empty(), "no quote reported for {schema}");
    Constraint::from_grammar(&g, vocab.clone()).unwrap()
}

fn normalised(s: &str, how: &str) -> String {
    match how {
        "whitespace" => {
            s.split([' ', '\t', '\n', '\r'])
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
                + ""
        }
        "case" => s.to_ascii_lowercase(),
        _ => s.to_string(),
    }
}

/// Whitespace-normalised containment, written plainly: collapse runs on both sides.
fn ws_collapse(s: &str) -> String {
    let mut out = String::new();
    let mut ws = false;
    for c in s.chars() {
        if matches!(c, ' ' | '\t' | '\n' | '\r') {
            if !ws {
                out.push(' ');
            }
            ws = true;
        } else {
            out.push(c);
            ws = false;
        }
    }
    out
}

fn is_span(value: &str, source: &str, how: &str) -> bool {
    match how {
        "whitespace" => ws_collapse(source).contains(&ws_collapse(value)),
        "case" => normalised(source, "case").contains(&normalised(value, "case")),
        _ => source.contains(value),
    }
}

#[test]
fn every_quoted_value_a_walk_produces_is_a_span_of_its_source() {
    let (vocab, eog, special) =
        synthetic_vocab(&["Total", " due", "GmbH", "Müller", "请", "付款", "\\t"]);
    let mut rng = Rng::new(25);
    let mut checked = 0;
    for (k, src) in SOURCES.iter().enumerate() {
        for how in ["none", "whitespace", "case"] {
            let schema = json!({
                "type": "object",
                "required": ["q", "r"],
                "additionalProperties": false,
                "properties": {
                    "q": {"type": ["string", "null"],
                          "x-llamay-quote": {"source": "doc", "normalize": how, "min_chars": 2}},
                    "r": {"type": "string", "maxLength": 12, "x-llamay-quote": true}
                }
            });
            let c = constraint(&schema, src, &vocab);
            for _ in 0..40 {
                let w = random_walk(&c, eog, special, &mut rng, 60, 400, &|t: &[u8]| {
                    t.contains(&b'"')
                });
                if !w.finished {
                    continue;
                }
                let v: Value = serde_json::from_slice(&w.bytes).unwrap_or_else(|e| {
                    panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&w.bytes))
                });
                if let Some(q) = v["q"].as_str() {
                    assert!(q.chars().count() >= 2, "min_chars broken: {q:?}");
                    assert!(is_span(q, src, how), "source {k} ({how}): {q:?} is no span");
                    checked += 1;
                }
                let r = v["r"].as_str().unwrap();
                assert!(
                    src.contains(r) && (1..=12).contains(&r.chars().count()),
                    "{r:?}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 300, "only {checked} values checked");
}

/// Each character of `s` spelled as `\uXXXX` (surrogate pairs above the BMP).
fn all_unicode_escapes(s: &str) -> String {
    let mut out = String::from("\"");
    for u in s.encode_utf16() {
        out.push_str(&format!("\\u{u:04x}"));
    }
    out.push('"');
    out
}

#[test]
fn every_span_is_accepted_however_it_is_escaped_and_nothing_else_is() {
    let (vocab, _, _) = synthetic_vocab(&[]);
    let mut rng = Rng::new(7);
    for src in SOURCES {
        let schema = json!({"type": "string", "x-llamay-quote": true});
        let c = constraint(&schema, src, &vocab);
        let chars: Vec<(usize, char)> = src.char_indices().collect();
        let mut spans = 0;
        for i in 0..chars.len() {
            for j in i + 1..=chars.len().min(i + 24) {
                let end = chars.get(j).map_or(src.len(), |c| c.0);
                let span = &src[chars[i].0..end];
                let plain = serde_json::to_string(span).unwrap();
                assert!(
                    accepts_chunked(&c, plain.as_bytes(), &mut rng, 5),
                    "{plain} refused"
                );
                let esc = all_unicode_escapes(span);
                assert!(
                    accepts_chunked(&c, esc.as_bytes(), &mut rng, 5),
                    "{esc} refused"
                );
                // The escaped form decodes to the span: it round-trips.
                assert_eq!(serde_json::from_str::<String>(&esc).unwrap(), span);
                spans += 1;
                // One character changed is no span (unless it happens to be one).
                let changed = format!("{span}\u{7}");
                let text = serde_json::to_string(&changed).unwrap();
                assert_eq!(
                    accepts_chunked(&c, text.as_bytes(), &mut rng, 5),
                    src.contains(&changed)
                );
            }
        }
        assert!(spans > 100);
        // The empty quote is no evidence (default min_chars 1).
        assert!(!accepts_chunked(&c, b"\"\"", &mut rng, 2));
    }
}

#[test]
fn normalisations_accept_what_they_say() {
    let (vocab, _, _) = synthetic_vocab(&[]);
    let mut rng = Rng::new(3);
    let src = "Total:\n\n   EUR 99.00\tpaid\nACME Ltd";
    let ws =
        json!({"type": "string", "x-llamay-quote": {"source": true, "normalize": "whitespace"}});
    let c = constraint(&ws, src, &vocab);
    for ok in [
        "\"Total: EUR 99.00 paid\"",
        "\"Total:\\n EUR\"",
        "\"99.00  paid\"",
    ] {
        assert!(accepts_chunked(&c, ok.as_bytes(), &mut rng, 4), "{ok}");
    }
    assert!(!accepts_chunked(&c, b"\"Total:EUR\"", &mut rng, 4));
    let case = json!({"type": "string", "x-llamay-quote": {"source": true, "normalize": "case"}});
    let c = constraint(&case, src, &vocab);
    assert!(accepts_chunked(&c, b"\"acme LTD\"", &mut rng, 4));
    assert!(!accepts_chunked(&c, b"\"acme  ltd\"", &mut rng, 4));
    let none = json!({"type": "string", "x-llamay-quote": true});
    let c = constraint(&none, src, &vocab);
    assert!(!accepts_chunked(&c, b"\"acme\"", &mut rng, 4));
}

#[test]
fn min_chars_never_leads_into_a_dead_end() {
    // "xyz" occurs only at the end: with min_chars 5 it may not even start.
    let (vocab, eog, special) = synthetic_vocab(&[]);
    let mut rng = Rng::new(11);
    let src = "abcdefgh xyz";
    let schema = json!({"type": "string", "x-llamay-quote": {"source": true, "min_chars": 5}});
    let c = constraint(&schema, src, &vocab);
    assert!(!accepts_chunked(&c, b"\"xyz", &mut rng, 1));
    assert!(accepts_chunked(&c, b"\"h xyz\"", &mut rng, 3));
    for _ in 0..200 {
        // random_walk panics on a dead end.
        let w = random_walk(&c, eog, special, &mut rng, 10, 100, &|_| true);
        if w.finished {
            let v: String = serde_json::from_slice(&w.bytes).unwrap();
            assert!(src.contains(&v) && v.chars().count() >= 5, "{v:?}");
        }
    }
}

#[test]
fn quoted_numbers_are_numbers_written_in_the_source() {
    let (vocab, eog, special) = synthetic_vocab(&[]);
    let mut rng = Rng::new(5);
    let src = "Qty 12 at 7.25 each, total 87.00 (ref 2024-118)";
    let schema = json!({"type": "number", "minimum": 5, "x-llamay-quote": true});
    let c = constraint(&schema, src, &vocab);
    for ok in ["12", "7.25", "87.00", "2024", "118", "87.0", "7.2", "87"] {
        assert!(accepts_chunked(&c, ok.as_bytes(), &mut rng, 2), "{ok}");
    }
    for bad in ["87.000", "4", "13", "-7", "1e3", "3"] {
        assert!(!accepts_chunked(&c, bad.as_bytes(), &mut rng, 2), "{bad}");
    }
    let int = json!({"type": "integer", "x-llamay-quote": true});
    let c = constraint(&int, src, &vocab);
    assert!(accepts_chunked(&c, b"118", &mut rng, 2));
    assert!(!accepts_chunked(&c, b"7.25", &mut rng, 2));
    for _ in 0..50 {
        let w = random_walk(&c, eog, special, &mut rng, 4, 40, &|_| true);
        if w.finished {
            let text = std::str::from_utf8(&w.bytes).unwrap().trim_start();
            assert!(src.contains(text), "{text:?}");
        }
    }
}

#[test]
fn a_missing_source_is_refused_naming_the_keyword_and_where_it_sits() {
    let schema = json!({"type": "object", "properties": {
        "source_quote": {"type": "string", "x-llamay-quote": "contract"}}});
    let e = schema_grammar_with(&schema, &sources("x")).unwrap_err();
    assert_eq!(e.keyword, "x-llamay-quote");
    assert_eq!(e.location, "properties.source_quote");
    assert!(
        e.message.contains("\"contract\"") && e.message.contains("llamay_sources"),
        "{e}"
    );
    let input = json!({"type": "string", "x-llamay-quote": true});
    let e = llamay_constrain::schema_grammar(&input).unwrap_err();
    assert!(
        e.message.contains("x-llamay-quote") && e.message.contains("input"),
        "{e}"
    );
    let both = json!({"type": "string", "pattern": "a+", "x-llamay-quote": true});
    let e = schema_grammar_with(&both, &sources("aaa")).unwrap_err();
    assert!(e.message.contains("pattern"), "{e}");
    let bad = json!({"type": "string", "x-llamay-quote": {"normalize": "fold"}});
    assert!(schema_grammar_with(&bad, &sources("a")).is_err());
}

#[test]
fn the_report_names_where_quotes_are_enforced() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "string", "x-llamay-quote": true},
        "b": {"type": ["string", "null"], "x-llamay-quote": "doc"}}});
    let (_, report) = schema_grammar_with(&schema, &sources("text")).unwrap();
    assert_eq!(report.quotes, vec!["properties.a", "properties.b"]);
    assert!(report.is_fully_enforced(), "{report}");
}

#[test]
fn a_one_megabyte_source_compiles_and_its_walks_stay_spans() {
    let (vocab, eog, special) = synthetic_vocab(&[" the", "name"]);
    let mut rng = Rng::new(99);
    let words = [
        "the", "name", "invoice", "Zürich", "total", "\"q\"", "a\\b", "42,50", "\n",
    ];
    let mut src = String::new();
    while src.len() < 1 << 20 {
        src.push_str(words[rng.below(words.len())]);
        src.push(if rng.chance(0.1) { '\n' } else { ' ' });
    }
    let schema = json!({"type": "string", "maxLength": 40, "x-llamay-quote": true});
    let c = constraint(&schema, &src, &vocab);
    for _ in 0..30 {
        let w = random_walk(&c, eog, special, &mut rng, 20, 200, &|t: &[u8]| {
            t.contains(&b'"')
        });
        if w.finished {
            let v: String = serde_json::from_slice(&w.bytes).unwrap();
            assert!(src.contains(&v), "{v:?}");
        }
    }
}
