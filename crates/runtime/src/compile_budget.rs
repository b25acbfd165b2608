//! What a schema's compile may take in this process (`serve -compile-budget-ms`,
//! `-compile-budget-nodes`), and the refusals already given: a client retrying a
//! schema that failed gets the same answer at the cost of a hash lookup.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, RwLock};

use llamay_constrain::schema::budget::Budget;
use llamay_constrain::schema::{Options, Sources};
use serde_json::Value;

use crate::error::Error;

/// Refusals kept (the map is cleared when full).
const FAILURES_KEPT: usize = 1024;

static BUDGET: RwLock<Option<Budget>> = RwLock::new(None);
static FAILURES: Mutex<Option<HashMap<u64, Error>>> = Mutex::new(None);

/// Sets the budget every schema compile of this process runs under.
pub fn set_compile_budget(b: Budget) {
    *BUDGET.write().unwrap_or_else(|e| e.into_inner()) = Some(b);
}

/// The budget schemas compile under now.
pub fn compile_budget() -> Budget {
    BUDGET
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .unwrap_or_default()
}

/// The key of a compile: the schema, how it is read, and what its extensions see.
pub(crate) fn compile_key(schema: &Value, options: &Options, sources: &Sources) -> u64 {
    let mut h = DefaultHasher::new();
    schema.to_string().hash(&mut h);
    options.hash(&mut h);
    sources.input.hash(&mut h);
    sources.named.hash(&mut h);
    for (name, l) in &sources.lexicons {
        (name, l.len()).hash(&mut h);
    }
    h.finish()
}

/// The refusal a compile with this key got before, if any.
pub(crate) fn known_failure(key: u64) -> Option<Error> {
    let f = FAILURES.lock().unwrap_or_else(|e| e.into_inner());
    f.as_ref().and_then(|m| m.get(&key).cloned())
}

/// Remembers a compile's refusal.
pub(crate) fn remember_failure(key: u64, e: &Error) {
    let mut f = FAILURES.lock().unwrap_or_else(|e| e.into_inner());
    let m = f.get_or_insert_with(HashMap::new);
    if m.len() >= FAILURES_KEPT {
        m.clear();
    }
    m.insert(key, e.clone());
}
