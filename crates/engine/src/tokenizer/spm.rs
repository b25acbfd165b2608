//! SentencePiece-style merging (llama.cpp's `llm_tokenizer_spm`): start from UTF-8
//! characters, repeatedly merge the adjacent pair whose concatenation is the
//! highest-scoring token (ties to the leftmost pair), then spell anything left that is
//! not a token as byte tokens.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::table::StrTable;
use super::unicode::utf8_len;

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Sym {
    start: u32,
    len: u32,
    prev: u32,
    next: u32,
}

struct Bigram {
    score: f32,
    left: u32,
    right: u32,
    size: u32,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    /// Higher score first, then the leftmost pair (the max of the heap).
    fn cmp(&self, o: &Self) -> Ordering {
        self.score
            .total_cmp(&o.score)
            .then_with(|| o.left.cmp(&self.left))
    }
}

/// Reusable buffers for [`encode`].
#[derive(Default)]
pub struct SpmScratch {
    syms: Vec<Sym>,
    heap: BinaryHeap<Bigram>,
}

/// Appends the ids of `text` (spaces already escaped as U+2581) to `out`.
/// `byte_ids[b]` is the token for byte `b` (`<0xNN>`, else the byte itself), if any.
pub fn encode(
    text: &[u8],
    table: &StrTable,
    scores: &[f32],
    byte_ids: &[Option<u32>; 256],
    out: &mut Vec<u32>,
    s: &mut SpmScratch,
) {
    if text.is_empty() {
        return;
    }
    s.syms.clear();
    let mut off = 0usize;
    while off < text.len() {
        let len = utf8_len(text[off]).min(text.len() - off);
        let i = s.syms.len() as u32;
        s.syms.push(Sym {
            start: off as u32,
            len: len as u32,
            prev: if i == 0 { NONE } else { i - 1 },
            next: if off + len == text.len() { NONE } else { i + 1 },
        });
        off += len;
    }
    // Seed the queue in one heapify, reusing its buffer.
    let mut seed = std::mem::take(&mut s.heap).into_vec();
    seed.clear();
    for i in 1..s.syms.len() as u32 {
        seed.extend(bigram(text, table, scores, &s.syms, i - 1, i));
    }
    s.heap = BinaryHeap::from(seed);
    while let Some(b) = s.heap.pop() {
        let (l, r) = (s.syms[b.left as usize], s.syms[b.right as usize]);
        if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
            continue;
        }
        let left = &mut s.syms[b.left as usize];
        left.len += r.len;
        left.next = r.next;
        s.syms[b.right as usize].len = 0;
        if r.next != NONE {
            s.syms[r.next as usize].prev = b.left;
        }
        if l.prev != NONE {
            if let Some(nb) = bigram(text, table, scores, &s.syms, l.prev, b.left) {
                s.heap.push(nb);
            }
        }
        if r.next != NONE {
            if let Some(nb) = bigram(text, table, scores, &s.syms, b.left, r.next) {
                s.heap.push(nb);
            }
        }
    }
    let mut i = 0;
    while i != NONE {
        let sym = s.syms[i as usize];
        let piece = &text[sym.start as usize..(sym.start + sym.len) as usize];
        match table.find(piece) {
            Some(id) => out.push(id),
            None => out.extend(piece.iter().filter_map(|&b| byte_ids[b as usize])),
        }
        i = sym.next;
    }
}

fn bigram(text: &[u8], table: &StrTable, scores: &[f32], syms: &[Sym], l: u32, r: u32) -> Option<Bigram> {
    let (a, b) = (syms[l as usize], syms[r as usize]);
    let size = a.len + b.len;
    let id = table.find(&text[a.start as usize..(a.start + size) as usize])?;
    Some(Bigram {
        score: scores.get(id as usize).copied().unwrap_or(0.0),
        left: l,
        right: r,
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_by_score_with_byte_fallback() {
        let mut t = StrTable::with_capacity(6, 16);
        for s in ["a", "b", "ab", "bc", "<0x63>", "<0xC3>"] {
            t.push(s.as_bytes());
        }
        t.build_index(|_| true);
        let scores = [0.0, 0.0, -1.0, -0.5, 0.0, 0.0];
        let mut bytes = [None; 256];
        bytes[b'c' as usize] = Some(4);
        bytes[0xC3] = Some(5);
        let mut out = Vec::new();
        let mut s = SpmScratch::default();
        // "bc" outscores "ab": a + bc.
        encode(b"abc", &t, &scores, &bytes, &mut out, &mut s);
        assert_eq!(out, [0, 3]);
        out.clear();
        // "c" has no token: byte fallback; a lone lead byte too.
        encode(b"ac\xc3", &t, &scores, &bytes, &mut out, &mut s);
        assert_eq!(out, [0, 4, 5]);
    }
}
