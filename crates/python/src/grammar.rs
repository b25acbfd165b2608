//! `Grammar`: what a request asks the output to be (a JSON Schema, GBNF text, a regular
//! expression), checked and lowered once, then compiled for each vocabulary it meets.

use crate::error;
use crate::tokenizer::PyTokenizer;
use llamay_constrain::{
    schema_grammar_with, Constraint, Grammar, NotEnforced, SchemaError, SchemaReport, Sources,
    Vocabulary,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use std::sync::{Arc, Mutex};

/// The grammar before any vocabulary.
enum Source {
    Ir(Grammar),
    Regex(String),
}

/// A checked grammar with its enforcement report. Compiling it for a tokenizer is
/// done once per tokenizer and shared by every matcher made from it.
#[pyclass(name = "Grammar", module = "llamay", frozen)]
pub struct PyGrammar {
    source: Source,
    kind: &'static str,
    report: SchemaReport,
    /// Compiled constraints by vocabulary (a grammar rarely meets more than one).
    compiled: Mutex<Vec<Constraint>>,
}

/// The schema as JSON text: a `str` as given, anything else through `json.dumps`.
fn schema_text(schema: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = schema.cast::<PyString>() {
        return s.extract();
    }
    let json = schema.py().import("json")?;
    json.call_method1("dumps", (schema,))?.extract()
}

fn parse_schema(text: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| {
        error::from_schema(SchemaError::new(
            "",
            "the schema",
            format!("the schema is not valid JSON: {e}"),
        ))
    })
}

/// `sources=` for `x-llamay-quote`: a str (the input) or a dict of named texts.
fn sources_of(sources: Option<&Bound<'_, PyAny>>) -> PyResult<Sources> {
    let mut out = Sources::none();
    let Some(s) = sources else { return Ok(out) };
    if let Ok(text) = s.extract::<String>() {
        out.input = Some(text);
    } else if let Ok(d) = s.cast::<PyDict>() {
        for (k, v) in d.iter() {
            let k: String = k.extract()?;
            let v: String = v.extract()?;
            if k == "input" {
                out.input = Some(v);
            } else {
                out.named.insert(k, v);
            }
        }
    } else {
        return Err(PyTypeError::new_err(
            "sources must be a str (the input) or a dict of named texts",
        ));
    }
    Ok(out)
}

fn check_schema(text: &str, sources: &Sources) -> PyResult<(Grammar, SchemaReport)> {
    let value = parse_schema(text)?;
    if !value.is_object() && !value.is_boolean() {
        return Err(error::from_schema(SchemaError::new(
            "",
            "the schema",
            "the schema must be a JSON Schema object".to_string(),
        )));
    }
    schema_grammar_with(&value, sources).map_err(error::from_schema)
}

fn report_list<'py>(py: Python<'py>, report: &SchemaReport) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for e in &report.entries {
        let d = PyDict::new(py);
        d.set_item("keyword", &e.keyword)?;
        d.set_item("location", &e.location)?;
        let kind = match e.kind {
            NotEnforced::Ignored => "ignored",
            NotEnforced::OverLimit => "over_limit",
            NotEnforced::Unknown => "unknown",
        };
        d.set_item("kind", kind)?;
        d.set_item("message", e.to_string())?;
        out.append(d)?;
    }
    Ok(out)
}

impl PyGrammar {
    fn new(source: Source, kind: &'static str, report: SchemaReport) -> Self {
        PyGrammar {
            source,
            kind,
            report,
            compiled: Mutex::new(Vec::new()),
        }
    }

    /// The constraint for `vocab`, compiled on first use (call without the GIL).
    pub fn constraint_for(&self, vocab: &Arc<Vocabulary>) -> PyResult<Constraint> {
        let lock = || self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = lock().iter().find(|c| Arc::ptr_eq(c.vocab(), vocab)) {
            return Ok(c.clone());
        }
        let c = match &self.source {
            Source::Ir(g) => Constraint::from_grammar(g, vocab.clone()),
            Source::Regex(p) => Constraint::from_regex(p, vocab.clone()),
        }
        .map_err(error::from_constrain)?;
        let mut compiled = lock();
        if let Some(c) = compiled.iter().find(|c| Arc::ptr_eq(c.vocab(), vocab)) {
            return Ok(c.clone());
        }
        compiled.push(c.clone());
        Ok(c)
    }
}

