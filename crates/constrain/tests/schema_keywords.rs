//! One test per row of SPEC §5's keyword table: enforced keywords change what the
//! compiled tree accepts, ignored ones are reported, refused ones fail with the
//! keyword, its location and the product page's wording.

use llamay_constrain::{
    compile_schema, internals::IntegerSpec, internals::Node, CompiledSchema, NotEnforced,
    SchemaError,
};
use serde_json::{json, Value};

fn ok(schema: Value) -> CompiledSchema {
    compile_schema(&schema).unwrap_or_else(|e| panic!("{schema} refused: {e}"))
}

fn err(schema: Value) -> SchemaError {
    match compile_schema(&schema) {
        Ok(c) => panic!("{schema} compiled: {:?}", c.root),
        Err(e) => e,
    }
}

fn accepts(c: &CompiledSchema, v: Value) -> bool {
    c.check(&v).is_ok()
}

/// Asserts the valid values fit and the invalid ones do not.
fn fits(schema: Value, valid: &[Value], invalid: &[Value]) -> CompiledSchema {
    let c = ok(schema.clone());
    for v in valid {
        assert!(
            accepts(&c, v.clone()),
            "{schema}: {v} should fit: {:?}",
            c.check(v)
        );
    }
    for v in invalid {
        assert!(!accepts(&c, v.clone()), "{schema}: {v} should not fit");
    }
    c
}

#[test]
fn type_one_or_list_and_inferred() {
    fits(
        json!({"type": "string"}),
        &[json!("a")],
        &[json!(1), json!(null)],
    );
    fits(
        json!({"type": ["string", "null"]}),
        &[json!("a"), json!(null)],
        &[json!(1), json!(true)],
    );
    fits(
        json!({"type": "integer"}),
        &[json!(3), json!(-7)],
        &[json!(2.5), json!("3")],
    );
    fits(
        json!({"type": "number"}),
        &[json!(3), json!(2.5)],
        &[json!("2.5")],
    );
    fits(json!({"type": "boolean"}), &[json!(true)], &[json!(0)]);
    // No type: properties imply an object, items an array.
    fits(
        json!({"properties": {"a": {}}}),
        &[json!({"a": 1})],
        &[json!("x"), json!([1])],
    );
    fits(
        json!({"items": {"type": "integer"}}),
        &[json!([1, 2])],
        &[json!({}), json!("x")],
    );
    assert_eq!(ok(json!({})).root, Node::Any);
    assert_eq!(ok(json!(true)).root, Node::Any);
    let e = err(json!({"type": "strnig"}));
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("type", "the schema")
    );
}

#[test]
fn properties_and_required() {
    let c = fits(
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
               "required": ["a"]}),
        &[json!({"a": 1}), json!({"b": "x", "a": 2})],
        &[json!({"b": "x"}), json!({"a": "1"}), json!({})],
    );
    let Node::Object(o) = &c.root else {
        panic!("{:?}", c.root)
    };
    assert_eq!(
        o.properties
            .iter()
            .map(|p| (p.name.as_str(), p.required))
            .collect::<Vec<_>>(),
        [("a", true), ("b", false)]
    );
    let e = err(json!({"type": "object", "properties": {"a": {}}, "required": ["a", "zz"]}));
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("required", "the schema")
    );
    assert!(e.message.contains("\"zz\""), "{}", e.message);
    // 64 properties compile, 65 are refused.
    let props = |n: usize| -> Value {
        (0..n)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    ok(json!({"type": "object", "properties": props(64)}));
    let e = err(json!({"properties": {"inner": {"type": "object", "properties": props(65)}}}));
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("properties", "properties.inner")
    );
    assert!(e.message.contains("64"), "{}", e.message);
}

#[test]
fn additional_properties_closed_by_default() {
    let base = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    fits(
        base.clone(),
        &[json!({"a": 1}), json!({})],
        &[json!({"a": 1, "z": 2})],
    );
    let mut open = base.clone();
    open["additionalProperties"] = json!(true);
    fits(open, &[json!({"a": 1, "z": [2]})], &[json!({"a": "1"})]);
    let mut typed = base.clone();
    typed["additionalProperties"] = json!({"type": "string"});
    fits(
        typed,
        &[json!({"a": 1, "z": "2"})],
        &[json!({"a": 1, "z": 2})],
    );
    // Without `properties` an object is open, unless said otherwise.
    fits(json!({"type": "object"}), &[json!({"z": 2})], &[json!([])]);
    fits(
        json!({"type": "object", "additionalProperties": false}),
        &[json!({})],
        &[json!({"z": 2})],
    );
}

