//! The per-matcher state table: configurations interned as small integers, with their
//! byte transitions cached lazily (cheap, numerous), separately from masks.

use super::config::{
    closure, closure_in, step, Frame, Item, Scratch, Stacks, ACCEPT, EMPTY_STACK, EXIT, EXIT_STACK,
};
use super::program::{Node, Program};
use crate::grammar::ByteSet;
use crate::trie::{classes, Shape, ASCII_CLASSES, CLASS_BYTES};
use rustc_hash::FxHashMap;

/// A transition not computed yet.
const UNKNOWN: u32 = u32::MAX;
/// No item survives the byte.
const DEAD: u32 = u32::MAX - 1;
/// The end of a chain of states of one hash.
const NO_STATE: u32 = u32::MAX;
/// A state without a transition row.
const NO_ROW: u32 = u32::MAX;
/// Cached transitions after which a state gets a full row.
const PROMOTE_AFTER: usize = 6;
/// A state not yet asked whether it spells a literal, one that does, one that does not.
const UNKNOWN_LITERAL: u8 = 0;
const LITERAL: u8 = 1;
const NOT_LITERAL: u8 = 2;
/// Set on a cached transition that consumed budgeted whitespace.
const WS_FLAG: u32 = 1 << 31;

/// Default state-table capacity.
pub(crate) const DEFAULT_STATE_LIMIT: usize = 4096;

/// Parse items the table's configurations may hold in all before it is cleared (about
/// 32 MB with the interning map's copy). A few thousand states of a handful of items
/// each stay far below; a highly ambiguous grammar, whose configurations grow by
/// thousands of items, would otherwise fill the state limit with gigabytes.
pub(crate) const ITEM_LIMIT: usize = 1 << 20;

/// Interned configurations and their transitions.
pub(crate) struct StateTable {
    /// Every state's items, one after another: state `s`'s are `spans[s]`, so a new
    /// state costs no allocation of its own.
    arena: Vec<Item>,
    spans: Vec<(u32, u32)>,
    /// A state's items while its transition is computed (the arena grows meanwhile).
    stepping: Vec<Item>,
    /// States by the hash of their configuration: the newest state of each hash, the
    /// others chained through `same_hash`. A configuration is hashed once, not again
    /// to insert it, and the map's keys are plain integers.
    ids: FxHashMap<u64, u32>,
    same_hash: Vec<u32>,
    scratch: Scratch,
    accepting: Vec<bool>,
    /// Whether a state holds the [`EXIT`] pseudo-item.
    exits: Vec<bool>,
    /// Per state, its row in `rows` (or [`NO_ROW`]): `rows[r * stride + mode * 256 + b]`,
    /// mode 1 = whitespace budget left.
    row_of: Vec<u32>,
    rows: Vec<u32>,
    /// Per state without a row yet, its few cached transitions. Most states a trie walk
    /// meets are passed once or twice (e.g. each character of a length-bounded string
    /// is a state), so a row is only given to a state with several transitions; until
    /// then a scan of a handful of slots beats hashing into a map.
    sparse: Vec<SparseSlots>,
    /// Per state, the bytes some item could take (computed on the first uncached
    /// transition): other bytes are dead without stepping the items.
    firsts: Vec<Option<ByteSet>>,
    /// Per state, the byte classes known to lead back to it or not (see
    /// [`loops_on`](Self::loops_on)).
    loops: Vec<(Shape, Shape)>,
    /// Per state, whether it is one item spelling a literal (see
    /// [`literal`](Self::literal)): [`UNKNOWN_LITERAL`] until asked.
    literal: Vec<u8>,
    stride: usize,
    stacks: Stacks,
    pub limit: usize,
    pub peak: usize,
    pub clears: u64,
}

/// The transitions a state without a row holds, in the order they were stored.
#[derive(Clone, Copy, Default)]
struct SparseSlots {
    slots: [u16; PROMOTE_AFTER],
    targets: [u32; PROMOTE_AFTER],
    len: u8,
}

impl SparseSlots {
    #[inline]
    fn get(&self, slot: usize) -> Option<u32> {
        let n = usize::from(self.len);
        let i = self.slots[..n]
            .iter()
            .position(|&x| usize::from(x) == slot)?;
        Some(self.targets[i])
    }
}

/// Outcome of a cached transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Next {
    pub state: u32,
    pub ws_used: bool,
}

/// Spare state tables of finished matchers, for the next matchers of a vocabulary: a
/// fresh matcher's table grows to hundreds of states and their transition rows (2 KiB
/// each), and growing it from empty, reallocating and touching new pages as it went,
/// cost the first masks of every request a tenth of their time.
#[derive(Default)]
pub(crate) struct TablePool {
    spare: std::sync::Mutex<Vec<StateTable>>,
}

