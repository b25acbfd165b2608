//! A byte-string table: every string in one arena, looked up through an open-addressing
//! index of ids. Built once per vocabulary with no per-token allocation.

use std::hash::Hasher;

use rustc_hash::FxHasher;

const EMPTY: u32 = u32::MAX;

/// Strings by id, with optional exact lookup of a string's id.
#[derive(Debug, Default)]
pub(super) struct StrTable {
    arena: Vec<u8>,
    offs: Vec<u32>,
    slots: Vec<u32>,
}

fn hash(s: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    h.write(s);
    h.write_usize(s.len());
    h.finish()
}

impl StrTable {
    pub(super) fn with_capacity(n: usize, bytes: usize) -> StrTable {
        let mut offs = Vec::with_capacity(n + 1);
        offs.push(0);
        StrTable {
            arena: Vec::with_capacity(bytes),
            offs,
            slots: Vec::new(),
        }
    }

    /// Appends the next string (its id is the number of strings before it).
    pub(super) fn push(&mut self, s: &[u8]) {
        self.arena.extend_from_slice(s);
        self.offs.push(self.arena.len() as u32);
    }

    /// Appends the next string, built in place by `f`.
    pub(super) fn push_with(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        f(&mut self.arena);
        self.offs.push(self.arena.len() as u32);
    }

    pub(super) fn len(&self) -> usize {
        self.offs.len() - 1
    }

    pub(super) fn total_bytes(&self) -> usize {
        self.arena.len()
    }

    #[inline]
    pub(super) fn get(&self, id: u32) -> &[u8] {
        let i = id as usize;
        &self.arena[self.offs[i] as usize..self.offs[i + 1] as usize]
    }

    /// Indexes the strings for which `include(id)` holds. When two included strings are
    /// equal, the first keeps the slot and the pair is returned.
    pub(super) fn build_index(&mut self, include: impl Fn(u32) -> bool) -> Option<(u32, u32)> {
        let cap = (self.len() * 2).next_power_of_two().max(16);
        let mut slots = vec![EMPTY; cap];
        let mask = cap - 1;
        let mut dup = None;
        for id in 0..self.len() as u32 {
            if !include(id) {
                continue;
            }
            let s = self.get(id);
            let mut i = hash(s) as usize & mask;
            loop {
                let cur = slots[i];
                if cur == EMPTY {
                    slots[i] = id;
                    break;
                }
                if self.get(cur) == s {
                    dup.get_or_insert((cur, id));
                    break;
                }
                i = (i + 1) & mask;
            }
        }
        self.slots = slots;
        dup
    }

    /// The id of an indexed string equal to `s`.
    #[inline]
    pub(super) fn find(&self, s: &[u8]) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = hash(s) as usize & mask;
        loop {
            let cur = self.slots[i];
            if cur == EMPTY {
                return None;
            }
            if bytes_eq(self.get(cur), s) {
                return Some(cur);
            }
            i = (i + 1) & mask;
        }
    }
}

/// Slice equality without a `memcmp` call for the short strings tokens are.
#[inline]
fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.len() > 16 {
        return a == b;
    }
    a.iter().zip(b).all(|(x, y)| x == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_and_duplicates() {
        let mut t = StrTable::with_capacity(4, 16);
        for s in [&b"a"[..], b"bc", b"", b"bc"] {
            t.push(s);
        }
        assert_eq!(t.build_index(|_| true), Some((1, 3)));
        assert_eq!(t.find(b"a"), Some(0));
        assert_eq!(t.find(b"bc"), Some(1));
        assert_eq!(t.find(b""), Some(2));
        assert_eq!(t.find(b"x"), None);
        assert_eq!(t.get(1), b"bc");
    }
}
