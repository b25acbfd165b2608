//! Masks over literals agree with the token-by-token answer.
//!
//! A walk that reaches a state whose one item spells a literal (a declared key, an
//! enum's or a const's value, a GBNF string) follows the trie down the literal without
//! making a state per byte, and makes one where the literal ends. Each mask here is
//! checked against the tokens committed one at a time (and rolled back), which step
//! the automaton byte by byte: keys sharing prefixes, keys that are prefixes of others,
//! keys longer than any token, escaped and non-ASCII keys, literals ending inside a
//! token that goes on past them, in open and closed objects and in detached value
//! walks.

#[path = "common/by_commits.rs"]
mod by_commits;
#[path = "common/real_vocab.rs"]
mod real_vocab;

use by_commits::{compare_walk, mask_by_commits};
use llamay_constrain::{AdditionalProperties, Constraint, SchemaOptions, TokenMask, Vocabulary};
use llamay_testdata::{RealModel, XorShift};
use serde_json::json;
use std::sync::Arc;

/// Texts after which a value or key literal starts, so its end is met inside tokens
/// that go on past it whatever the random walks pick.
const PREFIXES: [&str; 13] = [
    "",
    "he",
    "[alpha,",
    "{\"namespace\":",
    "{\"name\":\"a\",\"names\":[",
    "{\"name\":\"a\",\"names\":[\"alpha\",",
    "{\"name\":\"a\",\"id\":true,\"identifier\":",
    "{\"😀\":{",
    "{\"ключ\":",
    "{\"kind\":",
    "{\"kind\":\"circle\",\"shape\":{",
    "[",
    "[\"true\",",
];

/// The mask after each of [`PREFIXES`] the constraint takes, against commits.
fn check_prefixes(name: &str, c: &Constraint, v: &Vocabulary) -> usize {
    let mut met = 0;
    for prefix in PREFIXES {
        let mut m = c.matcher();
        if m.commit_bytes(prefix.as_bytes()).is_err() {
            continue;
        }
        let mut mask = TokenMask::new(v.len());
        m.mask(&mut mask);
        assert_eq!(
            mask,
            mask_by_commits(&mut m, v.len()),
            "{name} after {prefix:?}"
        );
        met += 1;
    }
    met
}

fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    let keys = json!({
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "name": {"type": "string"},
            "names": {"type": "array", "items": {"enum": ["alpha", "alphabet", "beta"]}},
            "namespace": {"const": "default"},
            "id": {"type": "boolean"},
            "identifier": {"enum": [1, 12, 123, true, null, "x\"y"]},
            "a_key_far_longer_than_any_token_of_the_vocabulary_can_be": {"type": "null"},
            "quo\"te": {"type": "number"},
            "back\\slash": {"type": "string", "maxLength": 3},
            "ключ": {"enum": ["значение", "значения"]},
            "😀": {"type": "object", "properties": {"deep": {"const": "er"}}, "required": ["deep"]}
        },
        "required": ["name", "id"]
    });
    let values = json!({
        "type": "array",
        "items": {"enum": ["true", "truth", "t", "false", "null", "nullable", " spaced ", "\n"]},
        "minItems": 1
    });
    let nested = json!({
        "type": "object",
        "properties": {
            "kind": {"enum": ["circle", "circles", "square"]},
            "shape": {
                "anyOf": [
                    {"type": "object", "properties": {"radius": {"type": "number"}}, "required": ["radius"]},
                    {"type": "object", "properties": {"side": {"type": "number"}, "sides": {"const": 4}}}
                ]
            }
        },
        "required": ["kind", "shape"]
    });
    vec![("keys", keys), ("values", values), ("nested", nested)]
}

fn check(v: &Arc<Vocabulary>, steps: usize, rounds: u64) {
    let open = SchemaOptions {
        additional_properties: AdditionalProperties::Open,
        ..SchemaOptions::default()
    };
    for (name, schema) in schemas() {
        for options in [SchemaOptions::default(), open] {
            let (c, _) =
                llamay_constrain::Constraint::from_schema_with(&schema, v.clone(), &options)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(check_prefixes(name, &c, v) >= 2, "{name}");
            for round in 0..rounds {
                let mut rng = XorShift::new(11 + round);
                let allowed = compare_walk(name, &c, v, &mut rng, steps);
                assert!(allowed > 10, "{name}: {allowed}");
            }
        }
    }
    let grammars = [
        "root ::= (\"hello world\" | \"help\" | \"helping hand\" | \"he\") [a-z]* \"!\"",
        // A literal that ends in a return to the caller's stack, which the detached
        // walk of `item` leaves to the real stack.
        "root ::= \"[\" item (\",\" item)* \"]\"\nitem ::= \"alpha\" | \"beta\" | \"gamma\"",
    ];
    for grammar in grammars {
        let c = Constraint::from_gbnf(grammar, v.clone()).unwrap();
        assert!(check_prefixes(grammar, &c, v) >= 2, "{grammar}");
        for round in 0..rounds {
            let mut rng = XorShift::new(40 + round);
            let allowed = compare_walk(grammar, &c, v, &mut rng, steps);
            assert!(allowed >= 4, "{grammar}: {allowed}");
        }
    }
}

#[test]
fn literal_walks_agree_with_commits_on_smollm2() {
    let rv = real_vocab::load(RealModel::SmolLM2);
    check(&rv.vocab, 24, 3);
}

/// Tokens that run past a literal's end into what follows it (`name":`, `"kind":"`,
/// `help!`), or stop one byte short of it, so the state after a literal is met
/// inside a token and at its end.
#[test]
fn literal_walks_agree_with_commits_on_tokens_across_literal_ends() {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for t in [
        "name",
        "name\"",
        "name\":",
        "name\":\"",
        "names\":[\"",
        "namespace\":\"def",
        "nam",
        "\"n\":1",
        "\"id\":true",
        "identifier\":12",
        "\"kind\":\"circle",
        "circles\"",
        "\":{\"",
        "radius\":",
        "side",
        "sides\":4}",
        "alpha\",\"",
        "alphabet\"]",
        "hello",
        "hello world!",
        "help!",
        "helping",
        " hand",
        "he!",
        "true\",\"",
        "nullable\"]",
        "\\\"te\":",
        "ключ\":\"",
        "значени",
        "😀\":{\"deep\":\"er\"}",
        "a_key_far_longer",
        "_than_any_token",
        "alpha,",
        "beta]",
        "gamma",
        "a,",
        "\"alpha\",\"",
        "\"square\",",
        "\"circles\"}",
        "\"t\",",
        "\"beta\"]",
        "\"default\"}",
    ] {
        tokens.push(t.as_bytes().to_vec());
    }
    tokens.push(b"</s>".to_vec());
    let eog = tokens.len() as u32 - 1;
    let v = Arc::new(Vocabulary::new(tokens, &[eog], &[]));
    check(&v, 40, 4);
}
