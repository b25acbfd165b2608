//! Lowering: the normalized schema tree → the grammar IR.
//!
//! - **Whitespace**: the IR's budgeted [`Symbol::Ws`] after `{`, `[`, `,`, `:` and
//!   before `}`/`]`/`,`; the document is `ws value` (nothing after it).
//! - **Objects**: one [`Unordered`] node: declared keys in any order, each at most
//!   once, the object closes only once every required key is present; undeclared
//!   keys (when open) through a key string that cannot decode to a declared key.
//!   Declared keys are matched in their canonical JSON spelling (`"a"`, not `"\u0061"`).
//! - **Strings**: [`JsonString`]: every JSON escape is accepted where the decoded
//!   character is allowed, lengths count code points, the pattern sees the decoded value.
//! - **Integers**: digits only (no fraction, no exponent, no leading zeros, no `-0`),
//!   bounds exact via digit-range patterns; a step other than 1 is a product of
//!   the range automaton with the remainder modulo the step.
//! - **Numbers**: unbounded and stepless, any JSON number; not whole (a `oneOf`
//!   branch beside every integer), at most 15 significant digits, the last fraction
//!   digit not zero, no exponent; otherwise written without
//!   an exponent, at most 15 significant digits when there is a fraction, at most
//!   `max_fraction_digits` after the point (trailing zeros beyond that allowed:
//!   `4.50`, `25.0`), bounds exact (each fraction length is a scaled integer range).
//! - **Enums**: strings through one [`JsonString`] (any escaping of the same value
//!   is accepted); other members as their compact JSON text only (`1.5`, `{"a":1}`).
//! - **Recursion**: definitions are rules; the automaton's stack bounds the depth.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use super::digits;
use super::error::SchemaError;
use super::node::{
    ArraySpec, Bound, CompiledSchema, IntegerSpec, Node, NumberSpec, ObjectSpec, QuotedNumber,
    StringSpec,
};
use super::quote::{numbers_in, Sources, Spans, QUOTE_KEYWORD};
use crate::grammar::{
    json, ByteDfa, Grammar, GrammarBuilder, JsonString, Member, RuleId, SpanAutomaton, Symbol,
    Unordered,
};

/// Most fraction digits a bounded number may be written with when no step says.
pub(super) const MAX_FRACTION_DIGITS: u32 = 15;
/// Most numbers of a source a quoted number may be (the first written are kept).
const MAX_QUOTED_NUMBERS: usize = 4096;

/// Most significant digits of a bounded number with a fraction.
const MAX_SIGNIFICANT: u32 = 15;
/// The largest magnitude an integer schema with an open end accepts: 19 digits, the
/// width of an i64 (bounds themselves are exact to 18 digits).
const MAX_OPEN_INTEGER: i128 = 9_999_999_999_999_999_999;
/// Trailing zeros a number may carry after its significant digits (`4.50`).
const MAX_TRAILING_ZEROS: u32 = 15;
/// A bounded integer with a step and at most this many multiples is listed outright.
const MAX_LISTED_MULTIPLES: u128 = 256;
/// Most (range state, remainder) pairs the step automaton may need.
const MAX_STEP_STATES: usize = 4096;

fn refused(keyword: &str, what: String) -> SchemaError {
    SchemaError::new(keyword, "the schema", what)
}

impl CompiledSchema {
    /// Lowers the schema to a validated grammar: one JSON value after budgeted
    /// whitespace. A quote is refused here (no sources): see [`crate::schema_grammar_with`].
    pub fn lower(&self) -> Result<Grammar, SchemaError> {
        lower_with(self, &Sources::none()).map(|(g, _)| g)
    }

    /// Lowers the schema into rules of an existing builder and returns the symbol
    /// matching one value of it (no whitespace around it), so a larger grammar can embed
    /// the schema: several schemas can share one builder (rule names never clash, the
    /// builder suffixes them), e.g. a wrapper that alternates between them.
    ///
    /// ```
    /// use llamay_constrain::{compile_schema, GrammarBuilder, Symbol};
    /// let s = compile_schema(&serde_json::json!({"enum": ["c", "f"]})).unwrap();
    /// let mut b = GrammarBuilder::new();
    /// let v = s.lower_into(&mut b).unwrap();
    /// let root = b.rule("root", vec![vec![Symbol::lit("unit="), v]]);
    /// assert!(b.build(root).is_ok());
    /// ```
    pub fn lower_into(&self, b: &mut GrammarBuilder) -> Result<Symbol, SchemaError> {
        lower_into_with(b, self, &Sources::none()).map(|(s, _)| s)
    }
}

