//! A call's grammar in Gemma 4's form: `call:NAME{…}`, the arguments in Gemma's
//! notation lowered from the tool's schema. Keys come sorted case-blind (the
//! template's `dictsort`), the required ones present. A string is raw between
//! `<|"|>` quotes (its `enum`/`const` as literals; `pattern`, `format` and lengths not
//! enforced); numbers, integers, booleans and null are JSON under their own schema;
//! objects and arrays are lowered member by member. A schema the notation cannot be
//! held to this way (no `type`, a union, `$ref`, `anyOf`) is refused naming it.

use llamay_constrain::{compile_schema, GrammarBuilder, Symbol};
use serde_json::Value;

use super::{CALL, QUOTE};
use crate::error::Error;
use crate::tools::xml::is_string_only;
use crate::tools::{raw_text, ToolDef};

/// Deepest nesting of objects and arrays lowered.
const MAX_DEPTH: usize = 16;

/// The inside of a call to `tool`: `call:NAME{…}`.
pub(crate) fn call_body(b: &mut GrammarBuilder, tool: &ToolDef) -> Result<Symbol, Error> {
    let refuse = |why: String| Error::refusal(format!("tool {}: {why}", tool.name)).at("tools");
    if tool.name.contains(['{', '<']) {
        return Err(refuse(
            "its name holds '{' or '<', which Gemma 4's call form cannot write".into(),
        ));
    }
    let args = object(b, &tool.parameters, 0).map_err(refuse)?;
    Ok(Symbol::seq(vec![
        Symbol::lit(format!("{CALL}{}", tool.name)),
        args,
    ]))
}

/// One value under `schema`.
fn value(b: &mut GrammarBuilder, schema: &Value, depth: usize) -> Result<Symbol, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nests deeper than {MAX_DEPTH}"));
    }
    if is_string_only(schema) {
        let literals = match (schema.get("const"), schema.get("enum")) {
            (Some(Value::String(c)), _) => Some(vec![c.as_str()]),
            (_, Some(Value::Array(e))) => Some(e.iter().filter_map(Value::as_str).collect()),
            _ => None,
        };
        let inner = match literals {
            Some(l) if l.is_empty() => return Err("an enum with no string".into()),
            Some(l) => Symbol::alt(l.into_iter().map(|s| vec![Symbol::lit(s)]).collect()),
            None => raw_text::without(QUOTE).map_err(|e| e.to_string())?,
        };
        return Ok(Symbol::seq(vec![
            Symbol::lit(QUOTE),
            inner,
            Symbol::lit(QUOTE),
        ]));
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => object(b, schema, depth),
        Some("array") => array(b, schema, depth),
        Some("integer" | "number" | "boolean" | "null") => compile_schema(schema)
            .and_then(|c| c.lower_into(b))
            .map_err(|e| e.to_string()),
        _ => Err(format!(
            "Gemma 4's call form can only be held to a schema with one type, not {schema}"
        )),
    }
}

/// `{key:value,…}` with the schema's properties, sorted as `dictsort` sorts them.
fn object(b: &mut GrammarBuilder, schema: &Value, depth: usize) -> Result<Symbol, String> {
    let required: Vec<&str> = match schema.get("required") {
        Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut props: Vec<(&String, &Value)> = match schema.get("properties") {
        Some(Value::Object(p)) => p.iter().collect(),
        _ => Vec::new(),
    };
    props.sort_by_key(|(k, _)| (k.to_lowercase(), k.to_string()));
    let mut members = Vec::new();
    for (key, s) in props {
        if key.contains([':', ',', '{', '}', '<']) {
            return Err(format!("the key {key:?} cannot be written bare"));
        }
        let v = value(b, s, depth + 1).map_err(|e| format!("{key}: {e}"))?;
        let rule = b.rule("gemma_value", vec![vec![v]]);
        members.push((
            key.as_str(),
            Symbol::rule(rule),
            required.contains(&key.as_str()),
        ));
    }
    // From the last member back: what may follow member i, with or without a ','
    // before the next one present.
    let mut tail = [Symbol::seq(Vec::new()), Symbol::seq(Vec::new())];
    for (key, v, needed) in members.into_iter().rev() {
        let next = tail.clone();
        tail = [false, true].map(|comma| {
            let lead = if comma {
                format!(",{key}:")
            } else {
                format!("{key}:")
            };
            let present = vec![Symbol::lit(lead), v.clone(), next[1].clone()];
            let alts = match needed {
                true => vec![present],
                false => vec![present, vec![next[usize::from(comma)].clone()]],
            };
            let rule = b.rule("gemma_members", alts);
            Symbol::rule(rule)
        });
    }
    let [first, _] = tail;
    Ok(Symbol::seq(vec![Symbol::lit("{"), first, Symbol::lit("}")]))
}

/// `[item,…]` within the schema's item bounds.
fn array(b: &mut GrammarBuilder, schema: &Value, depth: usize) -> Result<Symbol, String> {
    let items = schema
        .get("items")
        .ok_or("an array without an `items` schema")?;
    let item = value(b, items, depth + 1)?;
    let item = Symbol::rule(b.rule("gemma_item", vec![vec![item]]));
    let bound = |k: &str| {
        schema
            .get(k)
            .and_then(Value::as_u64)
            .map(|n| n.min(4096) as u32)
    };
    let (min, max) = (bound("minItems").unwrap_or(0), bound("maxItems"));
    if max.is_some_and(|m| m < min) {
        return Err("maxItems is below minItems".into());
    }
    let more = Symbol::seq(vec![Symbol::lit(","), item.clone()]);
    let list = Symbol::seq(vec![
        item,
        Symbol::repeat(
            more,
            min.saturating_sub(1),
            max.map(|m| m.saturating_sub(1)),
        ),
    ]);
    let body = match (min, max) {
        (_, Some(0)) => Symbol::seq(Vec::new()),
        (0, _) => Symbol::opt(list),
        _ => list,
    };
    Ok(Symbol::seq(vec![Symbol::lit("["), body, Symbol::lit("]")]))
}
