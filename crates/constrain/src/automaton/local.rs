//! Context-independent masks for JSON strings (XGrammar's insight, applied where it pays
//! most): while a token stays inside a string, whether it is allowed depends only on the
//! string's own state, not on the parse stack. So for a state that is one item inside a
//! string, the trie walk splits into a stack-free part, computed once per (string, aux)
//! and shared by every matcher of the constraint, and a small remainder: the subtrees of
//! tokens that close the string, walked with the real stack.

use super::jsonstr::{StrStep, StringProg};
use crate::mask::TokenMask;
use crate::trie::{loops_on, Shape, Trie, NOT_RAW, SHORTCUT_NODES, UNCLEAN};
use rustc_hash::FxHashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// The stack-free part of a mask for one string state.
#[derive(Clone)]
pub(crate) struct LocalMask {
    /// Tokens consumed entirely inside the string.
    pub inside: Inside,
    /// Trie nodes whose byte closes the string: the token ending there is allowed, and
    /// the subtree below must be walked from the state after the string.
    pub closing: Vec<u32>,
}

/// The tokens a string state keeps inside the string.
#[derive(Clone)]
pub(crate) enum Inside {
    /// As a bitset (shared with the profile it may be cut from: a 262k-token mask is
    /// worth not copying).
    Dense(Arc<TokenMask>),
    /// As a list, when they are few: most states of a pattern (a digit's, a hex
    /// digit's) keep a few hundred tokens, and the vocabulary keeps thousands of such
    /// masks, which as bitsets would cost 32 KiB each on a 262k vocabulary.
    Few(Box<[u32]>),
}

impl Inside {
    /// The tokens `tokens` (distinct) of an `n`-token vocabulary, in whichever form fits.
    pub(crate) fn of(tokens: Vec<u32>, n: usize) -> Inside {
        if tokens.len() <= n / FEW_DIVISOR {
            return Inside::Few(tokens.into());
        }
        let mut m = TokenMask::new(n);
        for t in tokens {
            m.allow(t);
        }
        Inside::Dense(Arc::new(m))
    }

    /// [`of`](Self::of) for tokens gathered in a bitset.
    pub(crate) fn of_mask(m: TokenMask) -> Inside {
        if m.count() <= m.len() / FEW_DIVISOR {
            return Inside::Few(m.allowed().collect());
        }
        Inside::Dense(Arc::new(m))
    }

    /// Heap bytes; a bitset only the first time it is met (it may be shared with a
    /// profile on the vocabulary; counted in full then).
    pub(crate) fn heap_bytes(&self, seen: &mut crate::heap::Seen) -> usize {
        match self {
            Inside::Dense(m) if seen.first(Arc::as_ptr(m)) => {
                std::mem::size_of::<TokenMask>() + m.heap_bytes()
            }
            Inside::Dense(_) => 0,
            Inside::Few(t) => crate::heap::slice(t),
        }
    }

    /// The tokens as a bitset of `n` tokens (for tests).
    #[cfg(test)]
    pub(crate) fn to_mask(&self, n: usize) -> TokenMask {
        match self {
            Inside::Dense(m) => TokenMask::clone(m),
            Inside::Few(t) => {
                let mut m = TokenMask::new(n);
                t.iter().for_each(|&t| m.allow(t));
                m
            }
        }
    }
}

