//! Byte-level BPE merging of one pre-tokenized word.
//!
//! Symbols are raw bytes rather than GPT-2 characters: each GPT-2 character stands for
//! exactly one byte, so merging byte strings by the ranks of their GPT-2 spellings
//! gives the same result. The merge order is llama.cpp's: lowest rank first, ties to
//! the leftmost pair.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use super::table::StrTable;

const NONE: u32 = u32::MAX;

/// Ranked merges and the ids of single bytes.
#[derive(Debug)]
pub(super) struct BpeModel {
    /// `(left id << 32 | right id)` -> `(rank, merged id)`.
    merges: FxHashMap<u64, (u32, u32)>,
    byte_ids: [u32; 256],
    /// Words found whole in the vocabulary skip merging (llama.cpp's `ignore_merges`).
    ignore_merges: bool,
    /// Symbols start as UTF-8 characters found by their bytes, and one no token
    /// spells is written as its bytes' `byte_ids` (Gemma 4). Otherwise symbols start
    /// as single bytes.
    over_chars: bool,
}

#[derive(Clone, Copy)]
struct Sym {
    id: u32,
    len: u32,
    prev: u32,
    next: u32,
}

/// Pending merges, lowest `(rank, left)` first: `(rank, left, right, left len, right len)`.
type Queue = BinaryHeap<Reverse<(u32, u32, u32, u32, u32)>>;

/// Reusable buffers for [`BpeModel::encode_word`].
#[derive(Default)]
pub(super) struct BpeScratch {
    syms: Vec<Sym>,
    /// Byte offset of each symbol (character mode).
    starts: Vec<usize>,
    heap: Queue,
}

impl BpeModel {
    /// `merges` holds `(left id, right id, merged id)` in rank order; `byte_ids` the ids
    /// of the token spelling each single byte (`None` if there is none).
    pub(super) fn new(
        merges: &[(u32, u32, u32)],
        byte_ids: [Option<u32>; 256],
        ignore_merges: bool,
    ) -> BpeModel {
        let mut map = FxHashMap::with_capacity_and_hasher(merges.len(), Default::default());
        for (rank, &(l, r, m)) in merges.iter().enumerate() {
            map.entry(key(l, r)).or_insert((rank as u32, m));
        }
        BpeModel {
            merges: map,
            byte_ids: byte_ids.map(|b| b.unwrap_or(NONE)),
            ignore_merges,
            over_chars: false,
        }
    }

    /// A model whose symbols start as characters; `byte_fallback` holds the
    /// `<0xNN>` token of each byte.
    pub(super) fn over_chars(
        merges: &[(u32, u32, u32)],
        byte_fallback: [Option<u32>; 256],
    ) -> BpeModel {
        BpeModel {
            over_chars: true,
            ..BpeModel::new(merges, byte_fallback, false)
        }
    }

    /// Appends the ids of `word` (raw bytes) to `out`. `by_bytes` finds a token by its
    /// raw bytes.
    pub(super) fn encode_word(
        &self,
        word: &[u8],
        by_bytes: &StrTable,
        out: &mut Vec<u32>,
        s: &mut BpeScratch,
    ) {
        if self.over_chars {
            return self.encode_chars(word, by_bytes, out, s);
        }
        if word.len() == 1 {
            push_id(self.byte_ids[word[0] as usize], out);
            return;
        }
        if self.ignore_merges {
            if let Some(id) = by_bytes.find(word) {
                out.push(id);
                return;
            }
        }
        let n = word.len() as u32;
        s.syms.clear();
        s.syms.extend(word.iter().enumerate().map(|(i, &b)| Sym {
            id: self.byte_ids[b as usize],
            len: 1,
            prev: if i == 0 { NONE } else { i as u32 - 1 },
            next: if i as u32 + 1 == n {
                NONE
            } else {
                i as u32 + 1
            },
        }));
        self.merge(s);
        let mut i = 0;
        while i != NONE {
            let sym = s.syms[i as usize];
            // A symbol with no token is dropped, as llama.cpp's fallback finds none.
            push_id(sym.id, out);
            i = sym.next;
        }
    }

