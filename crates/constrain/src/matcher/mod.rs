//! [`Matcher`]: one sequence's walk through a [`Constraint`]: token masks, commits,
//! rollback, forced bytes, statistics, and budget-aware closing ([`closing`]).

mod closing;
mod kept;
mod keys;
mod walk;

use crate::automaton::config::Item;
use crate::automaton::distance::StringMemo;
use crate::automaton::jsonstr::StringProg;
use crate::automaton::local::Inside;
use crate::automaton::program::Node;
use crate::automaton::states::StateTable;
use crate::constraint::Constraint;
use crate::error::{Error, Result};
use crate::mask::TokenMask;
use crate::stats::MatcherStats;
use kept::Kept;
use keys::{Event, KeyTracker};
use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::time::Instant;
use walk::Detached;

impl Constraint {
    /// A fresh matcher at the start of the grammar.
    pub fn matcher(&self) -> Matcher {
        Matcher::new(self.clone())
    }
}

/// Most detached walks a matcher keeps (cleared when full).
const DETACHED_LIMIT: usize = 64;

/// How many commits [`Matcher::rollback`] can always undo (a quarter more are kept
/// before the oldest are forgotten).
pub const MAX_ROLLBACK: usize = 1024;

/// Most bytes [`Matcher::forced_bytes`] returns.
const MAX_FORCED: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pos {
    state: u32,
    budget: u32,
    ended: bool,
}

/// The constraint's state for one sequence. Not shared: one per sequence being decoded.
pub struct Matcher {
    c: Constraint,
    states: StateTable,
    cur: Pos,
    history: Vec<Pos>,
    masks: FxHashMap<(u32, u32), usize>,
    mask_store: Vec<Kept>,
    /// A kept mask spelled out, for [`mask_ref`](Matcher::mask_ref).
    view: TokenMask,
    /// Tokens a mask computation walks on top of its bulk masks.
    extra: Vec<u32>,
    /// Detached walks by (placeholder-stack state, budget class).
    detached: FxHashMap<(u32, u32), Arc<Detached>>,
    walk: Vec<(u32, u32)>,
    /// The bytes from the root to the node a detached walk is at.
    path: Vec<u8>,
    stats: MatcherStats,
    /// Distance to acceptance per state ([`closing::UNKNOWN`] until computed).
    dist: Vec<u32>,
    /// What resuming a stack's frames costs, per stack.
    stack_dist: FxHashMap<u32, u32>,
    strings: StringMemo,
    /// The committed JSON's objects and their undeclared keys, where the grammar has
    /// such keys (see [`keys`]); one entry per `history` entry.
    keys: Option<KeyTracker>,
    keys_history: Vec<KeyTracker>,
}

/// Hands the cached masks' buffers to the next matcher of the vocabulary.
impl Drop for Matcher {
    fn drop(&mut self) {
        self.forget_masks();
        let states = std::mem::replace(&mut self.states, StateTable::empty());
        self.c.inner.vocab.state_tables.give(states);
    }
}

impl Matcher {
    pub(crate) fn new(c: Constraint) -> Self {
        let mut states = (c.inner.vocab.state_tables).take(&c.inner.program, c.inner.limits.states);
        let state = states.start(&c.inner.program);
        let budget = c.inner.program.ws_budget;
        let depth = c.inner.vocab.trie.max_depth + 1;
        Matcher {
            states,
            cur: Pos {
                state,
                budget,
                ended: false,
            },
            history: Vec::new(),
            masks: FxHashMap::default(),
            mask_store: Vec::new(),
            view: TokenMask::new(0),
            extra: Vec::new(),
            detached: FxHashMap::default(),
            walk: vec![(0, 0); depth],
            path: vec![0; depth],
            stats: MatcherStats {
                masks_limit: c.inner.limits.masks,
                ..MatcherStats::default()
            },
            dist: Vec::new(),
            stack_dist: FxHashMap::default(),
            strings: StringMemo::default(),
            keys: c
                .inner
                .program
                .strings
                .iter()
                .any(|s| s.object_key)
                .then(KeyTracker::default),
            keys_history: Vec::new(),
            c,
        }
    }