/// An [`Inside`] of at most `n / FEW_DIVISOR` tokens is kept as a list (as a kept
/// mask is, see [`crate::matcher`]).
const FEW_DIVISOR: usize = 128;

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
    /// Heap bytes: the closing nodes and the inside tokens (see [`Inside::heap_bytes`]).
    pub(crate) fn heap_bytes(&self, seen: &mut crate::heap::Seen) -> usize {
        crate::heap::vec(&self.closing) + self.inside.heap_bytes(seen)
    }

    /// Walks the trie through the string automaton alone (see [`walk_string`]).
    /// `memo` must belong to `prog` (same string, same bounds). Each first-byte subtree
    /// is walked once per string state after that byte and kept in the memo: a pattern's
    /// states tend to meet again one byte on (in `[^/]+/`, the start and the state after a
    /// character both go to the latter), so most of a new state's walk is a replay.
    pub(crate) fn compute(
        prog: &StringProg,
        aux: u64,
        trie: &Trie,
        memo: &mut StepMemo,
    ) -> LocalMask {
        memo.make_room();
        let start = memo.id(aux) as usize;
        let mut inside = Vec::new();
        let mut closing = Vec::new();
        // The root's children by byte from its table, so only the live ones are
        // touched: they lie all across the trie, a cold cache line each, and a pattern
        // (an enum's, a format's) often lets few first bytes live.
        for (b, &i) in trie.first.iter().enumerate() {
            if i == 0 {
                continue;
            }
            let i = i as usize;
            match memo.next(prog, start, b as u8) {
                CLOSED => closing.push(i as u32),
                DEAD => {}
                to => {
                    let sub = memo.subtree(prog, trie, i, to);
                    inside.extend_from_slice(&sub.inside);
                    closing.extend_from_slice(&sub.closing);
                }
            }
        }
        LocalMask {
            inside: Inside::of(inside, trie.n_tokens),
            closing,
        }
    }
}

/// What a first-byte subtree holds from one string state: the tokens consumed inside the
/// string (the subtree root's own included) and the nodes whose byte closes it.
pub(crate) struct Subtree {
    inside: Box<[u32]>,
    closing: Box<[u32]>,
}

/// Every token's fate from one state of an unpatterned string, with the length bounds
/// left open: the masks for any bounds are then cut from it without walking the trie,
/// so a `maxLength` string, whose remaining bounds change with every character, costs
/// one walk per vocabulary rather than one per character.
pub(crate) struct PlainProfile {
    /// `upto[k]`: the tokens consumed inside the string spending at most `k` characters.
    upto: Vec<Arc<TokenMask>>,
    /// Trie nodes whose byte closes the string, with the characters spent before it and
    /// the bytes from the root.
    closing: Vec<(u32, u32, Box<[u8]>)>,
}

impl PlainProfile {
    /// One walk from `aux`; `prog` must not count characters itself (no bounds).
    pub(crate) fn compute(prog: &StringProg, aux: u64, trie: &Trie) -> PlainProfile {
        let mut closing = Vec::new();
        let found = walk_counting(
            prog,
            aux,
            trie,
            &mut StepMemo::default(),
            |i, chars, path| closing.push((i, chars, path.into())),
        );
        let mut by_chars: Vec<Vec<u32>> = Vec::new();
        for (&t, &chars) in found.inside.iter().zip(&found.chars) {
            let c = chars as usize;
            if by_chars.len() <= c {
                by_chars.resize(c + 1, Vec::new());
            }
            by_chars[c].push(t);
        }
        let mut upto = Vec::with_capacity(by_chars.len());
        let mut acc = TokenMask::new(trie.n_tokens);
        for bucket in by_chars {
            for t in bucket {
                acc.allow(t);
            }
            upto.push(Arc::new(acc.clone()));
        }
        PlainProfile { upto, closing }
    }

    /// The stack-free mask under bounds `r` (characters still needed and allowed).
    /// With `closes`, a closing node is kept only if that string (no bounds) in that
    /// state closes on its bytes: for a string that takes the same bytes as the plain
    /// one inside (see [`StringProg::as_plain`]) and so differs only in which values
    /// may end.
    pub(crate) fn mask(&self, r: Remaining, closes: Option<(&StringProg, u64)>) -> LocalMask {
        let k = r.max.map_or(usize::MAX, |m| m as usize);
        let inside = match self.upto.get(k).or(self.upto.last()) {
            Some(m) => Inside::Dense(m.clone()),
            None => Inside::Few(Box::new([])),
        };
        let closing = self
            .closing
            .iter()
            .filter(|(_, c, _)| *c >= r.min && r.max.is_none_or(|m| *c <= m))
            .filter(|(_, _, path)| closes.is_none_or(|(p, aux)| closes_on(p, aux, path)))
            .map(|&(i, _, _)| i)
            .collect();
        LocalMask { inside, closing }
    }
}

