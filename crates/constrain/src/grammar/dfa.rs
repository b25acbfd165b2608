//! Byte DFAs for regex terminals.
//!
//! A pattern (RE2-like syntax, as `regex-syntax` reads it) is determinised once by
//! `regex-automata` and copied into a small dense table of our own: states renumbered
//! from 0 (the start), transitions into states that can no longer reach a match removed,
//! so a live DFA state always has a way to finish. The DFA matches the *whole* input
//! (anchored at both ends); a caller that wants "contains" wraps the pattern in `.*`.

use super::ByteSet;
use crate::error::{Error, Result};
use regex_automata::dfa::{dense, Automaton};
use regex_automata::nfa::thompson;
use regex_automata::{util::syntax, Anchored, Input, MatchKind};
use regex_syntax::utf8::Utf8Sequences;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

/// Marks "no transition" in [`ByteDfa`] tables.
pub(super) const DFA_DEAD: u32 = u32::MAX;

/// Default limit on DFA states for one pattern (the product contract's 2,000).
pub(super) const DEFAULT_DFA_STATE_LIMIT: usize = 2000;

/// An error and its causes in one line: regex-automata's "error building NFA" says
/// why only in its source.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out = format!("{out}: {c}");
        cause = c.source();
    }
    out
}

/// Most heap the NFA of one pattern may take while it is built (as the `regex` crate's
/// default), far above what a 2,000-state DFA needs.
const NFA_BYTES: usize = 10 << 20;

/// A deterministic automaton over bytes that accepts whole inputs matching a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ByteDfa {
    /// The source pattern (for messages and display).
    pattern: String,
    /// The transitions: a dense table for a pattern, a trie for a lexicon.
    table: Table,
    /// Whether the input may end in state `s`.
    accept: Vec<bool>,
    /// Fewest characters (UTF-8 lead bytes) still needed to reach acceptance from `s`.
    min_chars_to_accept: Vec<u32>,
    /// Per state, what whole characters do from it ([`ByteDfa::is_universal`],
    /// [`ByteDfa::is_settled`]); derived on first use, since only mask walks ask.
    chars: Derived,
}

/// How a [`ByteDfa`] stores its transitions.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Table {
    /// `trans[s * 256 + b]`: next state or [`DFA_DEAD`].
    Dense(Vec<u32>),
    /// A lexicon's trie: a million terms make millions of states, too many for 256
    /// entries each.
    Trie(Arc<Trie>),
}

/// Transitions of a trie: the edges out of state `s` are `first[s]..first[s + 1]`,
/// sorted by their byte.
#[derive(Debug, PartialEq, Eq)]
struct Trie {
    first: Vec<u32>,
    label: Vec<u8>,
    target: Vec<u32>,
}

impl Trie {
    #[inline]
    fn next(&self, s: u32, b: u8) -> Option<u32> {
        let (lo, hi) = (
            self.first[s as usize] as usize,
            self.first[s as usize + 1] as usize,
        );
        self.label[lo..hi]
            .binary_search(&b)
            .ok()
            .map(|i| self.target[lo + i])
    }
}

/// Lazily derived tables: equal for equal DFAs, so they take no part in comparisons.
#[derive(Clone, Debug, Default)]
struct Derived(OnceLock<CharTables>);

#[derive(Clone, Debug)]
struct CharTables {
    universal: Vec<bool>,
    settled: Vec<bool>,
    /// Universal over the characters a JSON string writes raw (see
    /// [`ByteDfa::is_raw_universal`]).
    raw_universal: Vec<bool>,
}

impl PartialEq for Derived {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Derived {}

impl ByteDfa {
    /// Heap bytes of the tables (see [`crate::heap`]).
    pub(crate) fn heap_bytes(&self) -> usize {
        use crate::heap::vec;
        let table = match &self.table {
            Table::Dense(t) => vec(t),
            Table::Trie(t) => vec(&t.first) + vec(&t.label) + vec(&t.target),
        };
        self.pattern.capacity()
            + table
            + vec(&self.accept)
            + vec(&self.min_chars_to_accept)
            + self
                .chars
                .0
                .get()
                .map_or(0, |c| vec(&c.universal) + vec(&c.settled))
    }

