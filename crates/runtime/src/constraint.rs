//! What a request's output must be: the surfaces a request used ([`Surfaces`]),
//! checked and turned into a [`ConstraintSpec`] by [`Surfaces::resolve`] (the rules:
//! one output constraint, grammars not beside schemas, schemas compiled or refused
//! with the compiler's message), and the spec built into an automaton for a model's
//! vocabulary ([`ConstraintSpec::build`]). Requests reach this through the runtime's
//! [`crate::Resolver`], inside `Runtime::start`, which keeps compiled schemas; `llamay
//! run` resolves its flags here directly. Offered tools have their say once the
//! model's convention is known (`tools::plan`). Schemas and grammars are compiled to
//! their model-independent form before a model loads or a token is decoded; only
//! the vocabulary-specific automaton is built later, per model, and cached.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llamay_constrain::{
    AdditionalProperties, Constraint, Grammar, Lexicon, NotEnforced, SchemaOptions, SchemaReport,
    Sources,
};
use serde_json::Value;

use crate::error::Error;
use crate::loaded::LoadedModel;
use crate::settings::ConstraintSettings;

/// Largest grammar text accepted in a request.
const MAX_GRAMMAR_BYTES: usize = 256 << 10;

/// The output constraint of one request.
#[derive(Clone, Debug, Default)]
pub enum ConstraintSpec {
    /// Unconstrained: the model writes what it likes.
    #[default]
    None,
    /// JSON mode: any JSON object (`json_object`, `format: "json"`, `-json`,
    /// `llamay_format: "json"`), as OpenAI's and Ollama's JSON modes answer.
    Json,
    /// Any JSON value, scalars included (`llamay_format: "json_value"`).
    JsonValue,
    /// A JSON Schema, already lowered to the grammar IR.
    Schema(Arc<SchemaGrammar>),
    /// A GBNF grammar, parsed once (its text is the cache key).
    Grammar(Arc<Gbnf>),
    /// A forced tool call: the call grammar over the tools' parameter schemas.
    Tools(Arc<SchemaGrammar>),
    /// `auto` tools beside a response constraint (of that kind): calls, or an answer
    /// in that constraint's language.
    ToolsOr(AnswerKind, Arc<SchemaGrammar>),
    /// A whole-output regex (`llamay_regex`), already checked.
    Regex(Arc<str>),
    /// The output is one of a request's strings (`llamay_choice`).
    Choice(Arc<Lexicon>),
    /// The output is one term of a lexicon (`llamay_lexicon`).
    Lexicon {
        /// The terms.
        lexicon: Arc<Lexicon>,
        /// One of the runtime's served lexicons (the same for every request, so its
        /// automaton is built once per model), not a request's own terms.
        served: bool,
    },
}

/// A GBNF grammar as a request (or `serve -grammar-file`) sent it: its text, and the
/// grammar IR parsed from it once.
#[derive(Debug)]
pub struct Gbnf {
    /// The grammar's source text, as sent.
    pub text: Arc<str>,
    /// The grammar IR parsed from `text`.
    pub grammar: Arc<Grammar>,
}

/// The constraint an `auto` tools request's answer is held to, beside its calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerKind {
    /// A JSON Schema ([`ConstraintSpec::Schema`]).
    Schema,
    /// JSON mode, any object ([`ConstraintSpec::Json`]).
    Json,
    /// Any JSON value ([`ConstraintSpec::JsonValue`]).
    JsonValue,
    /// A GBNF grammar ([`ConstraintSpec::Grammar`]).
    Grammar,
    /// A whole-output regex ([`ConstraintSpec::Regex`]).
    Regex,
    /// One of a set of strings: `llamay_choice` or `llamay_lexicon`
    /// ([`ConstraintSpec::Choice`], [`ConstraintSpec::Lexicon`]).
    Lexicon,
}

impl AnswerKind {
    /// The kind's name in the enforcement report, after `tools_or_`.
    pub fn name(self) -> &'static str {
        match self {
            AnswerKind::Schema => "schema",
            AnswerKind::Json => "json",
            AnswerKind::JsonValue => "json_value",
            AnswerKind::Grammar => "grammar",
            AnswerKind::Regex => "regex",
            AnswerKind::Lexicon => "lexicon",
        }
    }
}