    /// Clears the state table (and the masks keyed by its ids) if it is full, keeping the
    /// states that the current position and the rollback history refer to.
    fn make_room(&mut self) {
        if !self.states.is_full() {
            return;
        }
        let mut keep: Vec<u32> = self.history.iter().map(|p| p.state).collect();
        keep.push(self.cur.state);
        let ids = self.states.clear_keeping(&keep);
        for (p, &id) in self.history.iter_mut().zip(&ids) {
            p.state = id;
        }
        self.cur.state = *ids.last().unwrap();
        self.forget_masks();
        self.detached.clear();
        self.dist.clear();
        self.stack_dist.clear();
    }

    /// Empties the mask cache, handing its bitsets to the vocabulary's pool.
    fn forget_masks(&mut self) {
        self.masks.clear();
        let dense = self.mask_store.drain(..).filter_map(Kept::into_dense);
        self.c.inner.vocab.mask_pool.give(dense);
    }

    fn budget_class(&self, budget: u32) -> u32 {
        if !self.c.inner.program.uses_ws || budget >= self.c.inner.vocab.max_ws {
            u32::MAX
        } else {
            budget
        }
    }

    /// Writes the allowed tokens for the next step into `out` (resized to the
    /// vocabulary if it is not).
    pub fn mask(&mut self, out: &mut TokenMask) {
        let t0 = Instant::now();
        self.stats.steps += 1;
        self.fill_mask(out);
        self.stats.mask_time += t0.elapsed();
    }

    /// The mask of the current state, from the cache or computed (untimed, uncounted).
    fn fill_mask(&mut self, out: &mut TokenMask) {
        if out.len() != self.c.inner.vocab.len() {
            *out = TokenMask::new(self.c.inner.vocab.len());
        }
        let i = self.cached_mask();
        self.mask_store[i].write_to(out);
        self.drop_repeats(out);
    }

    /// The allowed tokens for the next step, valid until the matcher changes.
    pub fn mask_ref(&mut self) -> &TokenMask {
        let t0 = Instant::now();
        self.stats.steps += 1;
        let i = self.cached_mask();
        let n = self.c.inner.vocab.len();
        if self.view.len() != n {
            self.view = TokenMask::new(n);
        }
        self.mask_store[i].write_to(&mut self.view);
        let mut view = std::mem::replace(&mut self.view, TokenMask::new(0));
        self.drop_repeats(&mut view);
        self.view = view;
        self.stats.mask_time += t0.elapsed();
        &self.view
    }

    /// Writes the allowed tokens for the next step as 32-bit words (bit `i % 32` of word
    /// `i / 32`; `out` needs `ceil(n / 32)` words, any beyond are cleared): for a caller
    /// that converts the mask anyway, one pass over the vocabulary's bits fewer than
    /// [`mask`](Self::mask), and the same cost for a mask just computed as for a cached one.
    pub fn write_mask_words(&mut self, out: &mut [u32]) {
        let t0 = Instant::now();
        self.stats.steps += 1;
        let i = self.cached_mask();
        self.mask_store[i].write_u32_words(out);
        let bit = |t: u32| (t as usize / 32, 1u32 << (t % 32));
        let allowed = |t: u32| out.get(bit(t).0).is_some_and(|w| w & bit(t).1 != 0);
        for t in self.repeats(allowed) {
            out[bit(t).0] &= !bit(t).1;
        }
        self.stats.mask_time += t0.elapsed();
    }

    /// Takes from `mask` the tokens that would repeat an undeclared key.
    fn drop_repeats(&self, mask: &mut TokenMask) {
        for t in self.repeats(|t| mask.is_allowed(t)) {
            mask.disallow(t);
        }
    }

    /// The tokens `allowed` by the current state's mask that would close a key on one
    /// of its object's undeclared keys (see [`keys`]).
    fn repeats(&self, allowed: impl Fn(u32) -> bool) -> Vec<u32> {
        let mut out = Vec::new();
        if let Some(k) = self.keys.as_ref().filter(|_| !self.cur.ended) {
            k.repeats(&self.c.inner.vocab, allowed, &mut out);
        }
        out
    }