    /// Compiles `pattern` with the default state limit.
    pub fn new(pattern: &str) -> Result<Self> {
        Self::with_limit(pattern, DEFAULT_DFA_STATE_LIMIT)
    }

    /// Compiles `pattern`, refusing it if its DFA needs more than `limit` states.
    pub fn with_limit(pattern: &str, limit: usize) -> Result<Self> {
        let out = Self::language(pattern, limit)?;
        out.refuse_empty()?;
        Ok(out)
    }

    /// Refuses a DFA whose language is empty (no input can ever be accepted).
    pub fn refuse_empty(&self) -> Result<()> {
        if self.min_chars_to_accept[0] == u32::MAX {
            return Err(Error::Regex {
                pattern: self.pattern.clone(),
                msg: "matches no string".into(),
            });
        }
        Ok(())
    }

    /// The DFA of `pattern` with at most `limit` states, even if it matches nothing.
    pub(crate) fn language(pattern: &str, limit: usize) -> Result<Self> {
        let err = |msg: String| Error::Regex {
            pattern: pattern.to_string(),
            msg,
        };
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(regex_automata::dfa::StartKind::Anchored)
                    .dfa_size_limit(Some(16 << 20))
                    .determinize_size_limit(Some(16 << 20)),
            )
            .syntax(syntax::Config::new().utf8(true).unicode(true))
            // Counted repetition is expanded in the NFA: `[a-z]{1000000000}` would take
            // gigabytes before the DFA limits are ever reached.
            .thompson(thompson::Config::new().nfa_size_limit(Some(NFA_BYTES)))
            .build(pattern)
            .map_err(|e| err(with_causes(&e)))?;
        let start = dfa
            .start_state_forward(&Input::new(&[][..]).anchored(Anchored::Yes))
            .map_err(|e| err(e.to_string()))?;

        // Breadth-first renumbering; the start is state 0.
        let mut ids = FxHashMap::default();
        let mut order = vec![start];
        ids.insert(start, 0u32);
        let mut raw: Vec<u32> = Vec::new();
        let mut accept = Vec::new();
        let mut queue = VecDeque::from([start]);
        while let Some(s) = queue.pop_front() {
            accept.push(dfa.is_match_state(dfa.next_eoi_state(s)));
            for b in 0..=255u8 {
                let t = dfa.next_state(s, b);
                if dfa.is_dead_state(t) || dfa.is_quit_state(t) {
                    raw.push(DFA_DEAD);
                    continue;
                }
                let id = match ids.get(&t) {
                    Some(&id) => id,
                    None => {
                        let id = order.len() as u32;
                        if order.len() >= limit {
                            return Err(err(format!("needs more than {limit} DFA states")));
                        }
                        ids.insert(t, id);
                        order.push(t);
                        queue.push_back(t);
                        id
                    }
                };
                raw.push(id);
            }
        }
        let mut out = ByteDfa {
            pattern: pattern.to_string(),
            table: Table::Dense(raw),
            accept,
            min_chars_to_accept: Vec::new(),
            chars: Derived::default(),
        };
        out.prune_and_measure();
        Ok(out)
    }