/// What `llamay_lexicon` names: a served lexicon, or the terms themselves.
#[derive(Clone, Debug)]
pub enum LexiconAsk {
    /// The name of a lexicon the server was started with.
    Named(String),
    /// The request's own terms (`{"terms": [...]}`).
    Terms(Vec<String>),
}

/// A schema compiled to the grammar IR, with its not-enforced report.
#[derive(Debug)]
pub struct SchemaGrammar {
    /// The schema text, canonical (serde_json's), used as the cache key.
    pub key: String,
    /// The grammar IR the schema lowered to.
    pub grammar: Arc<Grammar>,
    /// The keywords parsed but not enforced, and the extensions (quotes, formats,
    /// lexicons) that are.
    pub report: SchemaReport,
    /// Time this request spent getting the compile: the compile itself, or only the
    /// lookup when an earlier request's compile was found again.
    pub compile_time: Duration,
}

impl SchemaGrammar {
    /// This compile again for another request, which spent only `since.elapsed()`
    /// finding it.
    fn reused(&self, since: Instant) -> Arc<SchemaGrammar> {
        Arc::new(SchemaGrammar {
            key: self.key.clone(),
            grammar: self.grammar.clone(),
            report: self.report.clone(),
            compile_time: since.elapsed(),
        })
    }
}

/// What one refusal is counted as in a [`SchemaMemo`].
const REFUSAL_BYTES: usize = 256;

/// A compile's outcome, by its key.
type Compiled = Result<Arc<SchemaGrammar>, Error>;

/// Schema compiles a `Resolver` has done (the IR or the refusal, by compile key, within
/// `bound` bytes: it starts over when full), and how often they were found again.
pub(crate) struct SchemaMemo {
    kept: Mutex<Kept>,
    bound: usize,
    lookups: AtomicU64,
    hits: AtomicU64,
}

#[derive(Default)]
struct Kept {
    by_key: HashMap<u64, Compiled>,
    bytes: usize,
}

