//! `oneOf` is never reported enforced when it was not: for each case, every
//! document the server writes validates under `oneOf`, or the response's enforcement
//! report lists `oneOf` as not enforced.

mod common;

use common::serve::{client, post, Server};
use serde_json::{json, Value};

#[test]
fn one_of_is_enforced_or_reported_never_claimed() {
    let s = Server::start(&[]);
    let c = client();
    let cases = [
        // Overlapping: every integer is also a number.
        json!({"oneOf": [{"type": "integer"}, {"type": "number"}]}),
        json!({"type": "object", "properties": {"n": {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "number"}]}}, "required": ["n"]}),
        // Told apart by type.
        json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}),
        // A tagged union.
        json!({"oneOf": [
            {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind", "x"]},
            {"type": "object", "properties": {"kind": {"const": "b"}, "x": {"type": "number"}}, "required": ["kind", "x"]}
        ]}),
    ];
    for schema in cases {
        let validator = jsonschema::validator_for(&schema).unwrap();
        for seed in 0..6 {
            let body = json!({"model": s.model, "seed": seed, "temperature": 1.0, "max_tokens": 40,
                "messages": [{"role": "user", "content": "A number or an object, please."}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}});
            let (st, v) = post(&c, &s.url("/v1/chat/completions"), &body);
            assert_eq!(st, 200, "{schema}: {v}");
            let reported = v["llamay"]["not_enforced"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e.as_str().unwrap_or("").contains("oneOf"));
            if reported {
                continue;
            }
            let text = v["choices"][0]["message"]["content"].as_str().unwrap();
            let doc: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert!(
                validator.is_valid(&doc),
                "{schema}: {doc} fails oneOf, yet the report says everything was enforced: {}",
                v["llamay"]
            );
        }
    }
}