#[pymethods]
impl PyGrammar {
    /// A JSON Schema (a dict or JSON text). A keyword the constraint cannot honour is
    /// refused with `ConstraintError` (the server's 400); keywords parsed but not
    /// enforced are listed in `report`. `sources` are the texts `x-llamay-quote`
    /// values must be spans of.
    #[staticmethod]
    #[pyo3(signature = (schema, *, sources = None))]
    fn json_schema(
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        sources: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let text = schema_text(schema)?;
        let sources = sources_of(sources)?;
        let (g, report) = py.detach(|| check_schema(&text, &sources))?;
        Ok(Self::new(Source::Ir(g), "json_schema", report))
    }

    /// Validate-only (admission control): the not-enforced report of a schema, or
    /// `ConstraintError`, without building anything for a vocabulary.
    #[staticmethod]
    #[pyo3(signature = (schema, *, sources = None))]
    fn check_json_schema<'py>(
        py: Python<'py>,
        schema: &Bound<'py, PyAny>,
        sources: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let text = schema_text(schema)?;
        let sources = sources_of(sources)?;
        let (_, report) = py.detach(|| check_schema(&text, &sources))?;
        report_list(py, &report)
    }

    /// Any JSON value.
    #[staticmethod]
    fn any_json() -> PyResult<Self> {
        let g = Grammar::any_json().map_err(error::from_constrain)?;
        Ok(Self::new(
            Source::Ir(g),
            "any_json",
            SchemaReport::default(),
        ))
    }

    /// GBNF text (llama.cpp's grammar format); errors carry `line` and `column`.
    #[staticmethod]
    fn gbnf(py: Python<'_>, text: &str) -> PyResult<Self> {
        let g = py
            .detach(|| llamay_constrain::parse_gbnf(text))
            .map_err(error::from_constrain)?;
        Ok(Self::new(Source::Ir(g), "gbnf", SchemaReport::default()))
    }

    /// Validate-only for GBNF text: `None`, or `ConstraintError`.
    #[staticmethod]
    fn check_gbnf(py: Python<'_>, text: &str) -> PyResult<()> {
        py.detach(|| llamay_constrain::parse_gbnf(text))
            .map(|_| ())
            .map_err(error::from_constrain)
    }

    /// Output that matches a regular expression in whole. The pattern is compiled
    /// with the grammar, for the first tokenizer it meets.
    #[staticmethod]
    fn regex(pattern: &str) -> Self {
        Self::new(
            Source::Regex(pattern.to_string()),
            "regex",
            SchemaReport::default(),
        )
    }

    /// Compiles the grammar for a tokenizer now (without the GIL), so the first
    /// `Matcher` on it starts at once; a refusal at this stage is `ConstraintError`.
    fn compile(&self, py: Python<'_>, tokenizer: &PyTokenizer) -> PyResult<()> {
        let vocab = tokenizer.vocab.clone();
        py.detach(|| self.constraint_for(&vocab)).map(|_| ())
    }

    /// What the constraint does not enforce: one dict per keyword (`keyword`,
    /// `location`, `kind`: ignored / over_limit / unknown, `message`).
    #[getter]
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        report_list(py, &self.report)
    }

    /// True when every keyword is enforced.
    #[getter]
    fn is_fully_enforced(&self) -> bool {
        self.report.is_fully_enforced()
    }

    /// `json_schema`, `gbnf`, `regex` or `any_json`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn __repr__(&self) -> String {
        format!(
            "Grammar(kind={:?}, not_enforced={})",
            self.kind,
            self.report.entries.len()
        )
    }
}
