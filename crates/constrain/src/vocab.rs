//! The vocabulary: token byte strings, organised once into a byte trie for mask walks.

use crate::automaton::jsonstr::{StrStep, StringProg};
use crate::automaton::local::{LocalMaskCache, PlainProfile, SharedCache};
use crate::grammar::{ByteDfa, JsonString};
use crate::pool::MaskPool;

/// A model's vocabulary as byte strings, with its end-of-generation and special tokens.
///
/// Built once per model and shared (`Arc<Vocabulary>`) by every constraint on it.
/// Special tokens (control, unknown, unused...) and end-of-generation tokens are kept out
/// of the trie: the mask never allows a special token, and allows end-of-generation
/// tokens only when the automaton is accepting. Empty non-special tokens are never
/// allowed either (they would let the model stall without progress).
#[derive(Debug)]
pub struct Vocabulary {
    tokens: Vec<Vec<u8>>,
    eog: Vec<u32>,
    special: Vec<bool>,
    pub(crate) trie: Trie,
    /// The most whitespace bytes any trie token holds (bounds the budget's effect on masks).
    pub(crate) max_ws: u32,
    /// Stack-free masks of unconstrained JSON strings, shared by every constraint.
    pub(crate) plain_strings: LocalMaskCache<(u64, u32, Option<u32>)>,
    /// Unbounded walks of unconstrained JSON strings by decoder state, from which the
    /// masks for any length bounds are cut.
    pub(crate) plain_profiles: SharedCache<u64, PlainProfile>,
    /// Stack-free masks of patterned strings by pattern tail (signature, decoder state
    /// in it, length bounds): shared by every constraint whose pattern ends alike.
    pub(crate) pattern_tails: LocalMaskCache<PatternTailKey>,
    /// Stack-free masks of patterned strings by (pattern, decoder state, length
    /// bounds), the pattern named by its id in `patterns`: a pattern many schemas
    /// write (a `format`, a URL or e-mail pattern), compiled afresh with each schema,
    /// is walked once per state for them all.
    pub(crate) pattern_states: LocalMaskCache<PatternStateKey>,
    pub(crate) patterns: PatternIds,
    /// Spare mask buffers for matchers' mask caches.
    pub(crate) mask_pool: MaskPool,
}

/// Most pattern-state masks kept per vocabulary (cleared when full): 512 of Gemma 3's
/// 32 KiB masks are 16 MiB.
const PATTERN_STATES_LIMIT: usize = 512;

/// A pattern's id, the decoder state and the length bounds.
pub(crate) type PatternStateKey = (u32, u64, u32, Option<u32>);

/// Ids for equal pattern DFAs, whichever constraint compiled them. Never reused: when
/// the table is emptied (it keeps [`PATTERN_IDS_LIMIT`] DFAs alive at most), masks
/// keyed by old ids are only unreachable.
#[derive(Debug, Default)]
pub(crate) struct PatternIds {
    inner: std::sync::Mutex<PatternTable>,
}

#[derive(Debug, Default)]
struct PatternTable {
    /// By the pattern's source: the equal DFAs' representative and id.
    by_source: rustc_hash::FxHashMap<String, Vec<(std::sync::Arc<ByteDfa>, u32)>>,
    held: usize,
    next: u32,
}

/// Most DFAs [`PatternIds`] keeps before it is emptied.
const PATTERN_IDS_LIMIT: usize = 256;

impl PatternIds {
    /// The id of `dfa`'s equals (compared in full: equal sources may still compile
    /// to other automata, e.g. with other flags).
    pub fn id(&self, dfa: &std::sync::Arc<ByteDfa>) -> u32 {
        let mut t = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(same) = t.by_source.get(dfa.pattern()) {
            if let Some((_, id)) = same
                .iter()
                .find(|(d, _)| std::sync::Arc::ptr_eq(d, dfa) || **d == **dfa)
            {
                return *id;
            }
        }
        if t.held >= PATTERN_IDS_LIMIT {
            t.by_source.clear();
            t.held = 0;
        }
        let id = t.next;
        t.next += 1;
        t.held += 1;
        t.by_source
            .entry(dfa.pattern().to_string())
            .or_default()
            .push((dfa.clone(), id));
        id
    }
}

/// A pattern tail's signature, the decoder state in it, and the length bounds.
pub(crate) type PatternTailKey = (Box<[u32]>, u64, u32, Option<u32>);

/// The token trie in depth-first preorder: node 0 is the root; node `i` is reached by
/// `nodes[i].byte` from its parent at depth `nodes[i].depth - 1`; its subtree is
/// `i..nodes[i].end`. One compact record per node, since mask walks stream through them.
#[derive(Debug, Default)]
pub(crate) struct Trie {
    pub nodes: Vec<TrieNode>,
    /// Token lists of nodes where several tokens end (identical byte strings).
    many: Vec<Box<[u32]>>,
    pub max_depth: usize,
    /// The root's child on each byte (0: none), for walks that know their first bytes.
    pub first: Vec<u32>,
}

