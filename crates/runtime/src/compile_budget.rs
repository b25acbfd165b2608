//! What a schema's compile may take in this process (`serve -compile-budget-ms`,
//! `-compile-budget-nodes`), and the key a compile is remembered by
//! (`resolver::SchemaMemo`).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::RwLock;

use llamay_constrain::{CompileBudget, SchemaOptions, Sources};
use serde_json::Value;

static BUDGET: RwLock<Option<CompileBudget>> = RwLock::new(None);

/// Sets the budget every schema compile of this process runs under.
pub fn set_compile_budget(b: CompileBudget) {
    *BUDGET.write().unwrap_or_else(|e| e.into_inner()) = Some(b);
}

/// The budget schemas compile under now.
pub fn compile_budget() -> CompileBudget {
    BUDGET
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .unwrap_or_default()
}

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
