//! Context-independent masks for JSON strings (XGrammar's insight, applied where it pays
//! most): while a token stays inside a string, whether it is allowed depends only on the
//! string's own state, not on the parse stack. So for a state that is one item inside a
//! string, the trie walk splits into a stack-free part, computed once per (string, aux)
//! and shared by every matcher of the constraint, and a small remainder: the subtrees of
//! tokens that close the string, walked with the real stack.

use super::jsonstr::{StrStep, StringProg};
use crate::vocab::{TokenMask, Vocabulary};
use rustc_hash::FxHashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// The stack-free part of a mask for one string state.
pub(crate) struct LocalMask {
    /// Tokens consumed entirely inside the string.
    pub inside: TokenMask,
    /// Trie nodes whose byte closes the string: the token ending there is allowed, and
    /// the subtree below must be walked from the state after the string.
    pub closing: Vec<u32>,
}

/// A string state not seen yet in this walk; `CLOSED`/`DEAD` mark the other outcomes.
const UNKNOWN: u32 = u32::MAX;
const CLOSED: u32 = u32::MAX - 1;
const DEAD: u32 = u32::MAX - 2;

/// Length bounds applied outside the string automaton: characters still needed before
/// the string may close, and characters still allowed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Remaining {
    pub min: u32,
    pub max: Option<u32>,
}

impl LocalMask {
    /// Walks the trie through the string automaton alone. String states met on the way
    /// are numbered and their byte transitions memoised, so the walk costs a table
    /// lookup per trie node, not a decoder step. With `remaining`, `prog` must not count
    /// characters itself (no bounds): they are counted here per trie depth, so the
    /// memoised states stay few.
    pub fn compute(
        prog: &StringProg,
        aux: u64,
        remaining: Option<Remaining>,
        vocab: &Vocabulary,
    ) -> LocalMask {
        let trie = &vocab.trie;
        let mut inside = TokenMask::new(vocab.len());
        let mut closing = Vec::new();
        let mut auxes = vec![aux];
        let mut ids: FxHashMap<u64, u32> = FxHashMap::default();
        ids.insert(aux, 0);
        let mut table: Vec<u32> = vec![UNKNOWN; 256];
        let mut stack = vec![0u32; trie.max_depth + 1];
        let mut chars = vec![0u32; trie.max_depth + 1];
        let mut i = 1;
        while i < trie.len() {
            let d = trie.depth[i] as usize;
            let (from, b) = (stack[d - 1] as usize, trie.byte[i]);
            if let Some(r) = remaining {
                let starts = StringProg::starts_char(auxes[from], b);
                chars[d] = chars[d - 1] + u32::from(starts);
                let too_long = r.max.is_some_and(|m| chars[d] > m);
                let too_short = b == b'"'
                    && !starts
                    && chars[d - 1] < r.min
                    && is_normal_close(prog, auxes[from]);
                if too_long || too_short {
                    i = trie.end[i] as usize;
                    continue;
                }
            }
            let mut to = table[from * 256 + b as usize];
            if to == UNKNOWN {
                to = match prog.step(auxes[from], b) {
                    StrStep::Inside(a) => *ids.entry(a).or_insert_with(|| {
                        auxes.push(a);
                        table.resize(auxes.len() * 256, UNKNOWN);
                        (auxes.len() - 1) as u32
                    }),
                    StrStep::Closed => CLOSED,
                    StrStep::Dead => DEAD,
                };
                table[from * 256 + b as usize] = to;
            }
            match to {
                CLOSED => {
                    closing.push(i as u32);
                    i = trie.end[i] as usize;
                }
                DEAD => i = trie.end[i] as usize,
                _ => {
                    stack[d] = to;
                    for &t in trie.tokens_at(i) {
                        inside.allow(t);
                    }
                    i += 1;
                }
            }
        }
        LocalMask { inside, closing }
    }
}

/// Whether a quote in state `aux` would close the string (rather than be escaped).
fn is_normal_close(prog: &StringProg, aux: u64) -> bool {
    matches!(prog.step(aux, b'"'), StrStep::Closed)
}

/// A bounded, thread-safe map of stack-free masks (cleared when full). Computation runs
/// outside the lock; two threads racing on one key both compute, one result is kept.
pub(crate) struct LocalMaskCache<K> {
    map: Mutex<FxHashMap<K, Arc<LocalMask>>>,
    limit: usize,
}

impl<K> std::fmt::Debug for LocalMaskCache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalMaskCache")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Copy> LocalMaskCache<K> {
    pub fn new(limit: usize) -> Self {
        LocalMaskCache {
            map: Mutex::new(FxHashMap::default()),
            limit,
        }
    }

    pub fn get_or_compute(&self, key: K, compute: impl FnOnce() -> LocalMask) -> Arc<LocalMask> {
        let lock = || self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = lock().get(&key) {
            return m.clone();
        }
        let m = Arc::new(compute());
        let mut map = lock();
        if map.len() >= self.limit {
            map.clear();
        }
        map.entry(key).or_insert(m).clone()
    }
}
