//! Distance to acceptance: the fewest bytes that complete the output from a parse item.
//!
//! Every position of the program gets, once per constraint, the fewest bytes from it to
//! the `Return` of its rule (a shortest-path computation over the program graph: a byte
//! edge costs one, a call costs the callee's shortest body plus what follows it). Terminals with their own
//! state add the cost of finishing that state: a regex DFA state's fewest bytes to a
//! match (per DFA, once), a JSON string's fewest bytes to its closing quote (searched per
//! state through the string's own decoder, memoised), an unordered node's missing
//! required members. An item's distance is its position's cost plus its stack frames'
//! (each frame resumes a caller: its return position's cost); a configuration's is the
//! least over its items. The values are exact: they follow the automaton's own
//! transitions. A string search cut short (a half-written surrogate pair under a
//! pattern) counts as no completion ([`FAR`]) rather than a guess.

use super::program::{Node, Pos, Program};
use crate::grammar::ByteDfa;
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// No completion (or one too long to count).
pub(crate) const FAR: u32 = u32::MAX - 1;

/// States a string's shortest-completion search may meet before it gives up.
const STRING_SEARCH_LIMIT: usize = 20_000;

/// Memoised string distances kept per matcher before the memo is cleared.
const STRING_MEMO_LIMIT: usize = 4096;

/// Saturating sum that keeps [`FAR`] absorbing.
pub(crate) fn add(a: u32, b: u32) -> u32 {
    if a >= FAR || b >= FAR {
        FAR
    } else {
        a.saturating_add(b).min(FAR - 1)
    }
}

/// The per-constraint part: costs of positions, DFA states and unopened strings.
#[derive(Debug)]
pub(crate) struct Distances {
    /// Fewest bytes from each position (terminal state 0) to its rule's `Return`.
    node: Vec<u32>,
    /// Per DFA, fewest bytes from each state to a match.
    dfa: Vec<Vec<u32>>,
    /// Per string spec, fewest bytes of a whole string, quotes included.
    open_string: Vec<u32>,
}

impl Distances {
    /// Heap bytes of the cost tables.
    pub(crate) fn heap_bytes(&self) -> usize {
        use crate::heap::vec;
        vec(&self.node)
            + vec(&self.dfa)
            + self.dfa.iter().map(vec).sum::<usize>()
            + vec(&self.open_string)
    }

    pub(crate) fn compute(p: &Program) -> Distances {
        let mut d = Distances {
            node: vec![FAR; p.nodes.len()],
            dfa: p.dfas.iter().map(|d| dfa_min_bytes(d)).collect(),
            open_string: p
                .strings
                .iter()
                .map(|s| s.min_bytes_to_close(0, STRING_SEARCH_LIMIT).unwrap_or(FAR))
                .collect(),
        };
        // Knuth's generalisation of Dijkstra: every node's cost is a monotone function
        // of its inputs' costs, never below any input it uses (sums and minima of
        // non-negative costs), so a node popped at the least tentative cost is final,
        // and each node is settled once: O(nodes · log nodes) whatever the grammar.
        let (starts, users) = users_of(p);
        let mut heap = BinaryHeap::new();
        for i in 0..p.nodes.len() {
            let v = d.node_cost(p, i);
            if v < FAR {
                d.node[i] = v;
                heap.push(Reverse((v, i as u32)));
            }
        }
        while let Some(Reverse((v, i))) = heap.pop() {
            if v > d.node[i as usize] {
                continue;
            }
            let i = i as usize;
            for &u in &users[starts[i] as usize..starts[i + 1] as usize] {
                let nv = d.node_cost(p, u as usize);
                if nv < d.node[u as usize] {
                    d.node[u as usize] = nv;
                    heap.push(Reverse((nv, u)));
                }
            }
        }
        d
    }

    fn node_cost(&self, p: &Program, i: usize) -> u32 {
        let at = |pos: Pos| self.node[pos as usize];
        match &p.nodes[i] {
            Node::Byte { set, next } if !set.is_empty() => add(1, at(*next)),
            Node::Byte { .. } => FAR,
            Node::Split(targets) => targets.iter().map(|&t| at(t)).min().unwrap_or(FAR),
            Node::Call { entry, ret } => add(at(*entry), at(*ret)),
            Node::Return => 0,
            Node::Ws { next } => at(*next),
            Node::Regex { dfa, next } => add(self.dfa[*dfa as usize][0], at(*next)),
            Node::JsonStr { spec, next } => add(self.open_string[*spec as usize], at(*next)),
            Node::Unordered { u, phase, next } => add(self.unordered(p, *u, *phase, 0), at(*next)),
        }
    }