/// Whether string `prog` in state `aux` stays inside it up to the last of `bytes` and
/// closes there.
fn closes_on(prog: &StringProg, mut aux: u64, bytes: &[u8]) -> bool {
    if let Some(closes) = prog.closes_unescaped(aux, bytes) {
        return closes;
    }
    for (k, &b) in bytes.iter().enumerate() {
        match prog.step(aux, b) {
            StrStep::Inside(a) => aux = a,
            StrStep::Closed => return k + 1 == bytes.len(),
            StrStep::Dead => return false,
        }
    }
    false
}

/// What a string walk found: the tokens consumed entirely inside the string (with the
/// characters each spent, when counted), and the nodes whose byte closes it.
#[derive(Default)]
struct Found {
    inside: Vec<u32>,
    /// Parallel to `inside` when the walk counts characters; empty otherwise.
    chars: Vec<u32>,
}

/// Walks the trie through the string automaton alone, from state `aux` with the
/// length bounds left open: every token consumed inside the string with the characters
/// it spends, and `closes(node, chars, bytes)` for each node whose byte closes it.
/// `prog` must not count characters itself (no bounds): they are counted here per trie
/// depth, so the memoised states stay few.
fn walk_counting(
    prog: &StringProg,
    aux: u64,
    trie: &Trie,
    memo: &mut StepMemo,
    closes: impl FnMut(u32, u32, &[u8]),
) -> Found {
    memo.make_room();
    let start = memo.id(aux);
    let open = Remaining { min: 0, max: None };
    let mut found = Found::default();
    walk_string_with::<true>(prog, 0, start, open, trie, memo, &mut found, closes);
    found
}

/// Walks the trie below node `root` (not `root`'s own tokens) through the string
/// automaton alone, from the string state numbered `start`, into `found`, calling
/// `closes(node, chars, bytes)` for each node whose byte closes the string. String
/// states met on the way are numbered and their byte transitions memoised, so the walk
/// costs a table lookup per trie node, not a decoder step. With `COUNT`, characters
/// are counted from `root` (the trie root then) and bounds `r` applied.
#[allow(clippy::too_many_arguments)]
fn walk_string_with<const COUNT: bool>(
    prog: &StringProg,
    root: usize,
    start: u32,
    r: Remaining,
    trie: &Trie,
    memo: &mut StepMemo,
    found: &mut Found,
    mut closes: impl FnMut(u32, u32, &[u8]),
) {
    // A memo's buffers: a patterned string's first walk calls this once per first-byte
    // subtree (hundreds), and three fresh vectors each time were a tenth of the walk.
    let mut buf = std::mem::take(&mut memo.buf);
    buf.reset(trie.max_depth + 1, start);
    let (stack, chars, path) = (&mut buf.stack, &mut buf.chars, &mut buf.path);
    let end = trie.nodes[root].end as usize;
    let nodes = &trie.nodes[..end];
    let mut i = root + 1;
    while i < end {
        let node = nodes[i];
        let d = node.depth as usize;
        let (from, b) = (stack[d - 1] as usize, node.byte);
        if COUNT {
            let starts = StringProg::starts_char(memo.auxes[from], b);
            chars[d] = chars[d - 1] + u32::from(starts);
            let too_long = r.max.is_some_and(|m| chars[d] > m);
            let too_short = b == b'"'
                && !starts
                && chars[d - 1] < r.min
                && is_normal_close(prog, memo.auxes[from]);
            if too_long || too_short {
                i = node.end as usize;
                continue;
            }
        }
        let mut to = memo.table[from * 256 + b as usize];
        if to == UNKNOWN {
            to = memo.next(prog, from, b);
        }
        // One test for both ends of a path (`DEAD` and `CLOSED` are the largest ids).
        if to >= DEAD {
            if to == CLOSED {
                path[d - 1] = b;
                closes(i as u32, chars[d], &path[..d]);
            }
            i = node.end as usize;
            continue;
        }
        stack[d] = to;
        path[d - 1] = b;
        let before = found.inside.len();
        trie.push_tokens(&node, &mut found.inside);
        if COUNT {
            let spent = found.inside.len() - before;
            found.chars.extend(std::iter::repeat_n(chars[d], spent));
        } else if node.end as usize - i > SHORTCUT_NODES {
            // Below a node whose state every byte under it leads back to, every token
            // stays inside: the whole subtree is taken unwalked (most of a `.*` or
            // `[^/]+` state's walk).
            if trie.shape(i) & UNCLEAN == 0 && memo.keeps_inside(prog, to, trie, i) {
                found.inside.extend_from_slice(trie.tokens_below(i));
                i = node.end as usize;
                continue;
            }
        }
        i += 1;
    }
    memo.buf = buf;
}

