//! Properties of rules that hold by least fixpoint ("can match the empty string", "can
//! finish"), solved in time linear in the grammar.
//!
//! A rule has the property when one of its alternatives has it for every symbol, and a
//! symbol's property is an and/or formula of constants and other rules' properties.
//! Re-checking every rule until nothing changes takes one pass per link of a chain of
//! rules (`r0 ::= "a" r1`, `r1 ::= "a" r2`, ...): quadratic, seconds for a generated
//! grammar of 14,000 rules. Here each formula node instead counts its children still
//! false and fires once when the count reaches zero (Horn-clause propagation).

use super::ir::{Grammar, RuleId, Symbol};

/// What a symbol's property depends on.
pub(crate) enum Shape<'g> {
    /// Known outright.
    Const(bool),
    /// The referenced rule's property.
    Rule(RuleId),
    /// That of one of these alternatives (each: all of its symbols).
    Any(&'g [Vec<Symbol>]),
    /// That of this symbol.
    Same(&'g Symbol),
    /// That of every symbol of every one of these sequences.
    All(Vec<&'g [Symbol]>),
}

/// No parent: a rule's own node.
const ROOT: u32 = u32::MAX;

struct Solver {
    /// Each node's parent, or [`ROOT`].
    parent: Vec<u32>,
    /// Children still to hold before the node holds (1 for an "any" node with children).
    pending: Vec<u32>,
    holds: Vec<bool>,
    /// For a rule's own node, the rule.
    rule_of: Vec<u32>,
    /// Per rule, the nodes that stand for its property inside formulas.
    uses: Vec<Vec<u32>>,
    /// Nodes found to hold, not yet propagated.
    ready: Vec<u32>,
}

/// Which rules of `g` have the property whose formulas `shape` gives.
pub(crate) fn least_fixpoint<'g>(
    g: &'g Grammar,
    shape: impl Fn(&'g Symbol) -> Shape<'g>,
) -> Vec<bool> {
    let rules = g.rules();
    let mut s = Solver {
        parent: Vec::new(),
        pending: Vec::new(),
        holds: Vec::new(),
        rule_of: Vec::new(),
        uses: vec![Vec::new(); rules.len()],
        ready: Vec::new(),
    };
    let mut roots = Vec::with_capacity(rules.len());
    for (i, r) in rules.iter().enumerate() {
        let root = s.any(ROOT, &r.alts, &shape);
        s.rule_of[root as usize] = i as u32;
        roots.push(root);
    }
    s.propagate();
    roots.iter().map(|&n| s.holds[n as usize]).collect()
}

impl Solver {
    /// A node under `parent` that holds once `pending` of its children do.
    fn push(&mut self, parent: u32, pending: u32) -> u32 {
        let id = self.parent.len() as u32;
        self.parent.push(parent);
        self.pending.push(pending);
        self.holds.push(false);
        self.rule_of.push(u32::MAX);
        id
    }

    /// Counts a child of an "all" node (an "any" node's single pending is fixed).
    fn child_of_all(&mut self, parent: u32) {
        self.pending[parent as usize] += 1;
    }

    /// Marks `n` ready if nothing is pending.
    fn settle(&mut self, n: u32) {
        if self.pending[n as usize] == 0 {
            self.ready.push(n);
        }
    }

    fn any<'g>(
        &mut self,
        parent: u32,
        alts: &'g [Vec<Symbol>],
        shape: &impl Fn(&'g Symbol) -> Shape<'g>,
    ) -> u32 {
        // With no alternative, never.
        let n = self.push(parent, 1);
        for alt in alts {
            self.all(n, &[alt.as_slice()], shape);
        }
        n
    }

    fn all<'g>(
        &mut self,
        parent: u32,
        seqs: &[&'g [Symbol]],
        shape: &impl Fn(&'g Symbol) -> Shape<'g>,
    ) -> u32 {
        let n = self.push(parent, 0);
        for sym in seqs.iter().copied().flatten() {
            self.child_of_all(n);
            self.symbol(n, sym, shape);
        }
        self.settle(n);
        n
    }

    fn symbol<'g>(
        &mut self,
        parent: u32,
        sym: &'g Symbol,
        shape: &impl Fn(&'g Symbol) -> Shape<'g>,
    ) {
        match shape(sym) {
            Shape::Const(holds) => {
                let n = self.push(parent, u32::from(!holds));
                self.settle(n);
            }
            Shape::Rule(r) => {
                let n = self.push(parent, 1);
                self.uses[r.0 as usize].push(n);
            }
            Shape::Any(alts) => {
                self.any(parent, alts, shape);
            }
            Shape::Same(inner) => {
                let n = self.push(parent, 1);
                self.symbol(n, inner, shape);
            }
            Shape::All(seqs) => {
                self.all(parent, &seqs, shape);
            }
        }
    }

    /// Fires every ready node, each once, and whatever that makes ready.
    fn propagate(&mut self) {
        while let Some(n) = self.ready.pop() {
            let n = n as usize;
            if self.holds[n] {
                continue;
            }
            self.holds[n] = true;
            let p = self.parent[n];
            if p == ROOT {
                let rule = self.rule_of[n] as usize;
                for &u in &self.uses[rule] {
                    self.pending[u as usize] = 0;
                    self.ready.push(u);
                }
            } else if self.pending[p as usize] > 0 {
                self.pending[p as usize] -= 1;
                self.settle(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::builder::{nullable_rules, productive_rules, seq_nullable};
    use crate::grammar::{Grammar, GrammarBuilder, Rule};

    /// The former algorithm: re-check every rule until nothing changes.
    fn nullable_by_passes(g: &Grammar) -> Vec<bool> {
        let mut nullable = vec![false; g.rules().len()];
        loop {
            let mut changed = false;
            for (i, r) in g.rules().iter().enumerate() {
                if !nullable[i] && r.alts.iter().any(|a| seq_nullable(a, &nullable)) {
                    nullable[i] = true;
                    changed = true;
                }
            }
            if !changed {
                return nullable;
            }
        }
    }

    /// The former "can finish" algorithm, likewise.
    fn productive_by_passes(g: &Grammar) -> Vec<bool> {
        fn seq(v: &[Symbol], p: &[bool]) -> bool {
            v.iter().all(|s| sym(s, p))
        }
        fn sym(s: &Symbol, p: &[bool]) -> bool {
            match s {
                Symbol::Rule(r) => p[r.0 as usize],
                Symbol::Group(alts) => alts.iter().any(|a| seq(a, p)),
                Symbol::Repeat { inner, min, .. } => *min == 0 || sym(inner, p),
                _ => true,
            }
        }
        let mut productive = vec![false; g.rules().len()];
        loop {
            let mut changed = false;
            for (i, r) in g.rules().iter().enumerate() {
                if !productive[i] && r.alts.iter().any(|a| seq(a, &productive)) {
                    productive[i] = true;
                    changed = true;
                }
            }
            if !changed {
                return productive;
            }
        }
    }

    /// Rules of random literals, references, groups and repetitions (not validated: a
    /// fixpoint does not need a valid grammar).
    fn random_grammar(seed: u64) -> Grammar {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let n = 1 + next(12) as usize;
        fn symbol(next: &mut impl FnMut(u64) -> u64, n: usize, depth: u32) -> Symbol {
            match next(if depth > 2 { 3 } else { 5 }) {
                0 => Symbol::lit(if next(2) == 0 { "" } else { "a" }),
                1 | 2 => Symbol::rule(RuleId(next(n as u64) as u32)),
                3 => Symbol::Group(
                    (0..next(3))
                        .map(|_| (0..next(3)).map(|_| symbol(next, n, depth + 1)).collect())
                        .collect(),
                ),
                _ => Symbol::repeat(symbol(next, n, depth + 1), next(2) as u32, None),
            }
        }
        let rules = (0..n)
            .map(|i| Rule {
                name: format!("r{i}"),
                alts: (0..next(3))
                    .map(|_| (0..next(4)).map(|_| symbol(&mut next, n, 0)).collect())
                    .collect(),
                origin: None,
            })
            .collect();
        Grammar {
            rules,
            root: RuleId(0),
            ws_budget: 0,
        }
    }

    #[test]
    fn agrees_with_repeated_passes_on_random_grammars() {
        let (mut nullable, mut stuck, mut rules) = (0, 0, 0);
        for seed in 0..2000 {
            let g = random_grammar(seed);
            let want = nullable_by_passes(&g);
            assert_eq!(nullable_rules(&g), want, "seed {seed}: {g:?}");
            let finish = productive_by_passes(&g);
            assert_eq!(productive_rules(&g), finish, "seed {seed}: {g:?}");
            nullable += want.iter().filter(|&&n| n).count();
            stuck += finish.iter().filter(|&&p| !p).count();
            rules += want.len();
        }
        // Both outcomes of both properties are exercised.
        assert!(
            nullable > rules / 10 && nullable < rules * 9 / 10,
            "{nullable} of {rules}"
        );
        assert!(
            stuck > rules / 10 && stuck < rules * 9 / 10,
            "{stuck} of {rules}"
        );
    }

    #[test]
    fn a_long_chain_is_nullable_through_every_link() {
        // r0 ::= r1 "b"?, ..., r(n-1) ::= "": every rule is nullable, but only
        // through all the rules after it.
        let n = 5000;
        let mut b = GrammarBuilder::new();
        let ids: Vec<RuleId> = (0..n).map(|i| b.declare(&format!("r{i}"))).collect();
        for i in 0..n {
            let alts = if i + 1 == n {
                vec![vec![Symbol::lit("")]]
            } else {
                vec![vec![
                    Symbol::rule(ids[i + 1]),
                    Symbol::opt(Symbol::lit("b")),
                ]]
            };
            b.define(ids[i], alts);
        }
        let g = b.build(ids[0]).unwrap();
        assert!(nullable_rules(&g).iter().all(|&x| x));
    }
}
