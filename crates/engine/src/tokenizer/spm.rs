//! SentencePiece-style merging (llama.cpp's `llm_tokenizer_spm`): start from UTF-8
//! characters, repeatedly merge the adjacent pair whose concatenation is the
//! highest-scoring token (ties to the leftmost pair), then spell anything left that is
//! not a token as byte tokens.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rustc_hash::FxHashSet;

use super::table::StrTable;
use super::unicode::utf8_len;

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Sym {
    start: u32,
    len: u32,
    prev: u32,
    next: u32,
    /// The token this symbol spells, when known from its last merge.
    id: u32,
}

#[derive(Clone, Copy)]
struct Bigram {
    score: f32,
    left: u32,
    right: u32,
    size: u32,
    id: u32,
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
    /// Higher score first, then the leftmost pair (the max of the heap). Scores
    /// compare as floats (so -0.0 ties with 0.0), as in llama.cpp.
    fn cmp(&self, o: &Self) -> Ordering {
        let by_score = if self.score < o.score {
            Ordering::Less
        } else if self.score > o.score {
            Ordering::Greater
        } else {
            Ordering::Equal
        };
        by_score.then_with(|| o.left.cmp(&self.left))
    }
}

/// Reusable buffers for [`encode`].
#[derive(Default)]
pub(super) struct SpmScratch {
    syms: Vec<Sym>,
    heap: BinaryHeap<Bigram>,
    score: Vec<f32>,
    pair: Vec<Option<Bigram>>,
}

/// Places where merging can be cut: the pairs of adjacent characters that occur
/// inside some token. Between two characters that no token holds side by side, no
/// merge can ever cross, so the text on either side can be merged on its own with
/// exactly the same result; that keeps the merge queue small on long texts.
#[derive(Debug, Default)]
pub(super) struct Barriers {
    inner_pairs: FxHashSet<u64>,
}

/// A character (1 to 4 bytes) as a number; distinct characters get distinct numbers
/// because only a 1-byte character can start with a byte below 0xC0.
#[inline]
fn char_key(c: &[u8]) -> u64 {
    c.iter().fold(0u64, |k, &b| (k << 8) | u64::from(b))
}

#[inline]
fn pair_key(a: &[u8], b: &[u8]) -> u64 {
    (char_key(a) << 32) | char_key(b)
}

/// The characters of `t` as llama.cpp splits them (by lead byte).
fn chars(t: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut off = 0;
    std::iter::from_fn(move || {
        (off < t.len()).then(|| {
            let len = utf8_len(t[off]).min(t.len() - off);
            off += len;
            &t[off - len..off]
        })
    })
}

impl Barriers {
    pub(super) fn new(table: &StrTable) -> Barriers {
        let mut inner_pairs = FxHashSet::default();
        for id in 0..table.len() as u32 {
            let mut prev: Option<&[u8]> = None;
            for c in chars(table.get(id)) {
                if let Some(p) = prev {
                    inner_pairs.insert(pair_key(p, c));
                }
                prev = Some(c);
            }
        }
        Barriers { inner_pairs }
    }
}

/// Texts shorter than this are merged in one piece.
const CHUNK: usize = 32;

/// Appends the ids of `text` (spaces already escaped as U+2581) to `out`.
/// `byte_ids[b]` is the token for byte `b` (`<0xNN>`, else the byte itself), if any.
pub(super) fn encode(
    text: &[u8],
    table: &StrTable,
    scores: &[f32],
    byte_ids: &[Option<u32>; 256],
    barriers: &Barriers,
    out: &mut Vec<u32>,
    s: &mut SpmScratch,
) {
    let mut start = 0;
    let mut prev: &[u8] = &[];
    let mut off = 0;
    for c in chars(text) {
        if off >= start + CHUNK && !barriers.inner_pairs.contains(&pair_key(prev, c)) {
            encode_chunk(&text[start..off], table, scores, byte_ids, out, s);
            start = off;
        }
        off += c.len();
        prev = c;
    }
    encode_chunk(&text[start..], table, scores, byte_ids, out, s);
}

