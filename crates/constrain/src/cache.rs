//! [`ConstraintCache`]: compiled constraints by content, within a byte budget, so the
//! same grammar text compiles once.

use crate::constraint::Constraint;
use crate::error::Result;
use crate::vocab::Vocabulary;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex};

/// Compiled constraints by content, for one vocabulary: the same grammar text compiles
/// once. Bounded in bytes: the entries' [`Constraint::heap_bytes`] (re-measured on every
/// insertion, since constraints grow as they are used) plus their keys stay within the
/// budget, the least recently used entries evicted first. A constraint larger than the
/// whole budget is returned but not kept.
pub struct ConstraintCache {
    vocab: Arc<Vocabulary>,
    max_bytes: usize,
    entries: Mutex<Entries>,
}

/// Cache key: (kind, text).
type Key = (String, String);

#[derive(Default)]
struct Entries {
    map: FxHashMap<Key, Entry>,
    /// Ticks once per lookup; an entry's `used` is the tick of its last lookup.
    clock: u64,
}

struct Entry {
    constraint: Constraint,
    used: u64,
}

/// Bytes an entry holds: its constraint and its key.
fn entry_bytes(key: &Key, c: &Constraint) -> usize {
    std::mem::size_of::<(Key, Entry)>() + key.0.capacity() + key.1.capacity() + c.heap_bytes()
}

impl Entries {
    fn bytes(&self) -> usize {
        self.map
            .iter()
            .map(|(k, e)| entry_bytes(k, &e.constraint))
            .sum()
    }

    /// Evicts least recently used entries until at most `max_bytes` are held.
    fn shrink_to(&mut self, max_bytes: usize) {
        let mut sizes: Vec<(u64, usize, Key)> = self
            .map
            .iter()
            .map(|(k, e)| (e.used, entry_bytes(k, &e.constraint), k.clone()))
            .collect();
        let mut total: usize = sizes.iter().map(|s| s.1).sum();
        sizes.sort_unstable_by_key(|s| s.0);
        for (_, bytes, key) in sizes {
            if total <= max_bytes {
                break;
            }
            self.map.remove(&key);
            total -= bytes;
        }
    }
}

impl ConstraintCache {
    /// An empty cache holding constraints of at most `max_bytes` in all (estimated as
    /// [`Constraint::heap_bytes`] plus the key text).
    pub fn new(vocab: Arc<Vocabulary>, max_bytes: usize) -> Self {
        ConstraintCache {
            vocab,
            max_bytes,
            entries: Mutex::new(Entries::default()),
        }
    }

    /// The constraint cached under (`kind`, `text`), or the result of `build` (cached if
    /// it succeeds and fits the budget). Front-ends outside this crate (JSON Schema) use
    /// their own `kind`. Compilation runs outside the lock.
    pub fn get_or_build(
        &self,
        kind: &str,
        text: &str,
        build: impl FnOnce(Arc<Vocabulary>) -> Result<Constraint>,
    ) -> Result<Constraint> {
        let key = (kind.to_string(), text.to_string());
        {
            let mut entries = self.lock();
            entries.clock += 1;
            let now = entries.clock;
            if let Some(e) = entries.map.get_mut(&key) {
                e.used = now;
                return Ok(e.constraint.clone());
            }
        }
        let c = build(self.vocab.clone())?;
        let mut entries = self.lock();
        entries.clock += 1;
        let now = entries.clock;
        if let Some(e) = entries.map.get_mut(&key) {
            // Another thread built it meanwhile: share theirs.
            e.used = now;
            return Ok(e.constraint.clone());
        }
        if entry_bytes(&key, &c) > self.max_bytes {
            return Ok(c);
        }
        entries.map.insert(
            key,
            Entry {
                constraint: c.clone(),
                used: now,
            },
        );
        entries.shrink_to(self.max_bytes);
        Ok(c)
    }

    /// A GBNF grammar, compiled once.
    pub fn gbnf(&self, text: &str) -> Result<Constraint> {
        self.get_or_build("gbnf", text, |v| Constraint::from_gbnf(text, v))
    }

    /// Any JSON value, compiled once.
    pub fn any_json(&self) -> Result<Constraint> {
        self.get_or_build("any-json", "", Constraint::any_json)
    }

    /// Any JSON object, compiled once.
    pub fn json_object(&self) -> Result<Constraint> {
        self.get_or_build("json-object", "", Constraint::json_object)
    }

    /// A whole-output regex, compiled once.
    pub fn regex(&self, pattern: &str) -> Result<Constraint> {
        self.get_or_build("regex", pattern, |v| Constraint::from_regex(pattern, v))
    }