    /// The index in the mask store of the current state's mask, computed straight into
    /// a new entry if it is not there.
    fn cached_mask(&mut self) -> usize {
        self.make_room();
        // After the end nothing is allowed: a key no state has.
        let key = if self.cur.ended {
            (u32::MAX, u32::MAX)
        } else {
            (self.cur.state, self.budget_class(self.cur.budget))
        };
        if let Some(&i) = self.masks.get(&key) {
            self.stats.cache_hits += u64::from(!self.cur.ended);
            return i;
        }
        let kept = if self.cur.ended {
            Kept::none()
        } else {
            self.stats.states_wanting_mask += 1;
            self.compute_mask()
        };
        if self.mask_store.len() >= self.c.inner.limits.masks.max(1) {
            self.forget_masks();
        }
        self.masks.insert(key, self.mask_store.len());
        self.mask_store.push(kept);
        self.mask_store.len() - 1
    }

    /// Computes the mask of the current state: EOG if accepting, then the trie walk.
    /// Items inside JSON strings take their string's stack-free mask (shared across
    /// matchers) plus walks below the tokens that close it, and the other items are
    /// walked on their own; a state on one stack is walked detached from it.
    fn compute_mask(&mut self) -> Kept {
        let inner = self.c.inner.clone();
        let mut out = std::mem::take(&mut self.extra);
        out.clear();
        let bases = self.compute_into(&mut out);
        let kept = Kept::build(&bases, &out, inner.vocab.len(), &inner.vocab.mask_pool);
        self.extra = out;
        kept
    }

    /// Walks the current state's mask: the bulk masks it is made of are returned, and
    /// the tokens walked on top of them go into `out`.
    fn compute_into(&mut self, out: &mut Vec<u32>) -> Vec<Arc<TokenMask>> {
        let inner = self.c.inner.clone();
        let (p, trie) = (&inner.program, &inner.vocab.trie);
        let (groups, rest) = self.string_groups();
        let detached = if groups.is_empty() {
            self.states
                .detach(self.cur.state)
                .map(|(local, _)| self.detached_walk(local))
        } else {
            None
        };
        let locals: Vec<_> = groups
            .iter()
            .map(|&(spec, aux, _)| inner.local_mask(spec, aux))
            .collect();
        if self.states.is_accepting(self.cur.state) {
            out.extend_from_slice(inner.vocab.eog());
        }
        if !groups.is_empty() {
            let mut bases = Vec::new();
            for l in &locals {
                match &l.inside {
                    Inside::Dense(m) => bases.push(m.clone()),
                    Inside::Few(t) => out.extend_from_slice(t),
                }
            }
            for ((_, _, seeds), local) in groups.into_iter().zip(locals) {
                let closed = self.states.enter(p, seeds);
                for &i in &local.closing {
                    let i = i as usize;
                    out.extend_from_slice(trie.tokens_at(i));
                    self.walk(i, (closed, self.cur.budget), out);
                }
            }
            // A configuration allows what any of its items allows: the other items
            // (e.g. an open object's declared keys beside its extra-key string) are
            // walked on their own.
            if !rest.is_empty() {
                let rest = self.states.subset(rest);
                self.walk(0, (rest, self.cur.budget), out);
            }
            return bases;
        }
        if let Some(d) = detached {
            for (i, path) in &d.frontier {
                let i = *i as usize;
                // The path was alive from the placeholder, so it is from the real stack.
                if let Some(at) = self.advance(self.cur, path) {
                    out.extend_from_slice(trie.tokens_at(i));
                    self.walk(i, (at.state, at.budget), out);
                }
            }
            return vec![d.mask.clone()];
        }
        self.walk(0, (self.cur.state, self.cur.budget), out);
        Vec::new()
    }

    /// The detached walk of placeholder-stack state `local`, cached per budget class.
    fn detached_walk(&mut self, local: u32) -> Arc<Detached> {
        let key = (local, self.budget_class(self.cur.budget));
        if let Some(d) = self.detached.get(&key) {
            return d.clone();
        }
        let d = Arc::new(self.walk_detached(local));
        if self.detached.len() >= DETACHED_LIMIT {
            self.detached.clear();
        }
        self.detached.insert(key, d.clone());
        d
    }