fn encode_chunk(
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
            id: NONE,
        });
        off += len;
    }
    let ctx = Ctx {
        text,
        table,
        scores,
    };
    if s.syms.len() <= SCAN_MAX {
        merge_by_scan(&ctx, s);
    } else {
        merge_by_heap(&ctx, s);
    }
    let mut i = 0;
    while i != NONE {
        let sym = s.syms[i as usize];
        let piece = &text[sym.start as usize..(sym.start + sym.len) as usize];
        let id = if sym.id != NONE {
            Some(sym.id)
        } else {
            table.find(piece)
        };
        match id {
            Some(id) => out.push(id),
            None => out.extend(piece.iter().filter_map(|&b| byte_ids[b as usize])),
        }
        i = sym.next;
    }
}

/// Up to this many characters, the best pair is found by scanning rather than by a
/// priority queue (same choice, less overhead on short texts).
const SCAN_MAX: usize = 64;

struct Ctx<'a> {
    text: &'a [u8],
    table: &'a StrTable,
    scores: &'a [f32],
}

impl Ctx<'_> {
    /// The pair `(l, r)` if its concatenation is a token.
    fn bigram(&self, syms: &[Sym], l: u32, r: u32) -> Option<Bigram> {
        let (a, b) = (syms[l as usize], syms[r as usize]);
        let size = a.len + b.len;
        let id = self
            .table
            .find(&self.text[a.start as usize..(a.start + size) as usize])?;
        Some(Bigram {
            score: self.scores.get(id as usize).copied().unwrap_or(0.0),
            left: l,
            right: r,
            size,
            id,
        })
    }
}

/// Merges the right symbol of `b` into its left one.
fn merge(syms: &mut [Sym], b: &Bigram) {
    let r = syms[b.right as usize];
    let left = &mut syms[b.left as usize];
    left.len += r.len;
    left.next = r.next;
    left.id = b.id;
    syms[b.right as usize].len = 0;
    if r.next != NONE {
        syms[r.next as usize].prev = b.left;
    }
}

fn merge_by_heap(ctx: &Ctx, s: &mut SpmScratch) {
    // Seed the queue in one heapify, reusing its buffer.
    let mut seed = std::mem::take(&mut s.heap).into_vec();
    seed.clear();
    for i in 1..s.syms.len() as u32 {
        seed.extend(ctx.bigram(&s.syms, i - 1, i));
    }
    s.heap = BinaryHeap::from(seed);
    while let Some(b) = s.heap.pop() {
        let (l, r) = (s.syms[b.left as usize], s.syms[b.right as usize]);
        // Symbols only grow or vanish: an unchanged total size means an unchanged pair.
        if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
            continue;
        }
        merge(&mut s.syms, &b);
        if l.prev != NONE {
            s.heap.extend(ctx.bigram(&s.syms, l.prev, b.left));
        }
        if r.next != NONE {
            s.heap.extend(ctx.bigram(&s.syms, b.left, r.next));
        }
    }
}