/// One trie node.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TrieNode {
    /// One past the last node of this node's subtree.
    pub end: u32,
    /// The token ending here, [`NO_TOKEN`], or `MANY | index` into `Trie::many`.
    tok: u32,
    pub depth: u16,
    pub byte: u8,
}

const NO_TOKEN: u32 = u32::MAX;
const MANY: u32 = 1 << 31;

/// Longest token (in bytes) put in the trie; longer ones are never allowed.
const MAX_TOKEN_LEN: usize = 1024;

impl Vocabulary {
    /// Builds the vocabulary and its trie. Ids in `eog`/`special` outside the vocabulary
    /// are ignored.
    pub fn new(tokens: Vec<Vec<u8>>, eog: &[u32], special: &[u32]) -> Self {
        let n = tokens.len();
        let mut is_special = vec![false; n];
        for &t in special.iter().chain(eog) {
            if let Some(s) = is_special.get_mut(t as usize) {
                *s = true;
            }
        }
        let eog: Vec<u32> = eog.iter().copied().filter(|&t| (t as usize) < n).collect();
        let mut ids: Vec<u32> = (0..n as u32)
            .filter(|&t| {
                !is_special[t as usize]
                    && !tokens[t as usize].is_empty()
                    && tokens[t as usize].len() <= MAX_TOKEN_LEN
            })
            .collect();
        ids.sort_unstable_by(|&a, &b| tokens[a as usize].cmp(&tokens[b as usize]));
        let trie = Trie::build(&tokens, &ids);
        let max_ws = ids
            .iter()
            .map(|&t| {
                tokens[t as usize]
                    .iter()
                    .filter(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
                    .count() as u32
            })
            .max()
            .unwrap_or(0);
        let v = Vocabulary {
            tokens,
            eog,
            special: is_special,
            trie,
            max_ws,
            plain_strings: LocalMaskCache::new(256),
            plain_profiles: SharedCache::new(8),
            pattern_tails: LocalMaskCache::new(256),
            pattern_states: LocalMaskCache::new(PATTERN_STATES_LIMIT),
            patterns: PatternIds::default(),
            mask_pool: MaskPool::new(n),
        };
        v.warm_plain_strings();
        v
    }

    /// Walks the vocabulary once for the state just inside an unconstrained string (the
    /// state almost every string passes through), so no request pays for it.
    fn warm_plain_strings(&self) {
        let prog = StringProg::new(&JsonString::default());
        if let StrStep::Inside(aux) = prog.step(0, b'"') {
            self.plain_profiles
                .get_or_compute(aux, || PlainProfile::compute(&prog, aux, self));
        }
    }

    /// Number of tokens (the mask length).
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the vocabulary has no tokens.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The bytes of a token.
    pub fn token_bytes(&self, t: u32) -> Option<&[u8]> {
        self.tokens.get(t as usize).map(Vec::as_slice)
    }

    /// The end-of-generation tokens.
    pub fn eog(&self) -> &[u32] {
        &self.eog
    }

    /// Whether a token is end-of-generation.
    pub fn is_eog(&self, t: u32) -> bool {
        self.eog.contains(&t)
    }

    /// Whether a token is special (never allowed as grammar text).
    pub fn is_special(&self, t: u32) -> bool {
        self.special.get(t as usize).copied().unwrap_or(true)
    }
}

impl Trie {
    fn build(tokens: &[Vec<u8>], sorted: &[u32]) -> Trie {
        let mut t = Trie {
            nodes: vec![TrieNode {
                tok: NO_TOKEN,
                ..TrieNode::default()
            }],
            ..Trie::default()
        };
        // Path of node indices from the root to the previous token's last node.
        let mut path: Vec<u32> = vec![0];
        let mut prev: &[u8] = &[];
        for &id in sorted {
            let bytes = tokens[id as usize].as_slice();
            let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            while path.len() > common + 1 {
                let node = path.pop().unwrap();
                t.nodes[node as usize].end = t.nodes.len() as u32;
            }
            for (d, &b) in bytes.iter().enumerate().skip(common) {
                t.nodes.push(TrieNode {
                    end: 0,
                    tok: NO_TOKEN,
                    depth: (d + 1) as u16,
                    byte: b,
                });
                path.push((t.nodes.len() - 1) as u32);
            }
            let node = &mut t.nodes[*path.last().unwrap() as usize];
            // Sorted input: byte-identical tokens arrive one after another.
            node.tok = match node.tok {
                NO_TOKEN => id,
                one if one & MANY == 0 => {
                    t.many.push(Box::new([one, id]));
                    MANY | (t.many.len() - 1) as u32
                }
                many => {
                    let i = (many & !MANY) as usize;
                    t.many[i] = t.many[i].iter().copied().chain([id]).collect();
                    many
                }
            };
            t.max_depth = t.max_depth.max(bytes.len());
            prev = bytes;
        }
        for node in path {
            t.nodes[node as usize].end = t.nodes.len() as u32;
        }
        t.first = vec![0; 256];
        let mut i = 1;
        while i < t.nodes.len() {
            t.first[usize::from(t.nodes[i].byte)] = i as u32;
            i = t.nodes[i].end as usize;
        }
        t
    }