    /// Constraints currently cached.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the cached entries hold now (measured afresh: constraints grow with use, so
    /// this may exceed [`max_bytes`](Self::max_bytes) until the next insertion evicts).
    pub fn bytes(&self) -> usize {
        self.lock().bytes()
    }

    /// The byte budget.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // A panic while holding the lock cannot leave the map inconsistent.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn vocab() -> Arc<Vocabulary> {
        let toks = (0..=255u8).map(|b| vec![b]).collect();
        Arc::new(Vocabulary::new(toks, &[], &[]))
    }

    /// A grammar of `rules` rules (more rules, more bytes).
    fn grammar(rules: usize) -> String {
        let mut g = String::from("root ::= r0\n");
        for i in 0..rules {
            g += &format!("r{i} ::= \"x{i}\" | \"y\"\n");
        }
        g
    }

    /// What one entry of this grammar costs, measured in a cache of its own.
    fn entry_cost(g: &str) -> usize {
        let cache = ConstraintCache::new(vocab(), usize::MAX);
        cache.gbnf(g).unwrap();
        cache.bytes()
    }

    #[test]
    fn heap_bytes_grow_with_the_program() {
        let v = vocab();
        let small = Constraint::from_gbnf(&grammar(1), v.clone()).unwrap();
        let large = Constraint::from_gbnf(&grammar(500), v).unwrap();
        // At least the program's nodes: every rule has a few.
        let node = std::mem::size_of::<crate::automaton::program::Node>();
        assert!(large.heap_bytes() >= large.inner.program.nodes.len() * node);
        assert!(large.heap_bytes() > 50 * small.heap_bytes());
    }

    #[test]
    fn least_recently_used_entries_are_evicted_by_bytes() {
        let (a, b, c) = (grammar(40), grammar(60), grammar(80));
        let (ca, cb, cc) = (entry_cost(&a), entry_cost(&b), entry_cost(&c));
        // Room for any two of the three, not all three.
        let cache = ConstraintCache::new(vocab(), ca + cb + cc - 1);
        let builds = Cell::new(0);
        let get = |g: &str| {
            cache
                .get_or_build("gbnf", g, |v| {
                    builds.set(builds.get() + 1);
                    Constraint::from_gbnf(g, v)
                })
                .unwrap()
        };
        let first_a = get(&a);
        get(&b);
        assert_eq!((cache.len(), cache.bytes()), (2, ca + cb));
        // `a` used again, so `b` is now the least recently used.
        assert!(get(&a).ptr_eq(&first_a));
        assert_eq!(builds.get(), 2);
        get(&c);
        assert_eq!((cache.len(), cache.bytes()), (2, ca + cc));
        assert!(cache.bytes() <= cache.max_bytes());
        assert!(get(&a).ptr_eq(&first_a), "a was evicted");
        assert_eq!(builds.get(), 3);
        get(&b);
        assert_eq!(builds.get(), 4, "b was kept");
        // b came back and pushed out c, the least recently used now.
        assert_eq!((cache.len(), cache.bytes()), (2, ca + cb));
    }

    #[test]
    fn an_entry_above_the_whole_budget_is_returned_not_kept() {
        let g = grammar(50);
        let cache = ConstraintCache::new(vocab(), entry_cost(&g) - 1);
        let builds = Cell::new(0);
        for _ in 0..2 {
            let c = cache.get_or_build("gbnf", &g, |v| {
                builds.set(builds.get() + 1);
                Constraint::from_gbnf(&g, v)
            });
            assert!(c.is_ok());
        }
        assert_eq!((builds.get(), cache.len(), cache.bytes()), (2, 0, 0));
        // A small one still fits beside the refusal.
        cache.gbnf("root ::= \"a\"").unwrap();
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn use_grows_an_entry_and_the_next_insertion_evicts_for_it() {
        let small = "root ::= \"a\"";
        let g = grammar(30);
        let (cg, cs) = (entry_cost(&g), entry_cost(small));
        // Room for both as compiled, not once `g` has grown.
        let cache = ConstraintCache::new(vocab(), cg + cs);
        let c = cache.gbnf(&g).unwrap();
        // A budget-aware question computes the constraint's distances, which it keeps.
        assert!(c.matcher().min_bytes_to_accept().is_some());
        assert!(cache.bytes() > cg, "{} vs {cg}", cache.bytes());
        cache.gbnf(small).unwrap();
        assert_eq!((cache.len(), cache.bytes()), (1, cs));
    }
}
