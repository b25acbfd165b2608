//! Field-by-field scoring of extracted objects against expected ones.
//!
//! Each top-level property of the schema is a field, scored by its kind: enums, booleans
//! and consts exactly; numbers within a tolerance; strings after normalising (trimmed,
//! whitespace runs collapsed, case folded); a quoted string (`x-llamay-quote`) is right
//! when one normalised span contains the other, since a longer or shorter span of the
//! same place is still the evidence asked for. Null-aware: expected null and got a
//! value is *invented*; expected a value and got null (or nothing) is *missed*.

use llamay_constrain::{Normalize, Quote, QuoteSource, Sources, QUOTE_KEYWORD};
use serde_json::Value;

/// How a field's values are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Exact,
    Number,
    Text,
}

/// One scored field of the schema.
#[derive(Clone, Debug)]
pub struct Field {
    pub name: String,
    pub kind: Kind,
    /// The field's `x-llamay-quote`, if any: its value must be a span of this source.
    pub quote: Option<Quote>,
}

/// The outcome of one field in one document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Correct,
    Wrong,
    /// Expected null, got a value.
    Invented,
    /// Expected a value, got null or no such key.
    Missed,
    /// The output did not parse: no value to score.
    NoOutput,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Correct => "correct",
            Verdict::Wrong => "wrong",
            Verdict::Invented => "invented",
            Verdict::Missed => "missed",
            Verdict::NoOutput => "no_output",
        }
    }
}

/// The fields of an object schema: its top-level properties, in order. Types are read
/// from `type`, `enum`/`const`, and the branches of a type list (`["string", "null"]`).
pub fn fields_of(schema: &Value) -> Result<Vec<Field>, String> {
    let props = schema.get("properties").and_then(Value::as_object).ok_or(
        "the schema must be an object schema with \"properties\" to be scored field by field",
    )?;
    let mut out = Vec::new();
    for (name, p) in props {
        let types: Vec<&str> = match p.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let exact =
            p.get("enum").is_some() || p.get("const").is_some() || types.contains(&"boolean");
        let kind = if exact {
            Kind::Exact
        } else if types.iter().any(|t| *t == "number" || *t == "integer") {
            Kind::Number
        } else if types.contains(&"string") {
            Kind::Text
        } else {
            Kind::Exact
        };
        let quote = match p.get(QUOTE_KEYWORD) {
            Some(q) => {
                Some(Quote::read(q, &format!("properties.{name}")).map_err(|e| e.to_string())?)
            }
            None => None,
        };
        out.push(Field {
            name: name.clone(),
            kind,
            quote,
        });
    }
    Ok(out)
}

