//! The vocabulary: token byte strings, organised once into a byte trie for mask walks.

use crate::automaton::jsonstr::{StrStep, StringProg, TailSignature};
use crate::automaton::local::{LocalMask, LocalMaskCache, PlainProfile, SharedCache};
use crate::automaton::states::TablePool;
use crate::grammar::{ByteDfa, JsonString};
use crate::pool::MaskPool;
use crate::trie::Trie;

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
    /// Spare state tables for matchers.
    pub(crate) state_tables: TablePool,
    /// Tokens holding two quotes or more, which may hold a whole object key (see
    /// `matcher::keys`).
    pub(crate) quoted: Vec<u32>,
}

/// Most pattern-state masks kept per vocabulary, and the most bytes they may take in
/// all (cleared when full). A pattern's states are many (a UUID's, a date's: one per
/// character) and a mask's first walk may cost as much as a millisecond, so the cache
/// holds tens of thousands; most are lists of a few hundred tokens, and a bitset of
/// Gemma 3's vocabulary is 32 KiB.
const PATTERN_STATES_LIMIT: usize = 1 << 16;
const PATTERN_STATES_BYTES: usize = 64 << 20;

/// The bytes a cached mask weighs.
fn mask_bytes(m: &LocalMask) -> usize {
    m.heap_bytes(&mut crate::heap::Seen::default())
}

/// A pattern's id, the decoder state and the length bounds.
pub(crate) type PatternStateKey = (u32, u64, u32, Option<u32>);

/// Ids for equal pattern DFAs, whichever constraint compiled them. Never reused: when
/// the table is emptied (it keeps [`PATTERN_IDS_LIMIT`] DFAs of [`PATTERN_IDS_BYTES`]
/// alive at most), masks keyed by old ids are only unreachable.
#[derive(Debug, Default)]
pub(crate) struct PatternIds {
    inner: std::sync::Mutex<PatternTable>,
}

#[derive(Debug, Default)]
struct PatternTable {
    /// By the pattern's source: the equal DFAs' representative and id.
    by_source: rustc_hash::FxHashMap<String, Vec<(std::sync::Arc<ByteDfa>, u32)>>,
    held: usize,
    /// The held DFAs' tables, in bytes.
    bytes: usize,
    next: u32,
}

/// Most DFAs [`PatternIds`] keeps, and the most bytes their tables may take, before it
/// is emptied: emptying it orphans every pattern-state mask, so it holds as many
/// patterns as those masks are kept for.
const PATTERN_IDS_LIMIT: usize = 4096;
const PATTERN_IDS_BYTES: usize = 256 << 20;

impl PatternIds {
    /// The id of `dfa`'s equals (compared in full: equal sources may still compile
    /// to other automata, e.g. with other flags).
    pub(crate) fn id(&self, dfa: &std::sync::Arc<ByteDfa>) -> u32 {
        let mut t = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(same) = t.by_source.get(dfa.pattern()) {
            if let Some((_, id)) = same
                .iter()
                .find(|(d, _)| std::sync::Arc::ptr_eq(d, dfa) || **d == **dfa)
            {
                return *id;
            }
        }
        let bytes = dfa.heap_bytes();
        if t.held >= PATTERN_IDS_LIMIT || t.bytes.saturating_add(bytes) > PATTERN_IDS_BYTES {
            t.by_source.clear();
            t.held = 0;
            t.bytes = 0;
        }
        let id = t.next;
        t.next += 1;
        t.held += 1;
        t.bytes += bytes;
        t.by_source
            .entry(dfa.pattern().to_string())
            .or_default()
            .push((dfa.clone(), id));
        id
    }
}

/// A pattern tail's signature, the decoder state in it, and the length bounds.
pub(crate) type PatternTailKey = (TailSignature, u64, u32, Option<u32>);

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
        let quoted = ids
            .iter()
            .copied()
            .filter(|&t| tokens[t as usize].iter().filter(|&&b| b == b'"').count() >= 2)
            .collect();
        let v = Vocabulary {
            quoted,
            tokens,
            eog,
            special: is_special,
            trie,
            max_ws,
            plain_strings: LocalMaskCache::new(256),
            plain_profiles: SharedCache::new(8),
            pattern_tails: LocalMaskCache::with_budget(
                PATTERN_STATES_LIMIT,
                PATTERN_STATES_BYTES,
                mask_bytes,
            ),
            pattern_states: LocalMaskCache::with_budget(
                PATTERN_STATES_LIMIT,
                PATTERN_STATES_BYTES,
                mask_bytes,
            ),
            patterns: PatternIds::default(),
            mask_pool: MaskPool::new(n),
            state_tables: TablePool::default(),
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
                .get_or_compute(aux, || PlainProfile::compute(&prog, aux, &self.trie));
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
}