    /// Removes transitions into states that cannot reach acceptance, and computes the
    /// fewest characters from each state to acceptance (0-1 BFS backwards: a lead byte
    /// costs one character, a continuation byte none).
    fn prune_and_measure(&mut self) {
        let Table::Dense(trans) = &mut self.table else {
            unreachable!("only a dense table is pruned")
        };
        let n = self.accept.len();
        let mut rev: Vec<Vec<(u32, u8)>> = vec![Vec::new(); n];
        for s in 0..n {
            for b in 0..256 {
                let t = trans[s * 256 + b];
                if t != DFA_DEAD {
                    rev[t as usize].push((s as u32, b as u8));
                }
            }
        }
        let mut dist = vec![u32::MAX; n];
        let mut dq = VecDeque::new();
        for (s, d) in dist.iter_mut().enumerate() {
            if self.accept[s] {
                *d = 0;
                dq.push_back(s as u32);
            }
        }
        while let Some(t) = dq.pop_front() {
            let d = dist[t as usize];
            for &(s, b) in &rev[t as usize] {
                let cost = u32::from(!(0x80..0xC0).contains(&b));
                if d + cost < dist[s as usize] {
                    dist[s as usize] = d + cost;
                    if cost == 0 {
                        dq.push_front(s);
                    } else {
                        dq.push_back(s);
                    }
                }
            }
        }
        for s in 0..n {
            for b in 0..256 {
                let t = trans[s * 256 + b];
                if t != DFA_DEAD && dist[t as usize] == u32::MAX {
                    trans[s * 256 + b] = DFA_DEAD;
                }
            }
        }
        self.min_chars_to_accept = dist;
    }

    /// The pattern this DFA was compiled from.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Number of states.
    pub fn len(&self) -> usize {
        self.accept.len()
    }

    /// Always false: a DFA has at least its start state.
    pub fn is_empty(&self) -> bool {
        self.accept.is_empty()
    }

    /// The start state (always 0).
    pub fn start(&self) -> u32 {
        0
    }

    /// The state after `b`, or `None` if no match can follow.
    #[inline]
    pub fn next(&self, s: u32, b: u8) -> Option<u32> {
        match &self.table {
            Table::Dense(trans) => {
                let t = trans[s as usize * 256 + b as usize];
                (t != DFA_DEAD).then_some(t)
            }
            Table::Trie(trie) => trie.next(s, b),
        }
    }

    /// The bytes state `s` has a transition on.
    pub fn live_bytes(&self, s: u32) -> ByteSet {
        let mut set = ByteSet::EMPTY;
        match &self.table {
            Table::Dense(trans) => {
                let row = &trans[s as usize * 256..][..256];
                for (b, &t) in row.iter().enumerate() {
                    if t != DFA_DEAD {
                        set.insert(b as u8);
                    }
                }
            }
            Table::Trie(trie) => {
                let (lo, hi) = (trie.first[s as usize], trie.first[s as usize + 1]);
                for &b in &trie.label[lo as usize..hi as usize] {
                    set.insert(b);
                }
            }
        }
        set
    }

    /// Whether the input may end in `s`.
    #[inline]
    pub fn is_accepting(&self, s: u32) -> bool {
        self.accept[s as usize]
    }

    /// Fewest characters needed from `s` to reach acceptance.
    pub fn min_chars_to_accept(&self, s: u32) -> u32 {
        self.min_chars_to_accept[s as usize]
    }

    /// The largest [`min_chars_to_accept`](Self::min_chars_to_accept) over live states.
    pub fn max_min_chars_to_accept(&self) -> u32 {
        self.min_chars_to_accept
            .iter()
            .copied()
            .filter(|&d| d != u32::MAX)
            .max()
            .unwrap_or(0)
    }

    /// Whether state `s` (reached at a character boundary) takes every sequence of
    /// Unicode scalar values without dying, as an unanchored pattern does before and
    /// after its match: inside a string from such a state a pattern refuses nothing, it
    /// only decides where the string may close.
    pub fn is_universal(&self, s: u32) -> bool {
        // A lexicon is finite: every state refuses something.
        if matches!(self.table, Table::Trie(_)) {
            return false;
        }
        if self.refuses_ascii_untabled(s) {
            return false;
        }
        self.chars.0.get_or_init(|| self.char_tables()).universal[s as usize]
    }

    /// Whether state `s` (at a character boundary) is universal and accepting, and so
    /// is every state after it: the pattern is met for good, as an unanchored one's is
    /// once it has matched, and a string from here is a plain string.
    pub fn is_settled(&self, s: u32) -> bool {
        if matches!(self.table, Table::Trie(_)) {
            return false;
        }
        if self.refuses_ascii_untabled(s) {
            return false;
        }
        self.chars.0.get_or_init(|| self.char_tables()).settled[s as usize]
    }

