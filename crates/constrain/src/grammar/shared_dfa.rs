//! A process-wide memo of [`ByteDfa`]s by pattern.
//!
//! Determinising is most of a schema's compile time, and schemas repeat their
//! patterns: every `format: date-time` is the same few-hundred-state DFA, every open
//! integer the same digit pattern, and a schema's `pattern` is read both when it is
//! checked and when it is lowered. A DFA never changes once built, so one copy serves
//! every constraint (and its lazily derived tables are derived once).

use super::dfa::{ByteDfa, DEFAULT_DFA_STATE_LIMIT};
use crate::error::Result;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex};

/// Heap bytes the memo may hold before it starts over (refusals count a little each).
const MEMO_BYTES: usize = 32 << 20;

/// What one refusal is counted as, so a flood of distinct bad patterns still clears.
const REFUSAL_BYTES: usize = 256;

#[derive(Default)]
struct Memo {
    /// By (pattern, state limit); the language may be empty (see [`language`]).
    dfas: FxHashMap<(String, usize), Result<Arc<ByteDfa>>>,
    bytes: usize,
}

static MEMO: Mutex<Option<Memo>> = Mutex::new(None);

impl ByteDfa {
    /// [`new`](Self::new), shared: built once per process.
    pub fn shared(pattern: &str) -> Result<Arc<Self>> {
        let dfa = language(pattern, DEFAULT_DFA_STATE_LIMIT)?;
        dfa.refuse_empty()?;
        Ok(dfa)
    }
}

/// [`ByteDfa::language`] of `pattern`, built once per process while it fits the memo.
/// The lock is not held while building: two threads may both build a new pattern.
pub(crate) fn language(pattern: &str, limit: usize) -> Result<Arc<ByteDfa>> {
    let key = (pattern.to_string(), limit);
    if let Some(hit) = lock().as_ref().and_then(|m| m.dfas.get(&key)) {
        return hit.clone();
    }
    let built = ByteDfa::language(pattern, limit).map(Arc::new);
    let size = match &built {
        Ok(d) => d.heap_bytes() + pattern.len(),
        Err(_) => REFUSAL_BYTES + pattern.len(),
    };
    if size <= MEMO_BYTES / 4 {
        let mut guard = lock();
        let memo = guard.get_or_insert_with(Memo::default);
        if memo.bytes + size > MEMO_BYTES {
            *memo = Memo::default();
        }
        memo.bytes += size;
        memo.dfas.insert(key, built.clone());
    }
    built
}

/// The memo, whatever a panicking holder left (every entry is complete when inserted).
fn lock() -> std::sync::MutexGuard<'static, Option<Memo>> {
    MEMO.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_is_built_once_and_its_refusal_remembered() {
        let a = language("(?:shared-memo-[0-9]{3})", 2000).unwrap();
        let b = language("(?:shared-memo-[0-9]{3})", 2000).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(b.matches(b"shared-memo-123") && !b.matches(b"shared-memo-12"));
        // The limit is part of the key: a smaller one refuses what the larger allowed.
        assert!(language("(?:shared-memo-[0-9]{3})", 3).is_err());
        assert!(language("(?:shared-memo-[0-9]{3})", 2000).is_ok());
        let e1 = language("shared-memo-(", 2000).unwrap_err();
        assert_eq!(language("shared-memo-(", 2000).unwrap_err(), e1);
    }
}
