//! [`GrammarBuilder`]: assembles rules and validates them into a [`Grammar`].

use super::display::render_seq;
use super::fixpoint::{least_fixpoint, Shape};
use super::ir::*;
use crate::error::{Error, Result};
use rustc_hash::{FxHashMap, FxHashSet};

/// Most nodes the exclusion trie of a [`JsonString`] may need, and most DFA states a
/// pattern inside a JSON string may have (both live in a 12-bit field of a parse item).
pub(crate) const MAX_JSON_STRING_AUX: usize = 4095;

/// Assembles a grammar rule by rule.
///
/// ```
/// use llamay_constrain::{CharClass, GrammarBuilder, Symbol};
/// let mut b = GrammarBuilder::new();
/// let digits = b.rule("digits", vec![vec![Symbol::plus(Symbol::class(CharClass::new([(0x30, 0x39)])))]]);
/// let root = b.rule("root", vec![vec![Symbol::lit("n="), Symbol::rule(digits)]]);
/// let g = b.build(root).unwrap();
/// assert_eq!(g.rules().len(), 2);
/// ```
#[derive(Clone, Debug, Default)]
pub struct GrammarBuilder {
    rules: Vec<Rule>,
    names: FxHashMap<String, RuleId>,
    pub(super) ws_budget: Option<u32>,
}

impl GrammarBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates an undefined rule (for forward references and recursion); define it later
    /// with [`define`](Self::define). A taken name gets a numeric suffix.
    pub fn declare(&mut self, name: &str) -> RuleId {
        let name = self.fresh_name(name);
        let id = RuleId(self.rules.len() as u32);
        self.names.insert(name.clone(), id);
        self.rules.push(Rule {
            name,
            alts: Vec::new(),
            origin: None,
        });
        id
    }

    /// Sets the alternatives of a declared rule (replacing any previous definition).
    pub fn define(&mut self, id: RuleId, alts: Vec<Vec<Symbol>>) {
        self.rules[id.0 as usize].alts = alts;
    }

    /// Declares and defines a rule in one go.
    pub fn rule(&mut self, name: &str, alts: Vec<Vec<Symbol>>) -> RuleId {
        let id = self.declare(name);
        self.define(id, alts);
        id
    }

    /// Records where a rule was defined in source text (1-based line, column).
    pub fn set_origin(&mut self, id: RuleId, line: u32, col: u32) {
        self.rules[id.0 as usize].origin = Some((line, col));
    }

    /// The rule with exactly this name, if any.
    pub fn lookup(&self, name: &str) -> Option<RuleId> {
        self.names.get(name).copied()
    }

    /// Whether a declared rule has been defined.
    pub fn is_defined(&self, id: RuleId) -> bool {
        !self.rules[id.0 as usize].alts.is_empty()
    }

    /// The name of a rule.
    pub fn name(&self, id: RuleId) -> &str {
        &self.rules[id.0 as usize].name
    }

    /// Sets the per-document whitespace budget (default 64).
    pub fn set_ws_budget(&mut self, budget: u32) {
        self.ws_budget = Some(budget);
    }

    fn fresh_name(&self, base: &str) -> String {
        if !self.names.contains_key(base) {
            return base.to_string();
        }
        (2..)
            .map(|i| format!("{base}-{i}"))
            .find(|n| !self.names.contains_key(n))
            .unwrap()
    }

    /// Validates and returns the grammar starting at `root`.
    ///
    /// Refused: an undefined rule, a repetition bound above 4096 or `min > max`, a bad
    /// [`Unordered`] (more than 64 members, empty or duplicate keys), a [`JsonString`]
    /// with out-of-range bounds, and left recursion (direct or through other rules and
    /// nullable prefixes), which would never stop expanding.
    pub fn build(self, root: RuleId) -> Result<Grammar> {
        let g = Grammar {
            rules: self.rules,
            root,
            ws_budget: self.ws_budget.unwrap_or(DEFAULT_WS_BUDGET),
        };
        if root.0 as usize >= g.rules.len() {
            return Err(Error::grammar("the start rule does not exist"));
        }
        for rule in &g.rules {
            if rule.alts.is_empty() {
                return Err(err_at(
                    rule,
                    format!("rule `{}` is referenced but never defined", rule.name),
                ));
            }
            for s in rule.alts.iter().flatten() {
                check_symbol(&g, rule, s)?;
            }
        }
        check_left_recursion(&g)?;
        check_productive(&g)?;
        Ok(g)
    }
}

fn err_at(rule: &Rule, msg: String) -> Error {
    Error::Grammar {
        msg,
        at: rule.origin,
    }
}

