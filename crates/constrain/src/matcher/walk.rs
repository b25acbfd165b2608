//! Trie walks: the tokens whose bytes stay alive from a state, found by streaming the
//! vocabulary's trie and pruning a subtree as soon as its prefix dies.
//!
//! At a [`wide`](crate::trie::TrieNode::wide) node the walk asks the state table which
//! children's bytes live on (a row it holds, or its first bytes) and reads only those
//! children: the children of the root or of ` ` lie all across the trie, one cold cache
//! line and page each, and the first masks of a fresh matcher met them all.

use super::Matcher;
use crate::automaton::config::Item;
use crate::constraint::Inner;
use crate::mask::{Allow, TokenMask};
use crate::trie::{SHORTCUT_NODES, UNCLEAN, WS_CLASSES};
use std::sync::Arc;

/// The stack-independent part of a mask (see [`Matcher::walk_detached`]).
pub(super) struct Detached {
    pub mask: Arc<TokenMask>,
    /// Nodes where a prefix may return into the real stack, with their bytes.
    pub frontier: Vec<(u32, Box<[u8]>)>,
}

/// Where prefixes that return into the real stack go in a detached walk (`DET`).
type Frontier = Vec<(u32, Box<[u8]>)>;

impl Matcher {
    /// Allows every token below trie node `root` (not `root`'s own) that stays alive from
    /// `start`.
    pub(super) fn walk(&mut self, root: usize, start: (u32, u32), out: &mut impl Allow) {
        let inner = self.c.inner.clone();
        let mut none = Frontier::new();
        if inner.program.uses_ws {
            self.walk_with::<true, false>(&inner, root, start, out, &mut none)
        } else {
            self.walk_with::<false, false>(&inner, root, start, out, &mut none)
        }
    }

    /// Walks the trie from a state on the placeholder stack: tokens that never return
    /// into the real stack are decided here, once for every real stack; where a prefix
    /// may return into it, the node and its byte path are kept for the real walk.
    pub(super) fn walk_detached(&mut self, local: u32) -> Detached {
        let inner = self.c.inner.clone();
        let mut mask = TokenMask::new(inner.vocab.len());
        let mut frontier = Frontier::new();
        let start = (local, self.cur.budget);
        if inner.program.uses_ws {
            self.walk_with::<true, true>(&inner, 0, start, &mut mask, &mut frontier)
        } else {
            self.walk_with::<false, true>(&inner, 0, start, &mut mask, &mut frontier)
        }
        Detached {
            mask: Arc::new(mask),
            frontier,
        }
    }

    /// [`walk`](Self::walk), specialised on whether the whitespace budget is tracked and
    /// on whether the walk is detached (`DET`: a prefix whose state may return into the
    /// real stack goes into `frontier`, its subtree left to the real walk).
    fn walk_with<const WS: bool, const DET: bool>(
        &mut self,
        inner: &Inner,
        root: usize,
        start: (u32, u32),
        out: &mut impl Allow,
        frontier: &mut Frontier,
    ) {
        let (p, trie) = (&inner.program, &inner.vocab.trie);
        if let Some(it) = self.states.literal(p, start.0) {
            self.walk_literal::<WS, DET>(inner, root, start.1, it, out, frontier);
            return;
        }
        if trie.nodes[root].wide {
            self.walk_kids::<WS, DET>(inner, root, start, out, frontier);
            return;
        }
        self.walk[trie.nodes[root].depth as usize] = start;
        let end = trie.nodes[root].end as usize;
        let mut i = root + 1;
        while i < end {
            let node = trie.nodes[i];
            let d = node.depth as usize;
            let (ps, pb) = self.walk[d - 1];
            let Some(nx) = self.states.next(p, ps, node.byte, WS && pb > 0) else {
                i = node.end as usize;
                continue;
            };
            if DET {
                self.path[d - 1] = node.byte;
                if self.states.exits(nx.state) {
                    frontier.push((i as u32, self.path[..d].into()));
                    i = node.end as usize;
                    continue;
                }
            }
            let at = (nx.state, if WS { pb - u32::from(nx.ws_used) } else { pb });
            for &t in trie.tokens_at(i) {
                out.allow_token(t);
            }
            if self.keeps_every_token::<WS>(inner, i, at) {
                out.allow_tokens(trie.tokens_below(i));
                i = node.end as usize;
                continue;
            }
            if node.end as usize > i + 1 {
                if let Some(it) = self.states.literal(p, at.0) {
                    self.walk_literal::<WS, DET>(inner, i, at.1, it, out, frontier);
                    i = node.end as usize;
                    continue;
                }
            }
            if node.wide {
                // Below, only this walk's deeper levels are written; the levels above
                // are read again as they were.
                self.walk_kids::<WS, DET>(inner, i, at, out, frontier);
                i = node.end as usize;
            } else {
                self.walk[d] = at;
                i += 1;
            }
        }
    }