    /// Whether from state `s` every sequence of the characters a JSON string spells raw
    /// (U+0020 and up, but for `"` and `\\`) stays alive: weaker than
    /// [`is_universal`](Self::is_universal), which `.` (no newline) already fails, yet
    /// enough to keep inside the string every token that writes only such characters.
    pub fn is_raw_universal(&self, s: u32) -> bool {
        if matches!(self.table, Table::Trie(_)) {
            return false;
        }
        if (0x20..0x80).any(|b| b != b'"' && b != b'\\' && self.next(s, b).is_none()) {
            return false;
        }
        self.chars
            .0
            .get_or_init(|| self.char_tables())
            .raw_universal[s as usize]
    }

    /// Whether the character tables are not derived yet and state `s` refuses some ASCII
    /// byte, so is neither universal nor settled: a handful of lookups settles most
    /// states (an enum's, a format's) without deriving the tables.
    fn refuses_ascii_untabled(&self, s: u32) -> bool {
        self.chars.0.get().is_none() && (0..0x80).any(|b| self.next(s, b).is_none())
    }

    /// [`is_universal`](Self::is_universal) and [`is_settled`](Self::is_settled) for
    /// every state. Universal: every character is live and leads to a universal state;
    /// settled: universal and accepting, and every character leads to a settled state.
    /// Each is the greatest such set, found by removing failures backwards.
    fn char_tables(&self) -> CharTables {
        let n = self.accept.len();
        let classes = match &self.table {
            Table::Dense(trans) => byte_classes(trans, n),
            Table::Trie(_) => (0..=255).collect(),
        };
        let all = class_sequences(&classes, &[('\0', char::MAX)]);
        let raw = class_sequences(&classes, &[(' ', '!'), ('#', '['), (']', char::MAX)]);
        let universal_over = |seqs: &[Vec<Vec<u8>>]| {
            let mut complete = vec![true; n];
            let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
            let mut buf = CharSteps::default();
            for (s, ok) in complete.iter_mut().enumerate() {
                if self.char_successors(s as u32, seqs, &mut buf) {
                    for &t in &buf.out {
                        preds[t as usize].push(s as u32);
                    }
                } else {
                    *ok = false;
                }
            }
            (greatest(&preds, complete), preds)
        };
        let (universal, preds) = universal_over(&all);
        let accepting_universal = universal.iter().zip(&self.accept).map(|(&u, &a)| u && a);
        let settled = greatest(&preds, accepting_universal.collect());
        let (raw_universal, _) = universal_over(&raw);
        CharTables {
            universal,
            settled,
            raw_universal,
        }
    }

