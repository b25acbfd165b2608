//! Lowering the IR to a flat program of positions ("nodes") the automaton walks.
//!
//! Every rule becomes a small NFA whose edges consume one byte, jump (split), call a rule
//! (pushing a return position), or return; terminals with internal state (regex DFAs,
//! JSON strings, whitespace, unordered members) are single nodes whose state lives in the
//! parse item's `aux` word. Lowering is continuation-passing (`lower(sym, next)`), so a
//! call in tail position returns straight into its caller's `Return` and the automaton can
//! skip pushing a frame: right recursion (`ws ::= [ ] ws | ""`) runs in constant stack.

use crate::error::{Error, Result};
use crate::grammar::{ByteDfa, ByteSet, Grammar, JsonString, Symbol, Unordered};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// A position in the program.
pub(crate) type Pos = u32;

/// Most nodes a grammar may lower to (bounded repetitions are unrolled); about 40 MB.
const MAX_NODES: usize = 1 << 20;

/// An upper bound on the nodes `s` lowers to, saturating (checked before lowering, so a
/// hostile `x{4096}{4096}` is refused without being built).
fn estimate(s: &Symbol) -> u64 {
    let seq = |v: &[Symbol]| v.iter().fold(0u64, |a, s| a.saturating_add(estimate(s)));
    match s {
        Symbol::Literal(b) => b.len() as u64,
        Symbol::Class(c) => 4 * c.ranges().len() as u64 * 8 + 1,
        Symbol::Group(alts) => alts.iter().fold(1u64, |a, alt| a.saturating_add(seq(alt))),
        Symbol::Repeat { inner, min, max } => {
            let copies = u64::from(max.unwrap_or(*min).max(*min)) + 1;
            estimate(inner).saturating_add(1).saturating_mul(copies)
        }
        Symbol::Unordered(u) => {
            let members = u.members.iter().fold(0u64, |a, m| {
                a.saturating_add(m.key.len() as u64 + seq(&m.value) + 1)
            });
            members
                .saturating_add(seq(&u.separator))
                .saturating_add(u.additional.as_deref().map_or(0, seq))
                + 4
        }
        _ => 1,
    }
}

/// One node of the program.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// Consume one byte from `set`, go to `next`.
    Byte { set: ByteSet, next: Pos },
    /// Go to any of these without consuming.
    Split(Box<[Pos]>),
    /// Push `ret` and enter the rule at `entry`.
    Call { entry: Pos, ret: Pos },
    /// Pop a frame (or accept, on an empty stack).
    Return,
    /// Budgeted whitespace: consume `[ \t\n\r]` and stay, or go to `next`.
    Ws { next: Pos },
    /// A regex terminal; `aux` is the DFA state.
    Regex { dfa: u32, next: Pos },
    /// A JSON string terminal; `aux` is the packed string state.
    JsonStr { spec: u32, next: Pos },
    /// An unordered-members node in phase 0 (start), 1 (after a member) or 2 (after a
    /// separator); `aux` is the "seen" bitset. The three phases are consecutive nodes.
    Unordered { u: u32, phase: u8, next: Pos },
}

/// Compiled form of an [`Unordered`] node.
#[derive(Clone, Debug)]
pub(crate) struct UnorderedProg {
    /// Entry of each member's "rule" (key + value, ending in a `Return`).
    pub members: Vec<Pos>,
    /// Bits of required members.
    pub required: u64,
    /// Entry of the separator "rule".
    pub separator: Pos,
    /// Entry of the additional-member "rule".
    pub additional: Option<Pos>,
    /// Position of phase 0; phases 1 and 2 follow.
    pub base: Pos,
}

/// The lowered grammar.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub nodes: Vec<Node>,
    pub root: Pos,
    pub dfas: Vec<Arc<ByteDfa>>,
    pub strings: Vec<super::jsonstr::StringProg>,
    pub unordered: Vec<UnorderedProg>,
    /// The spec of each entry of `strings`, to share one entry between equal specs.
    string_specs: Vec<Arc<JsonString>>,
    /// Entries of `string_specs` by a digest of the spec, so finding an equal one is
    /// not a scan of them all (a schema may hold tens of thousands of strings). Kept
    /// while lowering only.
    string_index: FxHashMap<StringDigest, Vec<u32>>,
    pub ws_budget: u32,
    pub uses_ws: bool,
}

/// What a string spec is looked up by: everything but the pattern's automaton, for
/// which its source stands (equal digests are then compared in full).
type StringDigest = (
    u32,
    Option<u32>,
    Vec<Vec<u8>>,
    Option<String>,
    Option<usize>,
    bool,
);

fn digest(spec: &JsonString) -> StringDigest {
    (
        spec.min_chars,
        spec.max_chars,
        spec.exclude.clone(),
        spec.pattern.as_ref().map(|d| d.pattern().to_string()),
        // A quote's source stands by its length (equal digests are compared in full).
        spec.quote.as_ref().map(|q| q.text().len()),
        spec.object_key,
    )
}

