//! What one evaluation found: every document's runs, and the figures per mode and field.

use std::time::Duration;

use serde_json::{json, Value};

use super::data::{BadLine, Case};
use super::score::{Field, Verdict};

/// How a document was run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The schema enforced by the constraint.
    Constrained,
    /// The schema only described in the prompt; the JSON taken from the reply text.
    Prompted,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Constrained => "constrained",
            Mode::Prompted => "prompted",
        }
    }
}

/// One generation of one document.
#[derive(Clone, Debug, Default)]
pub struct Run {
    pub text: String,
    /// The object taken from the text, if it parsed.
    pub value: Option<Value>,
    /// Whether it fits the schema.
    pub valid: bool,
    /// Why the run could not happen (e.g. a quote naming a source the line lacks).
    pub error: Option<String>,
    pub tokens: usize,
    pub latency: Duration,
    /// Per field, in the schema's order.
    pub verdicts: Vec<Verdict>,
    /// Per field: for a quoted field with a string value, whether it is a span of its
    /// source.
    pub grounded: Vec<Option<bool>>,
}

impl Run {
    /// Fraction of fields right (0 for a run without output).
    pub fn score(&self) -> f64 {
        if self.verdicts.is_empty() {
            return 0.0;
        }
        let right = self
            .verdicts
            .iter()
            .filter(|v| **v == Verdict::Correct)
            .count();
        right as f64 / self.verdicts.len() as f64
    }
}

/// One document with its runs (one per mode, in [`Evaluation::modes`] order).
#[derive(Clone, Debug)]
pub struct Doc {
    pub case: Case,
    pub runs: Vec<Run>,
}

/// Everything `llamay eval` reports.
#[derive(Clone, Debug)]
pub struct Evaluation {
    pub model: String,
    pub fields: Vec<Field>,
    pub modes: Vec<Mode>,
    pub docs: Vec<Doc>,
    pub bad_lines: Vec<BadLine>,
    pub temperature: f64,
}

/// A field's figures in one mode.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldStats {
    pub n: usize,
    pub correct: usize,
    pub invented: usize,
    pub missed: usize,
    /// Documents whose expected value is null (where inventing is possible).
    pub null_expected: usize,
    /// Documents whose expected value is not null (where missing is possible).
    pub value_expected: usize,
    /// Quoted values checked, and how many were spans of their source.
    pub quoted: usize,
    pub grounded: usize,
}

/// A mode's figures over all documents.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModeStats {
    pub docs: usize,
    pub parsed: usize,
    pub valid: usize,
    pub errors: usize,
    pub tokens: usize,
    pub latency: Duration,
    pub latencies_ms: Vec<f64>,
    pub quoted: usize,
    pub grounded: usize,
}