fn check_symbol(g: &Grammar, rule: &Rule, s: &Symbol) -> Result<()> {
    let e = |msg: String| Err(err_at(rule, format!("in rule `{}`: {msg}", rule.name)));
    match s {
        Symbol::Rule(r) if r.0 as usize >= g.rules.len() => {
            return e(format!("reference to unknown rule #{}", r.0))
        }
        Symbol::Class(c) if c.is_empty() => {
            return e("a character class matches no character".into())
        }
        Symbol::Bytes(b) if b.is_empty() => return e("a byte set matches no byte".into()),
        Symbol::Group(alts) => {
            if alts.is_empty() {
                return e("an empty alternation matches nothing".into());
            }
            for s in alts.iter().flatten() {
                check_symbol(g, rule, s)?;
            }
        }
        Symbol::Repeat { inner, min, max } => {
            let top = max.unwrap_or(*min);
            if top > MAX_REPEAT || *min > MAX_REPEAT {
                return e(format!(
                    "repetition bound {top} is above the limit of {MAX_REPEAT}"
                ));
            }
            if max.is_some_and(|m| m < *min) {
                return e(format!(
                    "repetition {{{min},{}}} has min above max",
                    max.unwrap()
                ));
            }
            check_symbol(g, rule, inner)?;
        }
        Symbol::Unordered(u) => {
            if u.members.len() > MAX_UNORDERED_MEMBERS {
                return e(format!(
                    "{} members, above the limit of {MAX_UNORDERED_MEMBERS}",
                    u.members.len()
                ));
            }
            let mut keys = FxHashSet::default();
            for m in &u.members {
                if m.key.is_empty() || !keys.insert(&m.key) {
                    return e(format!(
                        "member key {:?} is empty or repeated",
                        String::from_utf8_lossy(&m.key)
                    ));
                }
                for s in &m.value {
                    check_symbol(g, rule, s)?;
                }
            }
            for s in u.separator.iter().chain(u.additional.iter().flatten()) {
                check_symbol(g, rule, s)?;
            }
        }
        Symbol::JsonString(j) => {
            if j.max_chars
                .is_some_and(|m| m > MAX_REPEAT || m < j.min_chars)
                || j.min_chars > MAX_REPEAT
            {
                return e(format!(
                    "string length bounds {}..{:?} are out of range (max {MAX_REPEAT})",
                    j.min_chars, j.max_chars
                ));
            }
            if j.pattern
                .as_ref()
                .is_some_and(|d| d.len() > MAX_JSON_STRING_AUX)
            {
                return e("string pattern DFA has too many states".into());
            }
            if j.quote.is_some() && (j.pattern.is_some() || !j.exclude.is_empty()) {
                return e("a quoted string cannot also have a pattern or excluded values".into());
            }
            let trie_nodes: usize = j.exclude.iter().map(|v| v.len()).sum();
            if trie_nodes >= MAX_JSON_STRING_AUX {
                return e("too many excluded string values".into());
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether each rule can match the empty string (least fixpoint).
pub(crate) fn nullable_rules(g: &Grammar) -> Vec<bool> {
    least_fixpoint(g, |s| match s {
        Symbol::Literal(b) => Shape::Const(b.is_empty()),
        Symbol::Bytes(_) | Symbol::Class(_) | Symbol::JsonString(_) => Shape::Const(false),
        Symbol::Rule(r) => Shape::Rule(*r),
        Symbol::Group(alts) => Shape::Any(alts),
        Symbol::Repeat { min: 0, .. } => Shape::Const(true),
        Symbol::Repeat { inner, .. } => Shape::Same(inner),
        Symbol::Unordered(u) => Shape::Const(!u.members.iter().any(|m| m.required)),
        Symbol::Ws => Shape::Const(true),
        Symbol::Regex(d) => Shape::Const(d.is_accepting(d.start())),
    })
}

pub(crate) fn seq_nullable(seq: &[Symbol], nullable: &[bool]) -> bool {
    seq.iter().all(|s| sym_nullable(s, nullable))
}

pub(crate) fn sym_nullable(s: &Symbol, nullable: &[bool]) -> bool {
    match s {
        Symbol::Literal(b) => b.is_empty(),
        Symbol::Bytes(_) | Symbol::Class(_) | Symbol::JsonString(_) => false,
        Symbol::Rule(r) => nullable[r.0 as usize],
        Symbol::Group(alts) => alts.iter().any(|a| seq_nullable(a, nullable)),
        Symbol::Repeat { inner, min, .. } => *min == 0 || sym_nullable(inner, nullable),
        Symbol::Unordered(u) => !u.members.iter().any(|m| m.required),
        Symbol::Ws => true,
        Symbol::Regex(d) => d.is_accepting(d.start()),
    }
}

/// Refuses rules that can never finish (`a ::= "x" a`): a parse that enters one could
/// never end, so the automaton would offer tokens leading to a dead end.
fn check_productive(g: &Grammar) -> Result<()> {
    let productive = productive_rules(g);
    match g.rules.iter().zip(&productive).find(|(_, &p)| !p) {
        None => Ok(()),
        Some((r, _)) => Err(err_at(
            r,
            format!("rule `{}` can never finish: every alternative needs `{}` (or another unfinishable rule) again; give it an alternative that ends", r.name, r.name),
        )),
    }
}

/// Whether each rule can finish, i.e. match some finite text (least fixpoint).
pub(crate) fn productive_rules(g: &Grammar) -> Vec<bool> {
    least_fixpoint(g, |s| match s {
        Symbol::Rule(r) => Shape::Rule(*r),
        Symbol::Group(alts) => Shape::Any(alts),
        Symbol::Repeat { min: 0, .. } => Shape::Const(true),
        Symbol::Repeat { inner, .. } => Shape::Same(inner),
        Symbol::Unordered(u) => {
            let mut all: Vec<&[Symbol]> = u
                .members
                .iter()
                .filter(|m| m.required)
                .map(|m| m.value.as_slice())
                .collect();
            // Two required members or more need a separator between them.
            if all.len() >= 2 {
                all.push(&u.separator);
            }
            Shape::All(all)
        }
        _ => Shape::Const(true),
    })
}

/// Rules that may be entered before any byte is consumed in `seq`.
fn left_calls(seq: &[Symbol], nullable: &[bool], out: &mut Vec<RuleId>) {
    for s in seq {
        match s {
            Symbol::Rule(r) => out.push(*r),
            Symbol::Group(alts) => alts.iter().for_each(|a| left_calls(a, nullable, out)),
            Symbol::Repeat { inner, .. } => left_calls(std::slice::from_ref(inner), nullable, out),
            // Declared members start with a non-empty key; additional ones may not.
            Symbol::Unordered(u) => {
                if let Some(a) = &u.additional {
                    left_calls(a, nullable, out)
                }
            }
            _ => {}
        }
        if !sym_nullable(s, nullable) {
            return;
        }
    }
}

fn check_left_recursion(g: &Grammar) -> Result<()> {
    let nullable = nullable_rules(g);
    let edges: Vec<Vec<RuleId>> = g
        .rules
        .iter()
        .map(|r| {
            let mut out = Vec::new();
            r.alts
                .iter()
                .for_each(|a| left_calls(a, &nullable, &mut out));
            out.sort_unstable();
            out.dedup();
            out
        })
        .collect();
    // Iterative DFS with colours; a grey successor closes a cycle.
    let n = g.rules.len();
    let mut colour = vec![0u8; n]; // 0 white, 1 grey, 2 black
    for start in 0..n {
        if colour[start] != 0 {
            continue;
        }
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        colour[start] = 1;
        while let Some(&(v, i)) = path.last() {
            if i < edges[v].len() {
                let w = edges[v][i].0 as usize;
                path.last_mut().unwrap().1 += 1;
                match colour[w] {
                    0 => {
                        colour[w] = 1;
                        path.push((w, 0));
                    }
                    1 => {
                        let from = path.iter().position(|&(u, _)| u == w).unwrap();
                        let cycle: Vec<usize> = path[from..].iter().map(|&(u, _)| u).collect();
                        return Err(left_recursion_error(g, &cycle));
                    }
                    _ => {}
                }
            } else {
                colour[v] = 2;
                path.pop();
            }
        }
    }
    Ok(())
}

fn left_recursion_error(g: &Grammar, cycle: &[usize]) -> Error {
    let rule = &g.rules[cycle[0]];
    let mut names: Vec<&str> = cycle.iter().map(|&i| g.rules[i].name.as_str()).collect();
    names.push(&rule.name);
    let mut msg = format!(
        "rule `{}` is left-recursive ({}): it would never stop expanding; ",
        rule.name,
        names.join(" -> ")
    );
    // For direct recursion `A ::= A x | y` the right-recursive form is `A ::= y (x)*`.
    let me = RuleId(cycle[0] as u32);
    let (rec, base): (Vec<_>, Vec<_>) = rule
        .alts
        .iter()
        .partition(|a| a.first() == Some(&Symbol::Rule(me)));
    if cycle.len() == 1 && !rec.is_empty() && !base.is_empty() {
        let group = |alts: Vec<&[Symbol]>| {
            let parts: Vec<String> = alts.iter().map(|a| render_seq(g, a)).collect();
            if parts.len() == 1 && alts[0].len() == 1 {
                parts[0].clone()
            } else {
                format!("({})", parts.join(" | "))
            }
        };
        let tails: Vec<&[Symbol]> = rec.iter().map(|a| &a[1..]).collect();
        let heads: Vec<&[Symbol]> = base.iter().map(|a| a.as_slice()).collect();
        msg += &format!(
            "write it right-recursively, e.g. `{} ::= {} {}*`",
            rule.name,
            group(heads),
            group(tails)
        );
    } else {
        msg += &format!(
            "write it right-recursively (rule ::= base (suffix)*, so `{}` does not come first)",
            rule.name
        );
    }
    err_at(rule, msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::CharClass;

    fn digit() -> Symbol {
        Symbol::class(CharClass::new([(0x30, 0x39)]))
    }

    #[test]
    fn direct_left_recursion_is_refused_with_a_suggestion() {
        let mut b = GrammarBuilder::new();
        let expr = b.declare("expr");
        b.define(
            expr,
            vec![
                vec![Symbol::rule(expr), Symbol::lit("+"), digit()],
                vec![digit()],
            ],
        );
        let msg = b.build(expr).unwrap_err().to_string();
        assert!(msg.contains("left-recursive (expr -> expr)"), "{msg}");
        assert!(msg.contains("expr ::= [0-9] (\"+\" [0-9])*"), "{msg}");
    }

    #[test]
    fn indirect_left_recursion_behind_nullable_prefix_is_refused() {
        let mut b = GrammarBuilder::new();
        let a = b.declare("a");
        let c = b.rule(
            "c",
            vec![vec![Symbol::opt(Symbol::lit("x")), Symbol::rule(a)]],
        );
        b.define(
            a,
            vec![
                vec![Symbol::ws(), Symbol::rule(c), Symbol::lit("y")],
                vec![Symbol::lit("z")],
            ],
        );
        let msg = b.build(a).unwrap_err().to_string();
        assert!(msg.contains("a -> c -> a"), "{msg}");
    }

    #[test]
    fn right_recursion_and_bounds() {
        let mut b = GrammarBuilder::new();
        let list = b.declare("list");
        b.define(list, vec![vec![digit(), Symbol::opt(Symbol::rule(list))]]);
        assert!(b.clone().build(list).is_ok());
        let r = b.rule("big", vec![vec![Symbol::repeat(digit(), 0, Some(5000))]]);
        assert!(b
            .build(r)
            .unwrap_err()
            .to_string()
            .contains("above the limit of 4096"));
    }

    #[test]
    fn unordered_members_are_validated() {
        let member = |k: &str| Member {
            key: k.as_bytes().to_vec(),
            value: vec![],
            required: false,
        };
        let mut b = GrammarBuilder::new();
        let u = Unordered {
            members: vec![member("\"a\""), member("\"a\"")],
            separator: vec![],
            additional: None,
        };
        let r = b.rule("o", vec![vec![Symbol::unordered(u)]]);
        assert!(b.build(r).unwrap_err().to_string().contains("repeated"));
        let mut b = GrammarBuilder::new();
        let u = Unordered {
            members: (0..65).map(|i| member(&format!("\"{i}\""))).collect(),
            separator: vec![],
            additional: None,
        };
        let r = b.rule("o", vec![vec![Symbol::unordered(u)]]);
        assert!(b.build(r).unwrap_err().to_string().contains("limit of 64"));
    }

    #[test]
    fn unfinishable_rules_are_refused() {
        let mut b = GrammarBuilder::new();
        let x = b.declare("x");
        b.define(x, vec![vec![Symbol::lit("c"), Symbol::rule(x)]]);
        let r = b.rule(
            "root",
            vec![
                vec![Symbol::lit("a")],
                vec![Symbol::lit("b"), Symbol::rule(x)],
            ],
        );
        assert!(b
            .build(r)
            .unwrap_err()
            .to_string()
            .contains("rule `x` can never finish"));
    }

    #[test]
    fn undefined_rule_is_refused() {
        let mut b = GrammarBuilder::new();
        let w = b.declare("word");
        let r = b.rule("root", vec![vec![Symbol::rule(w)]]);
        assert!(b
            .build(r)
            .unwrap_err()
            .to_string()
            .contains("`word` is referenced but never defined"));
    }
}