fn too_large() -> Error {
    Error::grammar(format!(
        "the grammar is too large once repetitions are expanded (over {MAX_NODES} states)"
    ))
}

impl Program {
    /// The byte a one-byte node takes (a literal's: a key's, an enum's value's) and the
    /// position after it; `None` for any other node or position.
    #[inline]
    pub(crate) fn one_byte(&self, pos: Pos) -> Option<(u8, Pos)> {
        match self.nodes.get(pos as usize)? {
            Node::Byte { set, next } => Some((set.single()?, *next)),
            _ => None,
        }
    }

    /// Heap bytes of the program: nodes, split targets, DFAs, string and unordered
    /// tables (each shared DFA once, through `seen`).
    pub(crate) fn heap_bytes(&self, seen: &mut crate::heap::Seen) -> usize {
        use super::jsonstr::dfa_bytes;
        use crate::heap::{slice, vec};
        let splits: usize = self
            .nodes
            .iter()
            .map(|n| match n {
                Node::Split(targets) => slice(targets),
                _ => 0,
            })
            .sum();
        let dfas: usize = self.dfas.iter().map(|d| dfa_bytes(d, seen)).sum();
        let strings: usize = self.strings.iter().map(|s| s.heap_bytes(seen)).sum();
        let unordered: usize = self.unordered.iter().map(|u| vec(&u.members)).sum();
        let mut specs = 0;
        for s in &self.string_specs {
            if seen.first(Arc::as_ptr(s)) {
                let excluded = vec(&s.exclude) + s.exclude.iter().map(vec).sum::<usize>();
                let pattern = s.pattern.as_ref().map_or(0, |d| dfa_bytes(d, seen));
                specs += std::mem::size_of::<JsonString>() + excluded + pattern;
            }
        }
        vec(&self.nodes)
            + splits
            + vec(&self.dfas)
            + dfas
            + vec(&self.strings)
            + strings
            + vec(&self.unordered)
            + unordered
            + vec(&self.string_specs)
            + specs
    }

    /// Lowers a validated grammar.
    pub(crate) fn compile(g: &Grammar) -> Result<Program> {
        let mut p = Program {
            nodes: Vec::new(),
            root: 0,
            dfas: Vec::new(),
            strings: Vec::new(),
            unordered: Vec::new(),
            string_specs: Vec::new(),
            string_index: FxHashMap::default(),
            ws_budget: g.ws_budget(),
            uses_ws: g.uses_ws(),
        };
        let size = g
            .rules()
            .iter()
            .flat_map(|r| r.alts.iter().flatten())
            .fold(0u64, |a, s| a.saturating_add(estimate(s)));
        if size > MAX_NODES as u64 {
            return Err(too_large());
        }
        // Entries first (placeholders), so recursive references can point at them.
        let entries: Vec<Pos> = g
            .rules()
            .iter()
            .map(|_| p.push(Node::Split(Box::new([]))))
            .collect::<Result<_>>()?;
        for (rule, &entry) in g.rules().iter().zip(&entries) {
            let ret = p.push(Node::Return)?;
            let alts = rule
                .alts
                .iter()
                .map(|a| p.lower_seq(a, ret, &entries))
                .collect::<Result<Vec<_>>>()?;
            p.nodes[entry as usize] = Node::Split(alts.into());
        }
        p.root = entries[g.root().0 as usize];
        // Only lowering looks strings up.
        p.string_index = FxHashMap::default();
        Ok(p)
    }

    fn push(&mut self, n: Node) -> Result<Pos> {
        if self.nodes.len() >= MAX_NODES {
            return Err(too_large());
        }
        self.nodes.push(n);
        Ok((self.nodes.len() - 1) as Pos)
    }

    fn lower_seq(&mut self, seq: &[Symbol], next: Pos, entries: &[Pos]) -> Result<Pos> {
        let mut k = next;
        for s in seq.iter().rev() {
            k = self.lower(s, k, entries)?;
        }
        Ok(k)
    }

    fn byte_chain(
        &mut self,
        ranges: impl DoubleEndedIterator<Item = ByteSet>,
        next: Pos,
    ) -> Result<Pos> {
        let mut k = next;
        for set in ranges.rev() {
            k = self.push(Node::Byte { set, next: k })?;
        }
        Ok(k)
    }

    fn split(&mut self, mut targets: Vec<Pos>) -> Result<Pos> {
        if targets.len() == 1 {
            return Ok(targets.pop().unwrap());
        }
        self.push(Node::Split(targets.into()))
    }

