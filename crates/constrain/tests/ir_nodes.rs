//! The JSON-specific IR nodes through the whole automaton: unordered members, JSON
//! strings with pattern/length/exclusion, regex terminals.

mod common;
#[path = "common/json_check.rs"]
mod json_check;
use common::*;
use llamay_constrain::{
    compile_schema, Constraint, GrammarBuilder, JsonString, Member, Symbol, Unordered,
};
use std::collections::HashSet;

/// `{ "a": int (required), "b": string, "c": [ints] (required), extra keys: any value }`
fn object_constraint(additional: bool) -> (Constraint, u32, u32) {
    let (vocab, eog, special) = synthetic_vocab(&["\"a\":", "\"b\":", "\"c\":", "\"d\":"]);
    let mut b = GrammarBuilder::new();
    // `true` is any JSON value: its lowering is the grammar's own any-value rule.
    let any = compile_schema(&serde_json::json!(true))
        .unwrap()
        .lower_into(&mut b)
        .unwrap();
    let int = b.rule(
        "int",
        vec![vec![Symbol::regex("-?(?:0|[1-9][0-9]{0,18})").unwrap()]],
    );
    let kv = |key: &str, value: Vec<Symbol>, required| Member {
        key: format!("\"{key}\"").into_bytes(),
        value: [vec![Symbol::ws(), Symbol::lit(":"), Symbol::ws()], value].concat(),
        required,
    };
    let ints = Symbol::seq(vec![
        Symbol::lit("["),
        Symbol::ws(),
        Symbol::opt(Symbol::seq(vec![
            Symbol::rule(int),
            Symbol::star(Symbol::seq(vec![
                Symbol::ws(),
                Symbol::lit(","),
                Symbol::ws(),
                Symbol::rule(int),
            ])),
        ])),
        Symbol::ws(),
        Symbol::lit("]"),
    ]);
    let u = Unordered {
        members: vec![
            kv("a", vec![Symbol::rule(int)], true),
            kv("b", vec![Symbol::json_string(JsonString::any())], false),
            kv("c", vec![ints], true),
        ],
        separator: vec![Symbol::ws(), Symbol::lit(","), Symbol::ws()],
        additional: additional.then(|| {
            vec![
                Symbol::json_string(JsonString::excluding(["a", "b", "c"])),
                Symbol::ws(),
                Symbol::lit(":"),
                Symbol::ws(),
                any,
            ]
        }),
    };
    let root = b.rule(
        "root",
        vec![vec![
            Symbol::lit("{"),
            Symbol::ws(),
            Symbol::unordered(u),
            Symbol::ws(),
            Symbol::lit("}"),
        ]],
    );
    (
        Constraint::from_grammar(&b.build(root).unwrap(), vocab).unwrap(),
        eog,
        special,
    )
}

#[test]
fn members_in_any_order_each_once_required_before_closing() {
    let (c, _, _) = object_constraint(false);
    let mut rng = Rng::new(1);
    let good = [
        r#"{"a":1,"c":[]}"#,
        r#"{"c":[1, 2],"a":-3}"#,
        r#"{"b":"x","c":[],"a":0}"#,
        r#"{ "c" : [ 1 ] , "b" : "" , "a" : 7 }"#,
    ];
    for s in good {
        assert!(
            accepts_chunked(&c, s.as_bytes(), &mut rng, 4),
            "refused {s}"
        );
    }
    let bad = [
        r#"{"a":1}"#,
        r#"{"a":1,"a":2,"c":[]}"#,
        r#"{"a":1,"c":[],"d":1}"#,
        r#"{}"#,
        r#"{"a":1,,"c":[]}"#,
        r#"{"a":"1","c":[]}"#,
    ];
    for s in bad {
        assert!(
            !accepts_chunked(&c, s.as_bytes(), &mut rng, 4),
            "accepted {s}"
        );
    }
}

#[test]
fn additional_members_cannot_spell_declared_keys() {
    let (c, _, _) = object_constraint(true);
    let mut rng = Rng::new(2);
    for s in [
        r#"{"a":1,"c":[],"d":{"x":[null]}}"#,
        r#"{"ab":1,"a":1,"c":[],"\u0061b":2}"#,
    ] {
        assert!(
            accepts_chunked(&c, s.as_bytes(), &mut rng, 4),
            "refused {s}"
        );
    }
    for s in [r#"{"a":1,"c":[],"\u0061":2}"#, r#"{"b":1,"a":1,"c":[]}"#] {
        assert!(
            !accepts_chunked(&c, s.as_bytes(), &mut rng, 4),
            "accepted {s}"
        );
    }
}

