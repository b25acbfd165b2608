//! The compile budget: a schema that takes longer than its budget is refused with the
//! part it was compiling, soon after the budget ends; the node budget likewise.

use llamay_constrain::{schema_grammar_with_options, CompileBudget, SchemaOptions, Sources};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// An object of objects whose strings each carry a distinct, costly pattern.
pub fn slow_schema(groups: usize) -> Value {
    let mut outer = serde_json::Map::new();
    for g in 0..groups {
        let mut props = serde_json::Map::new();
        for i in 0..40 {
            let p = format!("^[a-z]{{0,{}}}{g}x{i}[a-z0-9]{{0,30}}$", 20 + i);
            props.insert(format!("p{i}"), json!({"type": "string", "pattern": p}));
        }
        outer.insert(
            format!("g{g}"),
            json!({"type": "object", "properties": props}),
        );
    }
    json!({"type": "object", "properties": outer})
}

fn options(time: Option<Duration>, nodes: usize) -> SchemaOptions {
    SchemaOptions {
        budget: CompileBudget { time, nodes },
        ..SchemaOptions::default()
    }
}

#[test]
fn a_compile_past_its_time_is_refused_naming_the_part() {
    let s = slow_schema(8);
    let t0 = Instant::now();
    let unbounded = schema_grammar_with_options(&s, &Sources::none(), &options(None, 100_000));
    let full = t0.elapsed();
    assert!(unbounded.is_ok());
    let budget = full / 4;
    let t0 = Instant::now();
    let e = schema_grammar_with_options(&s, &Sources::none(), &options(Some(budget), 100_000))
        .unwrap_err();
    let took = t0.elapsed();
    let msg = e.to_string();
    assert!(msg.contains("ran past the compile budget"), "{msg}");
    assert!(msg.contains("properties.g"), "names the part: {msg}");
    // One pattern's compile at most past the deadline.
    assert!(
        took < budget + Duration::from_millis(50),
        "{took:?} for a budget of {budget:?} (full {full:?})"
    );
}

#[test]
fn the_node_budget_is_configurable() {
    let s = slow_schema(2);
    let e = schema_grammar_with_options(&s, &Sources::none(), &options(None, 20)).unwrap_err();
    assert!(e.to_string().contains("past 20 nodes"), "{e}");
    assert!(schema_grammar_with_options(&s, &Sources::none(), &options(None, 200)).is_ok());
}