    /// [`Self::encode_word`] over characters: each starts as the token spelling it,
    /// and a symbol left with no token at the end goes out byte by byte.
    fn encode_chars(
        &self,
        word: &[u8],
        by_bytes: &StrTable,
        out: &mut Vec<u32>,
        s: &mut BpeScratch,
    ) {
        s.syms.clear();
        s.starts.clear();
        let mut at = 0;
        while at < word.len() {
            let len = utf8_len(word[at]).min(word.len() - at);
            let i = s.syms.len() as u32;
            s.syms.push(Sym {
                id: by_bytes.find(&word[at..at + len]).unwrap_or(NONE),
                len: len as u32,
                prev: if i == 0 { NONE } else { i - 1 },
                next: i + 1,
            });
            s.starts.push(at);
            at += len;
        }
        let Some(last) = s.syms.last_mut() else {
            return;
        };
        last.next = NONE;
        self.merge(s);
        // A merged symbol keeps its left part's index, so its bytes start there.
        let mut i = 0;
        while i != NONE {
            let sym = s.syms[i as usize];
            if sym.id != NONE {
                out.push(sym.id);
            } else {
                let start = s.starts[i as usize];
                for &b in &word[start..start + sym.len as usize] {
                    push_id(self.byte_ids[b as usize], out);
                }
            }
            i = sym.next;
        }
    }

    /// Applies the merges to the symbol list, lowest rank first, ties leftmost.
    fn merge(&self, s: &mut BpeScratch) {
        let n = s.syms.len() as u32;
        s.heap.clear();
        for i in 1..n {
            self.push_pair(&s.syms, i - 1, i, &mut s.heap);
        }
        while let Some(Reverse((_, l, r, l_len, r_len))) = s.heap.pop() {
            let (ls, rs) = (s.syms[l as usize], s.syms[r as usize]);
            // Symbols only grow or vanish, so unchanged lengths mean an unchanged pair.
            if ls.len != l_len || rs.len != r_len || rs.len == 0 {
                continue;
            }
            let merged = self.merges[&key(ls.id, rs.id)].1;
            let left = &mut s.syms[l as usize];
            left.id = merged;
            left.len += rs.len;
            left.next = rs.next;
            s.syms[r as usize].len = 0;
            if rs.next != NONE {
                s.syms[rs.next as usize].prev = l;
            }
            if ls.prev != NONE {
                self.push_pair(&s.syms, ls.prev, l, &mut s.heap);
            }
            if rs.next != NONE {
                self.push_pair(&s.syms, l, rs.next, &mut s.heap);
            }
        }
    }

    fn push_pair(&self, syms: &[Sym], l: u32, r: u32, heap: &mut Queue) {
        let (a, b) = (syms[l as usize], syms[r as usize]);
        if a.id == NONE || b.id == NONE {
            return;
        }
        if let Some(&(rank, _)) = self.merges.get(&key(a.id, b.id)) {
            heap.push(Reverse((rank, l, r, a.len, b.len)));
        }
    }
}

/// The length of the UTF-8 sequence a lead byte opens (1 for a stray byte).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xF0..=0xF7 => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

#[inline]
fn key(l: u32, r: u32) -> u64 {
    (u64::from(l) << 32) | u64::from(r)
}

#[inline]
fn push_id(id: u32, out: &mut Vec<u32>) {
    if id != NONE {
        out.push(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_lowest_rank_leftmost_first() {
        // ids: a=0 b=1 ab=2 bb=3 abb=4
        let mut t = StrTable::with_capacity(5, 8);
        for s in ["a", "b", "ab", "bb", "abb"] {
            t.push(s.as_bytes());
        }
        t.build_index(|_| true);
        let mut bytes = [None; 256];
        bytes[b'a' as usize] = Some(0);
        bytes[b'b' as usize] = Some(1);
        let m = BpeModel::new(&[(1, 1, 3), (0, 1, 2), (2, 1, 4)], bytes, false);
        let mut out = Vec::new();
        let mut s = BpeScratch::default();
        m.encode_word(b"abbb", &t, &mut out, &mut s);
        // "bb" (rank 0) merges leftmost first: a [bb] b, then nothing else applies.
        assert_eq!(out, [0, 3, 1]);
        out.clear();
        m.encode_word(b"abab", &t, &mut out, &mut s);
        assert_eq!(out, [2, 2]);
    }
}