#[test]
fn items_min_items_max_items() {
    fits(
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2}),
        &[json!([1]), json!([1, 2])],
        &[json!([]), json!([1, 2, 3]), json!(["1"])],
    );
    let e = err(json!({"properties": {"t": {"type": "array", "items": [{"type": "string"}]}}}));
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("items", "properties.t")
    );
    assert!(e.message.contains("tuple"), "{}", e.message);
    let e = err(json!({"type": "array", "minItems": 3, "maxItems": 2}));
    assert_eq!(e.keyword, "minItems");
}

#[test]
fn enum_and_const() {
    fits(
        json!({"enum": ["c", "f", 3]}),
        &[json!("c"), json!(3), json!(3.0)],
        &[json!("x"), json!(4)],
    );
    fits(
        json!({"const": {"k": [1]}}),
        &[json!({"k": [1]})],
        &[json!({"k": [2]})],
    );
    // Members another keyword rules out are dropped.
    let c = ok(json!({"type": "string", "maxLength": 2, "enum": ["ab", "abc", 1]}));
    assert_eq!(c.root, Node::Literals(vec![json!("ab")]));
    let c = ok(json!({"type": "integer", "minimum": 2, "enum": [1, 2, 3]}));
    assert_eq!(c.root, Node::Literals(vec![json!(2), json!(3)]));
    let many: Vec<Value> = (0..65).map(|i| json!(i)).collect();
    ok(json!({"enum": many[..64].to_vec()}));
    let e = err(json!({"items": {"enum": many}}));
    assert_eq!((e.keyword.as_str(), e.location.as_str()), ("enum", "items"));
    let e = err(json!({"type": "string", "enum": [1, 2]}));
    assert_eq!(e.keyword, "enum");
}

#[test]
fn min_length_max_length_in_code_points() {
    fits(
        json!({"type": "string", "minLength": 2, "maxLength": 3}),
        &[json!("ab"), json!("日本語"), json!("é\n")],
        &[json!("a"), json!("abcd"), json!("日本語!")],
    );
}

#[test]
fn pattern_re2_unanchored_unless_anchored() {
    fits(
        json!({"pattern": "^[0-9]{5}$"}),
        &[json!("69001")],
        &[json!("6900"), json!("a69001")],
    );
    fits(
        json!({"pattern": "[0-9]"}),
        &[json!("ab1")],
        &[json!("abc")],
    );
    for (p, word) in [
        ("(?=x)", "lookaround"),
        ("(?<!x)y", "lookaround"),
        ("(a)\\1", "back-reference"),
        ("\\bw", "word boundary"),
        ("(?m)^a$", "multi-line anchor"),
    ] {
        let e = err(json!({"properties": {"a": {"type": "string", "pattern": p}}}));
        assert_eq!(
            (e.keyword.as_str(), e.location.as_str()),
            ("pattern", "properties.a"),
            "{p}"
        );
        assert!(e.message.contains(word), "{p}: {}", e.message);
    }
    let e = err(json!({"type": "string", "pattern": "^(a|b)*a(a|b){12}$"}));
    assert!(e.message.contains("2000 automaton states"), "{}", e.message);
}

#[test]
fn integer_bounds_exact() {
    fits(
        json!({"type": "integer", "minimum": -5, "exclusiveMaximum": 10}),
        &[json!(-5), json!(9)],
        &[json!(-6), json!(10)],
    );
    let c = ok(
        json!({"type": "integer", "minimum": 999999999999999998_i64, "maximum": 999999999999999999_i64}),
    );
    let Node::Integer(s) = &c.root else { panic!() };
    assert_eq!(
        (s.min, s.max),
        (Some(999_999_999_999_999_998), Some(999_999_999_999_999_999))
    );
    // Non-integer bounds on integers round inwards; draft-4 boolean exclusivity.
    let c = ok(json!({"type": "integer", "minimum": 1.5, "maximum": 5, "exclusiveMaximum": true}));
    let Node::Integer(s) = &c.root else { panic!() };
    assert_eq!((s.min, s.max), (Some(2), Some(4)));
    fits(
        json!({"type": "number", "exclusiveMinimum": 0, "maximum": 1.5}),
        &[json!(0.001), json!(1.5)],
        &[json!(0), json!(1.51)],
    );
    let e = err(json!({"type": "integer", "minimum": 5, "maximum": 4}));
    assert_eq!(e.keyword, "minimum");
}

