//! What a request's output must be, decided in one place for every route and for
//! `llamay run`.
//!
//! Each API shape (and the CLI) names the surfaces it read (`response_format`,
//! `format`, `llamay_schema`, `output_config.format`, `llamay_grammar`, `-schema`...)
//! in [`Surfaces`], which [`Surfaces::resolve`] checks and turns into a
//! [`ConstraintSpec`]; [`ConstraintSpec::decide`] then puts the server's default
//! grammar in place of nothing, and offered tools have their say once the model's
//! convention is known (`tools::plan`). Schemas and grammars are compiled to their
//! model-independent form here, so a refusal is answered before a model loads or a token is decoded;
//! only the vocabulary-specific automaton is built later, per model, and cached.

use std::sync::Arc;
use std::time::{Duration, Instant};

use llamay_constrain::grammar::Grammar;
use llamay_constrain::schema::{NotEnforced, Report, Sources};
use llamay_constrain::Constraint;
use serde_json::Value;

use crate::error::Error;
use crate::loaded::LoadedModel;

/// Largest grammar text accepted in a request.
const MAX_GRAMMAR_BYTES: usize = 256 << 10;

/// The output constraint of one request.
#[derive(Clone, Debug, Default)]
pub enum ConstraintSpec {
    #[default]
    None,
    /// Any valid JSON value.
    Json,
    /// A JSON Schema, already lowered to the grammar IR.
    Schema(Arc<CompiledSchema>),
    /// GBNF text (already parsed once, so it is known to be valid).
    Grammar(Arc<str>),
    /// A forced tool call: the call grammar over the tools' parameter schemas.
    Tools(Arc<CompiledSchema>),
    /// `auto` tools beside a response constraint (its kind: `schema`, `json` or
    /// `grammar`): calls, or an answer in that constraint's language.
    ToolsOr(&'static str, Arc<CompiledSchema>),
}

/// A schema compiled to the grammar IR, with its not-enforced report.
#[derive(Debug)]
pub struct CompiledSchema {
    /// The schema text, canonical (serde_json's), used as the cache key.
    pub key: String,
    pub grammar: Grammar,
    pub report: Report,
    pub compile_time: Duration,
}

/// The enforcement report every response carries.
#[derive(Clone, Debug, Default)]
pub struct EnforcementReport {
    /// `none`, `json`, `schema`, `grammar` or `tools`.
    pub kind: &'static str,
    /// Schema keywords parsed but not enforced, as `keyword at location`.
    pub not_enforced: Vec<String>,
    /// Extensions enforced beyond JSON Schema, as `quote: enforced at location`.
    pub enforced: Vec<String>,
    /// Time spent compiling the constraint for this request (near zero when cached).
    pub compile_time: Duration,
}

/// What a request asked its output to be, by the field it used (the API shape names
/// it in messages). It owns what it holds, so resolving it (parsing a grammar,
/// compiling a schema: milliseconds to seconds for a large one) can run off the async
/// runtime's threads ([`Surfaces::resolve_blocking`]).
#[derive(Clone, Debug, Default)]
pub struct Surfaces {
    /// A JSON Schema from the request (`llamay_schema` first, then the API's own).
    pub schemas: Vec<(&'static str, Value)>,
    /// `json` was asked for (`json_object`, `format: "json"`, `llamay_format`).
    pub json: Option<&'static str>,
    /// GBNF text (`llamay_grammar` / `grammar`).
    pub grammar: Option<(&'static str, String)>,
    /// What `x-llamay-quote` values must be spans of: the request's input and its
    /// `llamay_sources`.
    pub sources: Sources,
}

/// Constraints resolved at once; more wait their turn, so a burst of huge grammars
/// cannot take every core from decoding.
static RESOLVING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

impl Surfaces {
    /// Adds a schema; earlier ones win (so add `llamay_schema` first).
    pub fn schema(&mut self, field: &'static str, v: &Value) {
        self.schemas.push((field, v.clone()));
    }

    /// Takes the GBNF fields every API shape accepts: `llamay_grammar` wins over
    /// `grammar`.
    pub fn grammar_fields(&mut self, llamay_grammar: Option<&String>, grammar: Option<&String>) {
        self.grammar = match (llamay_grammar, grammar) {
            (Some(g), _) => Some(("llamay_grammar", g.clone())),
            (None, Some(g)) => Some(("grammar", g.clone())),
            (None, None) => None,
        };
    }

    /// Takes `llamay_sources`: an object of source names to texts.
    pub fn llamay_sources(&mut self, v: Option<&Value>) -> Result<(), Error> {
        let Some(v) = v else { return Ok(()) };
        let bad = || {
            Error::bad_request(
                "llamay_sources must be an object of source names to texts, e.g.                  {\"contract\": \"...\"}",
            )
        };
        let obj = v.as_object().ok_or_else(bad)?;
        for (name, text) in obj {
            let text = text.as_str().ok_or_else(bad)?;
            self.sources.named.insert(name.clone(), text.to_string());
        }
        Ok(())
    }

    /// The request's input text, for `x-llamay-quote: true`.
    pub fn input(&mut self, text: String) {
        self.sources.input = Some(text);
    }

    /// Takes `llamay_format`, whose only value is `"json"`.
    pub fn llamay_format(&mut self, format: Option<&String>) -> Result<(), Error> {
        if let Some(f) = format {
            if f != "json" {
                return Err(Error::bad_request(format!(
                    "llamay_format must be \"json\", not {f:?}"
                )));
            }
            self.json = Some("llamay_format");
        }
        Ok(())
    }

    /// [`Self::resolve`] on a blocking thread, at most two at once.
    pub async fn resolve_blocking(self) -> Result<ConstraintSpec, Error> {
        if self.grammar.is_none() && self.schemas.is_empty() {
            return self.resolve();
        }
        let _turn = RESOLVING
            .acquire()
            .await
            .map_err(|_| Error::internal("the constraint compiler is closed"))?;
        tokio::task::spawn_blocking(move || self.resolve())
            .await
            .map_err(|e| Error::internal(format!("compiling the constraint failed: {e}")))?
    }

    /// Decides the constraint: a grammar together with a schema or JSON is refused,
    /// a schema is compiled (or refused with the compiler's message).
    pub fn resolve(self) -> Result<ConstraintSpec, Error> {
        if let Some((field, text)) = &self.grammar {
            if let Some((other, _)) = self.schemas.first() {
                return Err(Error::bad_request(format!(
                    "{field} and {other} were both given: send a grammar or a schema, not both"
                )));
            }
            if let Some(other) = self.json {
                return Err(Error::bad_request(format!(
                    "{field} and {other} were both given: send a grammar or a JSON format, not both"
                )));
            }
            return grammar_spec(field, text);
        }
        if let Some((field, schema)) = self.schemas.first() {
            return schema_spec(field, schema, &self.sources);
        }
        Ok(match self.json {
            Some(_) => ConstraintSpec::Json,
            None => ConstraintSpec::None,
        })
    }
}

fn grammar_spec(field: &str, text: &str) -> Result<ConstraintSpec, Error> {
    checked_grammar(field, text).map(ConstraintSpec::Grammar)
}

/// Checks a GBNF grammar named by `field` (size, syntax) and keeps its text: for
/// `llamay_grammar` and friends, and for `serve -grammar-file`.
pub fn checked_grammar(field: &str, text: &str) -> Result<Arc<str>, Error> {
    if text.len() > MAX_GRAMMAR_BYTES {
        return Err(Error::bad_request(format!(
            "{field} is {} bytes; the limit is {MAX_GRAMMAR_BYTES}",
            text.len()
        )));
    }
    llamay_constrain::gbnf::parse_gbnf(text)
        .map_err(|e| Error::bad_request(format!("{field}: {e}")))?;
    Ok(text.into())
}

fn schema_spec(field: &str, schema: &Value, sources: &Sources) -> Result<ConstraintSpec, Error> {
    if !schema.is_object() && !schema.is_boolean() {
        return Err(Error::bad_request(format!(
            "{field} must be a JSON Schema object"
        )));
    }
    let t0 = Instant::now();
    let (grammar, report) = llamay_constrain::schema::grammar_with(schema, sources)
        .map_err(|e| Error::refusal(e.to_string()).at(field))?;
    Ok(ConstraintSpec::Schema(Arc::new(CompiledSchema {
        key: schema.to_string(),
        grammar,
        report,
        compile_time: t0.elapsed(),
    })))
}

impl ConstraintSpec {
    /// The constraint a generation runs under before tools have their say
    /// (`tools::plan`): a request that asked for nothing gets the server's default
    /// grammar (`serve -grammar-file`), if it has one.
    pub fn decide(asked: ConstraintSpec, default_grammar: Option<&Arc<str>>) -> ConstraintSpec {
        match (asked, default_grammar) {
            (ConstraintSpec::None, Some(g)) => ConstraintSpec::Grammar(g.clone()),
            (asked, _) => asked,
        }
    }

    /// The schema's not-enforced report, for a spec that holds a schema.
    pub fn schema_report(&self) -> Option<&Report> {
        match self {
            ConstraintSpec::Schema(s)
            | ConstraintSpec::Tools(s)
            | ConstraintSpec::ToolsOr(_, s) => Some(&s.report),
            _ => None,
        }
    }

    /// The spec's name in the enforcement report.
    pub fn kind(&self) -> &'static str {
        match self {
            ConstraintSpec::None => "none",
            ConstraintSpec::Json => "json",
            ConstraintSpec::Schema(_) => "schema",
            ConstraintSpec::Grammar(_) => "grammar",
            ConstraintSpec::Tools(_) => "tools",
            ConstraintSpec::ToolsOr("schema", _) => "tools_or_schema",
            ConstraintSpec::ToolsOr("json", _) => "tools_or_json",
            ConstraintSpec::ToolsOr(_, _) => "tools_or_grammar",
        }
    }

    /// Builds (or takes from the model's cache) the automaton for `lm`'s vocabulary.
    pub fn build(
        &self,
        lm: &LoadedModel,
    ) -> Result<(Option<Constraint>, EnforcementReport), Error> {
        let t0 = Instant::now();
        let fail = |e: llamay_constrain::Error| {
            Error::bad_request(format!("the constraint could not be compiled: {e}"))
        };
        let mut report = EnforcementReport {
            kind: self.kind(),
            ..EnforcementReport::default()
        };
        let c = match self {
            ConstraintSpec::None => None,
            ConstraintSpec::Json => Some(lm.constraints.any_json().map_err(fail)?),
            ConstraintSpec::Grammar(text) => Some(lm.constraints.gbnf(text).map_err(fail)?),
            ConstraintSpec::Schema(s)
            | ConstraintSpec::Tools(s)
            | ConstraintSpec::ToolsOr(_, s) => {
                report.not_enforced = s
                    .report
                    .entries
                    .iter()
                    .map(|e| {
                        let what = match e.kind {
                            NotEnforced::Ignored => "not enforced",
                            NotEnforced::OverLimit => "above 4096, not enforced",
                            NotEnforced::Unknown => "unknown keyword, ignored",
                        };
                        format!("{} at {}: {what}", e.keyword, e.location)
                    })
                    .collect();
                report.enforced = s
                    .report
                    .quotes
                    .iter()
                    .map(|at| format!("quote: enforced at {at}"))
                    .collect();
                report.compile_time += s.compile_time;
                if s.report.quotes.is_empty() {
                    Some(
                        lm.constraints
                            .get_or_build(self.kind(), &s.key, |v| {
                                Constraint::from_grammar(&s.grammar, v)
                            })
                            .map_err(fail)?,
                    )
                } else {
                    // Quotes are bound to this request's sources: nothing to share.
                    Some(Constraint::from_grammar(&s.grammar, lm.vocab.clone()).map_err(fail)?)
                }
            }
        };
        report.compile_time += t0.elapsed();
        Ok((c, report))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use serde_json::json;

    #[test]
    fn llamay_schema_wins_and_refusals_carry_the_compiler_message() {
        let a = json!({"type": "integer"});
        let b = json!({"type": "string"});
        let mut s = Surfaces::default();
        s.schema("llamay_schema", &a);
        s.schema("response_format", &b);
        match s.resolve().unwrap() {
            ConstraintSpec::Schema(c) => assert_eq!(c.key, a.to_string()),
            other => panic!("{other:?}"),
        }
        let bad = json!({"type": "object", "properties": {"a": {"not": {"type": "string"}}}});
        let mut s = Surfaces::default();
        s.schema("llamay_schema", &bad);
        let e = s.resolve().unwrap_err();
        assert!(e.refusal);
        assert!(
            e.message.starts_with("properties.a uses \"not\""),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_grammar_with_a_schema_is_refused() {
        let a = json!({"type": "integer"});
        let mut s = Surfaces::default();
        s.schema("response_format", &a);
        s.grammar = Some(("grammar", "root ::= \"x\"".into()));
        assert_eq!(s.resolve().unwrap_err().kind, ErrorKind::InvalidRequest);
        let s = Surfaces {
            grammar: Some(("llamay_grammar", "root ::= root \"x\"".into())),
            ..Surfaces::default()
        };
        assert_eq!(s.resolve().unwrap_err().kind, ErrorKind::InvalidRequest);
    }

    #[test]
    fn the_default_grammar_fills_only_an_empty_ask() {
        let default: Arc<str> = "root ::= \"d\"".into();
        let json = ConstraintSpec::decide(ConstraintSpec::Json, Some(&default));
        assert_eq!(json.kind(), "json");
        let none = ConstraintSpec::decide(ConstraintSpec::None, Some(&default));
        assert!(matches!(none, ConstraintSpec::Grammar(g) if g == default));
        assert_eq!(ConstraintSpec::decide(ConstraintSpec::None, None).kind(), "none");
    }
}