impl SchemaMemo {
    /// The outcome of a compile with `key`, counted.
    pub(crate) fn get(&self, key: u64) -> Option<Compiled> {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let found = kept.by_key.get(&key).cloned();
        if found.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Keeps a compile's outcome, unless it alone is past the bound.
    pub(crate) fn put(&self, key: u64, compiled: Compiled) {
        let size = match &compiled {
            Ok(s) => s.key.len() + s.grammar.heap_bytes(),
            Err(e) => REFUSAL_BYTES + e.message.len(),
        };
        if size > self.bound {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.bytes + size > self.bound {
            *kept = Kept::default();
        }
        if kept.by_key.insert(key, compiled).is_none() {
            kept.bytes += size;
        }
    }

    pub(crate) fn new(bound: usize) -> SchemaMemo {
        SchemaMemo {
            kept: Mutex::default(),
            bound,
            lookups: AtomicU64::new(0),
            hits: AtomicU64::new(0),
        }
    }

    /// The figures of `/v1/stats`' `constraints` object.
    pub(crate) fn stats_json(&self) -> Value {
        let lookups = self.lookups.load(Ordering::Relaxed);
        let hits = self.hits.load(Ordering::Relaxed);
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        serde_json::json!({
            "schema_lookups": lookups,
            "schema_hits": hits,
            "schema_hit_rate": if lookups == 0 { 0.0 } else { hits as f64 / lookups as f64 },
            "schemas_kept": kept.by_key.len(),
            "schema_bytes": kept.bytes,
            "schema_bound_bytes": self.bound,
        })
    }
}

/// The enforcement report every response carries.
#[derive(Clone, Debug, Default)]
pub struct EnforcementReport {
    /// `none`, `json`, `schema`, `grammar`, `tools`, `regex`, `choice` or `lexicon`.
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
/// runtime's threads ([`crate::Resolver`]).
#[derive(Clone, Debug, Default)]
pub struct Surfaces {
    /// A JSON Schema from the request (`llamay_schema` first, then the API's own).
    pub schemas: Vec<(&'static str, Value)>,
    /// JSON mode was asked for (`json_object`, `format: "json"`, `llamay_format`):
    /// the field that asked.
    pub json: Option<&'static str>,
    /// The JSON asked for may be any value, not only an object
    /// (`llamay_format: "json_value"`).
    pub json_value: bool,
    /// GBNF text (`llamay_grammar` / `grammar`).
    pub grammar: Option<(&'static str, String)>,
    /// What `x-llamay-quote` values must be spans of: the request's input and its
    /// `llamay_sources`.
    pub sources: Sources,
    /// A whole-output regex (`llamay_regex` / `guided_regex`).
    pub regex: Option<(&'static str, String)>,
    /// The output is one of these strings (`llamay_choice` / `guided_choice`).
    pub choice: Option<(&'static str, Vec<String>)>,
    /// The output is one term of a lexicon (`llamay_lexicon`).
    pub lexicon: Option<(&'static str, LexiconAsk)>,
    /// How a schema is read (`llamay_options`).
    pub options: SchemaOptions,
    /// `llamay_options.whole_tool_calls`: a stream sends each call whole at the end.
    pub whole_tool_calls: bool,
}

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
                "llamay_sources must be an object of source names to texts, e.g. {\"contract\": \"...\"}",
            )
        };
        let obj = v.as_object().ok_or_else(bad)?;
        for (name, text) in obj {
            let text = text.as_str().ok_or_else(bad)?;
            self.sources.named.insert(name.clone(), text.to_string());
        }
        Ok(())
    }

    /// Takes `llamay_options`: `{"additional_properties": "open" | "closed",
    /// "whole_tool_calls": bool}`.
    pub fn llamay_options(&mut self, v: Option<&Value>) -> Result<(), Error> {
        let Some(v) = v else { return Ok(()) };
        let obj = v.as_object().ok_or_else(|| {
            Error::bad_request(
                "llamay_options must be an object, e.g. {\"additional_properties\": \"open\"}",
            )
        })?;
        for (key, value) in obj {
            match key.as_str() {
                "additional_properties" => {
                    self.options.additional_properties = value
                        .as_str()
                        .and_then(AdditionalProperties::from_name)
                        .ok_or_else(|| {
                            Error::bad_request(format!(
                                "llamay_options.additional_properties must be \"open\" or \"closed\", not {value}"
                            ))
                        })?;
                }
                "whole_tool_calls" => {
                    self.whole_tool_calls = value.as_bool().ok_or_else(|| {
                        Error::bad_request(format!(
                            "llamay_options.whole_tool_calls must be true or false, not {value}"
                        ))
                    })?;
                }
                other => {
                    return Err(Error::bad_request(format!(
                        "llamay_options has no option {other:?}; the options are: \
                         additional_properties, whole_tool_calls"
                    )))
                }
            }
        }
        Ok(())
    }

    /// Takes a whole-output regex; the first field given wins (`llamay_regex`, then
    /// vLLM's `guided_regex`).
    pub fn regex_field(&mut self, field: &'static str, pattern: Option<&String>) {
        if let (None, Some(p)) = (&self.regex, pattern) {
            self.regex = Some((field, p.clone()));
        }
    }

    /// Takes a list of strings the output must be one of; the first field given wins
    /// (`llamay_choice`, then `guided_choice`).
    pub fn choice_field(&mut self, field: &'static str, v: Option<&Value>) -> Result<(), Error> {
        let Some(v) = v else { return Ok(()) };
        if self.choice.is_some() {
            return Ok(());
        }
        let bad = || Error::bad_request(format!("{field} must be a non-empty list of strings"));
        let list = v.as_array().filter(|l| !l.is_empty()).ok_or_else(bad)?;
        let strings = list
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(bad)?;
        self.choice = Some((field, strings));
        Ok(())
    }

    /// Takes `llamay_lexicon`: a served lexicon's name or `{"terms": [...]}`.
    pub fn llamay_lexicon(&mut self, v: Option<&Value>) -> Result<(), Error> {
        let Some(v) = v else { return Ok(()) };
        let bad = || {
            Error::bad_request(
                "llamay_lexicon must be a lexicon's name or {\"terms\": [\"...\", ...]}",
            )
        };
        let ask = match v {
            Value::String(name) => LexiconAsk::Named(name.clone()),
            Value::Object(o) => {
                let terms = o.get("terms").and_then(Value::as_array).ok_or_else(bad)?;
                let terms = terms
                    .iter()
                    .map(|s| s.as_str().map(str::to_string))
                    .collect::<Option<Vec<String>>>()
                    .ok_or_else(bad)?;
                LexiconAsk::Terms(terms)
            }
            _ => return Err(bad()),
        };
        self.lexicon = Some(("llamay_lexicon", ask));
        Ok(())
    }

    /// The request's input text, for `x-llamay-quote: true`. Text of nothing but
    /// whitespace (an input of images only) is none: a quote of it is refused as
    /// having no input text, not compiled into a language with no strings.
    pub fn input(&mut self, text: String) {
        self.sources.input = (!text.trim().is_empty()).then_some(text);
    }

    /// Takes `llamay_format`: `"json"` (an object, as JSON mode) or `"json_value"`
    /// (any JSON value).
    pub fn llamay_format(&mut self, format: Option<&String>) -> Result<(), Error> {
        if let Some(f) = format {
            match f.as_str() {
                "json" => {}
                "json_value" => self.json_value = true,
                _ => {
                    return Err(Error::bad_request(format!(
                        "llamay_format must be \"json\" (an object) or \"json_value\" (any JSON value), not {f:?}"
                    )))
                }
            }
            self.json = Some("llamay_format");
        }
        Ok(())
    }

    /// Whether resolving costs next to nothing (no grammar, regex, choice, lexicon
    /// or schema to read): then it needs no blocking thread.
    pub(crate) fn is_light(&self) -> bool {
        self.grammar.is_none()
            && self.regex.is_none()
            && self.choice.is_none()
            && self.lexicon.is_none()
            && self.schemas.is_empty()
    }

    /// Decides the constraint under `settings` (the lexicons names refer to, the
    /// compile budget): a grammar together with a schema or JSON is refused, a schema
    /// is compiled (or refused with the compiler's message).
    pub fn resolve(self, settings: &ConstraintSettings) -> Result<ConstraintSpec, Error> {
        self.resolve_in(None, settings)
    }

    /// [`Self::resolve`], a schema's compile taken from (or kept in) `memo`.
    pub(crate) fn resolve_in(
        mut self,
        memo: Option<&SchemaMemo>,
        settings: &ConstraintSettings,
    ) -> Result<ConstraintSpec, Error> {
        if let Some(spec) = self.resolve_exact(settings)? {
            return Ok(spec);
        }
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
            self.sources.lexicons = settings.lexicons().clone();
            self.options.budget = settings.budget;
            let Some(memo) = memo else {
                return compile_schema(field, schema, &self.sources, &self.options)
                    .map(ConstraintSpec::Schema);
            };
            let t0 = Instant::now();
            let key = crate::compile_key::compile_key(schema, &self.options, &self.sources);
            let compiled = match memo.get(key) {
                Some(done) => done.map(|s| s.reused(t0)),
                None => {
                    let done = compile_schema(field, schema, &self.sources, &self.options);
                    memo.put(key, done.clone());
                    done
                }
            };
            return compiled.map(ConstraintSpec::Schema);
        }
        Ok(match self.json {
            Some(_) if self.json_value => ConstraintSpec::JsonValue,
            Some(_) => ConstraintSpec::Json,
            None => ConstraintSpec::None,
        })
    }
}

impl Surfaces {
    /// A regex, a choice or a lexicon: each is the whole output, so any other surface
    /// beside one is refused.
    fn resolve_exact(
        &self,
        settings: &ConstraintSettings,
    ) -> Result<Option<ConstraintSpec>, Error> {
        let exact = [
            self.regex.as_ref().map(|(f, _)| *f),
            self.choice.as_ref().map(|(f, _)| *f),
            self.lexicon.as_ref().map(|(f, _)| *f),
        ];
        let Some(field) = exact.iter().flatten().next().copied() else {
            return Ok(None);
        };
        let others = exact
            .iter()
            .flatten()
            .copied()
            .skip(1)
            .chain(self.grammar.as_ref().map(|(f, _)| *f))
            .chain(self.schemas.first().map(|(f, _)| *f))
            .chain(self.json);
        if let Some(other) = others.into_iter().next() {
            return Err(Error::bad_request(format!(
                "{field} and {other} were both given: send one output constraint"
            )));
        }
        let term_error = |e: llamay_constrain::Error| Error::bad_request(format!("{field}: {e}"));
        Ok(Some(if let Some((_, pattern)) = &self.regex {
            if pattern.len() > MAX_GRAMMAR_BYTES {
                return Err(Error::bad_request(format!(
                    "{field} is {} bytes; the limit is {MAX_GRAMMAR_BYTES}",
                    pattern.len()
                )));
            }
            // Read as a schema's `pattern` is (RE2, ASCII `\d` and `\w`), anchored at both ends.
            let whole = format!("^(?:{pattern})$");
            let checked = llamay_constrain::Pattern::compile(&whole, field)
                .map_err(|e| Error::bad_request(format!("{field}: {}", e.message)))?;
            checked.dfa().refuse_empty().map_err(term_error)?;
            ConstraintSpec::Regex(checked.regex.as_str().into())
        } else if let Some((_, strings)) = &self.choice {
            let l = Lexicon::from_terms(field, strings).map_err(term_error)?;
            ConstraintSpec::Choice(Arc::new(l))
        } else {
            match &self.lexicon {
                Some((_, LexiconAsk::Named(name))) => ConstraintSpec::Lexicon {
                    lexicon: settings.named(field, name)?,
                    served: true,
                },
                Some((_, LexiconAsk::Terms(terms))) => ConstraintSpec::Lexicon {
                    lexicon: Arc::new(Lexicon::from_terms(field, terms).map_err(term_error)?),
                    served: false,
                },
                None => unreachable!("one exact surface is set"),
            }
        }))
    }
}

fn grammar_spec(field: &str, text: &str) -> Result<ConstraintSpec, Error> {
    checked_grammar(field, text).map(ConstraintSpec::Grammar)
}

/// Checks a GBNF grammar named by `field` (size, syntax) and keeps it parsed: for
/// `llamay_grammar` and friends, and for `serve -grammar-file`.
pub fn checked_grammar(field: &str, text: &str) -> Result<Arc<Gbnf>, Error> {
    if text.len() > MAX_GRAMMAR_BYTES {
        return Err(Error::bad_request(format!(
            "{field} is {} bytes; the limit is {MAX_GRAMMAR_BYTES}",
            text.len()
        )));
    }
    let grammar = llamay_constrain::parse_gbnf(text)
        .map_err(|e| Error::bad_request(format!("{field}: {e}")))?;
    Ok(Arc::new(Gbnf {
        text: text.into(),
        grammar: Arc::new(grammar),
    }))
}

fn compile_schema(
    field: &str,
    schema: &Value,
    sources: &Sources,
    options: &SchemaOptions,
) -> Result<Arc<SchemaGrammar>, Error> {
    if !schema.is_object() && !schema.is_boolean() {
        return Err(Error::bad_request(format!(
            "{field} must be a JSON Schema object"
        )));
    }
    let t0 = Instant::now();
    let (grammar, report) = llamay_constrain::schema_grammar_with_options(schema, sources, options)
        .map_err(|e| Error::refusal(e.to_string()).at(field))?;
    // The same text read under other options is another language.
    let key = match options.additional_properties {
        AdditionalProperties::Closed => schema.to_string(),
        open => format!("{}:{schema}", open.name()),
    };
    Ok(Arc::new(SchemaGrammar {
        key,
        grammar: Arc::new(grammar),
        report,
        compile_time: t0.elapsed(),
    }))
}

impl ConstraintSpec {
    /// The constraint a generation runs under before tools have their say
    /// (`tools::plan`): a request that asked for nothing gets the server's default
    /// grammar (`serve -grammar-file`), if it has one.
    pub fn decide(asked: ConstraintSpec, default_grammar: Option<&Arc<Gbnf>>) -> ConstraintSpec {
        match (asked, default_grammar) {
            (ConstraintSpec::None, Some(g)) => ConstraintSpec::Grammar(g.clone()),
            (asked, _) => asked,
        }
    }

    /// The schema's not-enforced report, for a spec that holds a schema.
    pub fn schema_report(&self) -> Option<&SchemaReport> {
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
            ConstraintSpec::JsonValue => "json_value",
            ConstraintSpec::Schema(_) => "schema",
            ConstraintSpec::Grammar(_) => "grammar",
            ConstraintSpec::Tools(_) => "tools",
            ConstraintSpec::Regex(_) => "regex",
            ConstraintSpec::Choice(_) => "choice",
            ConstraintSpec::Lexicon { .. } => "lexicon",
            ConstraintSpec::ToolsOr(kind, _) => match kind {
                AnswerKind::Schema => "tools_or_schema",
                AnswerKind::Json => "tools_or_json",
                AnswerKind::JsonValue => "tools_or_json_value",
                AnswerKind::Grammar => "tools_or_grammar",
                AnswerKind::Regex => "tools_or_regex",
                AnswerKind::Lexicon => "tools_or_lexicon",
            },
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
            ConstraintSpec::Json => Some(lm.constraints.json_object().map_err(fail)?),
            ConstraintSpec::JsonValue => Some(lm.constraints.any_json().map_err(fail)?),
            ConstraintSpec::Grammar(g) => Some(
                lm.constraints
                    .get_or_build("gbnf", &g.text, |v| Constraint::from_grammar(&g.grammar, v))
                    .map_err(fail)?,
            ),
            ConstraintSpec::Regex(pattern) => Some(lm.constraints.regex(pattern).map_err(fail)?),
            ConstraintSpec::Choice(l) | ConstraintSpec::Lexicon { lexicon: l, .. } => {
                report
                    .enforced
                    .push(format!("lexicon {}: {} terms", l.name(), l.len()));
                let c = if matches!(self, ConstraintSpec::Lexicon { served: true, .. }) {
                    // A served lexicon is the same for every request: build it once.
                    let key = format!("{}:{}", l.name(), l.len());
                    lm.constraints
                        .get_or_build("lexicon", &key, |v| Constraint::from_lexicon(l, v))
                } else {
                    Constraint::from_lexicon(l, lm.vocab.clone())
                };
                Some(c.map_err(fail)?)
            }
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
                let r = &s.report;
                report.enforced = r
                    .quotes
                    .iter()
                    .map(|at| format!("quote: enforced at {at}"))
                    .chain(r.formats.iter().map(|f| format!("format {f}: enforced")))
                    .chain(r.lexicons.iter().map(|l| format!("lexicon {l}: enforced")))
                    .collect();
                report.compile_time += s.compile_time;
                // An empty key is a request's own (a quote's sources, a request's
                // lexicon terms): nothing to share.
                if s.report.quotes.is_empty() && !s.key.is_empty() {
                    Some(
                        lm.constraints
                            .get_or_build(self.kind(), &s.key, |v| {
                                Constraint::from_grammar(&s.grammar, v)
                            })
                            .map_err(fail)?,
                    )
                } else {
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
        match s.resolve(&ConstraintSettings::default()).unwrap() {
            ConstraintSpec::Schema(c) => assert_eq!(c.key, a.to_string()),
            other => panic!("{other:?}"),
        }
        let bad = json!({"type": "object", "properties": {"a": {"not": {"type": "string"}}}});
        let mut s = Surfaces::default();
        s.schema("llamay_schema", &bad);
        let e = s.resolve(&ConstraintSettings::default()).unwrap_err();
        assert!(e.refusal);
        assert!(
            e.message.starts_with("properties.a uses \"not\""),
            "{}",
            e.message
        );
    }

    #[test]
    fn llamay_sources_takes_texts_and_refuses_anything_else_in_one_clean_line() {
        let mut s = Surfaces::default();
        s.llamay_sources(Some(&json!({"contract": "Clause 4"})))
            .unwrap();
        assert_eq!(s.sources.named["contract"], "Clause 4");
        for bad in [json!({"a": 1}), json!(["x"]), json!("x")] {
            let e = Surfaces::default().llamay_sources(Some(&bad)).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidRequest);
            assert_eq!(
                e.message,
                "llamay_sources must be an object of source names to texts, e.g. {\"contract\": \"...\"}"
            );
        }
    }

    #[test]
    fn a_grammar_with_a_schema_is_refused() {
        let a = json!({"type": "integer"});
        let mut s = Surfaces::default();
        s.schema("response_format", &a);
        s.grammar = Some(("grammar", "root ::= \"x\"".into()));
        assert_eq!(
            s.resolve(&ConstraintSettings::default()).unwrap_err().kind,
            ErrorKind::InvalidRequest
        );
        let s = Surfaces {
            grammar: Some(("llamay_grammar", "root ::= root \"x\"".into())),
            ..Surfaces::default()
        };
        assert_eq!(
            s.resolve(&ConstraintSettings::default()).unwrap_err().kind,
            ErrorKind::InvalidRequest
        );
    }

    #[test]
    fn the_default_grammar_fills_only_an_empty_ask() {
        let default = checked_grammar("test", "root ::= \"d\"").unwrap();
        let json = ConstraintSpec::decide(ConstraintSpec::Json, Some(&default));
        assert_eq!(json.kind(), "json");
        let none = ConstraintSpec::decide(ConstraintSpec::None, Some(&default));
        assert!(matches!(none, ConstraintSpec::Grammar(g) if Arc::ptr_eq(&g, &default)));
        assert_eq!(
            ConstraintSpec::decide(ConstraintSpec::None, None).kind(),
            "none"
        );
    }

    #[test]
    fn exact_surfaces_resolve_and_refuse_company() {
        let mut s = Surfaces::default();
        s.regex_field("llamay_regex", Some(&"\\d+".to_string()));
        s.regex_field("guided_regex", Some(&"x".to_string()));
        let ConstraintSpec::Regex(p) = s.resolve(&ConstraintSettings::default()).unwrap() else {
            panic!()
        };
        let dfa = llamay_constrain::ByteDfa::new(&p).unwrap();
        assert!(dfa.matches(b"123") && !dfa.matches(b"12a") && !dfa.matches("١".as_bytes()));
        let mut s = Surfaces::default();
        s.regex_field("guided_regex", Some(&"(".to_string()));
        assert_eq!(
            s.resolve(&ConstraintSettings::default()).unwrap_err().kind,
            ErrorKind::InvalidRequest
        );
        let mut s = Surfaces::default();
        s.choice_field("guided_choice", Some(&json!(["a", "b", "a"])))
            .unwrap();
        match s.resolve(&ConstraintSettings::default()).unwrap() {
            ConstraintSpec::Choice(l) => assert_eq!(l.len(), 2),
            other => panic!("{other:?}"),
        }
        let mut s = Surfaces::default();
        assert!(s.choice_field("llamay_choice", Some(&json!([]))).is_err());
        assert!(s.choice_field("llamay_choice", Some(&json!([1]))).is_err());
        let mut s = Surfaces::default();
        s.choice_field("llamay_choice", Some(&json!(["a"])))
            .unwrap();
        s.schema("response_format", &json!({"type": "string"}));
        let e = s.resolve(&ConstraintSettings::default()).unwrap_err();
        assert!(
            e.message
                .contains("llamay_choice and response_format were both given"),
            "{}",
            e.message
        );
        let mut s = Surfaces::default();
        s.llamay_lexicon(Some(&json!({"terms": ["yes", "no"]})))
            .unwrap();
        assert_eq!(
            s.resolve(&ConstraintSettings::default()).unwrap().kind(),
            "lexicon"
        );
        let mut s = Surfaces::default();
        s.llamay_lexicon(Some(&json!("nowhere"))).unwrap();
        assert!(s
            .resolve(&ConstraintSettings::default())
            .unwrap_err()
            .message
            .contains("not loaded"));
        // A name reads the lexicons of the settings it is resolved under, and only those.
        let mut served = ConstraintSettings::default();
        served.serve_lexicon(Arc::new(
            Lexicon::from_terms("colours", &["red".into(), "blue".into()]).unwrap(),
        ));
        let named = || {
            let mut s = Surfaces::default();
            s.llamay_lexicon(Some(&json!("colours"))).unwrap();
            s
        };
        match named().resolve(&served).unwrap() {
            ConstraintSpec::Lexicon {
                lexicon,
                served: true,
            } => assert_eq!(lexicon.len(), 2),
            other => panic!("{other:?}"),
        }
        let e = named().resolve(&ConstraintSettings::default()).unwrap_err();
        assert!(
            e.message.contains("not loaded (loaded: none)"),
            "{}",
            e.message
        );
        assert!(Surfaces::default().llamay_lexicon(Some(&json!(3))).is_err());
    }

    #[test]
    fn options_change_the_language_and_the_cache_key() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let mut s = Surfaces::default();
        s.llamay_options(Some(&json!({"additional_properties": "open"})))
            .unwrap();
        s.schema("llamay_schema", &schema);
        let ConstraintSpec::Schema(open) = s.resolve(&ConstraintSettings::default()).unwrap()
        else {
            panic!()
        };
        assert_eq!(open.key, format!("open:{schema}"));
        let mut s = Surfaces::default();
        s.schema("llamay_schema", &schema);
        let ConstraintSpec::Schema(closed) = s.resolve(&ConstraintSettings::default()).unwrap()
        else {
            panic!()
        };
        assert_eq!(closed.key, schema.to_string());
        for bad in [
            json!({"additional_properties": "loose"}),
            json!({"strict": true}),
            json!(1),
        ] {
            assert!(
                Surfaces::default().llamay_options(Some(&bad)).is_err(),
                "{bad}"
            );
        }
    }
}