fn merge_by_scan(ctx: &Ctx, s: &mut SpmScratch) {
    // score[i]: the score of symbol i with its successor when that pair is a token
    // (-inf otherwise), kept dense so that finding the best pair is a flat scan.
    s.score.clear();
    s.pair.clear();
    for i in 0..s.syms.len() as u32 {
        let next = s.syms[i as usize].next;
        let b = if next == NONE {
            None
        } else {
            ctx.bigram(&s.syms, i, next)
        };
        s.score.push(b.map_or(f32::NEG_INFINITY, |b| b.score));
        s.pair.push(b);
    }
    loop {
        let mut top = usize::MAX;
        let mut best = f32::NEG_INFINITY;
        // Strictly better only: ties stay with the leftmost pair.
        for (i, &sc) in s.score.iter().enumerate() {
            if sc > best {
                best = sc;
                top = i;
            }
        }
        if top == usize::MAX {
            // Only pairs scored -inf (or none) are left.
            match s.pair.iter().position(Option::is_some) {
                Some(i) => top = i,
                None => break,
            }
        }
        let b = s.pair[top].expect("a scored pair exists");
        let prev = s.syms[b.left as usize].prev;
        merge(&mut s.syms, &b);
        s.score[b.right as usize] = f32::NEG_INFINITY;
        s.pair[b.right as usize] = None;
        let next = s.syms[b.left as usize].next;
        let nb = if next == NONE {
            None
        } else {
            ctx.bigram(&s.syms, b.left, next)
        };
        s.score[b.left as usize] = nb.map_or(f32::NEG_INFINITY, |b| b.score);
        s.pair[b.left as usize] = nb;
        if prev != NONE {
            let pb = ctx.bigram(&s.syms, prev, b.left);
            s.score[prev as usize] = pb.map_or(f32::NEG_INFINITY, |b| b.score);
            s.pair[prev as usize] = pb;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Plain llama.cpp: one queue over the whole text, no cutting, no scanning.
    fn reference(
        text: &[u8],
        t: &StrTable,
        scores: &[f32],
        bytes: &[Option<u32>; 256],
    ) -> Vec<u32> {
        let mut s = SpmScratch::default();
        s.syms.clear();
        let mut off = 0usize;
        while off < text.len() {
            let len = utf8_len(text[off]).min(text.len() - off);
            let i = s.syms.len() as u32;
            let next = if off + len == text.len() { NONE } else { i + 1 };
            let prev = if i == 0 { NONE } else { i - 1 };
            s.syms.push(Sym {
                start: off as u32,
                len: len as u32,
                prev,
                next,
                id: NONE,
            });
            off += len;
        }
        let mut out = Vec::new();
        if text.is_empty() {
            return out;
        }
        merge_by_heap(
            &Ctx {
                text,
                table: t,
                scores,
            },
            &mut s,
        );
        let mut i = 0;
        while i != NONE {
            let sym = s.syms[i as usize];
            let piece = &text[sym.start as usize..(sym.start + sym.len) as usize];
            match t.find(piece) {
                Some(id) => out.push(id),
                None => out.extend(piece.iter().filter_map(|&b| bytes[b as usize])),
            }
            i = sym.next;
        }
        out
    }

    proptest! {
        /// Cutting at barriers and scanning short texts change nothing.
        #[test]
        fn shortcuts_match_the_plain_algorithm(
            vocab in proptest::collection::btree_set("[ab▁é]{2,5}", 1..40),
            score_seed in proptest::collection::vec(-4i32..4, 40),
            text in "[ab▁éc]{0,200}",
        ) {
            let mut t = StrTable::with_capacity(64, 256);
            for s in ["a", "b", "▁", "é"] {
                t.push(s.as_bytes());
            }
            for v in &vocab {
                t.push(v.as_bytes());
            }
            t.build_index(|_| true);
            // Few distinct scores, so that ties are common.
            let scores: Vec<f32> = (0..t.len()).map(|i| score_seed[i % 40] as f32).collect();
            let bytes = [None; 256];
            let bar = Barriers::new(&t);
            let mut out = Vec::new();
            encode(text.as_bytes(), &t, &scores, &bytes, &bar, &mut out, &mut SpmScratch::default());
            prop_assert_eq!(out, reference(text.as_bytes(), &t, &scores, &bytes));
        }
    }

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
        let bar = Barriers::new(&t);
        encode(b"abc", &t, &scores, &bytes, &bar, &mut out, &mut s);
        assert_eq!(out, [0, 3]);
        out.clear();
        // "c" has no token: byte fallback; a lone lead byte too.
        encode(b"ac\xc3", &t, &scores, &bytes, &bar, &mut out, &mut s);
        assert_eq!(out, [0, 4, 5]);
    }
}
