//! `x-llamay-quote`: grounded values. On a `string` schema, the decoded value must be a
//! verbatim, contiguous span of a source text; on a `number`/`integer` schema, the
//! number's text as written.
//!
//! - `true`: the request's input (the user messages' text, or the prompt), which the
//!   caller passes as [`Sources::input`].
//! - `"name"`: the source of that name in [`Sources::named`] (`llamay_sources`).
//! - `{"source": true | "name", "normalize": "none" | "whitespace" | "case",
//!   "min_chars": N}`: the same, comparing under a normalisation, with at least `N`
//!   characters (default 1: an empty quote is no evidence).
//!
//! The sources are not part of the schema: they arrive per request and are bound when
//! the schema is lowered ([`super::lower::lower_with`]); a name the request did not
//! send is refused there, naming the keyword and where it sits.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::error::SchemaError;
use crate::grammar::{Normalize, SpanAutomaton};

/// The schema keyword that asks for a quote, for a caller that reads quotes out of a
/// schema itself (with [`Quote::read`]: `llamay eval` scores them).
pub const QUOTE_KEYWORD: &str = "x-llamay-quote";

/// Which text a quote must come from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuoteSource {
    /// The request's own input.
    Input,
    /// A named source.
    Named(String),
}

impl std::fmt::Display for QuoteSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuoteSource::Input => f.write_str("the input"),
            QuoteSource::Named(n) => write!(f, "source {n:?}"),
        }
    }
}

/// One `x-llamay-quote` as written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Quote {
    /// The text the span must come from.
    pub source: QuoteSource,
    /// How the value and the source are compared (as written, or ignoring case or
    /// runs of whitespace).
    pub normalize: Normalize,
    /// Fewest characters of the span.
    pub min_chars: u32,
    /// Where the keyword sits (dotted, as in messages).
    pub location: String,
}

/// What a schema's extensions may refer to, for one request: the texts `x-llamay-quote`
/// values must be spans of, and the lexicons `x-llamay-lexicon` may name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    /// The request's input (`x-llamay-quote: true`).
    pub input: Option<String>,
    /// `llamay_sources` by name.
    pub named: BTreeMap<String, String>,
    /// The lexicons `x-llamay-lexicon` may name (the server's).
    pub lexicons: BTreeMap<String, std::sync::Arc<crate::Lexicon>>,
}

impl Sources {
    /// No sources: a schema with a quote is refused when lowered.
    pub fn none() -> Self {
        Sources::default()
    }
}

impl Quote {
    /// Reads the keyword's value at `at`.
    pub fn read(v: &Value, at: &str) -> Result<Quote, SchemaError> {
        let bad = |what: &str| SchemaError::invalid(QUOTE_KEYWORD, at, what);
        let source = |v: &Value| match v {
            Value::Bool(true) => Ok(QuoteSource::Input),
            Value::String(s) if !s.is_empty() => Ok(QuoteSource::Named(s.clone())),
            _ => Err(bad(
                "must be true (the input), a source name, or an object with \"source\"",
            )),
        };
        let mut q = Quote {
            source: QuoteSource::Input,
            normalize: Normalize::None,
            min_chars: 1,
            location: at.to_string(),
        };
        match v {
            Value::Object(o) => {
                for (k, v) in o {
                    match k.as_str() {
                        "source" => q.source = source(v)?,
                        "normalize" => {
                            q.normalize = match v.as_str() {
                                Some("none") => Normalize::None,
                                Some("whitespace") => Normalize::Whitespace,
                                Some("case") => Normalize::Case,
                                _ => {
                                    return Err(bad(
                                        "has a \"normalize\" that is not \"none\", \"whitespace\" or \"case\"",
                                    ))
                                }
                            }
                        }
                        "min_chars" => {
                            q.min_chars = v
                                .as_u64()
                                .filter(|&n| n <= crate::grammar::MAX_REPEAT as u64)
                                .ok_or_else(|| bad("has a \"min_chars\" that is not a count up to 4096"))?
                                as u32
                        }
                        other => {
                            return Err(bad(&format!(
                                "has an unknown option {other:?} (known: source, normalize, min_chars)"
                            )))
                        }
                    }
                }
            }
            other => q.source = source(other)?,
        }
        Ok(q)
    }

