//! Hostile schemas get a clear refusal quickly: no panic, no hang, no huge allocation.

use std::time::{Duration, Instant};

use llamay_constrain::{compile_schema, schema_grammar};
use serde_json::{json, Value};

fn refused_quickly(schema: Value, keyword: &str) {
    let t = Instant::now();
    let e = match schema_grammar(&schema) {
        Ok(_) => panic!(
            "compiled: {}",
            schema.to_string().chars().take(200).collect::<String>()
        ),
        Err(e) => e,
    };
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(e.keyword, keyword, "{}", e.message);
    assert!(!e.message.is_empty());
}

#[test]
fn any_of_products_are_bounded() {
    // 4^12 combinations; contradictory types are pruned, so four survive.
    let alt = json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}, {"type": "boolean"}]});
    let t = Instant::now();
    let c = compile_schema(&json!({"allOf": vec![alt; 12]})).expect("pruned product");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    assert!(
        matches!(&c.root, llamay_constrain::internals::Node::Union(v) if v.len() == 4),
        "{:?}",
        c.root
    );
    // 8^6 combinations that do not contradict: refused by the expansion budget.
    let alt = json!({"anyOf": (0..8).map(|i| json!({"type": "object", "properties": {format!("p{i}"): {}}})).collect::<Vec<_>>()});
    let t = Instant::now();
    let e = compile_schema(&json!({"allOf": vec![alt; 6]})).expect_err("8^6 alternatives");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(e.keyword, "anyOf", "{}", e.message);
}

#[test]
fn reference_loops_and_chains() {
    refused_quickly(json!({"$ref": "#"}), "$ref");
    refused_quickly(
        json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
        "$ref",
    );
    let mut defs = serde_json::Map::new();
    for i in 0..100 {
        defs.insert(
            format!("d{i}"),
            json!({"$ref": format!("#/$defs/d{}", i + 1)}),
        );
    }
    defs.insert("d100".into(), json!({"type": "string"}));
    refused_quickly(json!({"$defs": defs, "$ref": "#/$defs/d0"}), "$ref");
}

#[test]
fn numbers_out_of_reach() {
    refused_quickly(json!({"type": "number", "maximum": 1e300}), "maximum");
    refused_quickly(
        json!({"type": "number", "multipleOf": 1e-300}),
        "multipleOf",
    );
    refused_quickly(json!({"type": "integer", "minimum": 1e40}), "minimum");
    refused_quickly(json!({"type": "string", "minLength": 100000}), "minLength");
    refused_quickly(json!({"type": "array", "minItems": 100000}), "minItems");
}

#[test]
fn wide_and_deep_but_legal_schemas_compile() {
    // A long chain of nested objects (as deep as serde_json parses by default).
    let mut s = json!({"type": "integer"});
    for i in 0..100 {
        s = json!({"type": "object", "properties": {format!("k{i}"): s}, "required": [format!("k{i}")]});
    }
    let (g, _) = schema_grammar(&s).expect("deep schema");
    assert!(g.rules().len() > 100);
    // Many definitions referencing each other without cycles.
    let mut defs = serde_json::Map::new();
    for i in 0..200 {
        let next = if i == 199 {
            json!({"type": "string"})
        } else {
            json!({"type": "array", "items": {"$ref": format!("#/$defs/d{}", i + 1)}, "maxItems": 2})
        };
        defs.insert(format!("d{i}"), next);
    }
    schema_grammar(&json!({"$defs": defs, "$ref": "#/$defs/d0"})).expect("chain of definitions");
}