    /// Into `buf.out`, the states after one whole character from `s`; false if some
    /// scalar value dies there. `seqs` are the UTF-8 sequences as bytes to step (see
    /// [`class_sequences`]); `buf`'s vectors are reused from state to state.
    fn char_successors(&self, s: u32, seqs: &[Vec<Vec<u8>>], buf: &mut CharSteps) -> bool {
        let CharSteps { states, next, out } = buf;
        out.clear();
        for seq in seqs {
            states.clear();
            states.push(s);
            for bytes in seq {
                next.clear();
                for &st in states.iter() {
                    for &b in bytes {
                        let Some(t) = self.next(st, b) else {
                            return false;
                        };
                        if !next.contains(&t) {
                            next.push(t);
                        }
                    }
                }
                std::mem::swap(states, next);
            }
            for &t in states.iter() {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
        true
    }

    /// The signature of the part of the DFA reachable from `s` (its table, renumbered
    /// breadth-first from `s`, and acceptance), if that part has at most `limit`
    /// states. Equal signatures mean the same continuations are accepted, whatever
    /// pattern the states came from: a pattern's tail (`.*$`, `-\d{4}$`) recurs across
    /// schemas, so masks keyed by it are shared by them.
    pub(crate) fn tail_signature(&self, s: u32, limit: usize) -> Option<Box<[u32]>> {
        match &self.table {
            // Computed per string state a mask walk meets: for a dense table of a
            // pattern's size, state numbers index a plain array rather than a map.
            Table::Dense(trans) if self.accept.len() <= DENSE_SIGNATURE_STATES => {
                Some(dense_signature(trans, &self.accept, s, limit)?)
            }
            _ => self.tail_signature_mapped(s, limit),
        }
    }

    fn tail_signature_mapped(&self, s: u32, limit: usize) -> Option<Box<[u32]>> {
        let mut ids: FxHashMap<u32, u32> = FxHashMap::default();
        let mut order = vec![s];
        ids.insert(s, 0);
        let mut k = 0;
        while k < order.len() {
            let from = order[k];
            for b in 0..=255u8 {
                if let Some(t) = self.next(from, b) {
                    if let std::collections::hash_map::Entry::Vacant(e) = ids.entry(t) {
                        if order.len() >= limit {
                            return None;
                        }
                        e.insert(order.len() as u32);
                        order.push(t);
                    }
                }
            }
            k += 1;
        }
        let mut sig = Vec::with_capacity(order.len() * 257);
        for &from in &order {
            sig.extend((0..=255u8).map(|b| self.next(from, b).map_or(DFA_DEAD, |t| ids[&t])));
        }
        sig.extend(order.iter().map(|&t| u32::from(self.is_accepting(t))));
        Some(sig.into())
    }

    /// The DFA of exactly the byte strings `terms` (a lexicon), as a trie: built in one
    /// pass over them once sorted, with no state limit. `name` stands for the pattern in
    /// messages. Refuses an empty set.
    pub fn from_terms(name: &str, terms: &[&[u8]]) -> Result<Self> {
        // Sorted with the first 16 bytes held inline, so most comparisons touch no term.
        let head = |t: &[u8]| {
            let mut k = [0u8; 16];
            let n = t.len().min(16);
            k[..n].copy_from_slice(&t[..n]);
            u128::from_be_bytes(k)
        };
        let mut keyed: Vec<(u128, &[u8])> = terms.iter().map(|t| (head(t), *t)).collect();
        keyed.sort_unstable();
        keyed.dedup_by(|a, b| a.1 == b.1);
        if keyed.is_empty() {
            return Err(Error::Regex {
                pattern: name.to_string(),
                msg: "has no terms".into(),
            });
        }
        // Depth first: each term adds the states past its common prefix with the one
        // before it. Sorted and distinct, so a state's children are made in byte order.
        let mut accept = vec![false];
        let (mut parent, mut label, mut child) = (Vec::new(), Vec::new(), Vec::new());
        let mut path: Vec<u32> = vec![0];
        let mut prev: &[u8] = &[];
        for &(_, t) in &keyed {
            let common = prev.iter().zip(t).take_while(|(a, b)| a == b).count();
            path.truncate(common + 1);
            for &b in &t[common..] {
                let id = accept.len() as u32;
                accept.push(false);
                parent.push(*path.last().expect("the root is on the path"));
                label.push(b);
                child.push(id);
                path.push(id);
            }
            accept[*path.last().expect("the root is on the path") as usize] = true;
            prev = t;
        }
        let states = accept.len();
        // Edges grouped by state (a counting sort keeps each state's byte order).
        let mut first = vec![0u32; states + 1];
        for &p in &parent {
            first[p as usize + 1] += 1;
        }
        for s in 0..states {
            first[s + 1] += first[s];
        }
        let mut at: Vec<u32> = first[..states].to_vec();
        let mut labels = vec![0u8; parent.len()];
        let mut targets = vec![0u32; parent.len()];
        for e in 0..parent.len() {
            let slot = &mut at[parent[e] as usize];
            labels[*slot as usize] = label[e];
            targets[*slot as usize] = child[e];
            *slot += 1;
        }
        drop((parent, label, child, at));
        // Fewest characters to an end: children have larger ids than their parents.
        let mut dist = vec![0u32; states];
        for s in (0..states).rev() {
            if accept[s] {
                continue;
            }
            let edges = first[s] as usize..first[s + 1] as usize;
            dist[s] = edges
                .map(|e| dist[targets[e] as usize] + u32::from(!(0x80..0xC0).contains(&labels[e])))
                .min()
                .unwrap_or(u32::MAX);
        }
        Ok(ByteDfa {
            pattern: name.to_string(),
            table: Table::Trie(Arc::new(Trie {
                first,
                label: labels,
                target: targets,
            })),
            accept,
            min_chars_to_accept: dist,
            chars: Derived::default(),
        })
    }

    /// Whether the whole of `input` matches.
    pub fn matches(&self, input: &[u8]) -> bool {
        let mut s = self.start();
        for &b in input {
            match self.next(s, b) {
                Some(t) => s = t,
                None => return false,
            }
        }
        self.is_accepting(s)
    }
}

/// States up to which [`ByteDfa::tail_signature`] numbers a dense table's states in an
/// array (one `u32` each, set per call).
const DENSE_SIGNATURE_STATES: usize = 4096;

/// [`ByteDfa::tail_signature`] of a dense table: the same breadth-first numbering.
fn dense_signature(trans: &[u32], accept: &[bool], s: u32, limit: usize) -> Option<Box<[u32]>> {
    let row = |q: u32| &trans[q as usize * 256..][..256];
    let mut ids = vec![u32::MAX; accept.len()];
    let mut order = vec![s];
    ids[s as usize] = 0;
    let mut k = 0;
    while k < order.len() {
        for &t in row(order[k]) {
            if t != DFA_DEAD && ids[t as usize] == u32::MAX {
                if order.len() >= limit {
                    return None;
                }
                ids[t as usize] = order.len() as u32;
                order.push(t);
            }
        }
        k += 1;
    }
    let mut sig = Vec::with_capacity(order.len() * 257);
    for &from in &order {
        sig.extend(row(from).iter().map(|&t| {
            if t == DFA_DEAD {
                DFA_DEAD
            } else {
                ids[t as usize]
            }
        }));
    }
    sig.extend(order.iter().map(|&t| u32::from(accept[t as usize])));
    Some(sig.into())
}

/// Buffers of [`ByteDfa::char_successors`].
#[derive(Default)]
struct CharSteps {
    states: Vec<u32>,
    next: Vec<u32>,
    out: Vec<u32>,
}

/// The UTF-8 sequences of the scalar values in `ranges`, each byte range cut to one byte per class
/// of `classes` (see [`byte_classes`]): stepping the others would find the same states.
/// A pattern with thousands of states steps these for each of them, 64 bytes per
/// continuation range, in a single mask.
fn class_sequences(classes: &[u16], ranges: &[(char, char)]) -> Vec<Vec<Vec<u8>>> {
    ranges
        .iter()
        .flat_map(|&(lo, hi)| Utf8Sequences::new(lo, hi))
        .map(|seq| {
            seq.as_slice()
                .iter()
                .map(|r| {
                    let mut bytes: Vec<u8> = Vec::new();
                    for b in r.start..=r.end {
                        let class = classes[usize::from(b)];
                        if !bytes.iter().any(|&x| classes[usize::from(x)] == class) {
                            bytes.push(b);
                        }
                    }
                    bytes
                })
                .collect()
        })
        .collect()
}

/// Bytes numbered by class: two bytes share a class when every state of the dense
/// table `trans` (`n` states) sends them to the same state. Columns are grouped by a
/// hash and then checked in full, row by row (the table is read in its own order: a
/// column at a time strides a kilobyte per state); a byte whose column differs from its
/// group's first gets a class of its own, so a class never joins bytes that differ.
fn byte_classes(trans: &[u32], n: usize) -> Vec<u16> {
    let mut hashes = [0xcbf2_9ce4_8422_2325u64; 256];
    for row in trans.chunks_exact(256).take(n) {
        for (h, &t) in hashes.iter_mut().zip(row) {
            *h = (*h ^ u64::from(t)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    // Each byte's group: the first byte of its hash.
    let mut first = [0usize; 256];
    for b in 0..256 {
        first[b] = (0..=b).find(|&r| hashes[r] == hashes[b]).unwrap_or(b);
    }
    for row in trans.chunks_exact(256).take(n) {
        for b in 0..256 {
            if row[b] != row[first[b]] {
                first[b] = b;
            }
        }
    }
    let mut class = vec![0u16; 256];
    let mut next = 0u16;
    for b in 0..256 {
        class[b] = if first[b] == b {
            next += 1;
            next - 1
        } else {
            class[first[b]]
        };
    }
    class
}

/// The greatest subset of `keep` closed under successors: every predecessor of a state
/// outside it is removed, transitively.
fn greatest(preds: &[Vec<u32>], mut keep: Vec<bool>) -> Vec<bool> {
    let mut work: Vec<u32> = (0..keep.len() as u32)
        .filter(|&s| !keep[s as usize])
        .collect();
    while let Some(t) = work.pop() {
        for &s in &preds[t as usize] {
            if keep[s as usize] {
                keep[s as usize] = false;
                work.push(s);
            }
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_counted_repetition_is_refused_before_it_is_expanded() {
        // Found by the request-body fuzzer: the NFA alone took over 2 GB.
        let e = ByteDfa::new("^[a-z]{1311976324}-[0-9]{3}$").unwrap_err();
        assert!(e.to_string().contains("exceeded limit"), "{e}");
        assert!(ByteDfa::new("^[a-z]{200}$").is_ok());
    }

    #[test]
    fn byte_classes_keep_every_whole_character_successor() {
        let every: Vec<u16> = (0..=255).collect();
        for pat in [
            r"(afs1-az1|ape1-az2|[^a]é|\x{1F600})",
            r"^[a-z]+-\d{4}$",
            r"^.*(ab|é)+.*$",
            "x",
        ] {
            let d = ByteDfa::new(pat).unwrap();
            let Table::Dense(trans) = &d.table else {
                unreachable!("a pattern's table is dense")
            };
            let classes = byte_classes(trans, d.len());
            assert!(
                classes.iter().max().unwrap() < &255,
                "{pat}: no byte shares a class"
            );
            for s in 0..d.len() as u32 {
                let succ = |classes: &[u16]| {
                    let mut buf = CharSteps::default();
                    let live = d.char_successors(
                        s,
                        &class_sequences(classes, &[('\0', char::MAX)]),
                        &mut buf,
                    );
                    buf.out.sort_unstable();
                    live.then_some(buf.out)
                };
                assert_eq!(succ(&classes), succ(&every), "{pat}, state {s}");
            }
        }
    }

    #[test]
    fn the_dense_tail_signature_is_the_mapped_one() {
        let mut some = 0;
        for pat in [
            r"^[a-z]+-\d{4}$",
            r"(ab|cd)*e?",
            r"^(https?://)?([\da-z.-]+)\.([a-z.]{2,6})$",
            "x",
        ] {
            let d = ByteDfa::new(pat).unwrap();
            for s in 0..d.len() as u32 {
                for limit in [1, 3, 32] {
                    let (a, b) = (
                        d.tail_signature(s, limit),
                        d.tail_signature_mapped(s, limit),
                    );
                    some += usize::from(a.is_some());
                    assert_eq!(a, b, "{pat} state {s} limit {limit}");
                }
            }
        }
        assert!(some > 10, "too few signatures compared: {some}");
    }

    #[test]
    fn a_trie_is_exactly_its_terms() {
        let terms: Vec<&[u8]> = vec![b"cat", b"car", b"ca", b"dog", b"cat", "é".as_bytes()];
        let d = ByteDfa::from_terms("animals", &terms).unwrap();
        for t in ["cat", "car", "ca", "dog", "é"] {
            assert!(d.matches(t.as_bytes()), "{t}");
        }
        for t in ["", "c", "cats", "do", "dogs", "e"] {
            assert!(!d.matches(t.as_bytes()), "{t}");
        }
        assert_eq!(d.min_chars_to_accept(0), 1);
        assert_eq!(d.min_chars_to_accept(after(&d, "c")), 1);
        assert_eq!(d.min_chars_to_accept(after(&d, "ca")), 0);
        assert!(!d.is_universal(0));
        // Tails are shared by shape here too: "ca" + {t, r} and "do" + {g} differ.
        let tail = |s: &str| d.tail_signature(after(&d, s), 8).unwrap();
        assert_eq!(tail("cat"), tail("dog"));
        assert_ne!(tail("ca"), tail("do"));
        assert!(ByteDfa::from_terms("none", &[]).is_err());
    }

    #[test]
    fn anchored_whole_match() {
        let d = ByteDfa::new("[0-9]{1,3}").unwrap();
        assert!(d.matches(b"1") && d.matches(b"123"));
        assert!(!d.matches(b"") && !d.matches(b"1234") && !d.matches(b"a1"));
        let d = ByteDfa::new("^ab$").unwrap();
        assert!(d.matches(b"ab") && !d.matches(b"abab"));
    }

    #[test]
    fn unicode_and_limits() {
        let d = ByteDfa::new("é+").unwrap();
        assert!(d.matches("éé".as_bytes()) && !d.matches(b"e"));
        assert_eq!(d.min_chars_to_accept(0), 1);
        assert!(ByteDfa::with_limit("[a-z]{0,300}x", 100).is_err());
        assert!(ByteDfa::new("(").is_err());
        assert!(ByteDfa::new("[^\\x00-\\x{10FFFF}]").is_err());
    }

    /// The state after `input` from the start.
    fn after(d: &ByteDfa, input: &str) -> u32 {
        input.bytes().fold(0, |s, b| d.next(s, b).unwrap())
    }

    #[test]
    fn tails_of_different_patterns_share_a_signature() {
        let a = ByteDfa::new("x-[0-9]{2}").unwrap();
        let b = ByteDfa::new("(yy|zz)-[0-9]{2}").unwrap();
        let tail = |d: &ByteDfa, s: &str| d.tail_signature(after(d, s), 16).unwrap();
        assert_eq!(tail(&a, "x"), tail(&b, "zz"));
        assert_eq!(tail(&a, "x-1"), tail(&b, "yy-7"));
        assert_ne!(tail(&a, "x"), tail(&a, "x-"));
        let c = ByteDfa::new("x-[0-9]{2}z").unwrap();
        assert_ne!(tail(&a, "x"), tail(&c, "x"));
        assert!(a.tail_signature(0, 2).is_none());
    }

    #[test]
    fn settled_states_accept_every_continuation() {
        let d = ByteDfa::new("(?s:.*)(?:^[A-Za-z][A-Za-z0-9_]*)(?s:.*)").unwrap();
        assert!(!d.is_settled(0), "nothing matched yet");
        assert!(d.is_settled(after(&d, "T")) && d.is_settled(after(&d, "T-é!")));
        // Universal and accepting, but a newline would end the match for good.
        let d = ByteDfa::new("(?s:.*)(?:^\\$.*$)(?s:.*)").unwrap();
        assert!(!d.is_settled(after(&d, "$")));
        let d = ByteDfa::new("(?s:.*)(?:a)(?s:.*)").unwrap();
        assert!(d.is_universal(0) && !d.is_settled(0) && d.is_settled(after(&d, "xa")));
    }

    #[test]
    fn universal_states_refuse_nothing() {
        // Unanchored: universal before the match and after it.
        let d = ByteDfa::new("(?s:.*)(?:a[0-9])(?s:.*)").unwrap();
        assert!(d.is_universal(0) && d.is_universal(after(&d, "xa")));
        assert!(d.is_universal(after(&d, "a1")) && d.is_accepting(after(&d, "a1")));
        // Anchored at the start: universal only once the prefix is matched.
        let d = ByteDfa::new("ab(?s:.*)").unwrap();
        assert!(!d.is_universal(0) && !d.is_universal(after(&d, "a")));
        assert!(d.is_universal(after(&d, "ab")));
        // `.` without `s` refuses a newline, so it is not universal.
        let d = ByteDfa::new(".*").unwrap();
        assert!(!d.is_universal(0));
        // A bounded tail is not either.
        let d = ByteDfa::new("a(?s:.){0,3}").unwrap();
        assert!(!d.is_universal(after(&d, "a")));
    }
}
