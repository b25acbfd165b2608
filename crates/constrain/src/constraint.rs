//! [`Constraint`]: a compiled grammar bound to a vocabulary, shareable across threads and
//! requests.

use crate::automaton::distance::Distances;
use crate::automaton::jsonstr::StringProg;
use crate::automaton::local::{LocalMask, LocalMaskCache, PlainProfile, Remaining, StepMemo};
use crate::automaton::program::Program;
use crate::automaton::states::DEFAULT_STATE_LIMIT;
use crate::error::Result;
use crate::grammar::{ByteDfa, Grammar, GrammarBuilder, Symbol};
use crate::heap::{self, Seen};
use crate::vocab::Vocabulary;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The masks a matcher caches by default ([`Limits::masks`]).
pub const DEFAULT_MASK_LIMIT: usize = 256;

/// Capacities of a matcher's caches (set with [`Constraint::with_limits`]): bounds on
/// memory, not on what the constraint accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Interned states before the table is cleared (default 4,096).
    pub states: usize,
    /// Cached masks before the mask cache is cleared (default 256).
    pub masks: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            states: DEFAULT_STATE_LIMIT,
            masks: DEFAULT_MASK_LIMIT,
        }
    }
}

pub(crate) struct Inner {
    pub program: Program,
    /// The program's heap bytes, measured once (it never changes).
    program_bytes: usize,
    pub vocab: Arc<Vocabulary>,
    pub limits: Limits,
    /// Stack-free string masks by (string id, string state), shared by all matchers.
    local: LocalMaskCache<(u32, u64, u32, Option<u32>)>,
    /// Decoder steps of patterned strings by (string id, bounds), kept across walks.
    memos: Mutex<FxHashMap<StringBounds, StepMemo>>,
    /// Shortest-completion costs, computed on first use (only budget-aware decoding
    /// needs them).
    distances: OnceLock<Distances>,
    /// Per string, its pattern's id on the vocabulary (see [`Vocabulary`]'s
    /// `pattern_states`), looked up on first use.
    pattern_ids: Vec<OnceLock<Option<u32>>>,
}

/// A string id with its (canonical) length bounds.
type StringBounds = (u32, u32, Option<u32>);

/// Most step memos kept per constraint (cleared when full).
const MEMO_LIMIT: usize = 16;

/// Most DFA states of a pattern tail whose masks are shared through the vocabulary.
const TAIL_LIMIT: usize = 32;

/// Most stack-free string masks kept per constraint (cleared when full).
const LOCAL_MASK_LIMIT: usize = 256;

impl Inner {
    fn new(program: Program, vocab: Arc<Vocabulary>, limits: Limits) -> Self {
        let inner = Inner {
            pattern_ids: (0..program.strings.len())
                .map(|_| OnceLock::new())
                .collect(),
            program_bytes: program.heap_bytes(&mut Seen::default()),
            program,
            vocab,
            limits,
            local: LocalMaskCache::new(LOCAL_MASK_LIMIT),
            memos: Mutex::new(FxHashMap::default()),
            distances: OnceLock::new(),
        };
        // A quoted string's first mask inside the quotes walks every span of its
        // source: part of compiling it, not of the request's first steps.
        for (spec, prog) in inner.program.strings.iter().enumerate() {
            if let Some(aux) = prog.quote_opened() {
                inner.local_mask(spec as u32, aux);
            }
        }
        inner
    }

    /// Heap bytes kept alive now: the program, and the string masks, step memos and
    /// distances matchers have filled in since (see [`crate::heap`] for what is counted).
    fn heap_bytes(&self) -> usize {
        let mut seen = Seen::default();
        let local = self.local.heap_bytes(|m| m.heap_bytes(&mut seen));
        let memos = {
            let memos = self.memos.lock().unwrap_or_else(|e| e.into_inner());
            heap::map(&memos) + memos.values().map(StepMemo::heap_bytes).sum::<usize>()
        };
        let distances = self.distances.get().map_or(0, Distances::heap_bytes);
        std::mem::size_of::<Inner>() + self.program_bytes + local + memos + distances
    }

