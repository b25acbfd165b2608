//! The semantics switch: `AdditionalProperties::Open` reads a schema as JSON Schema
//! does (undeclared keys allowed, no type inferred from keywords); the default stays
//! the API's closed reading.

mod common;

use common::{accepts_tokens, synthetic_vocab};
use llamay_constrain::{AdditionalProperties, Constraint, SchemaOptions};
use serde_json::{json, Value};

const OPEN: SchemaOptions = SchemaOptions {
    additional_properties: AdditionalProperties::Open,
    budget: llamay_constrain::CompileBudget {
        time: None,
        nodes: 100_000,
    },
};

fn accepts(schema: &Value, options: &SchemaOptions, doc: &str) -> bool {
    let (vocab, eog, _) = synthetic_vocab(&[]);
    let (c, _) = Constraint::from_schema_with(schema, vocab, options).unwrap();
    accepts_tokens(&c, eog, doc.as_bytes()).is_ok()
}

#[test]
fn undeclared_keys_are_open_only_under_json_semantics() {
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    let closed = SchemaOptions::default();
    for doc in [
        r#"{"a":1}"#,
        r#"{"b":[true],"a":2}"#,
        r#"{"a":1,"x":{"y":null},"z":"w"}"#,
    ] {
        assert!(accepts(&s, &OPEN, doc), "open refused {doc}");
    }
    assert!(accepts(&s, &closed, r#"{"a":1}"#));
    assert!(!accepts(&s, &closed, r#"{"a":1,"b":2}"#));
    // Declared keys keep their schema and still appear once; required still holds.
    for doc in [r#"{"a":"one"}"#, r#"{"a":1,"a":2}"#, r#"{"b":1}"#] {
        assert!(!accepts(&s, &OPEN, doc), "open accepted {doc}");
    }
    // `additionalProperties: false` stays closed under either reading.
    let shut = json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false});
    assert!(!accepts(&shut, &OPEN, r#"{"a":1,"b":2}"#));
    // A schema for extra keys is enforced on them.
    let typed = json!({"properties": {"a": {}}, "additionalProperties": {"type": "string"}});
    assert!(accepts(&typed, &OPEN, r#"{"b":"x"}"#));
    assert!(!accepts(&typed, &OPEN, r#"{"b":1}"#));
    // A declared key no value fits never appears, not even as an undeclared one.
    let none = json!({"type": "object", "properties": {"m": {"enum": ["x"], "type": "object"}}});
    assert!(accepts(&none, &OPEN, r#"{"n":"x"}"#));
    assert!(!accepts(&none, &OPEN, r#"{"m":"x"}"#));
}

#[test]
fn a_declared_key_appears_once_in_any_spelling_in_an_open_object() {
    // The empty key too: it is excluded from the extra keys like any other.
    let empty = json!({"type": "object", "properties": {"": {}}});
    assert!(accepts(&empty, &OPEN, r#"{"":1,"x":2}"#));
    assert!(!accepts(&empty, &OPEN, r#"{"":1,"":2}"#));
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}});
    assert!(accepts(&s, &OPEN, r#"{"a":1,"b":2,"c":3}"#));
    // Once as declared, never again as an undeclared key, escaped or not, before
    // or after the other members.
    for doc in [
        r#"{"a":1,"\u0061":2}"#,
        r#"{"\u0061":"x","a":1}"#,
        r#"{"a":1,"c":2,"a":3}"#,
        r#"{"b":1,"c":2,"\u0062":3}"#,
    ] {
        assert!(!accepts(&s, &OPEN, doc), "open accepted {doc}");
    }
}

#[test]
fn keywords_without_type_apply_only_to_their_own_type_under_json_semantics() {
    let s = json!({"properties": {"a": {"type": "integer"}}, "minLength": 2});
    for doc in [r#""text""#, "3", "null", "[1]", r#"{"a":1}"#] {
        assert!(accepts(&s, &OPEN, doc), "open refused {doc}");
    }
    assert!(
        !accepts(&s, &OPEN, r#""t""#),
        "minLength still holds on strings"
    );
    assert!(
        !accepts(&s, &OPEN, r#"{"a":"x"}"#),
        "properties still hold on objects"
    );
    // The API's reading: `properties` and `minLength` name the types meant.
    let closed = SchemaOptions::default();
    assert!(accepts(&s, &closed, r#"{"a":1}"#));
    assert!(accepts(&s, &closed, r#""text""#));
    assert!(!accepts(&s, &closed, "3"));
    assert!(!accepts(&s, &closed, "null"));
}

#[test]
fn the_names_round_trip() {
    for a in [AdditionalProperties::Open, AdditionalProperties::Closed] {
        assert_eq!(AdditionalProperties::from_name(a.name()), Some(a));
    }
    assert_eq!(AdditionalProperties::from_name("loose"), None);
}

#[test]
fn an_undeclared_key_appears_once_per_object_in_any_spelling() {
    let s = json!({"type": "object", "properties": {"a": {}}});
    for doc in [
        r#"{"x":1,"x":2}"#,
        r#"{"x":1,"\u0078":2}"#,
        r#"{"\u0078":1,"a":2,"x":3}"#,
        r#"{"😀":1,"\ud83d\ude00":2}"#,
        r#"{"":1,"":2}"#,
    ] {
        assert!(!accepts(&s, &OPEN, doc), "open accepted {doc}");
    }
    // Per object: the same key in a nested or a sibling object is another key.
    for doc in [
        r#"{"x":{"x":1},"y":[{"x":1},{"x":{"x":2}}],"xy":3}"#,
        r#"{"x":1,"a":{"x":2,"y":3},"y":4}"#,
    ] {
        assert!(accepts(&s, &OPEN, doc), "open refused {doc}");
    }
    // Unconstrained objects (`{"type":"object"}`, any JSON) under the API's reading too.
    let any = json!({"type": "object", "properties": {"m": {}}, "required": ["m"]});
    let closed = SchemaOptions::default();
    assert!(accepts(&any, &closed, r#"{"m":{"k":1,"l":[{"k":2}]}}"#));
    assert!(!accepts(&any, &closed, r#"{"m":{"k":1,"l":2,"k":3}}"#));
    assert!(!accepts(
        &json!({"type": "object"}),
        &closed,
        r#"{"k":1,"k":2}"#
    ));
}

#[test]
fn masks_refuse_exactly_the_tokens_that_commit_refuses_for_repeated_keys() {
    let extra = [
        "x\"",
        "\"x\"",
        ",\"x\"",
        "x\":",
        "\\u0078\"",
        "78\"",
        "\", \"x\"",
        "y\"",
        ",\"y\":1,\"y\"",
    ];
    let (vocab, _, _) = synthetic_vocab(&extra);
    let s = json!({"type": "object", "properties": {"a": {}}});
    let (c, _) = Constraint::from_schema_with(&s, vocab.clone(), &OPEN).unwrap();
    let token = |text: &str| {
        (0..vocab.len() as u32)
            .find(|&t| vocab.token_bytes(t) == Some(text.as_bytes()) && !vocab.is_special(t))
            .unwrap_or_else(|| panic!("no token {text:?}"))
    };
    let mut mask = llamay_constrain::TokenMask::new(vocab.len());
    for (prefix, refused, allowed) in [
        (r#"{"x":1,""#, &["x\"", "x\":", "\\u0078\""][..], "y\""),
        (r#"{"":1,""#, &["\""][..], "y\""),
        (r#"{"x":1,"\u00"#, &["78\""][..], "12"),
        (r#"{"x":1"#, &[",\"x\"", ",\"y\":1,\"y\""][..], ",\""),
        (r#"{"x":1,"#, &["\"x\""][..], "\"a\""),
        (r#"{"x":"ab"#, &["\", \"x\""][..], "\"}"),
    ] {
        let mut m = c.matcher();
        m.commit_bytes(prefix.as_bytes()).unwrap();
        m.mask(&mut mask);
        for r in refused {
            assert!(!mask.is_allowed(token(r)), "after {prefix}: {r} allowed");
        }
        assert!(
            mask.is_allowed(token(allowed)),
            "after {prefix}: {allowed} refused"
        );
        // The mask and commit agree on every token.
        for t in 0..vocab.len() as u32 {
            let committed = m.commit(t).is_ok();
            if committed {
                m.rollback(1).unwrap();
            }
            let text = String::from_utf8_lossy(vocab.token_bytes(t).unwrap_or(b""));
            assert_eq!(
                mask.is_allowed(t),
                committed,
                "after {prefix}: token {text:?}"
            );
        }
    }
}

#[test]
fn many_undeclared_keys_stay_refused_across_chunks() {
    // 120 keys of 10 bytes: several of the matcher's exclusion chunks, and one key too
    // long for any (refused by the commit check alone).
    let (vocab, _, _) = synthetic_vocab(&["0\"", "7\""]);
    let s = json!({"type": "object", "properties": {"a": {}}});
    let (c, _) = Constraint::from_schema_with(&s, vocab.clone(), &OPEN).unwrap();
    let long = "L".repeat(5000);
    let mut doc = format!(r#"{{"{long}":0"#);
    for i in 0..120 {
        doc.push_str(&format!(r#","key{i:07}":{i}"#));
    }
    let token = |text: &str| {
        (0..vocab.len() as u32)
            .find(|&t| vocab.token_bytes(t) == Some(text.as_bytes()) && !vocab.is_special(t))
            .unwrap()
    };
    let mut mask = llamay_constrain::TokenMask::new(vocab.len());
    // The first key and one of the last (other chunks), then a key not seen.
    for (key, last, seen) in [
        ("key000000", "0\"", true),
        ("key000011", "7\"", true),
        ("key000012", "0\"", false),
    ] {
        let mut m = c.matcher();
        m.commit_bytes(format!(r#"{doc},"{key}"#).as_bytes())
            .unwrap();
        m.mask(&mut mask);
        assert_eq!(mask.is_allowed(token(last)), !seen, "{key}{last}");
        assert_eq!(m.commit(token(last)).is_ok(), !seen, "{key}{last}");
    }
    let mut m = c.matcher();
    m.commit_bytes(doc.as_bytes()).unwrap();
    assert!(m.commit_bytes(format!(r#","{long}""#).as_bytes()).is_err());
    assert!(m.commit_bytes(format!(r#","{long}L""#).as_bytes()).is_ok());
}
