//! `oneOf`: exclusivity enforced where the branches can be told apart (by type, by
//! listed values, by a tag key), reported where not. Random walks of the compiled
//! constraint are validated with the `jsonschema` crate, which checks "exactly one".

mod common;
use common::{random_walk, synthetic_vocab, Rng};
use llamay_constrain::{compile_schema, Constraint};
use serde_json::{json, Value};

/// Where the schema's report says a `oneOf` is not exclusive.
fn not_exclusive(schema: &Value) -> Vec<String> {
    let tree = compile_schema(schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
    tree.report
        .entries
        .iter()
        .filter(|e| e.keyword == "oneOf exclusivity")
        .map(|e| e.location.clone())
        .collect()
}

/// Finished documents of `walks` random walks of the schema's constraint.
fn documents(schema: &Value, walks: usize) -> Vec<Value> {
    let (vocab, eog, special) = synthetic_vocab(&["\"kind\"", "circle", "square", "rect", "2.5"]);
    let (c, _) = Constraint::from_schema(schema, vocab).unwrap();
    let mut rng = Rng::new(11);
    let closer = |t: &[u8]| t.iter().all(|b| b"}]\"0123456789".contains(b));
    let docs: Vec<Value> = (0..walks)
        .map(|_| random_walk(&c, eog, special, &mut rng, 30, 500, &closer))
        .filter(|w| w.finished)
        .map(|w| serde_json::from_slice(&w.bytes).unwrap())
        .collect();
    assert!(
        docs.len() * 10 >= walks * 9,
        "{} of {walks} walks finished",
        docs.len()
    );
    docs
}

/// Asserts every walked document is valid under the schema, "exactly one" included.
fn all_valid(schema: &Value, walks: usize) -> Vec<Value> {
    let validator = jsonschema::validator_for(schema).unwrap();
    let docs = documents(schema, walks);
    for d in &docs {
        assert!(
            validator.is_valid(d),
            "{schema}: walked {d}, which is not valid"
        );
    }
    docs
}

#[test]
fn integer_beside_number_keeps_only_non_integral_numbers() {
    for schema in [
        json!({"oneOf": [{"type": "integer"}, {"type": "number"}]}),
        json!({"oneOf": [{"type": "number"}, {"type": "integer"}]}),
        json!({"oneOf": [{"type": ["integer", "string"]}, {"type": "number"}]}),
    ] {
        assert!(not_exclusive(&schema).is_empty(), "{schema}");
        let tree = compile_schema(&schema).unwrap();
        // An integer fits both branches, so none is valid; 2.5 fits one.
        assert!(tree.check(&json!(5)).is_err() && tree.check(&json!(5.0)).is_err());
        assert!(tree.check(&json!(2.5)).is_ok() && tree.check(&json!(-0.001)).is_ok());
        let docs = all_valid(&schema, 300);
        assert!(
            docs.iter().filter(|d| d.is_number()).count() > 100,
            "{schema}"
        );
    }
}

#[test]
fn overlapping_branches_are_reported() {
    let overlapping = [
        // 5 fits both: the number branch is bounded, so it cannot give up its integers.
        json!({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}),
        // `{}` fits both.
        json!({"oneOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"type": "object", "properties": {"b": {"type": "integer"}}}]}),
        // Without `type`, `properties` does not stop 5 from fitting the first branch.
        json!({"oneOf": [{"properties": {"a": {}}}, {"type": "integer"}]}),
        // llamay closes the second object, JSON Schema does not: {"a": 1} fits both.
        json!({"oneOf": [
            {"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]},
            {"type": "object", "properties": {"b": {}}}]}),
        json!({"oneOf": [{"enum": ["a", "b"]}, {"enum": ["b", 3]}]}),
        json!({"oneOf": [{"type": "string", "maxLength": 2}, {"type": "string", "minLength": 1}]}),
    ];
    for schema in overlapping {
        assert_eq!(not_exclusive(&schema), ["the schema"], "{schema}");
    }
    // The report is right to say so: the automaton keeps 5, which fails `oneOf`.
    let schema = &json!({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]});
    assert!(compile_schema(schema).unwrap().check(&json!(5)).is_ok());
    assert!(!jsonschema::validator_for(schema)
        .unwrap()
        .is_valid(&json!(5)));
    // Reported where the `oneOf` is written, in the words every response carries.
    let nested = json!({"type": "object", "properties": {"p": {"oneOf": [{}, {"type": "null"}]}}});
    let tree = compile_schema(&nested).unwrap();
    assert_eq!(not_exclusive(&nested), ["properties.p"]);
    assert_eq!(
        tree.report.to_string(),
        "oneOf exclusivity at properties.p: not enforced"
    );
}

#[test]
fn tagged_unions_are_enforced_and_not_reported() {
    let circle = json!({"type": "object",
        "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
        "required": ["kind", "r"]});
    let shapes = json!({"type": "object",
        "properties": {"kind": {"enum": ["square", "rect"]}, "w": {"type": "integer"}},
        "required": ["kind"]});
    let tagged = [
        json!({"oneOf": [circle, shapes]}),
        // Through references, and without `type`: the tag decides for objects, and
        // both branches take every other type alike, which the automaton never writes.
        json!({"$defs": {"c": {"properties": {"kind": {"const": "circle"}}, "required": ["kind"]},
                         "s": {"properties": {"kind": {"const": "square"}}, "required": ["kind"]}},
               "oneOf": [{"$ref": "#/$defs/c"}, {"$ref": "#/$defs/s"}]}),
        // Told apart by a key one branch requires and the other forbids.
        json!({"oneOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
             "additionalProperties": false},
            {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"],
             "additionalProperties": false}]}),
    ];
    for schema in tagged {
        assert!(not_exclusive(&schema).is_empty(), "{schema}");
        let docs = all_valid(&schema, 200);
        assert!(docs.iter().all(Value::is_object), "{schema}");
    }
}

#[test]
fn branches_of_different_types_or_values_are_not_reported() {
    let apart = [
        json!({"oneOf": [
            {"type": "string", "maxLength": 3},
            {"type": "null"},
            {"type": "array", "items": {"type": "boolean"}},
            {"type": "integer", "minimum": 0},
            {"type": "object", "properties": {"x": {"type": "boolean"}}}]}),
        json!({"oneOf": [{"enum": ["a", "b"]}, {"const": "c"}, {"enum": [1, null]}]}),
        // A recursive branch: its shape is a reference still being compiled, but the
        // types as written tell the branches apart.
        json!({"$defs": {"list": {"type": "array", "items": {"oneOf": [
            {"type": "string"}, {"$ref": "#/$defs/list"}]}}},
            "$ref": "#/$defs/list"}),
    ];
    for schema in apart {
        assert!(not_exclusive(&schema).is_empty(), "{schema}");
        all_valid(&schema, 200);
    }
}