#[test]
fn random_objects_have_required_keys_once_each() {
    for additional in [false, true] {
        let (c, eog, special) = object_constraint(additional);
        let mut rng = Rng::new(3);
        let mut finished = 0;
        for _ in 0..150 {
            let w = random_walk(&c, eog, special, &mut rng, 60, 3000, &|t| {
                t.iter().all(|b| b"}]\"0:".contains(b))
            });
            if !w.finished {
                continue;
            }
            finished += 1;
            let text = String::from_utf8(w.bytes).unwrap();
            // Duplicate keys would be silently merged by a map: count them on the raw text.
            let v: serde_json::Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                // serde_json refuses numbers beyond f64 (an open extra member can hold one).
                Err(e)
                    if e.to_string().contains("number out of range")
                        && json_check::is_json(text.as_bytes()) =>
                {
                    continue
                }
                Err(e) => panic!("{e}: {text}"),
            };
            let obj = v.as_object().unwrap();
            assert!(
                obj["a"].is_i64() || obj["a"].is_u64() || obj["a"].is_number(),
                "{text}"
            );
            assert!(obj["c"].is_array(), "{text}");
            // Declared keys at most once (extra keys are not checked for repeats).
            let top_keys: Vec<String> = top_level_keys(&text)
                .into_iter()
                .filter(|k| ["a", "b", "c"].contains(&k.as_str()) || !additional)
                .collect();
            let unique: HashSet<_> = top_keys.iter().collect();
            assert_eq!(unique.len(), top_keys.len(), "duplicate key in {text}");
            if !additional {
                assert!(
                    top_keys
                        .iter()
                        .all(|k| ["a", "b", "c"].contains(&k.as_str())),
                    "{text}"
                );
            }
        }
        assert!(finished >= 120, "{finished}/150 finished");
    }
}

/// Decoded top-level keys, in order, with duplicates kept.
fn top_level_keys(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text);
    // Stream the top-level object as (key, raw value) pairs to keep duplicates.
    struct Keys<'a>(&'a mut Vec<String>);
    impl<'de> serde::de::Visitor<'de> for Keys<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
            while let Some((k, _)) = m.next_entry::<String, serde::de::IgnoredAny>()? {
                self.0.push(k);
            }
            Ok(())
        }
    }
    serde::de::Deserializer::deserialize_map(&mut de, Keys(&mut keys)).unwrap();
    keys
}

#[test]
fn json_string_pattern_and_length_through_the_automaton() {
    let (vocab, eog, special) = synthetic_vocab(&["\\u00e9", "69", "001"]);
    let mut b = GrammarBuilder::new();
    let spec = JsonString::matching("[0-9]{5}|caf[eé]").unwrap();
    let root = b.rule("root", vec![vec![Symbol::json_string(spec)]]);
    let c = Constraint::from_grammar(&b.build(root).unwrap(), vocab.clone()).unwrap();
    let mut rng = Rng::new(4);
    for s in [
        r#""69001""#,
        r#""café""#,
        r#""caf\u00e9""#,
        r#""\u0036\u0039001""#,
    ] {
        assert!(
            accepts_chunked(&c, s.as_bytes(), &mut rng, 3),
            "refused {s}"
        );
    }
    for s in [r#""6900""#, r#""690011""#, r#""cafè""#, r#""caf\u00e8""#] {
        assert!(
            !accepts_chunked(&c, s.as_bytes(), &mut rng, 3),
            "accepted {s}"
        );
    }
    let mut seen = HashSet::new();
    for _ in 0..100 {
        let w = random_walk(&c, eog, special, &mut rng, 20, 200, &|_| true);
        assert!(w.finished);
        let v: String = serde_json::from_slice(&w.bytes).unwrap();
        assert!(
            v == "café" || v == "cafe" || (v.len() == 5 && v.bytes().all(|b| b.is_ascii_digit())),
            "{v:?}"
        );
        seen.insert(v);
    }
    assert!(seen.len() > 20);

    let mut b = GrammarBuilder::new();
    let root = b.rule(
        "root",
        vec![vec![Symbol::json_string(
            JsonString::any().with_length(2, Some(4)),
        )]],
    );
    let c = Constraint::from_grammar(&b.build(root).unwrap(), vocab).unwrap();
    for _ in 0..100 {
        let w = random_walk(&c, eog, special, &mut rng, 10, 200, &|_| true);
        let v: String = serde_json::from_slice(&w.bytes).unwrap();
        let n = v.chars().count();
        assert!((2..=4).contains(&n), "{v:?} has {n} characters");
    }
}

#[test]
fn regex_constraint() {
    let (vocab, eog, special) = synthetic_vocab(&["abc@", "@1"]);
    let c = Constraint::from_regex("[a-c]{2,4}@[0-9]+", vocab).unwrap();
    let mut rng = Rng::new(6);
    for _ in 0..100 {
        let w = random_walk(&c, eog, special, &mut rng, 8, 100, &|_| true);
        assert!(w.finished);
        let s = String::from_utf8(w.bytes).unwrap();
        let (l, r) = s.split_once('@').unwrap();
        assert!(
            (2..=4).contains(&l.len()) && l.bytes().all(|b| b"abc".contains(&b)),
            "{s}"
        );
        assert!(
            !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()),
            "{s}"
        );
    }
    assert!(Constraint::from_regex(
        "(a",
        Constraint::any_json(synthetic_vocab(&[]).0)
            .unwrap()
            .vocab()
            .clone()
    )
    .is_err());
}