    fn lower(&mut self, s: &Symbol, next: Pos, entries: &[Pos]) -> Result<Pos> {
        match s {
            Symbol::Literal(bytes) => {
                self.byte_chain(bytes.iter().map(|&b| ByteSet::of(&[b])), next)
            }
            Symbol::Bytes(set) => self.push(Node::Byte { set: *set, next }),
            Symbol::Class(c) => {
                let seqs = c.utf8_sequences();
                let heads = seqs
                    .into_iter()
                    .map(|seq| {
                        self.byte_chain(
                            seq.into_iter().map(|(lo, hi)| ByteSet::range(lo, hi)),
                            next,
                        )
                    })
                    .collect::<Result<Vec<_>>>()?;
                self.split(heads)
            }
            Symbol::Rule(r) => self.push(Node::Call {
                entry: entries[r.0 as usize],
                ret: next,
            }),
            Symbol::Group(alts) => {
                let heads = alts
                    .iter()
                    .map(|a| self.lower_seq(a, next, entries))
                    .collect::<Result<Vec<_>>>()?;
                self.split(heads)
            }
            Symbol::Repeat { inner, min, max } => {
                let mut k = match max {
                    None => {
                        let lp = self.push(Node::Split(Box::new([])))?;
                        let body = self.lower(inner, lp, entries)?;
                        self.nodes[lp as usize] = Node::Split(Box::new([body, next]));
                        lp
                    }
                    Some(max) => {
                        let mut k = next;
                        for _ in *min..*max {
                            let body = self.lower(inner, k, entries)?;
                            k = self.push(Node::Split(Box::new([body, next])))?;
                        }
                        k
                    }
                };
                for _ in 0..*min {
                    k = self.lower(inner, k, entries)?;
                }
                Ok(k)
            }
            Symbol::Unordered(u) => self.lower_unordered(u, next, entries),
            Symbol::Ws => self.push(Node::Ws { next }),
            Symbol::Regex(d) => {
                self.dfas.push(d.clone());
                self.push(Node::Regex {
                    dfa: (self.dfas.len() - 1) as u32,
                    next,
                })
            }
            Symbol::JsonString(spec) => self.lower_string(spec, next),
        }
    }

    fn lower_string(&mut self, spec: &Arc<JsonString>, next: Pos) -> Result<Pos> {
        // Equal specs share an entry, so they share stack-free masks too.
        let same = self.string_index.entry(digest(spec)).or_default();
        let specs = &self.string_specs;
        let id = match same.iter().find(|&&i| {
            let s = &specs[i as usize];
            Arc::ptr_eq(s, spec) || **s == **spec
        }) {
            Some(&i) => i as usize,
            None => {
                same.push(self.strings.len() as u32);
                self.strings.push(super::jsonstr::StringProg::new(spec));
                self.string_specs.push(spec.clone());
                self.strings.len() - 1
            }
        };
        self.push(Node::JsonStr {
            spec: id as u32,
            next,
        })
    }

    fn lower_unordered(&mut self, u: &Unordered, next: Pos, entries: &[Pos]) -> Result<Pos> {
        let sub = |p: &mut Self, seq: &[Symbol], key: &[u8]| -> Result<Pos> {
            let ret = p.push(Node::Return)?;
            let body = p.lower_seq(seq, ret, entries)?;
            p.byte_chain(key.iter().map(|&b| ByteSet::of(&[b])), body)
        };
        let members = u
            .members
            .iter()
            .map(|m| sub(self, &m.value, &m.key))
            .collect::<Result<Vec<_>>>()?;
        let separator = sub(self, &u.separator, &[])?;
        let additional = u
            .additional
            .as_ref()
            .map(|a| sub(self, a, &[]))
            .transpose()?;
        let required = u
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.required)
            .fold(0u64, |acc, (i, _)| acc | 1 << i);
        let id = self.unordered.len() as u32;
        let base = self.push(Node::Unordered {
            u: id,
            phase: 0,
            next,
        })?;
        self.push(Node::Unordered {
            u: id,
            phase: 1,
            next,
        })?;
        self.push(Node::Unordered {
            u: id,
            phase: 2,
            next,
        })?;
        self.unordered.push(UnorderedProg {
            members,
            required,
            separator,
            additional,
            base,
        });
        Ok(base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::GrammarBuilder;

    #[test]
    fn equal_string_specs_share_one_entry() {
        // 3,000 strings of 30 distinct specs (bounds, exclusions, patterns), each spec
        // built afresh (so equal by value, not by pointer).
        let spec = |i: usize| {
            let mut s = JsonString::excluding([format!("k{}", i % 3).as_bytes()]);
            s.min_chars = (i % 5) as u32;
            if i.is_multiple_of(2) {
                s.pattern = Some(Arc::new(ByteDfa::new("[a-c]+").unwrap()));
            }
            Symbol::json_string(s)
        };
        let mut b = GrammarBuilder::new();
        let alts = (0..3000).map(|i| vec![spec(i % 30)]).collect();
        let root = b.rule("root", alts);
        let p = Program::compile(&b.build(root).unwrap()).unwrap();
        assert_eq!((p.strings.len(), p.string_specs.len()), (30, 30));
        assert!(p.string_index.is_empty());
    }
}
