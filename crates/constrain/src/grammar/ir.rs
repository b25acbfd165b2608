//! The grammar IR's data types. See the [module docs](super) for the semantics.

use super::charclass::{ByteSet, CharClass};
use super::dfa::ByteDfa;
use super::span::SpanAutomaton;
use crate::error::Result;
use crate::heap;
use std::sync::Arc;

/// Largest bound allowed in a bounded repetition (each count is unrolled into states).
pub(crate) const MAX_REPEAT: u32 = 4096;

/// Most members an [`Unordered`] node may declare (the "seen" set is a `u64`).
pub(crate) const MAX_UNORDERED_MEMBERS: usize = 64;

/// Default per-document budget of structural whitespace characters for [`Symbol::Ws`].
pub(crate) const DEFAULT_WS_BUDGET: u32 = 64;

/// Index of a rule in a [`Grammar`] (or in the [`GrammarBuilder`](super::GrammarBuilder)
/// that made it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// One element of a sequence.
#[derive(Clone, Debug, PartialEq)]
pub enum Symbol {
    /// These bytes, in order (may be empty: matches the empty string).
    Literal(Vec<u8>),
    /// One byte from the set.
    Bytes(ByteSet),
    /// One character from the class, UTF-8 encoded.
    Class(CharClass),
    /// A reference to a rule (recursion allowed; left recursion refused).
    Rule(RuleId),
    /// An inline alternation of sequences (a parenthesised group).
    Group(Vec<Vec<Symbol>>),
    /// `inner` between `min` and `max` times (`None` = unbounded); `max <= 4096`.
    Repeat {
        /// The repeated symbol.
        inner: Box<Symbol>,
        /// Fewest repetitions.
        min: u32,
        /// Most repetitions, `None` for no limit.
        max: Option<u32>,
    },
    /// Object members in any order, each at most once; see [`Unordered`].
    Unordered(Arc<Unordered>),
    /// Structural JSON whitespace (`[ \t\n\r]*`) drawn from the document's budget.
    Ws,
    /// A whole match of a regular expression over raw bytes.
    Regex(Arc<ByteDfa>),
    /// A JSON string literal, quotes included, whose *decoded* value obeys a spec.
    JsonString(Arc<JsonString>),
}

/// A rule: a name and its alternatives, each a sequence of symbols.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// The rule's name (unique within a grammar; used in messages and display).
    pub name: String,
    /// The alternatives; an empty list means "not yet defined".
    pub alts: Vec<Vec<Symbol>>,
    /// Where the rule was defined in source text, as 1-based (line, column).
    pub origin: Option<(u32, u32)>,
}

/// Object members in any order.
///
/// Matches the empty string (when no member is required) or `m1 sep m2 sep ... mk` where
/// each `mi` is a declared member not seen before in this node, or an additional member;
/// the node can end only once every required member has been seen. Declared members
/// begin with distinct, non-empty literal keys (e.g. `"name"` with its quotes).
#[derive(Clone, Debug, PartialEq)]
pub struct Unordered {
    /// The declared members (at most 64).
    pub members: Vec<Member>,
    /// What goes between two members (e.g. `ws "," ws`).
    pub separator: Vec<Symbol>,
    /// A whole member (key, colon, value) for keys that are not declared, repeatable;
    /// `None` closes the object. Build its key with
    /// [`JsonString::excluding`] so it cannot spell a declared key.
    pub additional: Option<Vec<Symbol>>,
}

/// One declared member of an [`Unordered`] node.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// The literal key bytes the member starts with (e.g. `"name"`, quotes included).
    pub key: Vec<u8>,
    /// What follows the key (e.g. `ws ":" ws value`).
    pub value: Vec<Symbol>,
    /// Whether the node may not end without this member.
    pub required: bool,
}