    /// The items of the current state that are inside a JSON string, grouped by string
    /// spec and state (whatever their stacks: ambiguous alternatives often share a
    /// string), each group with the items that closing its string leads to; and the
    /// other items.
    #[allow(clippy::type_complexity)]
    fn string_groups(&self) -> (Vec<(u32, u64, Vec<Item>)>, Vec<Item>) {
        let p = &self.c.inner.program;
        let mut groups: Vec<(u32, u64, Vec<Item>)> = Vec::new();
        let mut rest = Vec::new();
        for it in self.states.config(self.cur.state) {
            match p.nodes.get(it.pos as usize) {
                Some(&Node::JsonStr { spec, next }) if StringProg::is_inside(it.aux) => {
                    let seed = Item {
                        pos: next,
                        stack: it.stack,
                        aux: 0,
                    };
                    match groups.iter_mut().find(|g| (g.0, g.1) == (spec, it.aux)) {
                        Some(g) => g.2.push(seed),
                        None => groups.push((spec, it.aux, vec![seed])),
                    }
                }
                _ => rest.push(*it),
            }
        }
        (groups, rest)
    }

    fn advance(&mut self, from: Pos, bytes: &[u8]) -> Option<Pos> {
        self.advance_watching(from, bytes, |_, _, _| true)
    }

    /// [`advance`](Self::advance), asking `watch` before each byte (with the state it
    /// leaves) whether it may be taken.
    fn advance_watching(
        &mut self,
        from: Pos,
        bytes: &[u8],
        mut watch: impl FnMut(&Self, u32, u8) -> bool,
    ) -> Option<Pos> {
        let (mut s, mut budget) = (from.state, from.budget);
        for &b in bytes {
            if !watch(self, s, b) {
                return None;
            }
            let nx = self.states.next(&self.c.inner.program, s, b, budget > 0)?;
            s = nx.state;
            budget -= u32::from(nx.ws_used);
        }
        Some(Pos {
            state: s,
            budget,
            ended: false,
        })
    }

    /// Consumes a token. Refused (state unchanged) if the mask would not allow it.
    pub fn commit(&mut self, token: u32) -> Result<()> {
        self.make_room();
        let vocab = self.c.inner.vocab.clone();
        let reject = Err(Error::TokenRejected { token });
        if self.cur.ended {
            return reject;
        }
        let (next, keys) = if vocab.is_eog(token) {
            if !self.states.is_accepting(self.cur.state) {
                return reject;
            }
            let end = Pos {
                ended: true,
                ..self.cur
            };
            (end, None)
        } else {
            match vocab.token_bytes(token) {
                Some(bytes) if !vocab.is_special(token) && !bytes.is_empty() => {
                    match self.advance_committed(self.cur, bytes) {
                        Some(p) => p,
                        None => return reject,
                    }
                }
                _ => return reject,
            }
        };
        self.move_to(next, keys);
        Ok(())
    }

    /// Makes `next` (and the key tracker's `keys`, if moved) current, the current
    /// position kept for rollback.
    fn move_to(&mut self, next: Pos, keys: Option<KeyTracker>) {
        self.remember(self.cur);
        self.cur = next;
        if keys.is_some() {
            self.keys = keys;
        }
    }

    /// [`advance`](Self::advance) over committed bytes, which also moves the key
    /// tracker (its new state is returned): `None` where the grammar refuses the
    /// bytes or they repeat an undeclared key of their object.
    fn advance_committed(&mut self, from: Pos, bytes: &[u8]) -> Option<(Pos, Option<KeyTracker>)> {
        let Some(mut keys) = self.keys.clone() else {
            return self.advance(from, bytes).map(|p| (p, None));
        };
        let at = self.advance_watching(from, bytes, |m, s, b| {
            // Only where the automaton closes an undeclared key too: text around a
            // document that the tracker misreads as JSON records and refuses nothing.
            if keys.step(b) != Event::KeyClosed || !m.closes_undeclared_key(s, keys.key()) {
                return true;
            }
            let fresh = !keys.is_repeat();
            keys.remember();
            fresh
        })?;
        Some((at, Some(keys)))
    }

    /// Whether state `s` has an undeclared key's string that `key` (its decoded text)
    /// may close.
    fn closes_undeclared_key(&self, s: u32, key: &[u8]) -> bool {
        let p = &self.c.inner.program;
        self.states
            .config(s)
            .iter()
            .any(|it| match p.nodes.get(it.pos as usize) {
                Some(&Node::JsonStr { spec, .. }) if StringProg::is_inside(it.aux) => {
                    let prog = &p.strings[spec as usize];
                    prog.object_key && !prog.excludes(key)
                }
                _ => false,
            })
    }