/// Lowers a compiled schema with the sources its `x-llamay-quote`s name; also returns
/// where quotes are enforced.
pub(crate) fn lower_with(
    schema: &CompiledSchema,
    sources: &Sources,
) -> Result<(Grammar, Vec<String>), SchemaError> {
    let mut b = GrammarBuilder::new();
    let (v, quotes) = lower_into_with(&mut b, schema, sources)?;
    let root = b.rule("root", vec![vec![Symbol::ws(), v]]);
    let g = b
        .build(root)
        .map_err(|e| refused("", format!("the schema could not be compiled: {e}")))?;
    Ok((g, quotes))
}

/// [`CompiledSchema::lower_into`] with sources for quotes; also returns where quotes are
/// enforced.
pub(crate) fn lower_into_with(
    b: &mut GrammarBuilder,
    schema: &CompiledSchema,
    sources: &Sources,
) -> Result<(Symbol, Vec<String>), SchemaError> {
    let mut l = Lowerer {
        b,
        defs: Vec::new(),
        any: None,
        next: 0,
        scalars: HashMap::new(),
        sources,
        spans: Spans::default(),
    };
    for (i, d) in schema.defs.iter().enumerate() {
        let id = l.b.declare(&format!("def{i}-{}", d.location));
        l.defs.push(id);
    }
    for (i, d) in schema.defs.iter().enumerate() {
        let v = l.value(&d.node)?;
        l.b.define(l.defs[i], vec![vec![v]]);
    }
    let v = l.value(&schema.root)?;
    let mut quotes = std::mem::take(&mut l.spans.locations);
    quotes.sort();
    quotes.dedup();
    Ok((v, quotes))
}

struct Lowerer<'a> {
    b: &'a mut GrammarBuilder,
    defs: Vec<RuleId>,
    any: Option<RuleId>,
    next: usize,
    scalars: HashMap<String, Symbol>,
    sources: &'a Sources,
    spans: Spans,
}

