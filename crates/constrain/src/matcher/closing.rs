//! Budget-aware closing: how many bytes still separate the output from acceptance, and
//! the mask of tokens that close it by a shortest way.
//!
//! A caller with a token budget keeps the distance within the tokens it has left: every
//! token of the closing mask shortens the distance by its own length (at least one byte),
//! so from a state `d` bytes from acceptance at most `d` closing tokens finish the output,
//! and a vocabulary holding every single byte always has one to offer.

use super::Matcher;
use crate::automaton::config::{ACCEPT, EMPTY_STACK, EXIT, EXIT_STACK};
use crate::automaton::distance::{add, FAR};
use crate::mask::TokenMask;
use std::time::Instant;

/// A state whose distance is not computed yet.
pub(super) const UNKNOWN: u32 = u32::MAX;

impl Matcher {
    /// The fewest bytes that complete the output from here: 0 when it may end now (or
    /// has ended), `None` if nothing completes it (never, for a matcher that only took
    /// allowed tokens, except midway through a `\u` surrogate pair whose completions are
    /// too many to search).
    pub fn min_bytes_to_accept(&mut self) -> Option<usize> {
        let t0 = Instant::now();
        self.make_room();
        let d = if self.cur.ended {
            0
        } else {
            self.state_distance(self.cur.state)
        };
        self.stats.mask_time += t0.elapsed();
        (d < FAR).then_some(d as usize)
    }

    /// What [`min_bytes_to_accept`](Self::min_bytes_to_accept) would be after committing
    /// `token` (nothing is committed), or `None` if the matcher would refuse the token.
    pub fn min_bytes_after(&mut self, token: u32) -> Option<usize> {
        let t0 = Instant::now();
        self.make_room();
        let vocab = self.c.inner.vocab.clone();
        let d = if self.cur.ended {
            None
        } else if vocab.is_eog(token) {
            self.is_accepting().then_some(0)
        } else {
            match vocab.token_bytes(token) {
                Some(bytes) if !vocab.is_special(token) && !bytes.is_empty() => self
                    .advance(self.cur, bytes)
                    .map(|at| self.state_distance(at.state)),
                _ => None,
            }
        };
        self.stats.mask_time += t0.elapsed();
        d.filter(|&d| d < FAR).map(|d| d as usize)
    }

    /// Writes into `out` the tokens that lie on a shortest completion: each one's bytes
    /// keep the output alive and shorten [`min_bytes_to_accept`](Self::min_bytes_to_accept)
    /// by exactly their length. Where the output may end, only end-of-generation tokens.
    /// Should the vocabulary spell no shortest completion (it lacks the single bytes
    /// one needs), this is the plain [`mask`](Self::mask). Counted in the statistics as a
    /// mask step and a closing step.
    pub fn closing_mask(&mut self, out: &mut TokenMask) {
        let t0 = Instant::now();
        if out.len() != self.c.inner.vocab.len() {
            *out = TokenMask::new(self.c.inner.vocab.len());
        }
        self.make_room();
        self.stats.steps += 1;
        self.stats.closing_steps += 1;
        out.clear();
        if !self.cur.ended {
            let d0 = self.state_distance(self.cur.state);
            if d0 == 0 {
                for &t in self.c.inner.vocab.eog() {
                    out.allow(t);
                }
            } else if d0 < FAR {
                self.closing_walk(d0, out);
            }
            if out.count() == 0 {
                self.fill_mask(out);
            }
        }
        self.stats.mask_time += t0.elapsed();
    }

    /// Allows the tokens whose every prefix stays on a shortest completion from the
    /// current state (`d0` bytes away): a trie subtree is pruned where its prefix leaves it.
    fn closing_walk(&mut self, d0: u32, out: &mut TokenMask) {
        let inner = self.c.inner.clone();
        let (p, trie) = (&inner.program, &inner.vocab.trie);
        let mut walk = std::mem::take(&mut self.walk);
        walk[0] = (self.cur.state, self.cur.budget);
        let mut i = 1;
        while i < trie.len() {
            let node = trie.nodes[i];
            let depth = node.depth as usize;
            let (ps, pb) = walk[depth - 1];
            let next = if depth as u32 <= d0 {
                self.states.next(p, ps, node.byte, pb > 0)
            } else {
                None
            };
            match next {
                Some(nx) if add(self.state_distance(nx.state), depth as u32) <= d0 => {
                    walk[depth] = (nx.state, pb - u32::from(nx.ws_used));
                    for &t in trie.tokens_at(i) {
                        out.allow(t);
                    }
                    i += 1;
                }
                _ => i = node.end as usize,
            }
        }
        self.walk = walk;
    }

    /// The distance of state `s`: the least over its items (cached per state).
    fn state_distance(&mut self, s: u32) -> u32 {
        if let Some(&d) = self.dist.get(s as usize) {
            if d != UNKNOWN {
                return d;
            }
        }
        let inner = self.c.inner.clone();
        let (p, dist) = (&inner.program, inner.distances());
        let items = self.states.config(s).to_vec();
        let mut best = FAR;
        for it in items {
            let d = match it.pos {
                ACCEPT => 0,
                EXIT => FAR,
                pos => {
                    let own = dist.from(p, pos, it.aux, &mut self.strings);
                    if own >= best {
                        continue;
                    }
                    add(own, self.stack_distance(it.stack))
                }
            };
            best = best.min(d);
        }
        if self.dist.len() <= s as usize {
            self.dist.resize(s as usize + 1, UNKNOWN);
        }
        self.dist[s as usize] = best;
        best
    }

    /// What resuming every frame of `stack` costs (memoised per stack).
    fn stack_distance(&mut self, stack: u32) -> u32 {
        let inner = self.c.inner.clone();
        let (p, dist) = (&inner.program, inner.distances());
        let mut chain = Vec::new();
        let mut id = stack;
        let mut d = loop {
            match id {
                EMPTY_STACK => break 0,
                EXIT_STACK => break FAR,
                _ => {}
            }
            if let Some(&d) = self.stack_dist.get(&id) {
                break d;
            }
            chain.push(id);
            id = self.states.frame(id).parent;
        };
        for &id in chain.iter().rev() {
            let f = self.states.frame(id);
            d = add(dist.from(p, f.ret, f.aux, &mut self.strings), d);
            self.stack_dist.insert(id, d);
        }
        d
    }
}
