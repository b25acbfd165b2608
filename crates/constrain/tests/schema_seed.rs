//! The product page's schemas and the seed corpus compile, and their instances fit.

use llamay_constrain::compile_schema;
use llamay_constrain::internals::Node;
use serde_json::Value;

fn seed(name: &str) -> String {
    let p = llamay_testdata::shared_dir().join("corpus/seed").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn check_seed(stem: &str) {
    let c = compile_schema(&serde_json::from_str(&seed(&format!("{stem}.schema.json"))).unwrap())
        .expect(stem);
    assert!(c.report.is_fully_enforced(), "{stem}: {}", c.report);
    let instances: Vec<Value> =
        serde_json::from_str(&seed(&format!("{stem}.instances.json"))).unwrap();
    assert!(!instances.is_empty());
    for i in &instances {
        assert_eq!(c.check(i), Ok(()), "{stem}: {i}");
    }
}

#[test]
fn seed_corpus_schemas_compile_and_fit_their_instances() {
    for stem in ["order", "invoice", "tool_call"] {
        check_seed(stem);
    }
}

/// The order schema as the product page sends it, and the output it shows.
#[test]
fn product_page_order_schema() {
    let schema = llamay_testdata::PRODUCT_PAGE_ORDER_SCHEMA;
    let c = compile_schema(&serde_json::from_str(schema).unwrap()).unwrap();
    let shown: Value = serde_json::from_str(
        r#"{ "order_id": "7", "delivery": { "postcode": "69001", "city": "Lyon" }, "lines": [ { "item": "Widget 1", "unit_price": 4.50, "qty": 3 }, { "item": "Widget 2", "unit_price": 4.50, "qty": 3 }, { "item": "Widget 3", "unit_price": 4.50, "qty": 3 } ] }"#,
    )
    .unwrap();
    assert_eq!(c.check(&shown), Ok(()));
    for bad in [
        r#"{"order_id": "1234567", "lines": [{"item": "a", "qty": 1, "unit_price": 1}], "delivery": null}"#,
        r#"{"order_id": "1", "lines": [], "delivery": null}"#,
        r#"{"order_id": "1", "lines": [{"item": "a", "qty": 1000, "unit_price": 1}], "delivery": null}"#,
        r#"{"order_id": "1", "lines": [{"item": "a", "qty": 1, "unit_price": 4.505}], "delivery": null}"#,
        r#"{"order_id": "1", "lines": [{"item": "a", "qty": 1, "unit_price": 1}], "delivery": {"city": "Lyon", "postcode": "6900"}}"#,
        r#"{"order_id": "1", "lines": [{"item": "a", "qty": 1, "unit_price": 1}]}"#,
    ] {
        let v: Value = serde_json::from_str(bad).unwrap();
        assert!(c.check(&v).is_err(), "{bad}");
    }
    let Node::Object(o) = &c.root else {
        panic!("{:?}", c.root)
    };
    assert!(o.additional.is_none(), "closed by default");
}

/// The get_weather tool's parameters.
#[test]
fn product_page_tool_schema() {
    let c = compile_schema(&serde_json::json!({"type": "object",
      "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
      "required": ["city", "unit"]}))
    .unwrap();
    assert_eq!(
        c.check(&serde_json::json!({"city": "Paris", "unit": "c"})),
        Ok(())
    );
    assert!(c
        .check(&serde_json::json!({"city": "Paris", "unit": "k"}))
        .is_err());
    assert!(c.check(&serde_json::json!({"city": "Paris"})).is_err());
}