    /// The tokens ending at node `i`.
    #[inline]
    pub fn tokens_at(&self, i: usize) -> &[u32] {
        let n = &self.nodes[i];
        match n.tok {
            NO_TOKEN => &[],
            t if t & MANY == 0 => std::slice::from_ref(&n.tok),
            t => &self.many[(t & !MANY) as usize],
        }
    }

    /// Number of nodes, root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
}

/// A bitset over the vocabulary: bit `i` set = token `i` allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenMask {
    words: Vec<u64>,
    n: usize,
}

impl TokenMask {
    /// An all-disallowed mask for `n` tokens.
    pub fn new(n: usize) -> Self {
        TokenMask {
            words: vec![0; n.div_ceil(64)],
            n,
        }
    }

    /// Number of tokens covered.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Heap bytes of the bitset.
    pub(crate) fn heap_bytes(&self) -> usize {
        crate::heap::vec(&self.words)
    }

    /// Whether the mask covers no tokens.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Disallows everything.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// Allows token `t`.
    #[inline]
    pub fn allow(&mut self, t: u32) {
        self.words[(t >> 6) as usize] |= 1 << (t & 63);
    }

    /// Disallows token `t` (no effect beyond the mask's length).
    #[inline]
    pub fn disallow(&mut self, t: u32) {
        if let Some(w) = self.words.get_mut((t >> 6) as usize) {
            *w &= !(1 << (t & 63));
        }
    }

    /// Whether token `t` is allowed.
    #[inline]
    pub fn is_allowed(&self, t: u32) -> bool {
        (t as usize) < self.n && self.words[(t >> 6) as usize] >> (t & 63) & 1 != 0
    }

    /// Number of allowed tokens.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The allowed token ids in increasing order.
    pub fn allowed(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros();
                    w &= w - 1;
                    (i as u32) * 64 + b
                })
            })
        })
    }

    /// The 64-bit words (bit `i % 64` of word `i / 64` is token `i`).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Writes the mask as 32-bit words (bit `i % 32` of word `i / 32`), as llama.cpp-style
    /// samplers and the benchmark protocol expect. `out` needs `ceil(n / 32)` words.
    pub fn write_u32_words(&self, out: &mut [u32]) {
        // Pairs in lockstep, so the loop compiles to straight vector moves: a mask is
        // written every step, and over a 262k vocabulary an indexed loop costs
        // microseconds.
        let mut pairs = out.chunks_exact_mut(2);
        let mut words = self.words.iter();
        for (pair, &w) in (&mut pairs).zip(&mut words) {
            pair[0] = w as u32;
            pair[1] = (w >> 32) as u32;
        }
        let rest = pairs.into_remainder();
        if let Some(o) = rest.first_mut() {
            *o = words.next().map_or(0, |&w| w as u32);
        }
        // Beyond the mask (a longer `out`): nothing allowed.
        let covered = (self.words.len() * 2).min(out.len());
        out[covered..].fill(0);
    }

    pub(crate) fn copy_from(&mut self, other: &TokenMask) {
        self.words.copy_from_slice(&other.words);
    }

    pub(crate) fn union_with(&mut self, other: &TokenMask) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trie_preorder_holds_every_token_once() {
        let toks: Vec<Vec<u8>> = ["a", "ab", "abc", "b", "", "ab", "<s>", "x y\n"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let v = Vocabulary::new(toks.clone(), &[6], &[]);
        let t = &v.trie;
        let mut found = vec![];
        // Rebuild each node's bytes by walking the preorder with a path.
        let mut path: Vec<u8> = vec![];
        for i in 1..t.len() {
            let n = t.nodes[i];
            path.truncate(n.depth as usize - 1);
            path.push(n.byte);
            assert!(n.end as usize > i && n.end as usize <= t.len());
            for &id in t.tokens_at(i) {
                assert_eq!(toks[id as usize], path);
                found.push(id);
            }
        }
        found.sort();
        assert_eq!(found, vec![0, 1, 2, 3, 5, 7]);
        assert_eq!(v.max_ws, 2);
        assert!(v.is_special(6) && v.is_eog(6) && !v.is_special(0));
    }

    #[test]
    fn mask_words() {
        let mut m = TokenMask::new(70);
        m.allow(0);
        m.allow(33);
        m.allow(69);
        assert_eq!(m.allowed().collect::<Vec<_>>(), vec![0, 33, 69]);
        let mut w = [0u32; 3];
        m.write_u32_words(&mut w);
        assert_eq!(w, [1, 2, 1 << 5]);
        let mut w = [7u32; 5];
        m.write_u32_words(&mut w);
        assert_eq!(w, [1, 2, 1 << 5, 0, 0]);
        assert!(!m.is_allowed(1000));
    }
}
