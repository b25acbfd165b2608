//! The key a schema's compile is remembered by (`constraint::SchemaMemo`).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use llamay_constrain::{SchemaOptions, Sources};
use serde_json::Value;

/// The key of a compile: the schema, how it is read, and what its extensions see
/// (the texts a quote may come from only when it has an `x-llamay-quote`, so the same
/// schema over other inputs is the same compile).
pub(crate) fn compile_key(schema: &Value, options: &SchemaOptions, sources: &Sources) -> u64 {
    let mut h = DefaultHasher::new();
    schema.to_string().hash(&mut h);
    options.hash(&mut h);
    if quotes(schema) {
        sources.input.hash(&mut h);
        sources.named.hash(&mut h);
    }
    for (name, l) in &sources.lexicons {
        (name, l.len()).hash(&mut h);
    }
    h.finish()
}

/// Whether `v` holds an `x-llamay-quote` keyword anywhere.
fn quotes(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.iter().any(|(k, v)| k == "x-llamay-quote" || quotes(v)),
        Value::Array(a) => a.iter().any(quotes),
        _ => false,
    }
}