    /// The program's shortest-completion costs.
    pub(crate) fn distances(&self) -> &Distances {
        self.distances
            .get_or_init(|| Distances::compute(&self.program))
    }

    /// The stack-free mask of string `spec` in state `aux`, computed on first use and
    /// keyed by the state's canonical form. Strings without pattern or exclusions are the
    /// same in every grammar: their masks live on the vocabulary, so even a freshly
    /// compiled schema finds them ready.
    pub(crate) fn local_mask(&self, spec: u32, aux: u64) -> Arc<LocalMask> {
        let prog = &self.program.strings[spec as usize];
        if prog.is_unpatterned() {
            return self.plain_mask(prog, aux);
        }
        if let Some((plain, paux)) = prog.as_settled(aux) {
            return self.plain_mask(&plain, paux);
        }
        let (min, max, aux) = prog.canonical(aux, self.vocab.trie.max_depth as u32);
        // Looked up before deciding how to compute it: the decision costs more than the
        // lookup (it builds the plain string).
        if let Some(m) = self.local.get(&(spec, aux, min, max)) {
            return m;
        }
        if let Some((plain, paux)) = max.is_none().then(|| prog.as_plain(aux)).flatten() {
            // Exclusions, or a pattern that can no longer refuse a character (e.g. an
            // unanchored one): the plain string's mask, keeping only the closing tokens
            // that end on a value this string accepts.
            let compute = || {
                let profile = self.plain_profile(&plain, paux);
                let pending = u32::from(StringProg::in_escape(aux));
                let remaining = Remaining {
                    min: min.saturating_sub(pending),
                    max: None,
                };
                let closes = prog.with_bounds(0, None);
                profile.mask(remaining, Some((&closes, aux)))
            };
            self.local.get_or_compute((spec, aux, min, max), compute)
        } else if prog.is_quote() {
            let compute = || {
                crate::automaton::quoted::mask(&prog.with_bounds(min, max), aux, &self.vocab.trie)
            };
            self.local.get_or_compute((spec, aux, min, max), compute)
        } else {
            let walk = || {
                let bounded = prog.with_bounds(min, max);
                // The memo is taken out of the map for the walk, so other matchers of
                // this constraint are not held up (one racing them walks with a fresh one).
                let key = (spec, min, max);
                let lock = || self.memos.lock().unwrap_or_else(|e| e.into_inner());
                let mut memo = lock().remove(&key).unwrap_or_default();
                let m = LocalMask::compute(&bounded, aux, &self.vocab.trie, &mut memo);
                let mut memos = lock();
                if memos.len() >= MEMO_LIMIT {
                    memos.clear();
                }
                memos.insert(key, memo);
                m
            };
            // A short enough pattern tail is looked up by its shape on the vocabulary:
            // another schema ending alike may have walked it already. The walk itself
            // stays on this constraint's memo, whose subtrees its states share.
            let by_tail = || match prog.tail_key(aux, TAIL_LIMIT) {
                Some((sig, taux)) => {
                    let key = (sig, taux, min, max);
                    LocalMask::clone(&self.vocab.pattern_tails.get_or_compute(key, walk))
                }
                None => walk(),
            };
            // Failing that, by the whole pattern, if another schema wrote the same one.
            let pattern = self.pattern_ids[spec as usize]
                .get_or_init(|| prog.pattern_only().map(|d| self.vocab.patterns.id(d)));
            let compute = || match *pattern {
                Some(id) => LocalMask::clone(
                    &self
                        .vocab
                        .pattern_states
                        .get_or_compute((id, aux, min, max), by_tail),
                ),
                None => by_tail(),
            };
            self.local.get_or_compute((spec, aux, min, max), compute)
        }
    }