    /// Fewest bytes that finish unordered node `u` in `phase` having seen `seen`: the
    /// required members still missing, with separators between them (in phase 1 one
    /// before the first too); after a separator, at least one member.
    fn unordered(&self, p: &Program, u: u32, phase: u8, seen: u64) -> u32 {
        let up = &p.unordered[u as usize];
        let missing = up.required & !seen;
        let sep = self.node[up.separator as usize];
        let k = missing.count_ones();
        let members = (0..up.members.len())
            .filter(|i| missing >> i & 1 == 1)
            .fold(0, |a, i| add(a, self.node[up.members[i] as usize]));
        let seps = |n: u32| (0..n).fold(0, |a, _| add(a, sep));
        match (phase, k) {
            (0, 0) | (1, 0) => 0,
            (1, _) => add(members, seps(k)),
            (2, 0) => (0..up.members.len())
                .filter(|i| seen >> i & 1 == 0)
                .map(|i| self.node[up.members[i] as usize])
                .chain(up.additional.map(|a| self.node[a as usize]))
                .min()
                .unwrap_or(FAR),
            _ => add(members, seps(k - 1)),
        }
    }

    /// Fewest bytes from position `pos`, its terminal in state `aux`, to its rule's
    /// `Return`. Strings under way are searched through `strings`.
    pub(crate) fn from(&self, p: &Program, pos: Pos, aux: u64, strings: &mut StringMemo) -> u32 {
        let at = |pos: Pos| self.node[pos as usize];
        match &p.nodes[pos as usize] {
            Node::Ws { next } => at(*next),
            Node::Regex { dfa, next } => add(self.dfa[*dfa as usize][aux as usize], at(*next)),
            Node::JsonStr { spec, next } if aux != 0 => add(strings.get(p, *spec, aux), at(*next)),
            Node::Unordered { u, phase, next } => {
                add(self.unordered(p, *u, *phase, aux), at(*next))
            }
            _ => at(pos),
        }
    }
}

/// The positions whose cost a position's cost is an input of, as one flat list
/// (`users[starts[i]..starts[i + 1]]` for position `i`).
fn users_of(p: &Program) -> (Vec<u32>, Vec<u32>) {
    let inputs = |i: usize, out: &mut Vec<Pos>| match &p.nodes[i] {
        Node::Byte { next, .. }
        | Node::Ws { next }
        | Node::Regex { next, .. }
        | Node::JsonStr { next, .. } => out.push(*next),
        Node::Split(targets) => out.extend_from_slice(targets),
        Node::Call { entry, ret } => out.extend([*entry, *ret]),
        Node::Return => {}
        Node::Unordered { u, next, .. } => {
            let up = &p.unordered[*u as usize];
            out.push(*next);
            out.extend_from_slice(&up.members);
            out.push(up.separator);
            out.extend(up.additional);
        }
    };
    let n = p.nodes.len();
    let mut buf = Vec::new();
    let mut starts = vec![0u32; n + 1];
    for i in 0..n {
        buf.clear();
        inputs(i, &mut buf);
        for &j in &buf {
            starts[j as usize + 1] += 1;
        }
    }
    for i in 0..n {
        starts[i + 1] += starts[i];
    }
    let mut fill = starts.clone();
    let mut users = vec![0u32; starts[n] as usize];
    for i in 0..n {
        buf.clear();
        inputs(i, &mut buf);
        for &j in &buf {
            users[fill[j as usize] as usize] = i as u32;
            fill[j as usize] += 1;
        }
    }
    (starts, users)
}

/// Per-matcher memo of string distances by (spec, state).
#[derive(Default)]
pub(crate) struct StringMemo {
    map: FxHashMap<(u32, u64), u32>,
}

impl StringMemo {
    fn get(&mut self, p: &Program, spec: u32, aux: u64) -> u32 {
        if let Some(&d) = self.map.get(&(spec, aux)) {
            return d;
        }
        let d = p.strings[spec as usize]
            .min_bytes_to_close(aux, STRING_SEARCH_LIMIT)
            .unwrap_or(FAR);
        if self.map.len() >= STRING_MEMO_LIMIT {
            self.map.clear();
        }
        self.map.insert((spec, aux), d);
        d
    }
}

/// Fewest bytes from each DFA state to a match (breadth-first, backwards from the
/// accepting states).
fn dfa_min_bytes(d: &ByteDfa) -> Vec<u32> {
    let n = d.len();
    let mut rev: Vec<Vec<u32>> = vec![Vec::new(); n];
    for s in 0..n as u32 {
        for b in 0..=255u8 {
            if let Some(t) = d.next(s, b) {
                if rev[t as usize].last() != Some(&s) {
                    rev[t as usize].push(s);
                }
            }
        }
    }
    let mut dist = vec![FAR; n];
    let mut queue = std::collections::VecDeque::new();
    for (s, ds) in dist.iter_mut().enumerate() {
        if d.is_accepting(s as u32) {
            *ds = 0;
            queue.push_back(s as u32);
        }
    }
    while let Some(t) = queue.pop_front() {
        for &s in &rev[t as usize] {
            if dist[s as usize] == FAR {
                dist[s as usize] = dist[t as usize] + 1;
                queue.push_back(s);
            }
        }
    }
    dist
}
