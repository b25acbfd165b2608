//! An independent recogniser for IR grammars without the JSON node kinds: memoised
//! set-of-end-positions recursive descent (no automaton, no stacks), used as the oracle
//! for GBNF walks.

use llamay_constrain::{Grammar, Symbol};
use std::collections::{BTreeSet, HashMap};

pub fn recognises(g: &Grammar, input: &[u8]) -> bool {
    let g = g.clone();
    let input = input.to_vec();
    // Deep right recursion recurses once per repetition: give it room.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let mut r = Rec {
                g: &g,
                s: &input,
                memo: HashMap::new(),
            };
            r.rule(g.root().0, 0).contains(&input.len())
        })
        .unwrap()
        .join()
        .unwrap()
}

struct Rec<'a> {
    g: &'a Grammar,
    s: &'a [u8],
    memo: HashMap<(u32, usize), BTreeSet<usize>>,
}

impl Rec<'_> {
    fn rule(&mut self, r: u32, p: usize) -> BTreeSet<usize> {
        if let Some(v) = self.memo.get(&(r, p)) {
            return v.clone();
        }
        let g = self.g;
        let mut out = BTreeSet::new();
        for alt in &g.rules()[r as usize].alts {
            out.extend(self.seq(alt, p));
        }
        self.memo.insert((r, p), out.clone());
        out
    }

    fn seq(&mut self, syms: &[Symbol], p: usize) -> BTreeSet<usize> {
        let mut cur = BTreeSet::from([p]);
        for s in syms {
            let mut next = BTreeSet::new();
            for &q in &cur {
                next.extend(self.sym(s, q));
            }
            cur = next;
            if cur.is_empty() {
                break;
            }
        }
        cur
    }

    fn sym(&mut self, s: &Symbol, p: usize) -> BTreeSet<usize> {
        let rest = &self.s[p..];
        match s {
            Symbol::Literal(l) => rest
                .starts_with(l)
                .then_some(p + l.len())
                .into_iter()
                .collect(),
            Symbol::Bytes(set) => rest
                .first()
                .filter(|&&b| set.contains(b))
                .map(|_| p + 1)
                .into_iter()
                .collect(),
            Symbol::Class(c) => {
                let n = match rest.first() {
                    Some(0..=0x7F) => 1,
                    Some(0xC0..=0xDF) => 2,
                    Some(0xE0..=0xEF) => 3,
                    Some(0xF0..=0xF7) => 4,
                    _ => return BTreeSet::new(),
                };
                match rest.get(..n).and_then(|b| std::str::from_utf8(b).ok()) {
                    Some(ch) if c.contains(ch.chars().next().unwrap() as u32) => {
                        BTreeSet::from([p + n])
                    }
                    _ => BTreeSet::new(),
                }
            }
            Symbol::Rule(r) => self.rule(r.0, p),
            Symbol::Group(alts) => {
                let mut out = BTreeSet::new();
                for a in alts {
                    out.extend(self.seq(a, p));
                }
                out
            }
            Symbol::Repeat { inner, min, max } => {
                let mut out = BTreeSet::new();
                if *min == 0 {
                    out.insert(p);
                }
                let mut frontier = BTreeSet::from([p]);
                let mut k = 0;
                loop {
                    k += 1;
                    if max.is_some_and(|m| k > m) {
                        break;
                    }
                    let mut next = BTreeSet::new();
                    for &q in &frontier {
                        next.extend(self.sym(inner, q));
                    }
                    if next.is_empty() {
                        break;
                    }
                    if k >= *min {
                        if max.is_none() && next.is_subset(&out) {
                            break;
                        }
                        out.extend(next.iter().copied());
                    }
                    frontier = next;
                }
                out
            }
            other => panic!("recogniser does not handle {other:?}"),
        }
    }
}