    /// Consumes raw bytes (e.g. text forced by the caller). Refused, state unchanged,
    /// if they leave the grammar. Counts as one step for [`rollback`](Self::rollback).
    pub fn commit_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.make_room();
        match (!self.cur.ended)
            .then(|| self.advance_committed(self.cur, bytes))
            .flatten()
        {
            Some((p, keys)) => {
                self.move_to(p, keys);
                Ok(())
            }
            None => Err(Error::grammar("the bytes leave the grammar")),
        }
    }

    /// Records a position for rollback, forgetting the oldest beyond [`MAX_ROLLBACK`]
    /// (the history's states survive table clears, so it must stay well below the
    /// table's capacity).
    fn remember(&mut self, p: Pos) {
        if self.history.len() >= MAX_ROLLBACK + MAX_ROLLBACK / 4 {
            self.history.drain(..MAX_ROLLBACK / 4);
            if self.keys.is_some() {
                self.keys_history.drain(..MAX_ROLLBACK / 4);
            }
        }
        self.history.push(p);
        if let Some(k) = &self.keys {
            self.keys_history.push(k.clone());
        }
    }

    /// Undoes the last `n` commits (at most the last [`MAX_ROLLBACK`]).
    pub fn rollback(&mut self, n: usize) -> Result<()> {
        if n > self.history.len() {
            return Err(Error::grammar(format!(
                "cannot roll back {n} tokens: only the last {} can be undone",
                self.history.len()
            )));
        }
        let at = self.history.len() - n;
        if n > 0 {
            self.cur = self.history[at];
            if self.keys.is_some() {
                self.keys = Some(self.keys_history[at].clone());
            }
        }
        self.history.truncate(at);
        self.keys_history.truncate(at);
        Ok(())
    }

    /// Whether the output may end here (an end-of-generation token is allowed).
    pub fn is_accepting(&self) -> bool {
        !self.cur.ended && self.states.is_accepting(self.cur.state)
    }

    /// Whether generation is over: an end-of-generation token was committed, or the
    /// output may end and no byte can extend it.
    pub fn is_finished(&mut self) -> bool {
        if self.cur.ended {
            return true;
        }
        self.is_accepting() && self.live_bytes(self.cur).is_empty()
    }

    fn live_bytes(&mut self, at: Pos) -> Vec<(u8, Pos)> {
        (0..=255u8)
            .filter_map(|b| self.advance(at, &[b]).map(|p| (b, p)))
            .collect()
    }

    /// The bytes every continuation must start with (empty when there is a choice, or
    /// the output may end here).
    pub fn forced_bytes(&mut self) -> Vec<u8> {
        self.make_room();
        let mut out = Vec::new();
        let mut at = self.cur;
        while !at.ended && out.len() < MAX_FORCED && !self.states.is_accepting(at.state) {
            let live = self.live_bytes(at);
            if live.len() != 1 {
                break;
            }
            out.push(live[0].0);
            at = live[0].1;
        }
        out
    }

    /// Remaining budget of structural whitespace.
    pub fn ws_budget_left(&self) -> u32 {
        self.cur.budget
    }

    /// The current mask by a plain trie walk, bypassing caches and the stack-free string
    /// masks: a cross-check for tests.
    #[doc(hidden)]
    pub fn mask_by_plain_walk(&mut self, out: &mut TokenMask) {
        *out = TokenMask::new(self.c.inner.vocab.len());
        if self.cur.ended {
            return;
        }
        if self.states.is_accepting(self.cur.state) {
            for &t in self.c.inner.vocab.eog() {
                out.allow(t);
            }
        }
        self.walk(0, (self.cur.state, self.cur.budget), out);
        self.drop_repeats(out);
    }

    /// Statistics so far.
    pub fn stats(&self) -> MatcherStats {
        MatcherStats {
            states_used: self.states.len(),
            states_limit: self.states.limit,
            states_peak: self.states.peak,
            masks_used: self.mask_store.len(),
            table_clears: self.states.clears,
            ..self.stats.clone()
        }
    }

    /// The constraint this matcher walks.
    pub fn constraint(&self) -> &Constraint {
        &self.c
    }
}