/// Most tables a pool keeps, and the most bytes of rows and items a kept table may
/// hold (one that grew past them is dropped: its like is rare), so a vocabulary keeps
/// 16 MiB of spare tables at most.
const POOLED_TABLES: usize = 8;
const POOLED_TABLE_BYTES: usize = 2 << 20;

impl std::fmt::Debug for TablePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TablePool").finish_non_exhaustive()
    }
}

impl TablePool {
    /// An empty table for `p`, a spare one if there is one.
    pub(crate) fn take(&self, p: &Program, limit: usize) -> StateTable {
        match self.lock().pop() {
            Some(mut t) => {
                t.reset(p, limit);
                t
            }
            None => StateTable::new(p, limit),
        }
    }

    /// Keeps `t` for a later taker, if the pool has room and `t` is not oversized.
    pub(crate) fn give(&self, t: StateTable) {
        let mut spare = self.lock();
        let bytes = t.rows.capacity() * std::mem::size_of::<u32>()
            + t.arena.capacity() * std::mem::size_of::<Item>();
        if spare.len() < POOLED_TABLES && bytes <= POOLED_TABLE_BYTES {
            spare.push(t);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<StateTable>> {
        // A poisoned pool holds whole tables still, each reset before use.
        self.spare.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl StateTable {
    pub(crate) fn new(p: &Program, limit: usize) -> Self {
        let mut t = StateTable::empty();
        // Sized for a typical walk: growing from empty rehashed a few percent of the
        // mask time away in fresh matchers.
        t.ids.reserve(128);
        t.reset(p, limit);
        t
    }

    /// A table of no states and no capacity (for a limit of none).
    pub(crate) fn empty() -> Self {
        StateTable {
            arena: Vec::new(),
            spans: Vec::new(),
            stepping: Vec::new(),
            ids: FxHashMap::default(),
            same_hash: Vec::new(),
            scratch: Scratch::default(),
            accepting: Vec::new(),
            exits: Vec::new(),
            row_of: Vec::new(),
            rows: Vec::new(),
            sparse: Vec::new(),
            firsts: Vec::new(),
            loops: Vec::new(),
            literal: Vec::new(),
            stride: 256,
            stacks: Stacks::new(),
            limit: 0,
            peak: 0,
            clears: 0,
        }
    }

    /// Empties the table for a matcher of `p`, keeping its buffers.
    fn reset(&mut self, p: &Program, limit: usize) {
        self.clear();
        self.stacks.reset();
        self.stride = if p.uses_ws { 512 } else { 256 };
        self.limit = limit;
        self.peak = 0;
        self.clears = 0;
    }

    /// Forgets every state (the stacks stay).
    fn clear(&mut self) {
        self.arena.clear();
        self.spans.clear();
        self.ids.clear();
        self.same_hash.clear();
        self.accepting.clear();
        self.exits.clear();
        self.row_of.clear();
        self.rows.clear();
        self.sparse.clear();
        self.firsts.clear();
        self.loops.clear();
        self.literal.clear();
    }

    /// The initial state of `p`.
    pub(crate) fn start(&mut self, p: &Program) -> u32 {
        let kernel = closure(
            p,
            &mut self.stacks,
            vec![Item {
                pos: p.root,
                stack: 0,
                aux: 0,
            }],
        );
        self.intern(&kernel)
    }

    /// The items of state `s`.
    pub(crate) fn config(&self, s: u32) -> &[Item] {
        let (at, n) = self.spans[s as usize];
        &self.arena[at as usize..(at + n) as usize]
    }

    /// The state reached from `seeds` without consuming input.
    pub(crate) fn enter(&mut self, p: &Program, seeds: Vec<Item>) -> u32 {
        let kernel = closure(p, &mut self.stacks, seeds);
        self.intern(&kernel)
    }

    /// The state holding just `items` (a subset of some state's items: its tokens are
    /// the ones some of those items allow, since a configuration steps item by item).
    pub(crate) fn subset(&mut self, mut items: Vec<Item>) -> u32 {
        items.sort_unstable();
        self.intern(&items)
    }

    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    fn intern(&mut self, kernel: &[Item]) -> u32 {
        let hash = {
            use std::hash::{Hash, Hasher};
            let mut h = rustc_hash::FxHasher::default();
            kernel.hash(&mut h);
            h.finish()
        };
        let id = self.spans.len() as u32;
        let newest = match self.ids.entry(hash) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let mut at = *e.get();
                while at != NO_STATE {
                    let (from, n) = self.spans[at as usize];
                    if self.arena[from as usize..(from + n) as usize] == *kernel {
                        return at;
                    }
                    at = self.same_hash[at as usize];
                }
                e.insert(id)
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(id);
                NO_STATE
            }
        };
        self.same_hash.push(newest);
        self.accepting
            .push(kernel.iter().any(|it| it.pos == ACCEPT));
        self.exits.push(kernel.iter().any(|it| it.pos == EXIT));
        self.spans
            .push((self.arena.len() as u32, kernel.len() as u32));
        self.arena.extend_from_slice(kernel);
        self.row_of.push(NO_ROW);
        self.sparse.push(SparseSlots::default());
        self.firsts.push(None);
        self.loops.push((0, 0));
        self.literal.push(UNKNOWN_LITERAL);
        self.peak = self.peak.max(self.spans.len());
        id
    }

    /// Frame `id` of the hash-consed stacks (not the empty or placeholder stack).
    pub(crate) fn frame(&self, id: u32) -> Frame {
        self.stacks.frame(id)
    }

    /// Whether state `s` may have returned into the placeholder stack.
    #[inline]
    pub(crate) fn exits(&self, s: u32) -> bool {
        self.exits[s as usize]
    }

    /// If every item of `s` sits on one stack other than the empty one, the state with
    /// that stack replaced by the placeholder, and the stack.
    pub(crate) fn detach(&mut self, s: u32) -> Option<(u32, u32)> {
        let items = self.config(s);
        let stack = items[0].stack;
        if stack == 0 || stack == EXIT_STACK || items.iter().any(|it| it.stack != stack) {
            return None;
        }
        let mut kernel: Vec<Item> = items
            .iter()
            .map(|it| Item {
                stack: EXIT_STACK,
                ..*it
            })
            .collect();
        kernel.sort_unstable();
        Some((self.intern(&kernel), stack))
    }

    /// The one item of state `s` if that is all it holds and the item stands at a node
    /// of one byte: the state spells a literal (a key, an enum's or a const's value)
    /// whose next byte leaves one item again, or a state after it.
    #[inline]
    pub(crate) fn literal(&mut self, p: &Program, s: u32) -> Option<Item> {
        let known = self.literal[s as usize];
        if known == NOT_LITERAL {
            return None;
        }
        let items = self.config(s);
        if known == LITERAL {
            return Some(items[0]);
        }
        let one = match *items {
            [it] => p.one_byte(it.pos).map(|_| it),
            _ => None,
        };
        self.literal[s as usize] = if one.is_some() { LITERAL } else { NOT_LITERAL };
        one
    }

    /// The state of the item `it` alone, closed (as a byte step leaves it), or `None`
    /// if its closure is empty (a dead end).
    pub(crate) fn of_item(&mut self, p: &Program, it: Item) -> Option<u32> {
        let mut sc = std::mem::take(&mut self.scratch);
        sc.work.clear();
        sc.work.push(it);
        closure_in(p, &mut self.stacks, &mut sc);
        let s = (!sc.kernel.is_empty()).then(|| self.intern(&sc.kernel));
        self.scratch = sc;
        s
    }

    /// Whether the input may end in state `s`.
    #[inline]
    pub(crate) fn is_accepting(&self, s: u32) -> bool {
        self.accepting[s as usize]
    }

    /// The state after byte `b`, or `None` if the byte kills every parse. The fast
    /// paths (a state with a row and the transition cached; a byte no item of a state
    /// without a row can take) are inlined table reads: a walk meets many dead
    /// siblings below each live prefix.
    #[inline(always)]
    pub(crate) fn next(&mut self, p: &Program, s: u32, b: u8, ws_left: bool) -> Option<Next> {
        let mode = usize::from(ws_left && self.stride == 512);
        let slot = mode * 256 + b as usize;
        let row = self.row_of[s as usize];
        let mut t = UNKNOWN;
        if row != NO_ROW {
            t = self.rows[row as usize * self.stride + slot];
        }
        if t == UNKNOWN {
            // A row's dead bytes are not stored (most of a state's 256 never come up):
            // they are told by the first bytes here, not out of line.
            if let Some(f) = &self.firsts[s as usize] {
                if !f.contains(b) {
                    return None;
                }
            }
            t = self.next_slow(p, s, slot);
        }
        (t != DEAD).then_some(Next {
            state: t & !WS_FLAG,
            ws_used: t & WS_FLAG != 0,
        })
    }

    /// A transition not in a row: from the sparse map, or computed and stored.
    #[inline(never)]
    fn next_slow(&mut self, p: &Program, s: u32, slot: usize) -> u32 {
        // Bytes no item can take are dead without a lookup or a stored entry: a walk
        // meets many of them below a live prefix (every sibling of a key's next byte).
        let firsts = match self.firsts[s as usize] {
            Some(f) => f,
            None => {
                let f = first_bytes(p, self.config(s));
                self.firsts[s as usize] = Some(f);
                f
            }
        };
        if !firsts.contains(slot as u8) {
            return DEAD;
        }
        if self.row_of[s as usize] == NO_ROW {
            if let Some(t) = self.sparse[s as usize].get(slot) {
                return t;
            }
        }
        let t = self.compute(p, s, slot as u8, slot >= 256);
        self.store(s, slot, t);
        t
    }

    fn store(&mut self, s: u32, slot: usize, t: u32) {
        let row = self.row_of[s as usize];
        if row != NO_ROW {
            self.rows[row as usize * self.stride + slot] = t;
            return;
        }
        let held = &mut self.sparse[s as usize];
        let n = usize::from(held.len);
        held.slots[n] = slot as u16;
        held.targets[n] = t;
        held.len += 1;
        if usize::from(held.len) >= PROMOTE_AFTER {
            let held = *held;
            let row = (self.rows.len() / self.stride) as u32;
            self.rows.resize(self.rows.len() + self.stride, UNKNOWN);
            let base = row as usize * self.stride;
            for (&slot, &t) in held.slots.iter().zip(&held.targets) {
                self.rows[base + usize::from(slot)] = t;
            }
            self.row_of[s as usize] = row;
        }
    }

    #[cold]
    fn compute(&mut self, p: &Program, s: u32, b: u8, ws_allowed: bool) -> u32 {
        let mut from = std::mem::take(&mut self.stepping);
        from.clear();
        from.extend_from_slice(self.config(s));
        let mut sc = std::mem::take(&mut self.scratch);
        let ws_used = step(p, &mut self.stacks, &mut sc, &from, b, ws_allowed);
        self.stepping = from;
        let t = if sc.kernel.is_empty() {
            DEAD
        } else {
            self.intern(&sc.kernel) | if ws_used { WS_FLAG } else { 0 }
        };
        self.scratch = sc;
        t
    }

    /// Whether every character of `shape`'s classes leads state `s` back to `s`
    /// without spending budgeted whitespace (see [`crate::trie::loops_on`]), with no
    /// whitespace budget left or no whitespace in `shape`.
    pub(crate) fn loops_on(&mut self, p: &Program, s: u32, shape: Shape) -> bool {
        let mut learnt = self.loops[s as usize];
        if shape & learnt.0 & !learnt.1 != 0 {
            return false;
        }
        // A class with a byte no item takes does not loop: most states (a key's, a
        // number's) are told so without a transition computed.
        let unknown = shape & ASCII_CLASSES & !learnt.0;
        if unknown != 0 {
            let (at, n) = self.spans[s as usize];
            let items = &self.arena[at as usize..(at + n) as usize];
            let firsts = self.firsts[s as usize].get_or_insert_with(|| first_bytes(p, items));
            let live = u128::from(firsts.0[0]) | u128::from(firsts.0[1]) << 64;
            if let Some(k) = classes(unknown).find(|&k| CLASS_BYTES[k as usize] & !live != 0) {
                learnt.0 |= 1 << k;
                self.loops[s as usize] = learnt;
                return false;
            }
        }
        let loops = crate::trie::loops_on(s, shape, &mut learnt, |t, b| {
            let nx = self.next(p, t, b, false)?;
            (!nx.ws_used).then_some(nx.state)
        });
        self.loops[s as usize] = learnt;
        loops
    }

    /// Whether the table has reached its limit (of states, or of items in all) and
    /// should be cleared before the next step.
    pub(crate) fn is_full(&self) -> bool {
        self.spans.len() >= self.limit || self.arena.len() >= ITEM_LIMIT
    }

    /// Empties the table, keeping only the given states (renumbered; the new ids are
    /// returned in the same order). Stacks are copied into a fresh table, so frames no
    /// kept state stands on do not leak.
    pub(crate) fn clear_keeping(&mut self, keep: &[u32]) -> Vec<u32> {
        let old_stacks = std::mem::replace(&mut self.stacks, Stacks::new());
        let old_arena = std::mem::take(&mut self.arena);
        let old_spans = std::mem::take(&mut self.spans);
        self.clear();
        self.clears += 1;
        let mut moved: FxHashMap<u32, u32> =
            FxHashMap::from_iter([(EMPTY_STACK, EMPTY_STACK), (EXIT_STACK, EXIT_STACK)]);
        keep.iter()
            .map(|&s| {
                let (at, n) = old_spans[s as usize];
                let mut kernel: Vec<Item> = old_arena[at as usize..(at + n) as usize]
                    .iter()
                    .map(|it| Item {
                        stack: old_stacks.copy_into(it.stack, &mut self.stacks, &mut moved),
                        ..*it
                    })
                    .collect();
                kernel.sort_unstable();
                self.intern(&kernel)
            })
            .collect()
    }
}

/// The bytes some item of a configuration could take: exact for byte edges and
/// whitespace, a cheap superset for regexes and strings (their live bytes without a
/// step). A number's state, say, takes a dozen bytes of the hundreds a trie walk tries,
/// and each byte let through is a closure computed, though it dies.
fn first_bytes(p: &Program, items: &[Item]) -> ByteSet {
    let mut f = ByteSet::EMPTY;
    for it in items {
        match p.nodes.get(it.pos as usize) {
            Some(Node::Byte { set, .. }) => {
                for (a, b) in f.0.iter_mut().zip(set.0) {
                    *a |= b;
                }
            }
            Some(Node::Ws { .. }) => {
                for b in [b' ', b'\t', b'\n', b'\r'] {
                    f.insert(b);
                }
            }
            Some(Node::Regex { dfa, .. }) => {
                f = f.union(&p.dfas[*dfa as usize].live_bytes(it.aux as u32));
            }
            Some(Node::JsonStr { spec, .. }) => {
                f = f.union(&p.strings[*spec as usize].first_bytes(it.aux));
            }
            // The accepting and exit pseudo-items take no byte.
            None if it.pos == ACCEPT || it.pos == EXIT => {}
            _ => return ByteSet([u64::MAX; 4]),
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{GrammarBuilder, Symbol};

    fn table() -> StateTable {
        let mut b = GrammarBuilder::new();
        let root = b.rule("root", vec![vec![Symbol::lit("a")]]);
        StateTable::new(&Program::compile(&b.build(root).unwrap()).unwrap(), 4096)
    }

    /// The frames of a stack, innermost first.
    fn frames(stacks: &Stacks, mut id: u32) -> Vec<Frame> {
        let mut out = Vec::new();
        while id != EMPTY_STACK && id != EXIT_STACK {
            let f = stacks.frame(id);
            out.push(f);
            id = f.parent;
        }
        out
    }

    #[test]
    fn the_table_is_full_at_its_item_budget_before_its_state_limit() {
        let mut t = table();
        let config = |n: u32| {
            (0..1000).map(move |i| Item {
                pos: n * 1000 + i,
                stack: 0,
                aux: 0,
            })
        };
        let mut n = 0;
        while !t.is_full() {
            t.intern(&config(n).collect::<Vec<_>>());
            n += 1;
        }
        assert_eq!(n as usize, ITEM_LIMIT.div_ceil(1000));
        assert!(t.spans.len() < t.limit);
        t.clear_keeping(&[]);
        assert!(!t.is_full());
    }

    #[test]
    fn a_clear_copies_shared_stacks_once_and_keeps_their_frames() {
        // One chain of 2,000 frames; item i stands on the stack of depth i, so spelling
        // every item's stack out would be two million frames.
        let mut t = table();
        let mut stack = EMPTY_STACK;
        let mut items = Vec::new();
        for i in 0..2000 {
            stack = t.stacks.push(Frame {
                ret: i,
                aux: u64::from(i % 7),
                parent: stack,
            });
            items.push(Item {
                pos: i,
                stack,
                aux: 0,
            });
        }
        // Frames no kept state stands on are dropped.
        t.stacks.push(Frame {
            ret: 9,
            aux: 9,
            parent: EMPTY_STACK,
        });
        let s = t.intern(&items);
        let before: Vec<Vec<(u32, u64)>> = items
            .iter()
            .map(|it| {
                frames(&t.stacks, it.stack)
                    .iter()
                    .map(|f| (f.ret, f.aux))
                    .collect()
            })
            .collect();
        let ids = t.clear_keeping(&[s]);
        assert_eq!(t.stacks.len(), 2 + 2000);
        let after: Vec<Vec<(u32, u64)>> = t
            .config(ids[0])
            .iter()
            .map(|it| {
                frames(&t.stacks, it.stack)
                    .iter()
                    .map(|f| (f.ret, f.aux))
                    .collect()
            })
            .collect();
        assert_eq!(after, before);
    }
}
