//! Putting a finished [`Grammar`] inside another: a caller that builds a larger
//! language around one it was handed (tool calls beside a response schema) imports
//! it rather than rebuilding it from its source, which it may no longer have.

use super::builder::GrammarBuilder;
use super::ir::*;
use std::sync::Arc;

impl GrammarBuilder {
    /// Adds every rule of `g` (renamed where a name is taken) and returns the rule
    /// that stands for its root. The builder's whitespace budget becomes at least
    /// `g`'s, so the imported language keeps all of its documents.
    pub fn import(&mut self, g: &Grammar) -> RuleId {
        let ids: Vec<RuleId> = g.rules().iter().map(|r| self.declare(&r.name)).collect();
        for (rule, &id) in g.rules().iter().zip(&ids) {
            let alts = rule.alts.iter().map(|alt| remap_seq(alt, &ids)).collect();
            self.define(id, alts);
            if let Some((line, col)) = rule.origin {
                self.set_origin(id, line, col);
            }
        }
        let budget = self
            .ws_budget
            .unwrap_or(DEFAULT_WS_BUDGET)
            .max(g.ws_budget());
        self.set_ws_budget(budget);
        ids[g.root().0 as usize]
    }
}

fn remap_seq(seq: &[Symbol], ids: &[RuleId]) -> Vec<Symbol> {
    seq.iter().map(|s| remap(s, ids)).collect()
}

fn remap(s: &Symbol, ids: &[RuleId]) -> Symbol {
    match s {
        Symbol::Rule(r) => Symbol::Rule(ids[r.0 as usize]),
        Symbol::Group(alts) => Symbol::Group(alts.iter().map(|a| remap_seq(a, ids)).collect()),
        Symbol::Repeat { inner, min, max } => Symbol::Repeat {
            inner: Box::new(remap(inner, ids)),
            min: *min,
            max: *max,
        },
        Symbol::Unordered(u) => Symbol::Unordered(Arc::new(Unordered {
            members: u
                .members
                .iter()
                .map(|m| Member {
                    key: m.key.clone(),
                    value: remap_seq(&m.value, ids),
                    required: m.required,
                })
                .collect(),
            separator: remap_seq(&u.separator, ids),
            additional: u.additional.as_ref().map(|a| remap_seq(a, ids)),
        })),
        Symbol::Literal(_)
        | Symbol::Bytes(_)
        | Symbol::Class(_)
        | Symbol::Ws
        | Symbol::Regex(_)
        | Symbol::JsonString(_) => s.clone(),
    }
}

#[cfg(test)]
mod tests {
    use crate::grammar::{Grammar, GrammarBuilder, Symbol};
    use crate::{Constraint, Vocabulary};
    use std::sync::Arc;

    fn accepts(g: &Grammar, text: &str) -> bool {
        let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let c = Constraint::from_grammar(g, Arc::new(Vocabulary::new(toks, &[], &[]))).unwrap();
        let mut m = c.matcher();
        m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting()
    }

    #[test]
    fn an_imported_grammar_keeps_its_language_beside_new_rules() {
        let json = Grammar::any_json().unwrap();
        let mut b = GrammarBuilder::new();
        // A name the import also uses, so renaming is exercised.
        let first = json.rules()[0].name.clone();
        let taken = b.rule(&first, vec![vec![Symbol::lit("call!")]]);
        let inner = b.import(&json);
        let root = b.rule(
            "root",
            vec![vec![Symbol::rule(taken)], vec![Symbol::rule(inner)]],
        );
        let g = b.build(root).unwrap();
        for ok in ["call!", "{\"a\": [1, 2.5, null]}", "\"x\"", "true"] {
            assert!(accepts(&g, ok), "{ok}");
        }
        for bad in ["call", "{\"a\": }", "call!{}", "nul"] {
            assert!(!accepts(&g, bad), "{bad}");
        }
    }
}
