//! Any-JSON constraint: soundness by random walks, completeness on real documents,
//! whitespace budget.

mod common;
#[path = "common/json_check.rs"]
mod json_check;
use common::*;
use llamay_constrain::{Constraint, TokenMask};
use std::fs;

fn structural_ws(doc: &[u8]) -> usize {
    let (mut in_str, mut esc, mut n) = (false, false, 0);
    for &b in doc {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
        } else if b == b'"' {
            in_str = true;
        } else if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            n += 1;
        }
    }
    n
}

fn json_closer(t: &[u8]) -> bool {
    t.iter().all(|b| b"}]\"0:".contains(b))
}

#[test]
fn random_walks_always_parse_as_json_and_never_dead_end() {
    let (vocab, eog, special) = synthetic_vocab(&[]);
    let c = Constraint::any_json(vocab).unwrap();
    let mut rng = Rng::new(7);
    let (mut finished, mut total_ws_max) = (0, 0);
    for _ in 0..300 {
        let w = random_walk(&c, eog, special, &mut rng, 60, 3000, &json_closer);
        if !w.finished {
            continue;
        }
        finished += 1;
        let text = String::from_utf8(w.bytes.clone()).expect("constrained output is UTF-8");
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&text) {
            // serde_json refuses numbers beyond f64; JSON itself does not.
            assert!(
                e.to_string().contains("number out of range"),
                "{e}: {text:?}"
            );
            assert!(json_check::is_json(text.as_bytes()), "{text:?}");
        }
        let ws = structural_ws(&w.bytes);
        assert!(ws <= 64, "{ws} whitespace characters in {text:?}");
        total_ws_max = total_ws_max.max(ws);
    }
    assert!(finished >= 280, "only {finished}/300 walks finished");
    // The walks lean on whitespace tokens enough to hit the budget at least once.
    assert!(
        total_ws_max >= 40,
        "budget never approached (max {total_ws_max})"
    );
}

#[test]
fn whitespace_budget_runs_out_then_output_is_compact() {
    let (vocab, eog, _) = synthetic_vocab(&[]);
    let c = Constraint::any_json(vocab.clone()).unwrap();
    let mut m = c.matcher();
    let space = b' ' as u32;
    m.commit(b'[' as u32).unwrap();
    for i in 0..64 {
        assert_eq!(m.ws_budget_left(), 64 - i);
        m.commit(space).unwrap();
    }
    let mut mask = TokenMask::new(vocab.len());
    m.mask(&mut mask);
    assert!(!mask.is_allowed(space) && !mask.is_allowed(b'\n' as u32));
    assert!(mask.is_allowed(b']' as u32) && mask.is_allowed(b'1' as u32));
    assert!(m.commit(space).is_err());
    // Inside a string a space is content, not structure: still allowed.
    m.commit(b'"' as u32).unwrap();
    m.mask(&mut mask);
    assert!(mask.is_allowed(space));
    for t in [b' ', b'"', b']'] {
        m.commit(t as u32).unwrap();
    }
    m.mask(&mut mask);
    assert!(mask.is_allowed(eog) && mask.count() == 1);
    assert!(m.is_finished());
}

#[test]
fn handwritten_documents_are_accepted_and_broken_ones_refused() {
    let (vocab, eog, _) = synthetic_vocab(&[]);
    let c = Constraint::any_json(vocab).unwrap();
    let mut rng = Rng::new(3);
    let good = [
        r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
        r#"[1,-0.5,2e10,-3E-2,0,1.25e+3]"#,
        r#""caf\u00e9 \ud83d\ude00 \" \\ \/ \b\f\n\r\t""#,
        "\"héllo ぁ 😀\"",
        r#"{ "a" : [ 1 , 2 ] , "b" : { } }"#,
        "  [\n  {\"x\": []}\n]",
        "123",
        "[]",
        "{}",
    ];
    for doc in good {
        for _ in 0..5 {
            assert!(
                accepts_chunked(&c, doc.as_bytes(), &mut rng, 6),
                "refused {doc:?}"
            );
        }
        accepts_tokens(&c, eog, doc.as_bytes()).unwrap_or_else(|e| panic!("{doc:?}: {e}"));
    }
    let bad = [
        "{\"a\" 1}",
        "[1,]",
        "{,}",
        "01",
        "1.",
        "-",
        "\"\\x\"",
        "\"a\nb\"",
        "[1 2]",
        "{\"a\":1,}",
        "tru",
        "\"\\ud800\"",
        "\"\\udc00\"",
        "{\"a\"}",
        "[",
        "nul",
        "1e",
        "\"\u{1}\"",
    ];
    for doc in bad {
        assert!(
            !accepts_chunked(&c, doc.as_bytes(), &mut rng, 3),
            "accepted {doc:?}"
        );
    }
}