/// Strings as compared: trimmed, whitespace runs as one space, lower case.
pub fn normalise_text(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Whether two numbers agree within `tolerance` (absolute) or one part in a million.
pub fn numbers_agree(a: f64, b: f64, tolerance: f64) -> bool {
    let d = (a - b).abs();
    d <= tolerance || d <= 1e-6 * a.abs().max(b.abs())
}

/// Scores one field: `got` is the output object (`None` when it did not parse).
pub fn score(field: &Field, expected: &Value, got: Option<&Value>, tolerance: f64) -> Verdict {
    let Some(obj) = got else {
        return Verdict::NoOutput;
    };
    let want = expected.get(&field.name).unwrap_or(&Value::Null);
    let have = obj.get(&field.name).unwrap_or(&Value::Null);
    match (want.is_null(), have.is_null()) {
        (true, true) => return Verdict::Correct,
        (true, false) => return Verdict::Invented,
        (false, true) => return Verdict::Missed,
        _ => {}
    }
    let ok = match field.kind {
        Kind::Exact => want == have,
        Kind::Number => match (want.as_f64(), have.as_f64()) {
            (Some(a), Some(b)) => numbers_agree(a, b, tolerance),
            _ => false,
        },
        Kind::Text => match (want.as_str(), have.as_str()) {
            (Some(a), Some(b)) => {
                let (a, b) = (normalise_text(a), normalise_text(b));
                if field.quote.is_some() {
                    !b.is_empty() && (a.contains(&b) || b.contains(&a))
                } else {
                    a == b
                }
            }
            _ => false,
        },
    };
    if ok {
        Verdict::Correct
    } else {
        Verdict::Wrong
    }
}

/// Whether a quoted value is a span of its source (a plain substring search, under the
/// quote's normalisation): the grounding check, independent of the automaton. `None`
/// when the source is unknown.
pub fn grounded(quote: &Quote, value: &str, sources: &Sources) -> Option<bool> {
    let source = match &quote.source {
        QuoteSource::Input => sources.input.as_deref()?,
        QuoteSource::Named(n) => sources.named.get(n)?.as_str(),
    };
    let (s, v) = match quote.normalize {
        Normalize::None => (source.to_string(), value.to_string()),
        Normalize::Case => (source.to_ascii_lowercase(), value.to_ascii_lowercase()),
        Normalize::Whitespace => (collapse_ws(source), collapse_ws(value)),
    };
    Some(s.contains(&v))
}

fn collapse_ws(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut ws = false;
    for c in s.chars() {
        if matches!(c, ' ' | '\t' | '\n' | '\r') {
            if !ws {
                out.push(' ');
            }
            ws = true;
        } else {
            out.push(c);
            ws = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "supplier_name": {"type": ["string", "null"]},
            "invoice_total": {"type": ["number", "null"]},
            "currency": {"type": ["string", "null"], "enum": ["EUR", "GBP", null]},
            "paid": {"type": "boolean"},
            "source_quote": {"type": ["string", "null"], "x-llamay-quote": true}
        }})
    }

    fn verdicts(expected: Value, got: Value) -> Vec<(String, Verdict)> {
        let fields = fields_of(&schema()).unwrap();
        fields
            .iter()
            .map(|f| (f.name.clone(), score(f, &expected, Some(&got), 0.005)))
            .collect()
    }

    fn of(v: &[(String, Verdict)], name: &str) -> Verdict {
        v.iter().find(|(n, _)| n == name).unwrap().1
    }

    #[test]
    fn kinds_come_from_the_schema() {
        let f = fields_of(&schema()).unwrap();
        let kind = |n: &str| f.iter().find(|f| f.name == n).unwrap();
        assert_eq!(kind("supplier_name").kind, Kind::Text);
        assert_eq!(kind("invoice_total").kind, Kind::Number);
        assert_eq!(kind("currency").kind, Kind::Exact);
        assert_eq!(kind("paid").kind, Kind::Exact);
        assert!(kind("source_quote").quote.is_some() && kind("supplier_name").quote.is_none());
        assert!(fields_of(&json!({"type": "string"})).is_err());
    }

    #[test]
    fn each_kind_compares_its_own_way() {
        let want = json!({"supplier_name": "ACME  Ltd", "invoice_total": 1234.5, "currency": "EUR",
                          "paid": true, "source_quote": "Total: 1.234,50 EUR"});
        let got = json!({"supplier_name": " acme ltd", "invoice_total": 1234.501, "currency": "EUR",
                         "paid": true, "source_quote": "1.234,50 EUR"});
        let v = verdicts(want.clone(), got);
        assert!(v.iter().all(|(_, v)| *v == Verdict::Correct), "{v:?}");
        let got = json!({"supplier_name": "ACME", "invoice_total": 1234.6, "currency": "GBP",
                         "paid": false, "source_quote": "Total due"});
        let v = verdicts(want, got);
        assert!(v.iter().all(|(_, v)| *v == Verdict::Wrong), "{v:?}");
    }

    #[test]
    fn nulls_are_invented_or_missed() {
        let want = json!({"supplier_name": null, "invoice_total": 10, "currency": null,
                          "paid": false, "source_quote": null});
        let got = json!({"supplier_name": "Invented GmbH", "invoice_total": null, "currency": null,
                         "paid": false});
        let v = verdicts(want.clone(), got);
        assert_eq!(of(&v, "supplier_name"), Verdict::Invented);
        assert_eq!(of(&v, "invoice_total"), Verdict::Missed);
        assert_eq!(of(&v, "currency"), Verdict::Correct);
        assert_eq!(of(&v, "source_quote"), Verdict::Correct);
        let f = fields_of(&schema()).unwrap();
        assert_eq!(score(&f[0], &want, None, 0.0), Verdict::NoOutput);
    }

    #[test]
    fn grounding_is_a_substring_test_under_the_normalisation() {
        let mut sources = Sources {
            input: Some("Total:\n  EUR 10".into()),
            ..Sources::default()
        };
        sources.named.insert("po".into(), "PO 77".into());
        let q = |v: Value| Quote::read(&v, "p").unwrap();
        assert_eq!(grounded(&q(json!(true)), "EUR 10", &sources), Some(true));
        assert_eq!(
            grounded(&q(json!(true)), "Total: EUR", &sources),
            Some(false)
        );
        let ws = q(json!({"source": true, "normalize": "whitespace"}));
        assert_eq!(grounded(&ws, "Total: EUR", &sources), Some(true));
        assert_eq!(grounded(&q(json!("po")), "PO 77", &sources), Some(true));
        assert_eq!(grounded(&q(json!("other")), "PO 77", &sources), None);
    }
}
