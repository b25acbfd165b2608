//! Parse configurations: the set of live parse stacks after some input.
//!
//! Why a set of stacks (XGrammar-style) rather than Earley items (llguidance-style): our
//! grammars are small, mostly deterministic (JSON Schema lowerings, unambiguous GBNF),
//! so a configuration is usually one to a handful of items. Stacks are hash-consed into a
//! table (a stack is a `u32`: its top frame plus its parent), which makes a configuration
//! a small sorted vector of `(position, aux, stack)` items that can be interned as a DFA
//! state, and a byte transition is a pure function of the state. Earley would handle
//! highly ambiguous grammars more gracefully, but costs more per byte on the common case.

use super::jsonstr::StrStep;
use super::program::{Node, Pos, Program};
use rustc_hash::{FxHashMap, FxHashSet};

/// The empty stack.
pub(crate) const EMPTY_STACK: u32 = 0;

/// Position of the "accepted" pseudo-item (the root rule returned on an empty stack).
pub(crate) const ACCEPT: Pos = Pos::MAX;

/// A placeholder stack standing for "whatever stack the real state has": used to walk
/// the vocabulary once for all states that differ only in that stack.
pub(crate) const EXIT_STACK: u32 = 1;

/// Position of the pseudo-item for "returned into the placeholder stack": from here on
/// the real stack decides.
pub(crate) const EXIT: Pos = Pos::MAX - 1;

/// One live parse: a program position, the state of the terminal at that position, and
/// the return stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Item {
    pub pos: Pos,
    pub stack: u32,
    pub aux: u64,
}

/// A return frame: where to continue, with which `aux`, and the rest of the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Frame {
    pub ret: Pos,
    pub aux: u64,
    pub parent: u32,
}

/// Hash-consed stacks; id 0 is the empty stack.
#[derive(Debug)]
pub(crate) struct Stacks {
    frames: Vec<Frame>,
    ids: FxHashMap<Frame, u32>,
}

impl Stacks {
    pub(crate) fn new() -> Self {
        Stacks {
            // Ids 0 and 1: the empty stack and the placeholder, never popped.
            frames: vec![
                Frame {
                    ret: 0,
                    aux: 0,
                    parent: 0
                };
                2
            ],
            ids: FxHashMap::default(),
        }
    }

    /// Back to the empty and placeholder stacks alone, keeping the buffers.
    pub(crate) fn reset(&mut self) {
        self.frames.truncate(2);
        self.ids.clear();
    }

    pub(crate) fn push(&mut self, f: Frame) -> u32 {
        let next = self.frames.len() as u32;
        let id = *self.ids.entry(f).or_insert(next);
        if id == next {
            self.frames.push(f);
        }
        id
    }

    /// Frames held, the empty and placeholder stacks included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.frames.len()
    }

    pub(crate) fn frame(&self, id: u32) -> Frame {
        self.frames[id as usize]
    }

    /// Copies stack `id` into `to`, returning its id there. `moved` maps the ids
    /// already copied (seed it with the empty and placeholder stacks), so stacks that
    /// share frames are copied once: the cost is the frames not copied yet, not the
    /// stack's depth again for every item that stands on it.
    pub(crate) fn copy_into(
        &self,
        id: u32,
        to: &mut Stacks,
        moved: &mut FxHashMap<u32, u32>,
    ) -> u32 {
        let mut chain = Vec::new();
        let mut at = id;
        let mut base = loop {
            match moved.get(&at) {
                Some(&new) => break new,
                None => {
                    chain.push(at);
                    at = self.frames[at as usize].parent;
                }
            }
        };
        for &old in chain.iter().rev() {
            let f = self.frames[old as usize];
            base = to.push(Frame { parent: base, ..f });
            moved.insert(old, base);
        }
        base
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Buffers the closure and the byte step reuse from call to call: most trie nodes a
/// fresh state's walk keeps need a new transition, and allocating its sets afresh each
/// time cost about a fifth of the mask time.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Items still to expand (the seeds on entry).
    pub work: Vec<Item>,
    seen: SeenItems,
    /// The closure's result: sorted, deduplicated.
    pub kernel: Vec<Item>,
}

/// Items a closure has expanded: a scanned list while few (the common case), a hash
/// set beyond [`SEEN_SCAN`].
#[derive(Default)]
struct SeenItems {
    list: Vec<Item>,
    set: FxHashSet<Item>,
}

const SEEN_SCAN: usize = 32;

impl SeenItems {
    fn clear(&mut self) {
        self.list.clear();
        if !self.set.is_empty() {
            self.set.clear();
        }
    }

    /// Whether `it` is new (recording it).
    #[inline]
    fn insert(&mut self, it: Item) -> bool {
        if !self.set.is_empty() {
            return self.set.insert(it);
        }
        if self.list.contains(&it) {
            return false;
        }
        if self.list.len() < SEEN_SCAN {
            self.list.push(it);
        } else {
            self.set.extend(self.list.drain(..));
            self.set.insert(it);
        }
        true
    }
}

/// Expands `seeds` through everything that consumes no input, returning the sorted,
/// deduplicated kernel: items at byte-consuming nodes, plus [`ACCEPT`].
pub(crate) fn closure(p: &Program, stacks: &mut Stacks, seeds: Vec<Item>) -> Vec<Item> {
    let mut sc = Scratch {
        work: seeds,
        ..Scratch::default()
    };
    closure_in(p, stacks, &mut sc);
    sc.kernel
}