/// A JSON string (quotes included) constrained on its decoded value.
///
/// Escapes (`\n`, `\"`, `\u00e9`, surrogate pairs `\ud83d\ude00`) are decoded before
/// the value reaches the checks: the pattern sees the UTF-8 of the decoded character,
/// an escape counts as the one character it stands for. Raw control characters
/// (below U+0020) and invalid UTF-8 are never accepted; lone surrogates are refused.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JsonString {
    /// The decoded value must match this DFA in whole (if any).
    pub pattern: Option<Arc<ByteDfa>>,
    /// Fewest characters (code points) in the decoded value.
    pub min_chars: u32,
    /// Most characters (code points), at most 4096.
    pub max_chars: Option<u32>,
    /// Decoded values that are not allowed (e.g. the declared keys of an object, for the
    /// key of its additional members).
    pub exclude: Vec<Vec<u8>>,
    /// The decoded value must be a span of this source (a grounded quote); not combined
    /// with `pattern` or `exclude`.
    pub quote: Option<Arc<SpanAutomaton>>,
    /// An object's key that no declaration names (an open object's extra key, any key
    /// of an unconstrained object): the matcher refuses a second key of the same
    /// decoded text in one object, which the string's own states cannot know.
    pub object_key: bool,
}

impl JsonString {
    /// Any JSON string.
    pub fn any() -> Self {
        JsonString::default()
    }

    /// A string whose decoded value matches `pattern` in whole.
    pub fn matching(pattern: &str) -> Result<Self> {
        Ok(JsonString {
            pattern: Some(ByteDfa::shared(pattern)?),
            ..Self::default()
        })
    }

    /// Sets the length bounds in characters.
    pub fn with_length(mut self, min: u32, max: Option<u32>) -> Self {
        self.min_chars = min;
        self.max_chars = max;
        self
    }

    /// A string whose decoded value is a contiguous span of `source`'s text.
    pub fn quoting(source: Arc<SpanAutomaton>) -> Self {
        JsonString {
            quote: Some(source),
            ..Self::default()
        }
    }

    /// The same string as an undeclared object key (see [`object_key`](Self::object_key)).
    pub fn as_object_key(mut self) -> Self {
        self.object_key = true;
        self
    }

    /// Any string except the given decoded values.
    pub fn excluding<I, S>(values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        JsonString {
            exclude: values.into_iter().map(|v| v.as_ref().to_vec()).collect(),
            ..Self::default()
        }
    }
}

/// A compiled-to-IR grammar: validated rules and a start rule.
///
/// Made by [`GrammarBuilder::build`](crate::GrammarBuilder::build) (or [`crate::parse_gbnf`],
/// [`crate::schema_grammar`]), which guarantees every referenced rule is defined, no rule
/// is left-recursive, and repetition bounds are at most 4096.
#[derive(Clone, Debug, PartialEq)]
pub struct Grammar {
    pub(crate) rules: Vec<Rule>,
    pub(crate) root: RuleId,
    pub(crate) ws_budget: u32,
}

impl Grammar {
    /// The rules, indexed by [`RuleId`].
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The start rule.
    pub fn root(&self) -> RuleId {
        self.root
    }

    /// The per-document whitespace budget for [`Symbol::Ws`].
    pub fn ws_budget(&self) -> u32 {
        self.ws_budget
    }

    /// Sets the whitespace budget (characters of structural whitespace per document).
    pub fn with_ws_budget(mut self, budget: u32) -> Self {
        self.ws_budget = budget;
        self
    }

    /// Whether any rule uses [`Symbol::Ws`] (only then does the budget matter).
    pub fn uses_ws(&self) -> bool {
        fn walk(s: &Symbol) -> bool {
            match s {
                Symbol::Ws => true,
                Symbol::Group(alts) => alts.iter().flatten().any(walk),
                Symbol::Repeat { inner, .. } => walk(inner),
                Symbol::Unordered(u) => {
                    u.members.iter().flat_map(|m| &m.value).any(walk)
                        || u.separator.iter().any(walk)
                        || u.additional.iter().flatten().any(walk)
                }
                _ => false,
            }
        }
        self.rules
            .iter()
            .flat_map(|r| r.alts.iter().flatten())
            .any(walk)
    }
}

impl Grammar {
    /// Heap bytes the grammar keeps alive (the crate's `heap` accounting: shared tables, a
    /// pattern's DFA or a quote's automaton, counted once), for a byte budget on kept
    /// grammars.
    pub fn heap_bytes(&self) -> usize {
        let mut seen = heap::Seen::default();
        heap::vec(&self.rules)
            + self
                .rules
                .iter()
                .map(|r| {
                    r.name.capacity()
                        + heap::vec(&r.alts)
                        + r.alts
                            .iter()
                            .map(|a| seq_bytes(a, &mut seen))
                            .sum::<usize>()
                })
                .sum::<usize>()
    }
}