    /// The mask of a string without pattern or exclusions in state `aux`: the same in
    /// every grammar, so it lives on the vocabulary.
    fn plain_mask(&self, prog: &StringProg, aux: u64) -> Arc<LocalMask> {
        let (min, max, aux) = prog.canonical(aux, self.vocab.trie.max_depth as u32);
        // Bounds are counted by the walk, so the decoder's own states stay few. The
        // walk counts a character where it starts; the decoder counts an escape once
        // complete, so an escape under way has one character more spent.
        let pending = u32::from(StringProg::in_escape(aux));
        let remaining = Remaining {
            min: min.saturating_sub(pending),
            max: max.map(|m| m - pending),
        };
        let compute = || {
            let profile = self.plain_profile(prog, aux);
            profile.mask(remaining, None)
        };
        self.vocab
            .plain_strings
            .get_or_compute((aux, min, max), compute)
    }

    /// The vocabulary's profile of plain string `prog` (its bounds set aside) from `aux`.
    fn plain_profile(&self, prog: &StringProg, aux: u64) -> Arc<PlainProfile> {
        let open = prog.with_bounds(0, None);
        self.vocab
            .plain_profiles
            .get_or_compute(aux, || PlainProfile::compute(&open, aux, &self.vocab.trie))
    }
}

/// A compiled constraint: grammar program plus vocabulary. Cheap to clone (`Arc`),
/// `Send + Sync`; make one [`Matcher`](crate::Matcher) per sequence with [`matcher`](Self::matcher).
#[derive(Clone)]
pub struct Constraint {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint")
            .field("nodes", &self.inner.program.nodes.len())
            .field("vocab", &self.inner.vocab.len())
            .finish()
    }
}

impl Constraint {
    /// Compiles a validated IR grammar for `vocab`.
    pub fn from_grammar(g: &Grammar, vocab: Arc<Vocabulary>) -> Result<Self> {
        Ok(Constraint {
            inner: Arc::new(Inner::new(Program::compile(g)?, vocab, Limits::default())),
        })
    }

    /// Compiles GBNF text (llama.cpp's format).
    pub fn from_gbnf(text: &str, vocab: Arc<Vocabulary>) -> Result<Self> {
        Self::from_grammar(&crate::gbnf::parse_gbnf(text)?, vocab)
    }

    /// Any JSON value, with the default whitespace budget.
    pub fn any_json(vocab: Arc<Vocabulary>) -> Result<Self> {
        Self::from_grammar(&Grammar::any_json()?, vocab)
    }

    /// Any JSON object (JSON mode), with the default whitespace budget.
    pub fn json_object(vocab: Arc<Vocabulary>) -> Result<Self> {
        Self::from_grammar(&Grammar::json_object()?, vocab)
    }

    /// Output that matches `pattern` in whole.
    pub fn from_regex(pattern: &str, vocab: Arc<Vocabulary>) -> Result<Self> {
        let mut b = GrammarBuilder::new();
        let root = b.rule("root", vec![vec![Symbol::Regex(ByteDfa::shared(pattern)?)]]);
        Self::from_grammar(&b.build(root)?, vocab)
    }

    /// Output that is exactly one term of `lexicon`.
    pub fn from_lexicon(lexicon: &crate::Lexicon, vocab: Arc<Vocabulary>) -> Result<Self> {
        let mut b = GrammarBuilder::new();
        let root = b.rule("root", vec![vec![Symbol::Regex(lexicon.dfa().clone())]]);
        Self::from_grammar(&b.build(root)?, vocab)
    }

    /// The same constraint with other cache capacities for its matchers.
    pub fn with_limits(&self, limits: Limits) -> Self {
        let i = &self.inner;
        Constraint {
            inner: Arc::new(Inner::new(i.program.clone(), i.vocab.clone(), limits)),
        }
    }

    /// Whether both handles share one compiled constraint (e.g. from a [`ConstraintCache`](crate::ConstraintCache)).
    pub fn ptr_eq(&self, other: &Constraint) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The vocabulary this constraint was compiled for.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.inner.vocab
    }

    /// An estimate of the heap bytes this constraint keeps alive: its compiled program
    /// (nodes, DFAs, string tables) plus what its matchers have cached on it so far
    /// (stack-free string masks, step memos, distances). It grows as decoding fills
    /// those caches, each of which is bounded. The vocabulary is not counted.
    pub fn heap_bytes(&self) -> usize {
        self.inner.heap_bytes()
    }
}