/// [`closure`] of the seeds in `sc.work`, into `sc.kernel`.
pub(crate) fn closure_in(p: &Program, stacks: &mut Stacks, sc: &mut Scratch) {
    sc.seen.clear();
    sc.kernel.clear();
    let (work, kernel) = (&mut sc.work, &mut sc.kernel);
    while let Some(it) = work.pop() {
        if !sc.seen.insert(it) {
            continue;
        }
        let at = |pos: Pos| Item {
            pos,
            stack: it.stack,
            aux: 0,
        };
        match &p.nodes[it.pos as usize] {
            Node::Byte { .. } | Node::JsonStr { .. } => kernel.push(it),
            Node::Split(targets) => work.extend(targets.iter().map(|&t| at(t))),
            Node::Call { entry, ret } => {
                // A call in tail position needs no frame: its return is the caller's.
                let stack = if matches!(p.nodes[*ret as usize], Node::Return) {
                    it.stack
                } else {
                    stacks.push(Frame {
                        ret: *ret,
                        aux: 0,
                        parent: it.stack,
                    })
                };
                work.push(Item {
                    pos: *entry,
                    stack,
                    aux: 0,
                });
            }
            Node::Return => {
                if it.stack == EMPTY_STACK {
                    kernel.push(Item {
                        pos: ACCEPT,
                        stack: EMPTY_STACK,
                        aux: 0,
                    });
                } else if it.stack == EXIT_STACK {
                    kernel.push(Item {
                        pos: EXIT,
                        stack: EXIT_STACK,
                        aux: 0,
                    });
                } else {
                    let f = stacks.frame(it.stack);
                    work.push(Item {
                        pos: f.ret,
                        stack: f.parent,
                        aux: f.aux,
                    });
                }
            }
            Node::Ws { next } => {
                kernel.push(it);
                work.push(at(*next));
            }
            Node::Regex { dfa, next } => {
                kernel.push(it);
                if p.dfas[*dfa as usize].is_accepting(it.aux as u32) {
                    work.push(at(*next));
                }
            }
            Node::Unordered { u, phase, next } => {
                let up = &p.unordered[*u as usize];
                let seen_bits = it.aux;
                let mut call = |entry: Pos, ret_phase: Pos, aux: u64, work: &mut Vec<Item>| {
                    let stack = stacks.push(Frame {
                        ret: up.base + ret_phase,
                        aux,
                        parent: it.stack,
                    });
                    work.push(Item {
                        pos: entry,
                        stack,
                        aux: 0,
                    });
                };
                let may_end = seen_bits & up.required == up.required;
                match phase {
                    0 | 2 => {
                        if *phase == 0 && may_end {
                            work.push(at(*next));
                        }
                        for (i, &entry) in up.members.iter().enumerate() {
                            if seen_bits >> i & 1 == 0 {
                                call(entry, 1, seen_bits | 1 << i, &mut *work);
                            }
                        }
                        if let Some(a) = up.additional {
                            call(a, 1, seen_bits, &mut *work);
                        }
                    }
                    _ => {
                        if may_end {
                            work.push(at(*next));
                        }
                        // A separator only if a member can still follow it.
                        let all = if up.members.len() == 64 {
                            u64::MAX
                        } else {
                            (1u64 << up.members.len()) - 1
                        };
                        if up.additional.is_some() || seen_bits != all {
                            call(up.separator, 2, seen_bits, &mut *work);
                        }
                    }
                }
            }
        }
    }
    kernel.sort_unstable();
    kernel.dedup();
}

/// Advances every item of a kernel by one byte, into `sc.kernel` (empty: dead).
/// Returns whether budgeted whitespace was consumed. With `ws_allowed` false,
/// [`Node::Ws`] consumes nothing.
pub(crate) fn step(
    p: &Program,
    stacks: &mut Stacks,
    sc: &mut Scratch,
    kernel: &[Item],
    b: u8,
    ws_allowed: bool,
) -> bool {
    let seeds = &mut sc.work;
    seeds.clear();
    let mut ws_used = false;
    for it in kernel {
        if it.pos == ACCEPT || it.pos == EXIT {
            continue;
        }
        match &p.nodes[it.pos as usize] {
            Node::Byte { set, next } => {
                if set.contains(b) {
                    seeds.push(Item {
                        pos: *next,
                        stack: it.stack,
                        aux: 0,
                    });
                }
            }
            Node::Ws { .. } => {
                if ws_allowed && is_ws(b) {
                    ws_used = true;
                    seeds.push(*it);
                }
            }
            Node::Regex { dfa, .. } => {
                if let Some(t) = p.dfas[*dfa as usize].next(it.aux as u32, b) {
                    seeds.push(Item {
                        aux: u64::from(t),
                        ..*it
                    });
                }
            }
            Node::JsonStr { spec, next } => match p.strings[*spec as usize].step(it.aux, b) {
                StrStep::Inside(aux) => seeds.push(Item { aux, ..*it }),
                StrStep::Closed => seeds.push(Item {
                    pos: *next,
                    stack: it.stack,
                    aux: 0,
                }),
                StrStep::Dead => {}
            },
            _ => unreachable!("closure keeps only consuming nodes in a kernel"),
        }
    }
    if seeds.is_empty() {
        sc.kernel.clear();
        return false;
    }
    closure_in(p, stacks, sc);
    ws_used
}