/// Per-depth buffers of a string walk.
#[derive(Default)]
struct WalkBuf {
    stack: Vec<u32>,
    chars: Vec<u32>,
    path: Vec<u8>,
}

impl WalkBuf {
    fn reset(&mut self, depth: usize, start: u32) {
        self.stack.clear();
        self.stack.resize(depth, start);
        self.chars.clear();
        self.chars.resize(depth, 0);
        self.path.clear();
        self.path.resize(depth, 0);
    }
}

/// String states met by walks of one string program, numbered, with their byte
/// transitions memoised: kept across walks, since a pattern's states recur from walk to
/// walk and a decoder step with a pattern is costly.
#[derive(Default)]
pub(crate) struct StepMemo {
    auxes: Vec<u64>,
    ids: FxHashMap<u64, u32>,
    table: Vec<u32>,
    /// Per state, the [`Shape`] bits known, and those of them that lead back to it.
    loops: Vec<(Shape, Shape)>,
    /// Per state, its [`StringProg::raw_room`], once asked.
    room: Vec<Option<u32>>,
    /// First-byte subtrees by (trie node, state after its byte).
    subtrees: FxHashMap<(u32, u32), Arc<Subtree>>,
    /// Token and node ids the subtrees hold.
    subtree_ids: usize,
    buf: WalkBuf,
}

/// States a memo holds before it is emptied.
const MEMO_LIMIT: usize = 512;

/// Ids a memo's subtrees hold before it is emptied (4 MiB: a constraint keeps up to 16
/// memos).
const SUBTREE_LIMIT: usize = 1 << 20;

impl StepMemo {
    /// Heap bytes of the memo: states, transitions and subtrees.
    pub(crate) fn heap_bytes(&self) -> usize {
        use crate::heap::{map, slice, vec};
        let subtrees: usize = self
            .subtrees
            .values()
            .map(|s| std::mem::size_of::<Subtree>() + slice(&s.inside) + slice(&s.closing))
            .sum();
        vec(&self.auxes)
            + map(&self.ids)
            + vec(&self.table)
            + vec(&self.loops)
            + vec(&self.room)
            + map(&self.subtrees)
            + subtrees
    }

    /// Empties the memo if it is full.
    fn make_room(&mut self) {
        if self.auxes.len() > MEMO_LIMIT || self.subtree_ids > SUBTREE_LIMIT {
            *self = StepMemo::default();
        }
    }

    /// What the subtree of first-byte node `i` holds from state number `to`, reached by
    /// its byte: walked once, then kept.
    fn subtree(&mut self, prog: &StringProg, trie: &Trie, i: usize, to: u32) -> Arc<Subtree> {
        if let Some(s) = self.subtrees.get(&(i as u32, to)) {
            return s.clone();
        }
        let mut found = Found {
            inside: trie.tokens_at(i).to_vec(),
            chars: Vec::new(),
        };
        let mut closing = Vec::new();
        let open = Remaining { min: 0, max: None };
        walk_string_with::<false>(prog, i, to, open, trie, self, &mut found, |n, _, _| {
            closing.push(n)
        });
        let inside = found.inside;
        self.subtree_ids += inside.len() + closing.len();
        let s = Arc::new(Subtree {
            inside: inside.into(),
            closing: closing.into(),
        });
        self.subtrees.insert((i as u32, to), s.clone());
        s
    }

    /// The number of state `aux`, given one if new.
    fn id(&mut self, aux: u64) -> u32 {
        if let Some(&id) = self.ids.get(&aux) {
            return id;
        }
        self.auxes.push(aux);
        self.loops.push((0, 0));
        self.room.push(None);
        self.table.resize(self.auxes.len() * 256, UNKNOWN);
        let id = (self.auxes.len() - 1) as u32;
        self.ids.insert(aux, id);
        id
    }