impl Lowerer<'_> {
    fn fresh(&mut self, kind: &str) -> String {
        self.next += 1;
        format!("{kind}{}", self.next)
    }

    fn value(&mut self, n: &Node) -> Result<Symbol, SchemaError> {
        Ok(match n {
            Node::Any => {
                let id = match self.any {
                    Some(id) => id,
                    None => *self.any.insert(json::add_any_value(self.b)),
                };
                Symbol::rule(id)
            }
            Node::Ref(id) => Symbol::rule(self.defs[*id]),
            Node::Union(alts) => {
                let mut seqs = Vec::with_capacity(alts.len());
                for a in alts {
                    seqs.push(vec![self.value(a)?]);
                }
                Symbol::alt(seqs)
            }
            Node::Null => Symbol::lit("null"),
            Node::Boolean => {
                Symbol::alt(vec![vec![Symbol::lit("true")], vec![Symbol::lit("false")]])
            }
            // Scalars repeat across copies of shared sub-schemas; their automata are
            // built once per distinct spec.
            Node::Literals(_) | Node::Integer(_) | Node::Number(_) | Node::String(_) => {
                let key = format!("{n:?}");
                if let Some(s) = self.scalars.get(&key) {
                    return Ok(s.clone());
                }
                let s = match n {
                    Node::Literals(values) => literals(values)?,
                    Node::Integer(spec) => integer(self.b, spec)?,
                    Node::Number(spec) => match &spec.quote {
                        Some(q) => self.quoted_number(q)?,
                        None => number(spec)?,
                    },
                    Node::String(StringSpec {
                        lexicon: Some(name),
                        ..
                    }) => lexicon_string(name, self.sources)?,
                    Node::String(spec) => {
                        let quote = match &spec.quote {
                            Some(q) => Some(self.spans.get(q, self.sources)?),
                            None => None,
                        };
                        string(spec, quote)?
                    }
                    _ => unreachable!("scalar arm"),
                };
                self.scalars.insert(key, s.clone());
                s
            }
            Node::Array(spec) => self.array(spec)?,
            Node::Object(spec) => self.object(spec)?,
        })
    }

    /// The numbers written in the quote's source that fit its shape, as literals.
    fn quoted_number(&mut self, q: &QuotedNumber) -> Result<Symbol, SchemaError> {
        let text = q.quote.text(self.sources)?;
        let check = CompiledSchema {
            root: q.shape.clone(),
            defs: vec![],
            report: Default::default(),
        };
        let fits: Vec<Vec<Symbol>> = numbers_in(text, q.integer)
            .into_iter()
            .filter(|t| q.quote.min_chars as usize <= t.len())
            .filter(|t| serde_json::from_str::<Value>(t).is_ok_and(|v| check.check(&v).is_ok()))
            .take(MAX_QUOTED_NUMBERS)
            .map(|t| vec![Symbol::lit(t)])
            .collect();
        if fits.is_empty() {
            return Err(SchemaError::invalid(
                QUOTE_KEYWORD,
                &q.quote.location,
                format!("finds no number in {} that fits the schema", q.quote.source),
            ));
        }
        self.spans.locations.push(q.quote.location.clone());
        Ok(Symbol::alt(fits))
    }

    fn array(&mut self, spec: &ArraySpec) -> Result<Symbol, SchemaError> {
        let name = self.fresh("array");
        let close = |mut v: Vec<Symbol>| {
            v.insert(0, Symbol::ws());
            v.insert(0, Symbol::lit("["));
            v.push(Symbol::lit("]"));
            v
        };
        if spec.max_items == Some(0) {
            return Ok(Symbol::rule(self.b.rule(&name, vec![close(vec![])])));
        }
        let item = self.value(&spec.items)?;
        let more = |min: u64, max: Option<u64>| {
            Symbol::repeat(
                Symbol::seq(vec![
                    Symbol::lit(","),
                    Symbol::ws(),
                    item.clone(),
                    Symbol::ws(),
                ]),
                min as u32,
                max.map(|m| m as u32),
            )
        };
        let alts = if spec.min_items == 0 {
            vec![
                close(vec![]),
                close(vec![
                    item.clone(),
                    Symbol::ws(),
                    more(0, spec.max_items.map(|m| m - 1)),
                ]),
            ]
        } else {
            let tail = more(spec.min_items - 1, spec.max_items.map(|m| m - 1));
            vec![close(vec![item.clone(), Symbol::ws(), tail])]
        };
        Ok(Symbol::rule(self.b.rule(&name, alts)))
    }

    fn object(&mut self, spec: &ObjectSpec) -> Result<Symbol, SchemaError> {
        let name = self.fresh("object");
        let colon = || vec![Symbol::ws(), Symbol::lit(":"), Symbol::ws()];
        let mut members = Vec::with_capacity(spec.properties.len());
        for p in &spec.properties {
            let key = serde_json::to_string(&p.name).expect("a string serializes");
            let mut value = colon();
            value.push(self.value(&p.node)?);
            members.push(Member {
                key: key.into_bytes(),
                value,
                required: p.required,
            });
        }
        let additional = match &spec.additional {
            None => None,
            Some(a) => {
                let names = spec.properties.iter().map(|p| p.name.as_bytes());
                let names = names.chain(spec.impossible.iter().map(String::as_bytes));
                let mut m = vec![Symbol::json_string(
                    JsonString::excluding(names).as_object_key(),
                )];
                m.extend(colon());
                m.push(self.value(a)?);
                Some(m)
            }
        };
        let body = if members.is_empty() && additional.is_none() {
            vec![Symbol::lit("{"), Symbol::ws(), Symbol::lit("}")]
        } else {
            let u = Unordered {
                members,
                separator: vec![Symbol::ws(), Symbol::lit(","), Symbol::ws()],
                additional,
            };
            vec![
                Symbol::lit("{"),
                Symbol::ws(),
                Symbol::unordered(u),
                Symbol::ws(),
                Symbol::lit("}"),
            ]
        };
        Ok(Symbol::rule(self.b.rule(&name, vec![body])))
    }
}

fn regex(keyword: &str, pattern: &str) -> Result<Symbol, SchemaError> {
    Symbol::regex(pattern).map_err(|e| {
        refused(
            keyword,
            format!("the schema's {keyword} cannot be enforced: {e}"),
        )
    })
}

fn literals(values: &[Value]) -> Result<Symbol, SchemaError> {
    let mut alts = Vec::new();
    let strings: Vec<String> = values
        .iter()
        .filter_map(|v| v.as_str())
        .map(regex_syntax::escape)
        .collect();
    if !strings.is_empty() {
        let pattern = format!("(?:{})", strings.join("|"));
        let dfa =
            ByteDfa::shared(&pattern).map_err(|e| refused("enum", format!("enum strings: {e}")))?;
        let spec = JsonString {
            pattern: Some(dfa),
            ..JsonString::default()
        };
        alts.push(vec![Symbol::json_string(spec)]);
    }
    for v in values.iter().filter(|v| !v.is_string()) {
        alts.push(vec![Symbol::lit(v.to_string())]);
    }
    Ok(Symbol::alt(alts))
}

