//! A call's grammar in the XML form: the tool's parameters in its schema's order, the
//! required ones present, each value held to its own schema (a string raw, which
//! cannot hold `</parameter>`; any other value JSON under the property's schema).
//!
//! A raw string is held to its type and to `enum`/`const`; its `pattern`, `format` and
//! lengths are not enforced (they are written for JSON strings, not raw text).

use llamay_constrain::{compile_schema, GrammarBuilder, Symbol};
use serde_json::Value;

use super::{is_string_only, FUNCTION_CLOSE, FUNCTION_OPEN, PARAM_CLOSE, PARAM_OPEN};
use crate::error::Error;
use crate::tools::{raw_text, ToolDef};

/// The body of a call to `tool`: `<function=NAME>\n`, its parameters, `</function>`.
pub(crate) fn call_body(b: &mut GrammarBuilder, tool: &ToolDef) -> Result<Symbol, Error> {
    let refuse = |why: String| Error::refusal(format!("tool {}: {why}", tool.name)).at("tools");
    check_name(&tool.name).map_err(|w| refuse(format!("its name {w}")))?;
    let required: Vec<&str> = match tool.parameters.get("required") {
        Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut seq = vec![Symbol::lit(format!("{FUNCTION_OPEN}{}>\n", tool.name))];
    let no_properties = serde_json::Map::new();
    let properties = match tool.parameters.get("properties") {
        Some(Value::Object(p)) => p,
        _ => &no_properties,
    };
    for (key, schema) in properties {
        check_name(key).map_err(|w| refuse(format!("the parameter name {key:?} {w}")))?;
        let value = value(b, tool, schema).map_err(|e| refuse(format!("parameter {key}: {e}")))?;
        let param = Symbol::seq(vec![
            Symbol::lit(format!("{PARAM_OPEN}{key}>\n")),
            value,
            Symbol::lit(format!("\n{PARAM_CLOSE}\n")),
        ]);
        seq.push(match required.contains(&key.as_str()) {
            true => param,
            false => Symbol::opt(param),
        });
    }
    seq.push(Symbol::lit(FUNCTION_CLOSE));
    Ok(Symbol::seq(seq))
}

/// A name the form can write between `=` and `>`.
fn check_name(name: &str) -> Result<(), &'static str> {
    match name.contains(['>', '<', '\n']) {
        true => Err("holds '<', '>' or a line break, which the XML call form cannot write"),
        false => Ok(()),
    }
}

/// One parameter's value under its `schema`.
fn value(b: &mut GrammarBuilder, tool: &ToolDef, schema: &Value) -> Result<Symbol, String> {
    if is_string_only(schema) {
        let literals = match (schema.get("const"), schema.get("enum")) {
            (Some(Value::String(c)), _) => Some(vec![c.as_str()]),
            (_, Some(Value::Array(e))) => Some(e.iter().filter_map(Value::as_str).collect()),
            _ => None,
        };
        return match literals {
            Some(l) if l.is_empty() => Err("an enum with no string".into()),
            Some(l) => Ok(Symbol::alt(
                l.into_iter().map(|s| vec![Symbol::lit(s)]).collect(),
            )),
            None => raw_text::without(PARAM_CLOSE).map_err(|e| e.to_string()),
        };
    }
    // A property's `$ref` points into the tool's own definitions.
    let mut own = schema.clone();
    if let Value::Object(o) = &mut own {
        for defs in ["$defs", "definitions"] {
            if let Some(d) = tool.parameters.get(defs) {
                o.entry(defs).or_insert_with(|| d.clone());
            }
        }
    }
    let compiled = compile_schema(&own).map_err(|e| e.to_string())?;
    compiled.lower_into(b).map_err(|e| e.to_string())
}
