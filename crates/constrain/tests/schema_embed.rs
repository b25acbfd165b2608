//! `CompiledSchema::lower_into`: several schemas embedded in one larger grammar, walked byte by byte.

use std::sync::Arc;

use llamay_constrain::{compile_schema, Constraint, GrammarBuilder, Symbol, Vocabulary};
use serde_json::json;

fn byte_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    toks.push(b"</s>".to_vec());
    Arc::new(Vocabulary::new(toks, &[256], &[]))
}

fn walks(c: &Constraint, text: &str) -> bool {
    let mut m = c.matcher();
    text.bytes().all(|b| m.commit_bytes(&[b]).is_ok()) && m.is_accepting()
}

#[test]
fn two_schemas_with_refs_share_one_grammar() {
    // Both schemas have `$defs` with the same names: their rules must not clash.
    let a = compile_schema(
        &json!({"$defs": {"n": {"type": "integer", "minimum": 1, "maximum": 9}},
        "type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}, "required": ["n"]}),
    )
    .unwrap();
    let b = compile_schema(&json!({"$defs": {"n": {"enum": ["x", "y"]}},
        "type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 2}))
    .unwrap();
    let mut g = GrammarBuilder::new();
    let va = a.lower_into(&mut g).unwrap();
    let vb = b.lower_into(&mut g).unwrap();
    let root = g.rule(
        "root",
        vec![vec![Symbol::lit("A:"), va], vec![Symbol::lit("B:"), vb]],
    );
    let c = Constraint::from_grammar(&g.build(root).unwrap(), byte_vocab()).unwrap();
    for ok in [
        r#"A:{"n":3}"#,
        r#"A:{ "n" : 9 }"#,
        r#"B:[]"#,
        r#"B:["x","y"]"#,
    ] {
        assert!(walks(&c, ok), "{ok} should be accepted");
    }
    for bad in [
        r#"A:{"n":0}"#,
        r#"A:["x"]"#,
        r#"B:{"n":3}"#,
        r#"B:["x","y","x"]"#,
        r#"B:["z"]"#,
        r#"A: {"n":3}"#,
    ] {
        assert!(!walks(&c, bad), "{bad} should be rejected");
    }
}