#[test]
fn multiple_of() {
    let c = fits(
        json!({"type": "integer", "multipleOf": 7, "minimum": 1}),
        &[json!(7), json!(14)],
        &[json!(0), json!(8)],
    );
    assert_eq!(
        c.root,
        Node::Integer(IntegerSpec {
            min: Some(7),
            max: None,
            multiple_of: 7
        })
    );
    fits(
        json!({"type": "number", "multipleOf": 0.01}),
        &[json!(4.5), json!(4.05)],
        &[json!(4.005)],
    );
    fits(
        json!({"type": "number", "multipleOf": 5}),
        &[json!(10)],
        &[json!(7), json!(2.5)],
    );
    let e = err(json!({"properties": {"a": {"type": "number", "multipleOf": 0.25}}}));
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("multipleOf", "properties.a")
    );
    // On integers any step goes: 2.5 means multiples of 5.
    fits(
        json!({"type": "integer", "multipleOf": 2.5}),
        &[json!(5), json!(-10)],
        &[json!(2), json!(3)],
    );
}

#[test]
fn ref_local_pointers_and_recursion() {
    let line =
        json!({"type": "object", "properties": {"qty": {"type": "integer"}}, "required": ["qty"]});
    for (container, pointer) in [
        ("$defs", "#/$defs/line"),
        ("definitions", "#/definitions/line"),
    ] {
        let schema =
            json!({container: {"line": line}, "type": "array", "items": {"$ref": pointer}});
        fits(schema, &[json!([{"qty": 1}])], &[json!([{"qty": "1"}])]);
    }
    // Any pointer, escapes included.
    fits(
        json!({"properties": {"a/b": {"type": "string"}, "c": {"$ref": "#/properties/a~1b"}}}),
        &[json!({"c": "x"})],
        &[json!({"c": 1})],
    );
    // Recursion: a tree of nodes.
    let c = fits(
        json!({"$defs": {"node": {"type": "object", "properties": {
            "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "required": ["v"]}}, "$ref": "#/$defs/node"}),
        &[json!({"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]})],
        &[json!({"v": 1, "kids": [{"kids": []}]})],
    );
    assert_eq!(c.defs.len(), 1);
    let e = err(json!({"properties": {"a": {"$ref": "other.json#/x"}}}));
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("$ref", "properties.a")
    );
    assert!(e.message.contains("remote"), "{}", e.message);
    let e = err(json!({"$defs": {"x": {"$anchor": "x"}}, "$ref": "#/$defs/x"}));
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("$anchor", "$defs.x")
    );
    let e = err(json!({"$ref": "#x"}));
    assert_eq!(e.keyword, "$ref");
    let e = err(json!({"$ref": "#/$defs/missing"}));
    assert_eq!(e.keyword, "$ref");
    let e = err(json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}));
    assert_eq!(e.keyword, "$ref");
    let e = err(
        json!({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"}),
    );
    assert_eq!(e.keyword, "$ref", "{}", e.message);
}

#[test]
fn any_of_with_siblings_merged() {
    let c = fits(
        json!({"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"],
               "anyOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                         {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]}),
        &[json!({"k": "x", "a": 1}), json!({"k": "x", "b": true})],
        &[
            json!({"a": 1}),
            json!({"k": "x"}),
            json!({"k": "x", "a": true}),
        ],
    );
    assert!(
        matches!(&c.root, Node::Union(v) if v.len() == 2),
        "{:?}",
        c.root
    );
    let alts: Vec<Value> = (0..257).map(|i| json!({"const": i})).collect();
    let e = err(json!({"items": {"anyOf": alts}}));
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("anyOf", "items")
    );
    ok(json!({"anyOf": alts[..256].to_vec()}));
}

#[test]
fn one_of_exclusive_where_told_apart_else_reported() {
    // Overlapping branches are enforced as `anyOf` (5 matches both and is accepted),
    // and the report says exclusivity is not enforced.
    let c = fits(
        json!({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}),
        &[json!(5), json!(-3), json!(0.5)],
        &[json!(-0.5), json!("5")],
    );
    assert_eq!(
        c.report.to_string(),
        "oneOf exclusivity at the schema: not enforced"
    );
    // Every integer beside every number: no integer is valid, fractions are.
    let c = fits(
        json!({"oneOf": [{"type": "integer"}, {"type": "number"}]}),
        &[json!(0.5), json!(-3.25)],
        &[json!(5), json!(-3), json!("5")],
    );
    assert!(c.report.is_fully_enforced());
}

#[test]
fn all_of_merged_or_refused() {
    // Types intersect and bounds tighten; an untyped member's keywords do not
    // narrow the types another member wrote.
    let c = ok(json!({"allOf": [
        {"type": ["integer", "string"], "minimum": 0},
        {"type": "integer", "maximum": 10},
        {"properties": {}}]}));
    assert_eq!(
        c.root,
        Node::Integer(IntegerSpec {
            min: Some(0),
            max: Some(10),
            multiple_of: 1
        })
    );
    let c = fits(
        json!({"allOf": [{"type": "number", "minimum": 0}, {"type": "integer", "maximum": 10}]}),
        &[json!(0), json!(10)],
        &[json!(-1), json!(11), json!(0.5)],
    );
    assert!(matches!(c.root, Node::Integer(_)));
    fits(
        json!({"allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}),
        &[json!({"a": 1, "b": "x"})],
        &[json!({"a": 1}), json!({"a": 1, "b": "x", "c": 0})],
    );
    let e = err(
        json!({"properties": {"a": {"allOf": [{"type": "string"}, {"type": "integer"}]}}, "required": ["a"]}),
    );
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("type", "properties.a"),
        "{}",
        e.message
    );
    let e = err(json!({"allOf": [{"pattern": "^a"}, {"pattern": "b$"}]}));
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("allOf", "the schema"),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("two different patterns"),
        "{}",
        e.message
    );
}

#[test]
fn ignored_keywords_are_reported() {
    let cases = [
        (
            "format",
            // date-time is enforced (tests/formats.rs); a non-regular format is not.
            json!({"type": "string", "format": "uri-reference"}),
            json!("::not a reference"),
        ),
        (
            "uniqueItems",
            json!({"type": "array", "uniqueItems": true}),
            json!([1, 1]),
        ),
        (
            "prefixItems",
            json!({"type": "array", "prefixItems": [{"type": "string"}]}),
            json!([1]),
        ),
        (
            "contains",
            json!({"type": "array", "contains": {"const": 3}}),
            json!([1]),
        ),
        (
            "minProperties",
            json!({"type": "object", "minProperties": 1}),
            json!({}),
        ),
        (
            "maxProperties",
            json!({"type": "object", "maxProperties": 0}),
            json!({"a": 1}),
        ),
        (
            "propertyNames",
            json!({"type": "object", "propertyNames": {"maxLength": 1}}),
            json!({"ab": 1}),
        ),
        (
            "dependentRequired",
            json!({"type": "object", "dependentRequired": {"a": ["b"]}}),
            json!({"a": 1}),
        ),
    ];
    for (kw, schema, violating) in cases {
        let schema = json!({"properties": {"p": schema}});
        let c = ok(schema.clone());
        let entries: Vec<_> = c.report.of_kind(NotEnforced::Ignored).collect();
        assert_eq!(entries.len(), 1, "{kw}: {:?}", c.report);
        assert_eq!(
            (entries[0].keyword.as_str(), entries[0].location.as_str()),
            (kw, "properties.p")
        );
        // Not enforced: the value the keyword forbids still fits.
        assert!(accepts(&c, json!({"p": violating})), "{kw}");
        assert!(!c.report.is_fully_enforced());
    }
}

#[test]
fn annotations_are_silent() {
    let c = ok(
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x",
                      "title": "t", "description": "d", "default": 1, "examples": [1],
                      "$comment": "c", "x-vendor": 1, "type": "integer"}),
    );
    assert!(c.report.is_fully_enforced(), "{:?}", c.report);
    assert!(matches!(c.root, Node::Integer(_)));
}

#[test]
fn unknown_keys_are_reported() {
    let c =
        ok(json!({"type": "object", "properties": {"a": {"type": "string", "nullable": true}}}));
    let e: Vec<_> = c.report.of_kind(NotEnforced::Unknown).collect();
    assert_eq!(e.len(), 1);
    assert_eq!(
        (e[0].keyword.as_str(), e[0].location.as_str()),
        ("nullable", "properties.a")
    );
}

#[test]
fn refused_keywords_use_the_product_wording() {
    let e = err(json!({"type": "object", "properties": {"a": {"not": {"type": "null"}}}}));
    assert_eq!(
        e.message,
        "properties.a uses \"not\", which llamay's constraint cannot honour; send a schema \
         without it rather than one that is silently not enforced"
    );
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("not", "properties.a")
    );
    for kw in ["if", "then", "else"] {
        let e = err(json!({"items": {kw: {"type": "string"}}}));
        assert_eq!((e.keyword.as_str(), e.location.as_str()), (kw, "items"));
        assert!(
            e.message
                .starts_with(&format!("items uses \"{kw}\", which llamay's")),
            "{}",
            e.message
        );
    }
    let e = err(json!({"patternProperties": {"^x": {}}}));
    assert_eq!(
        e.message.split(',').next().unwrap(),
        "the schema uses \"patternProperties\""
    );
    // Inside a definition, located where it is written.
    let e = err(
        json!({"$defs": {"line": {"properties": {"qty": {"not": {}}}}}, "items": {"$ref": "#/$defs/line"}}),
    );
    assert_eq!(e.location, "$defs.line.properties.qty");
    // An unreferenced definition is never read.
    ok(json!({"$defs": {"unused": {"not": {}}}, "type": "string"}));
}

#[test]
fn documented_decisions() {
    // `required` on an open object: the key is required, its value any.
    fits(
        json!({"type": "object", "required": ["a"]}),
        &[json!({"a": [1]}), json!({"a": 1, "b": 2})],
        &[json!({"b": 2})],
    );
    // ...or the additional schema's.
    fits(
        json!({"type": "object", "additionalProperties": {"type": "integer"}, "required": ["a"]}),
        &[json!({"a": 1})],
        &[json!({"a": "1"}), json!({})],
    );
    // Type inferred from keywords when no `type` is written, after merging.
    fits(
        json!({"minLength": 2}),
        &[json!("ab")],
        &[json!(5), json!("a")],
    );
    fits(
        json!({"minimum": 2}),
        &[json!(2.5)],
        &[json!("x"), json!(1)],
    );
    fits(
        json!({"anyOf": [{"type": "integer"}, {"type": "string"}], "minLength": 2}),
        &[json!(1), json!("ab")],
        &[json!("a")],
    );
    // Unsatisfiable parts are dropped where JSON Schema allows it.
    let c = ok(json!({"type": "object", "properties": {"never": false, "a": {"type": "integer"}}}));
    let Node::Object(o) = &c.root else { panic!() };
    assert_eq!(
        o.properties.len(),
        1,
        "an optional property no value fits never appears"
    );
    fits(
        json!({"type": "array", "items": false}),
        &[json!([])],
        &[json!([1])],
    );
    fits(
        json!({"anyOf": [{"type": "string", "minLength": 3, "maxLength": 1}, {"type": "null"}]}),
        &[json!(null)],
        &[json!("abc")],
    );
    // ...and refused where the document itself cannot exist.
    let e = err(json!({"type": "object", "properties": {"a": false}, "required": ["a"]}));
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("type", "properties.a"),
        "{}",
        e.message
    );
    // `$ref` siblings are merged with the target.
    fits(
        json!({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2}),
        &[json!("ab")],
        &[json!("abc"), json!(1)],
    );
    // Bounds above 4096 are reported, not enforced; lower bounds above it are refused.
    let c = ok(json!({"type": "string", "maxLength": 100000}));
    let over: Vec<_> = c.report.of_kind(NotEnforced::OverLimit).collect();
    assert_eq!((over.len(), over[0].keyword.as_str()), (1, "maxLength"));
    assert_eq!(
        err(json!({"type": "array", "minItems": 5000})).keyword,
        "minItems"
    );
}