/// A string whose value is one term of lexicon `name`, in its canonical JSON spelling.
fn lexicon_string(name: &str, sources: &Sources) -> Result<Symbol, SchemaError> {
    let lexicon = sources.lexicons.get(name).ok_or_else(|| {
        let have: Vec<&str> = sources.lexicons.keys().map(String::as_str).collect();
        refused(
            super::facets::LEXICON,
            format!(
                "names the lexicon {name:?}, which is not loaded (loaded: {}); start the \
                 server with -lexicon {name}=FILE",
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                }
            ),
        )
    })?;
    Ok(Symbol::seq(vec![
        Symbol::lit("\""),
        Symbol::Regex(lexicon.json_dfa().clone()),
        Symbol::lit("\""),
    ]))
}

fn string(spec: &StringSpec, quote: Option<Arc<SpanAutomaton>>) -> Result<Symbol, SchemaError> {
    let pattern = match &spec.pattern {
        None => None,
        Some(p) => {
            super::budget::check("the schema", &format!("the pattern {:?}", p.source))?;
            p.dfa().refuse_empty().map_err(|e| {
                refused(
                    "pattern",
                    format!("pattern {:?} cannot be enforced: {e}", p.source),
                )
            })?;
            Some(p.dfa().clone())
        }
    };
    let js = JsonString {
        pattern,
        max_chars: spec.max_length.map(|m| m as u32),
        exclude: vec![],
        min_chars: match (&spec.quote, &quote) {
            (Some(q), Some(_)) => (spec.min_length as u32).max(q.min_chars),
            _ => spec.min_length as u32,
        },
        quote,
        object_key: false,
    };
    Ok(Symbol::json_string(js))
}

fn integer(b: &mut GrammarBuilder, spec: &IntegerSpec) -> Result<Symbol, SchemaError> {
    let k = spec.multiple_of;
    if k > 1 {
        if let (Some(lo), Some(hi)) = (spec.min, spec.max) {
            let count = (hi - lo) as u128 / k + 1;
            if count <= MAX_LISTED_MULTIPLES {
                let step = k as i128;
                let alts =
                    (0..count as i128).map(|i| vec![Symbol::lit((lo + i * step).to_string())]);
                return Ok(Symbol::alt(alts.collect()));
            }
        }
    }
    // An open end is closed at 19 digits, so a model cannot write digits for ever.
    let (lo, hi) = (
        spec.min.unwrap_or(-MAX_OPEN_INTEGER),
        spec.max.unwrap_or(MAX_OPEN_INTEGER),
    );
    let patterns = digits::signed(Some(lo), Some(hi), 0)
        .ok_or_else(|| refused("minimum", "integer bounds are too wide to enforce".into()))?;
    let pattern = digits::to_regex(&patterns);
    if k == 1 {
        return regex("minimum", &pattern);
    }
    stepped(b, &pattern, k)
}

/// The integers matched by `pattern` that are multiples of `k`: the pattern's DFA
/// times the remainder modulo `k`, as right-recursive rules (one per live pair).
fn stepped(b: &mut GrammarBuilder, pattern: &str, k: u128) -> Result<Symbol, SchemaError> {
    let too_big = || {
        refused(
            "multipleOf",
            format!("multipleOf {k} with these bounds needs too many states"),
        )
    };
    if k > MAX_STEP_STATES as u128 {
        return Err(too_big());
    }
    let dfa = ByteDfa::shared(pattern).map_err(|_| too_big())?;
    let start = (dfa.start(), 0u128);
    let mut index: HashMap<(u32, u128), usize> = HashMap::from([(start, 0)]);
    let mut states = vec![start];
    let mut edges: Vec<Vec<(u8, usize)>> = vec![vec![]];
    let mut queue = VecDeque::from([0usize]);
    while let Some(i) = queue.pop_front() {
        let (s, r) = states[i];
        for byte in b"-0123456789".iter().copied() {
            let Some(t) = dfa.next(s, byte) else { continue };
            let r2 = if byte == b'-' {
                r
            } else {
                (r * 10 + (byte - b'0') as u128) % k
            };
            let j = match index.get(&(t, r2)) {
                Some(&j) => j,
                None => {
                    if states.len() >= MAX_STEP_STATES {
                        return Err(too_big());
                    }
                    states.push((t, r2));
                    edges.push(vec![]);
                    index.insert((t, r2), states.len() - 1);
                    queue.push_back(states.len() - 1);
                    states.len() - 1
                }
            };
            edges[i].push((byte, j));
        }
    }
    // Pairs from which an accepting pair (remainder 0) is reachable.
    let accepting: Vec<bool> = states
        .iter()
        .map(|&(s, r)| r == 0 && dfa.is_accepting(s))
        .collect();
    let mut live = accepting.clone();
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..states.len() {
            if !live[i] && edges[i].iter().any(|&(_, j)| live[j]) {
                live[i] = true;
                changed = true;
            }
        }
    }
    if !live[0] {
        return Err(refused(
            "multipleOf",
            format!("no multiple of {k} lies within the bounds"),
        ));
    }
    let ids: Vec<Option<RuleId>> = (0..states.len())
        .map(|i| live[i].then(|| b.declare(&format!("step{k}-{i}"))))
        .collect();
    for i in 0..states.len() {
        let Some(id) = ids[i] else { continue };
        let mut alts: Vec<Vec<Symbol>> = edges[i]
            .iter()
            .filter_map(|&(byte, j)| ids[j].map(|t| vec![Symbol::lit([byte]), Symbol::rule(t)]))
            .collect();
        if accepting[i] {
            alts.push(vec![]);
        }
        b.define(id, alts);
    }
    Ok(Symbol::rule(ids[0].expect("start is live")))
}