/// `part / whole` as a fraction, 0 when there is no whole.
pub fn rate(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

impl Evaluation {
    pub fn field_stats(&self, mode: usize, field: usize) -> FieldStats {
        let mut s = FieldStats::default();
        let name = &self.fields[field].name;
        for d in &self.docs {
            let r = &d.runs[mode];
            let want_null = d.case.expected.get(name).is_none_or(Value::is_null);
            if want_null {
                s.null_expected += 1;
            } else {
                s.value_expected += 1;
            }
            s.n += 1;
            match r.verdicts.get(field).copied().unwrap_or(Verdict::NoOutput) {
                Verdict::Correct => s.correct += 1,
                Verdict::Invented => s.invented += 1,
                Verdict::Missed => s.missed += 1,
                Verdict::Wrong | Verdict::NoOutput => {}
            }
            if let Some(Some(g)) = r.grounded.get(field) {
                s.quoted += 1;
                s.grounded += usize::from(*g);
            }
        }
        s
    }

    pub fn mode_stats(&self, mode: usize) -> ModeStats {
        let mut s = ModeStats::default();
        for d in &self.docs {
            let r = &d.runs[mode];
            s.docs += 1;
            s.parsed += usize::from(r.value.is_some());
            s.valid += usize::from(r.valid);
            s.errors += usize::from(r.error.is_some());
            s.tokens += r.tokens;
            s.latency += r.latency;
            s.latencies_ms.push(r.latency.as_secs_f64() * 1e3);
            for g in r.grounded.iter().flatten() {
                s.quoted += 1;
                s.grounded += usize::from(*g);
            }
        }
        s.latencies_ms.sort_by(f64::total_cmp);
        s
    }

    /// Documents by how badly they went (lowest mean score over the modes first).
    pub fn worst(&self, k: usize) -> Vec<&Doc> {
        let mut docs: Vec<&Doc> = self.docs.iter().collect();
        let mean =
            |d: &Doc| d.runs.iter().map(Run::score).sum::<f64>() / d.runs.len().max(1) as f64;
        docs.sort_by(|a, b| mean(a).total_cmp(&mean(b)));
        docs.truncate(k);
        docs
    }

    /// The machine-readable report (`-json`).
    pub fn to_json(&self) -> Value {
        let modes: Vec<Value> = (0..self.modes.len())
            .map(|m| {
                let s = self.mode_stats(m);
                let fields: serde_json::Map<String, Value> = (0..self.fields.len())
                    .map(|f| {
                        let fs = self.field_stats(m, f);
                        let v = json!({
                            "accuracy": rate(fs.correct, fs.n),
                            "correct": fs.correct,
                            "n": fs.n,
                            "invented": fs.invented,
                            "invented_rate": rate(fs.invented, fs.null_expected),
                            "null_expected": fs.null_expected,
                            "missed": fs.missed,
                            "missed_rate": rate(fs.missed, fs.value_expected),
                            "value_expected": fs.value_expected,
                            "quoted": fs.quoted,
                            "grounded": fs.grounded,
                        });
                        (self.fields[f].name.clone(), v)
                    })
                    .collect();
                json!({
                    "mode": self.modes[m].as_str(),
                    "docs": s.docs,
                    "parse_rate": rate(s.parsed, s.docs),
                    "schema_valid_rate": rate(s.valid, s.docs),
                    "errors": s.errors,
                    "quoted": s.quoted,
                    "grounded": s.grounded,
                    "grounding_rate": if s.quoted == 0 { Value::Null } else { json!(rate(s.grounded, s.quoted)) },
                    "mean_tokens": rate(s.tokens, s.docs),
                    "mean_latency_ms": s.latencies_ms.iter().sum::<f64>() / s.docs.max(1) as f64,
                    "p50_latency_ms": percentile(&s.latencies_ms, 0.5),
                    "p95_latency_ms": percentile(&s.latencies_ms, 0.95),
                    "fields": fields,
                })
            })
            .collect();
        let docs: Vec<Value> = self
            .docs
            .iter()
            .map(|d| {
                let runs: serde_json::Map<String, Value> = d
                    .runs
                    .iter()
                    .zip(&self.modes)
                    .map(|(r, m)| {
                        let verdicts: serde_json::Map<String, Value> = self
                            .fields
                            .iter()
                            .zip(&r.verdicts)
                            .map(|(f, v)| (f.name.clone(), json!(v.as_str())))
                            .collect();
                        let v = json!({
                            "text": r.text,
                            "value": r.value,
                            "schema_valid": r.valid,
                            "error": r.error,
                            "tokens": r.tokens,
                            "latency_ms": r.latency.as_secs_f64() * 1e3,
                            "fields": verdicts,
                            "grounded": self.fields.iter().zip(&r.grounded)
                                .filter_map(|(f, g)| g.map(|g| (f.name.clone(), json!(g))))
                                .collect::<serde_json::Map<String, Value>>(),
                        });
                        (m.as_str().to_string(), v)
                    })
                    .collect();
                json!({"id": d.case.id, "line": d.case.line, "input": d.case.input,
                       "expected": d.case.expected, "runs": runs})
            })
            .collect();
        json!({
            "model": self.model,
            "temperature": self.temperature,
            "fields": self.fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
            "modes": modes,
            "documents": docs,
            "bad_lines": self.bad_lines.iter()
                .map(|b| json!({"line": b.line, "error": b.error})).collect::<Vec<_>>(),
        })
    }
}

/// The `p` quantile of sorted values (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}