#[test]
fn corpus_instances_are_accepted_token_by_token() {
    let (vocab, eog, _) = synthetic_vocab(&[]);
    let c = Constraint::any_json(vocab).unwrap();
    let mut rng = Rng::new(11);
    let dir = llamay_testdata::shared_dir().join("corpus");
    let mut docs: Vec<serde_json::Value> = Vec::new();
    let mut bench: Vec<_> = fs::read_dir(dir.join("jsonschemabench"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    bench.sort();
    for p in bench.iter().step_by(8) {
        let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(p).unwrap()).unwrap();
        for t in v["tests"].as_array().into_iter().flatten() {
            docs.push(t["data"].clone());
        }
    }
    for name in ["order", "invoice", "tool_call"] {
        let v: serde_json::Value = serde_json::from_str(
            &fs::read_to_string(dir.join(format!("seed/{name}.instances.json"))).unwrap(),
        )
        .unwrap();
        docs.extend(v.as_array().unwrap().iter().cloned());
    }
    assert!(docs.len() > 200, "{} documents", docs.len());
    let mut tokens = 0;
    for d in &docs {
        let compact = serde_json::to_string(d).unwrap();
        assert!(
            accepts_chunked(&c, compact.as_bytes(), &mut rng, 8),
            "refused {compact}"
        );
        tokens += accepts_tokens(&c, eog, compact.as_bytes())
            .unwrap_or_else(|e| panic!("{compact}: {e}"));
        let pretty = serde_json::to_string_pretty(d).unwrap();
        let within_budget = structural_ws(pretty.as_bytes()) <= 64;
        assert_eq!(
            accepts_chunked(&c, pretty.as_bytes(), &mut rng, 8),
            within_budget,
            "{pretty}"
        );
    }
    assert!(tokens > 1000);
}

#[test]
fn json_mode_is_an_object_whose_members_are_any_values() {
    let (vocab, eog, special) = synthetic_vocab(&[]);
    let c = Constraint::json_object(vocab).unwrap();
    let mut rng = Rng::new(5);
    for doc in [
        "{}",
        " {\"a\": 42}",
        r#"{"a":[1,"x",{"b":null}],"c":-0.5e3}"#,
    ] {
        assert!(accepts_chunked(&c, doc.as_bytes(), &mut rng, 4), "{doc:?}");
    }
    // The scalars a model reaches for when asked "how old…", and arrays: refused.
    for doc in ["42", "6.7", "\"Alec\"", "true", "null", "[{}]", "{} {}"] {
        assert!(
            !accepts_chunked(&c, doc.as_bytes(), &mut rng, 4),
            "accepted {doc:?}"
        );
    }
    let mut objects = 0;
    for _ in 0..100 {
        let w = random_walk(&c, eog, special, &mut rng, 60, 3000, &json_closer);
        if w.finished {
            let v: serde_json::Value = match serde_json::from_slice(&w.bytes) {
                Ok(v) => v,
                Err(e) if e.to_string().contains("number out of range") => continue,
                Err(e) => panic!("{e}: {:?}", String::from_utf8_lossy(&w.bytes)),
            };
            assert!(v.is_object(), "{v}");
            objects += 1;
        }
    }
    assert!(objects >= 80, "only {objects}/100 walks ended in an object");
}