    /// Whether every token below trie node `i` (its shape clean) stays inside the string
    /// from state number `s`: the state has room for any characters written raw, as
    /// many as the tokens below spell, and they write no other; or every character of
    /// the shape's classes leads `s` back to `s` (see [`loops_on`]).
    fn keeps_inside(&mut self, prog: &StringProg, s: u32, trie: &Trie, i: usize) -> bool {
        let shape = trie.shape(i);
        let aux = self.auxes[s as usize];
        let room = *self.room[s as usize].get_or_insert_with(|| prog.raw_room(aux));
        if shape & NOT_RAW == 0 && room >= trie.reach(i) {
            return true;
        }
        let mut learnt = self.loops[s as usize];
        let loops = loops_on(s, shape, &mut learnt, |t, b| {
            let to = self.next(prog, t as usize, b);
            (to < DEAD).then_some(to)
        });
        self.loops[s as usize] = learnt;
        loops
    }

    /// The state after byte `b` from state number `from`, or `CLOSED`/`DEAD`.
    #[inline]
    fn next(&mut self, prog: &StringProg, from: usize, b: u8) -> u32 {
        let to = self.table[from * 256 + b as usize];
        if to != UNKNOWN {
            return to;
        }
        let to = match prog.step(self.auxes[from], b) {
            StrStep::Inside(a) => self.id(a),
            StrStep::Closed => CLOSED,
            StrStep::Dead => DEAD,
        };
        self.table[from * 256 + b as usize] = to;
        to
    }
}

/// Whether a quote in state `aux` would close the string (rather than be escaped).
fn is_normal_close(prog: &StringProg, aux: u64) -> bool {
    matches!(prog.step(aux, b'"'), StrStep::Closed)
}

/// A bounded, thread-safe map of shared computed values, cleared when full: of entries,
/// or of the bytes its values weigh in all. Computation runs outside the lock; two
/// threads racing on one key both compute, one result is kept.
pub(crate) struct SharedCache<K, V = LocalMask> {
    map: Mutex<Held<K, V>>,
    limit: usize,
    budget: usize,
    weigh: fn(&V) -> usize,
}

struct Held<K, V> {
    map: FxHashMap<K, Arc<V>>,
    /// What the values weigh in all.
    bytes: usize,
}

/// Stack-free masks by their key.
pub(crate) type LocalMaskCache<K> = SharedCache<K, LocalMask>;

impl<K, V> std::fmt::Debug for SharedCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCache")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq, V> SharedCache<K, V> {
    /// A cache of at most `limit` entries.
    pub(crate) fn new(limit: usize) -> Self {
        Self::with_budget(limit, usize::MAX, |_| 0)
    }

    /// A cache of at most `limit` entries whose values weigh at most `budget` bytes
    /// in all, each as `weigh` tells.
    pub(crate) fn with_budget(limit: usize, budget: usize, weigh: fn(&V) -> usize) -> Self {
        SharedCache {
            map: Mutex::new(Held {
                map: FxHashMap::default(),
                bytes: 0,
            }),
            limit,
            budget,
            weigh,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held<K, V>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Heap bytes of the table plus `value_bytes` of each value.
    pub(crate) fn heap_bytes(&self, mut value_bytes: impl FnMut(&V) -> usize) -> usize {
        let held = self.lock();
        let values: usize = held
            .map
            .values()
            .map(|v| std::mem::size_of::<V>() + value_bytes(v))
            .sum();
        crate::heap::map(&held.map) + values
    }

    /// The value under `key`, if computed.
    pub(crate) fn get(&self, key: &K) -> Option<Arc<V>> {
        self.lock().map.get(key).cloned()
    }

    pub(crate) fn get_or_compute(&self, key: K, compute: impl FnOnce() -> V) -> Arc<V> {
        if let Some(m) = self.lock().map.get(&key) {
            return m.clone();
        }
        let m = Arc::new(compute());
        let w = (self.weigh)(&m);
        let mut held = self.lock();
        if let Some(won) = held.map.get(&key) {
            return won.clone();
        }
        if held.map.len() >= self.limit || held.bytes.saturating_add(w) > self.budget {
            held.map.clear();
            held.bytes = 0;
        }
        held.bytes += w;
        held.map.insert(key, m.clone());
        m
    }
}