    /// The source text this quote names in `sources`, or the refusal naming it.
    pub fn text<'s>(&self, sources: &'s Sources) -> Result<&'s str, SchemaError> {
        let found = match &self.source {
            QuoteSource::Input => sources.input.as_deref(),
            QuoteSource::Named(n) => sources.named.get(n).map(String::as_str),
        };
        found.ok_or_else(|| {
            let what = match &self.source {
                QuoteSource::Input => {
                    "asks for a span of the input, and this request has no input text".to_string()
                }
                QuoteSource::Named(n) => {
                    let known: Vec<&str> = sources.named.keys().map(String::as_str).collect();
                    format!(
                        "names source {n:?}, which the request's llamay_sources does not have \
                         (it has: {})",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    )
                }
            };
            SchemaError::invalid(QUOTE_KEYWORD, &self.location, what)
        })
    }
}

/// Span automata built while lowering one schema, shared by every quote of the same
/// source and normalisation.
#[derive(Default)]
pub(crate) struct Spans {
    built: BTreeMap<(QuoteSource, u8), Arc<SpanAutomaton>>,
    /// Where quotes were enforced, for the report.
    pub locations: Vec<String>,
}

impl Spans {
    pub(super) fn get(
        &mut self,
        q: &Quote,
        sources: &Sources,
    ) -> Result<Arc<SpanAutomaton>, SchemaError> {
        let key = (q.source.clone(), q.normalize as u8);
        if let Some(a) = self.built.get(&key) {
            self.locations.push(q.location.clone());
            return Ok(a.clone());
        }
        let text = q.text(sources)?;
        let a = Arc::new(SpanAutomaton::new(text, q.normalize).map_err(|e| {
            SchemaError::invalid(
                QUOTE_KEYWORD,
                &q.location,
                format!("cannot be enforced: {e}"),
            )
        })?);
        self.built.insert(key, a.clone());
        self.locations.push(q.location.clone());
        Ok(a)
    }
}

/// Every text of a JSON number that occurs in `source` (a substring of it that is a
/// valid JSON number), for a quoted number; each at most once, in order of first
/// appearance. `integer` keeps those without fraction or exponent.
pub(super) fn numbers_in(source: &str, integer: bool) -> Vec<String> {
    let b = source.as_bytes();
    let is_num_byte = |c: u8| c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E');
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut i = 0;
    while i < b.len() {
        if !is_num_byte(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_num_byte(b[i]) {
            i += 1;
        }
        // Runs are short in real text; cap a pathological one.
        let run = &b[start..i.min(start + 64)];
        for s in 0..run.len() {
            for e in s + 1..=run.len() {
                let t = &run[s..e];
                if is_json_number(t, integer) && seen.insert(t.to_vec()) {
                    out.push(String::from_utf8_lossy(t).into_owned());
                }
            }
        }
    }
    out
}

/// Whether `t` is a JSON number (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`).
fn is_json_number(t: &[u8], integer: bool) -> bool {
    let mut i = 0;
    let digits = |i: &mut usize| {
        let s = *i;
        while *i < t.len() && t[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - s
    };
    if t.first() == Some(&b'-') {
        i += 1;
    }
    match t.get(i) {
        Some(b'0') => i += 1,
        Some(c) if c.is_ascii_digit() => {
            digits(&mut i);
        }
        _ => return false,
    }
    if integer {
        return i == t.len();
    }
    if t.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    }
    if matches!(t.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(t.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == t.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_the_json_numbers_written_in_the_source() {
        let n = numbers_in("Total 1234.50 EUR, qty 03, -7e2, v1.2.3", false);
        for want in ["1234.50", "234.5", "4", "0", "3", "-7e2", "7", "1.2", "2.3"] {
            assert!(n.contains(&want.to_string()), "{want} missing from {n:?}");
        }
        for not in ["03", "1.2.3", "1234.", ".5"] {
            assert!(!n.contains(&not.to_string()), "{not} in {n:?}");
        }
        let i = numbers_in("Total 1234.50", true);
        assert!(i.contains(&"1234".to_string()) && !i.contains(&"1234.50".to_string()));
    }

    #[test]
    fn the_keyword_reads_its_three_forms() {
        let q = Quote::read(&serde_json::json!(true), "p").unwrap();
        assert_eq!((q.source, q.min_chars), (QuoteSource::Input, 1));
        let q = Quote::read(&serde_json::json!("doc"), "p").unwrap();
        assert_eq!(q.source, QuoteSource::Named("doc".into()));
        let q = Quote::read(
            &serde_json::json!({"source": "doc", "normalize": "whitespace", "min_chars": 3}),
            "p",
        )
        .unwrap();
        assert_eq!((q.normalize, q.min_chars), (Normalize::Whitespace, 3));
        for bad in [
            serde_json::json!(false),
            serde_json::json!(""),
            serde_json::json!({"normalize": "upper"}),
            serde_json::json!({"sauce": true}),
        ] {
            let e = Quote::read(&bad, "properties.q").unwrap_err();
            assert!(e.message.contains("x-llamay-quote"), "{e}");
        }
    }
}