    /// Walks below a wide node alive in `at`, reading only the children that live on.
    fn walk_kids<const WS: bool, const DET: bool>(
        &mut self,
        inner: &Inner,
        node: usize,
        at: (u32, u32),
        out: &mut impl Allow,
        frontier: &mut Frontier,
    ) {
        let (p, trie) = (&inner.program, &inner.vocab.trie);
        let (bytes, kids) = trie.kids(node);
        let (s, budget) = at;
        let d = trie.nodes[node].depth as usize + 1;
        for (&b, &child) in bytes.iter().zip(kids) {
            let Some(nx) = self.states.next(p, s, b, WS && budget > 0) else {
                continue;
            };
            let child = child as usize;
            if DET {
                self.path[d - 1] = b;
                if self.states.exits(nx.state) {
                    frontier.push((child as u32, self.path[..d].into()));
                    continue;
                }
            }
            let budget = if WS {
                budget - u32::from(nx.ws_used)
            } else {
                budget
            };
            for &t in trie.tokens_at(child) {
                out.allow_token(t);
            }
            if self.keeps_every_token::<WS>(inner, child, (nx.state, budget)) {
                out.allow_tokens(trie.tokens_below(child));
                continue;
            }
            self.walk_with::<WS, DET>(inner, child, (nx.state, budget), out, frontier);
        }
    }

    /// Walks below trie node `i`, alive in a state that is one item spelling a literal
    /// (a key, an enum's value; see [`StateTable::literal`]) with `budget` left: only
    /// the child on the literal's next byte can live, so the walk follows the trie
    /// down the literal, making no state for its bytes, and makes one where the
    /// literal ends, to walk what lies below from there.
    ///
    /// [`StateTable::literal`]: crate::automaton::states::StateTable::literal
    fn walk_literal<const WS: bool, const DET: bool>(
        &mut self,
        inner: &Inner,
        mut i: usize,
        budget: u32,
        it: Item,
        out: &mut impl Allow,
        frontier: &mut Frontier,
    ) {
        let (p, trie) = (&inner.program, &inner.vocab.trie);
        let mut pos = it.pos;
        let mut byte = p.one_byte(pos);
        while let Some((b, next)) = byte {
            let Some(child) = trie.child(i, b) else {
                return;
            };
            if DET {
                self.path[trie.nodes[child].depth as usize - 1] = b;
            }
            (pos, i) = (next, child);
            byte = p.one_byte(pos);
            if byte.is_none() {
                break;
            }
            for &t in trie.tokens_at(i) {
                out.allow_token(t);
            }
        }
        // Where the literal ends: the state after it, as a byte step would make it.
        let Some(s) = self.states.of_item(
            p,
            Item {
                pos,
                stack: it.stack,
                aux: 0,
            },
        ) else {
            return;
        };
        if DET && self.states.exits(s) {
            let d = trie.nodes[i].depth as usize;
            frontier.push((i as u32, self.path[..d].into()));
            return;
        }
        for &t in trie.tokens_at(i) {
            out.allow_token(t);
        }
        if self.keeps_every_token::<WS>(inner, i, (s, budget)) {
            out.allow_tokens(trie.tokens_below(i));
            return;
        }
        if trie.nodes[i].end as usize > i + 1 {
            self.walk_with::<WS, DET>(inner, i, (s, budget), out, frontier);
        }
    }

    /// Whether every token below trie node `i` stays alive from `at`, the state there:
    /// it loops on every character below (as a free-text rule's state does, say
    /// `[^\n]+`), so the subtree's tokens are taken without walking it. A state that
    /// loops never returns into the real stack, so a detached walk may take them too.
    #[inline]
    fn keeps_every_token<const WS: bool>(
        &mut self,
        inner: &Inner,
        i: usize,
        at: (u32, u32),
    ) -> bool {
        let trie = &inner.vocab.trie;
        if trie.nodes[i].end as usize - i <= SHORTCUT_NODES {
            return false;
        }
        let shape = trie.shape(i);
        // With whitespace budget left, a whitespace byte takes another transition.
        let budgeted = WS && at.1 > 0 && shape & WS_CLASSES != 0;
        shape & UNCLEAN == 0 && !budgeted && self.states.loops_on(&inner.program, at.0, shape)
    }
}
