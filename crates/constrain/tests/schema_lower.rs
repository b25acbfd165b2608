//! Lowered schemas on the real automaton: documents fed byte by byte.

use std::sync::Arc;

use llamay_constrain::{Constraint, SchemaError, Vocabulary};
use serde_json::{json, Value};

/// One token per byte value, plus an end-of-generation token.
fn byte_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    toks.push(b"</s>".to_vec());
    Arc::new(Vocabulary::new(toks, &[256], &[]))
}

fn build(schema: &Value) -> Result<Constraint, SchemaError> {
    Constraint::from_schema(schema, byte_vocab()).map(|(c, _)| c)
}

/// True when `text`, fed one byte at a time, is a complete document.
fn walks(c: &Constraint, text: &str) -> bool {
    let mut m = c.matcher();
    text.bytes().all(|b| m.commit_bytes(&[b]).is_ok()) && m.is_accepting()
}

fn check(schema: Value, valid: &[&str], invalid: &[&str]) {
    let c = build(&schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
    for t in valid {
        assert!(walks(&c, t), "{schema}: {t} should be accepted");
    }
    for t in invalid {
        assert!(!walks(&c, t), "{schema}: {t} should be rejected");
    }
}

#[test]
fn product_page_order_output_walks() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            llamay_testdata::shared_dir().join("corpus/seed/order.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let shown = r#"{ "order_id": "7", "delivery": { "postcode": "69001", "city": "Lyon" }, "lines": [ { "item": "Widget 1", "unit_price": 4.50, "qty": 3 }, { "item": "Widget 2", "unit_price": 4.50, "qty": 3 }, { "item": "Widget 3", "unit_price": 4.50, "qty": 3 } ] }"#;
    check(
        schema,
        &[
            shown,
            r#"{"order_id":"42","lines":[{"item":"x","qty":2,"unit_price":18}],"delivery":null}"#,
        ],
        &[
            r#"{"order_id":"1234567","lines":[{"item":"x","qty":2,"unit_price":18}],"delivery":null}"#,
            r#"{"order_id":"1","lines":[],"delivery":null}"#,
            r#"{"order_id":"1","lines":[{"item":"x","qty":1000,"unit_price":18}],"delivery":null}"#,
            r#"{"order_id":"1","lines":[{"item":"x","qty":1,"unit_price":4.505}],"delivery":null}"#,
            r#"{"order_id":"1","lines":[{"item":"x","qty":1,"unit_price":1}]}"#,
            r#"{"order_id":"1","order_id":"1","lines":[{"item":"x","qty":1,"unit_price":1}],"delivery":null}"#,
            r#"{"order_id":"1","lines":[{"item":"x","qty":1,"unit_price":1}],"delivery":null,"x":1}"#,
        ],
    );
}

#[test]
fn strings_escapes_lengths_patterns() {
    check(
        json!({"type": "string", "minLength": 2, "maxLength": 3}),
        &[
            r#""ab""#,
            r#""日本語""#,
            r#""\u00e9\n""#,
            r#""\ud83d\ude00x""#,
            r#""a\"""#,
        ],
        &[r#""a""#, r#""abcd""#, r#""\u00e9\n!!""#, "\"a\nb\""],
    );
    check(
        json!({"type": "string", "pattern": "^caf\u{e9}$"}),
        &[r#""café""#, r#""caf\u00e9""#],
        &[r#""cafe""#],
    );
    check(
        json!({"type": "string", "pattern": "[0-9]"}),
        &[r#""ab1""#],
        &[r#""abc""#],
    );
    check(
        json!({"type": "string", "pattern": "^\\d+$"}),
        &[r#""123""#],
        &["\"\u{663}\""],
    );
}

#[test]
fn integers_exact() {
    check(
        json!({"type": "integer", "minimum": -12, "maximum": 305}),
        &["-12", "0", "9", "305", "100"],
        &["-13", "306", "-0", "007", "1.0", "1e2", "3.5"],
    );
    // Open ends stop at 19 digits, so a model cannot write digits for ever.
    check(
        json!({"type": "integer"}),
        &["0", "-5", "1234567890123456789", "-9999999999999999999"],
        &["-0", "01", "1.5", "12345678901234567890"],
    );
    check(
        json!({"type": "integer", "exclusiveMinimum": 999999999999999990_i64}),
        &["999999999999999991", "1000000000000000000"],
        &["999999999999999990"],
    );
}

#[test]
fn integer_steps() {
    // Listed outright.
    check(
        json!({"type": "integer", "minimum": 0, "maximum": 100, "multipleOf": 25}),
        &["0", "75", "100"],
        &["10", "125"],
    );
    // Automaton product: unbounded above.
    check(
        json!({"type": "integer", "minimum": 10, "multipleOf": 7}),
        &["14", "700", "7000000000007"],
        &["7", "15", "7000000000008"],
    );
    check(
        json!({"type": "integer", "multipleOf": 3}),
        &["0", "-3", "99", "-123"],
        &["1", "-100"],
    );
}

#[test]
fn numbers_bounded_and_stepped() {
    check(
        json!({"type": "number", "minimum": 0, "multipleOf": 0.01}),
        &["0", "4.5", "4.50", "12.05", "1000000"],
        &["-1", "4.505", "1e3", "-0.01"],
    );
    check(
        json!({"type": "number", "exclusiveMinimum": -1.5, "maximum": 2.25}),
        &["-1.49", "0", "2.25", "2.2", "1.000000001"],
        &["-1.5", "2.26", "2.2500001", "3", "1E0"],
    );
    check(
        json!({"type": "number"}),
        &["1.5e-05", "-0.0", "3", "1E+10"],
        &["01", ".5", "1."],
    );
}

#[test]
fn enums_consts_and_types() {
    check(
        json!({"enum": ["c", "f", 3, null, {"a": [1]}]}),
        &[r#""c""#, r#""\u0063""#, "3", "null", r#"{"a":[1]}"#],
        &[r#""x""#, "4", r#"{"a":[2]}"#, r#""cf""#],
    );
    check(
        json!({"type": ["string", "null"]}),
        &["null", r#""x""#],
        &["1", "true"],
    );
    check(
        json!({"type": "boolean"}),
        &["true", "false"],
        &["1", "null"],
    );
    check(
        json!({}),
        &["1", r#"{"a":[null,{}]}"#, r#""s""#],
        &["{", "tru"],
    );
}

#[test]
fn objects_any_order_required_and_additional() {
    let schema = json!({"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]});
    check(
        schema.clone(),
        &[
            r#"{"a":1}"#,
            r#"{"b":"x","a":1}"#,
            "{ \"a\" : 1 , \"b\" : \"x\" }",
        ],
        &[
            r#"{}"#,
            r#"{"b":"x"}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,"c":2}"#,
            r#"{"a":"1"}"#,
        ],
    );
    check(
        json!({"type": "object", "properties": {"a": {"type": "integer"}},
               "additionalProperties": {"type": "boolean"}}),
        &[r#"{"a":1,"z":true}"#, r#"{"z":false,"y":true}"#],
        &[r#"{"z":1}"#, r#"{"a":true}"#],
    );
    check(
        json!({"type": "object"}),
        &[r#"{}"#, r#"{"q":[1]}"#],
        &["[]"],
    );
}

#[test]
fn arrays_counts_and_recursion() {
    check(
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
        &["[1]", "[1, 2, 3]", "[ 1 ]"],
        &["[]", "[1,2,3,4]", "[\"1\"]", "[1,]"],
    );
    check(
        json!({"$defs": {"n": {"type": "object", "properties": {
            "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
            "required": ["v"]}}, "$ref": "#/$defs/n"}),
        &[r#"{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}"#],
        &[r#"{"v":1,"kids":[{"kids":[]}]}"#],
    );
}

#[test]
fn whitespace_is_budgeted() {
    let c = build(&json!({"type": "array", "items": {"type": "integer"}})).unwrap();
    let padded = format!("[{}1]", " ".repeat(64));
    assert!(walks(&c, &padded));
    let over = format!("[{}1]", " ".repeat(65));
    assert!(!walks(&c, &over));
}

/// A small deterministic generator (no external crate needed for a fixed sample).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

/// Random numeric schemas: the automaton accepts a number's text exactly when the
/// compiled tree (the reference semantics) accepts its value.
#[test]
fn numeric_specs_agree_with_the_tree() {
    use llamay_constrain::{compile_schema, internals::Node};
    let mut rng = Lcg(7);
    let mut checked = 0;
    for round in 0..60 {
        let integer = round % 2 == 0;
        let mut schema = json!({"type": if integer { "integer" } else { "number" }});
        let lo = rng.range(-300, 300);
        let hi = lo + rng.range(-20, 400);
        let scale = if integer {
            1.0
        } else {
            [1.0, 10.0, 100.0][rng.range(0, 2) as usize]
        };
        if rng.range(0, 3) > 0 {
            let key = if rng.range(0, 1) == 0 {
                "minimum"
            } else {
                "exclusiveMinimum"
            };
            schema[key] = json!(lo as f64 / scale);
        }
        if rng.range(0, 3) > 0 {
            let key = if rng.range(0, 1) == 0 {
                "maximum"
            } else {
                "exclusiveMaximum"
            };
            schema[key] = json!(hi as f64 / scale);
        }
        match rng.range(0, 3) {
            0 if integer => schema["multipleOf"] = json!(rng.range(2, 9)),
            0 => schema["multipleOf"] = json!([0.1, 0.01, 1.0, 5.0][rng.range(0, 3) as usize]),
            _ => {}
        }
        let Ok(tree) = compile_schema(&schema) else {
            continue;
        };
        let c = build(&schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
        for _ in 0..150 {
            let v = rng.range(-4000, 4000);
            let digits = rng.range(0, 3) as usize;
            let text = if digits == 0 {
                v.to_string()
            } else {
                let s = format!("{:.*}", digits, v as f64 / 10f64.powi(digits as i32));
                if s == format!("-{}", &s[1..]) && s[1..].bytes().all(|b| b == b'0' || b == b'.') {
                    continue; // "-0.00": a spelling llamay never writes
                }
                s
            };
            let value: Value = serde_json::from_str(&text).unwrap();
            // Integers are written as digits only (`25`, never `25.0`).
            let digits_only = matches!(tree.root, Node::Integer(_)) && text.contains('.');
            let expected = tree.check(&value).is_ok() && !digits_only;
            assert_eq!(walks(&c, &text), expected, "{schema}: {text}");
            checked += 1;
        }
    }
    assert!(checked > 5000, "{checked}");
}

#[test]
fn recursion_to_depth_64() {
    let c = build(
        &json!({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                          "$ref": "#/$defs/n"}),
    )
    .unwrap();
    let doc = format!("{}{}", "[".repeat(64), "]".repeat(64));
    assert!(walks(&c, &doc));
    assert!(!walks(&c, &format!("{}{}", "[".repeat(64), "]".repeat(63))));
}

#[test]
fn numbers_cannot_grow_for_ever() {
    // Found by `llamay run`: a model wrote `250.0018…E+26037479…` (no parser reads it)
    // and, for a price with only a minimum, `1000000…` until the token limit.
    check(
        json!({"type": "number"}),
        &["250.5E+12", "-1e-99", "1234567890123456789.5"],
        &["1E+100", "2e-123", "12345678901234567890"],
    );
    check(
        json!({"type": "number", "minimum": 0, "multipleOf": 0.01}),
        &["4.50", "0", "999999999999999", "25.0"],
        &["1000000000000000", "4.505", "1.5000000000000000000000"],
    );
}