fn number(spec: &NumberSpec) -> Result<Symbol, SchemaError> {
    if spec.non_integral {
        return regex("oneOf", &non_integral_pattern());
    }
    if spec.is_unconstrained() {
        return Ok(Symbol::seq(json::number_symbols()));
    }
    let bounded = spec.min.is_some() || spec.max.is_some();
    let max_frac = spec.max_fraction_digits.unwrap_or(MAX_FRACTION_DIGITS);
    let too_wide = || {
        refused(
            "minimum",
            "number bounds are too wide or too precise to enforce".into(),
        )
    };
    let cap = 10i128.pow(MAX_SIGNIFICANT) - 1;
    let mut groups = Vec::new();
    for k in 0..=max_frac {
        let (mut lo, mut hi) = (scaled(spec.min, k, true), scaled(spec.max, k, false));
        if lo == Some(None) || hi == Some(None) {
            return Err(too_wide());
        }
        let (lo_k, hi_k) = (lo.take().flatten(), hi.take().flatten());
        // Bounded numbers are written with at most 15 significant digits, whole
        // numbers included, so a half-open range cannot grow digits for ever.
        let (lo_k, hi_k) = if bounded {
            (
                Some(lo_k.map_or(-cap, |v| v.max(-cap))),
                Some(hi_k.map_or(cap, |v| v.min(cap))),
            )
        } else {
            (lo_k, hi_k)
        };
        if let (Some(a), Some(b)) = (lo_k, hi_k) {
            if a > b {
                continue;
            }
        }
        let patterns = digits::signed(lo_k, hi_k, k).ok_or_else(too_wide)?;
        if patterns.is_empty() {
            continue;
        }
        let re = digits::to_regex(&patterns);
        // Trailing zeros change no value: `25.0` and `4.50` stay writable whatever the
        // step (the longest fraction length takes them).
        groups.push(match k {
            0 => format!("{re}(?:\\.0{{1,{MAX_TRAILING_ZEROS}}})?"),
            k if k == max_frac => format!("{re}0{{0,{MAX_TRAILING_ZEROS}}}"),
            _ => re,
        });
    }
    if groups.is_empty() {
        return Err(refused(
            "minimum",
            "no number lies within the bounds".into(),
        ));
    }
    regex("minimum", &format!("(?:{})", groups.join("|")))
}

/// Numbers that are not whole, written without exponent and with at most
/// [`MAX_SIGNIFICANT`] digits (so an `f64` reader, which most validators are, keeps
/// them apart from integers): `f` fraction digits, the last one not zero, after an
/// integer part of at most `15 - f` digits.
fn non_integral_pattern() -> String {
    let alts: Vec<String> = (1..=MAX_SIGNIFICANT)
        .map(|f| {
            let int = match MAX_SIGNIFICANT - f {
                0 => "0".to_string(),
                more => format!("(?:0|[1-9][0-9]{{0,{}}})", more - 1),
            };
            format!("{int}\\.[0-9]{{{}}}[1-9]", f - 1)
        })
        .collect();
    format!("-?(?:{})", alts.join("|"))
}

/// A bound scaled by `10^k` to the integer bound on the scaled value: `None` for no
/// bound, `Some(None)` when it does not fit.
fn scaled(bound: Option<Bound>, k: u32, lower: bool) -> Option<Option<i128>> {
    let b = bound?;
    Some(if lower {
        if b.exclusive {
            b.value.floor_scaled(k).and_then(|v| v.checked_add(1))
        } else {
            b.value.ceil_scaled(k)
        }
    } else if b.exclusive {
        b.value.ceil_scaled(k).and_then(|v| v.checked_sub(1))
    } else {
        b.value.floor_scaled(k)
    })
}