/// Heap bytes of a sequence of symbols and what they hold.
fn seq_bytes(seq: &Vec<Symbol>, seen: &mut heap::Seen) -> usize {
    heap::vec(seq) + seq.iter().map(|s| symbol_bytes(s, seen)).sum::<usize>()
}

fn symbol_bytes(s: &Symbol, seen: &mut heap::Seen) -> usize {
    match s {
        Symbol::Literal(b) => heap::vec(b),
        Symbol::Class(c) => heap::slice(c.ranges()),
        Symbol::Group(alts) => {
            heap::vec(alts) + alts.iter().map(|a| seq_bytes(a, seen)).sum::<usize>()
        }
        Symbol::Repeat { inner, .. } => std::mem::size_of::<Symbol>() + symbol_bytes(inner, seen),
        Symbol::Unordered(u) if seen.first(Arc::as_ptr(u)) => {
            heap::vec(&u.members)
                + u.members
                    .iter()
                    .map(|m| heap::vec(&m.key) + seq_bytes(&m.value, seen))
                    .sum::<usize>()
                + seq_bytes(&u.separator, seen)
                + u.additional.as_ref().map_or(0, |a| seq_bytes(a, seen))
        }
        Symbol::Regex(d) if seen.first(Arc::as_ptr(d)) => d.heap_bytes(),
        Symbol::JsonString(j) if seen.first(Arc::as_ptr(j)) => {
            let pattern = match &j.pattern {
                Some(d) if seen.first(Arc::as_ptr(d)) => d.heap_bytes(),
                _ => 0,
            };
            let quote = match &j.quote {
                Some(q) if seen.first(Arc::as_ptr(q)) => q.heap_bytes(),
                _ => 0,
            };
            pattern + quote + heap::vec(&j.exclude) + j.exclude.iter().map(heap::vec).sum::<usize>()
        }
        _ => 0,
    }
}

impl Symbol {
    /// A literal byte string.
    pub fn lit(bytes: impl AsRef<[u8]>) -> Self {
        Symbol::Literal(bytes.as_ref().to_vec())
    }

    /// One character from the class.
    pub fn class(class: CharClass) -> Self {
        Symbol::Class(class)
    }

    /// One character from the given inclusive code-point ranges.
    pub fn chars(ranges: impl IntoIterator<Item = (u32, u32)>) -> Self {
        Symbol::Class(CharClass::new(ranges))
    }

    /// One byte from the set.
    pub fn bytes(set: ByteSet) -> Self {
        Symbol::Bytes(set)
    }

    /// A rule reference.
    pub fn rule(id: RuleId) -> Self {
        Symbol::Rule(id)
    }

    /// A parenthesised sequence.
    pub fn seq(symbols: Vec<Symbol>) -> Self {
        Symbol::Group(vec![symbols])
    }

    /// An inline alternation.
    pub fn alt(alts: Vec<Vec<Symbol>>) -> Self {
        Symbol::Group(alts)
    }

    /// `sym?`
    pub fn opt(sym: Symbol) -> Self {
        Self::repeat(sym, 0, Some(1))
    }

    /// `sym*`
    pub fn star(sym: Symbol) -> Self {
        Self::repeat(sym, 0, None)
    }

    /// `sym+`
    pub fn plus(sym: Symbol) -> Self {
        Self::repeat(sym, 1, None)
    }

    /// `sym{min,max}`; `max = None` is unbounded. Bounds above 4096 are refused by
    /// [`GrammarBuilder::build`](super::GrammarBuilder::build).
    pub fn repeat(sym: Symbol, min: u32, max: Option<u32>) -> Self {
        Symbol::Repeat {
            inner: Box::new(sym),
            min,
            max,
        }
    }

    /// Members in any order.
    pub fn unordered(u: Unordered) -> Self {
        Symbol::Unordered(Arc::new(u))
    }

    /// Budgeted structural whitespace.
    pub fn ws() -> Self {
        Symbol::Ws
    }

    /// A whole match of `pattern` over raw bytes (DFA at most 2,000 states).
    pub fn regex(pattern: &str) -> Result<Self> {
        Ok(Symbol::Regex(ByteDfa::shared(pattern)?))
    }

    /// A JSON string literal obeying `spec`.
    pub fn json_string(spec: JsonString) -> Self {
        Symbol::JsonString(Arc::new(spec))
    }
}
