//! The values a Go template sees: Go's maps, slices and structs, each printed the way
//! Go's `fmt` prints it (Ollama's API types print as JSON, through their `String`
//! methods, which a [`Value::Struct`] carries).

use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug, Default)]
pub(crate) enum Value {
    #[default]
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Arc<Vec<Value>>),
    /// A Go map: ranged over in key order, printed `map[k:v]`.
    Map(Arc<BTreeMap<String, Value>>),
    Struct(Arc<Struct>),
}

/// A Go struct: named fields, and what printing it (or `json`) gives: compact JSON
/// with the fields in the struct's order, as Go writes it.
#[derive(Debug)]
pub(crate) struct Struct {
    pub(crate) fields: BTreeMap<String, Value>,
    pub(crate) json: String,
}

impl Value {
    pub(crate) fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }

    pub(crate) fn list(items: Vec<Value>) -> Value {
        Value::List(Arc::new(items))
    }

    /// A struct with `fields` (Go names) that prints as `json`.
    pub(crate) fn object(fields: Vec<(&str, Value)>, json: String) -> Value {
        Value::Struct(Arc::new(Struct {
            fields: fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            json,
        }))
    }

    /// JSON as Go's `map[string]any` would hold it after `json.Unmarshal`.
    pub(crate) fn from_json(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Nil,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(0.0)),
            },
            serde_json::Value::String(s) => Value::Str(s.clone()),
            serde_json::Value::Array(a) => Value::list(a.iter().map(Value::from_json).collect()),
            serde_json::Value::Object(o) => Value::Map(Arc::new(
                o.iter()
                    .map(|(k, v)| (k.clone(), Value::from_json(v)))
                    .collect(),
            )),
        }
    }

    pub(super) fn truth(&self) -> bool {
        match self {
            Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Map(m) => !m.is_empty(),
            Value::Struct(_) => true,
        }
    }

    pub(super) fn kind(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float64",
            Value::Str(_) => "string",
            Value::List(_) => "slice",
            Value::Map(_) => "map",
            Value::Struct(_) => "struct",
        }
    }

    /// `{{ . }}` of this value.
    pub(super) fn print(&self, out: &mut String) {
        match self {
            Value::Nil => {}
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Int(i) => out.push_str(&i.to_string()),
            Value::Float(f) => out.push_str(&f.to_string()),
            Value::Str(s) => out.push_str(s),
            Value::List(l) => {
                out.push('[');
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    v.print(out);
                }
                out.push(']');
            }
            Value::Map(m) => {
                out.push_str("map[");
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    out.push_str(k);
                    out.push(':');
                    v.print(out);
                }
                out.push(']');
            }
            Value::Struct(s) => out.push_str(&s.json),
        }
    }

    /// Ollama's `json` function: `json.Marshal` of the value.
    pub(super) fn to_json(&self) -> String {
        match self {
            Value::Nil => "null".into(),
            Value::Bool(_) | Value::Int(_) | Value::Str(_) => {
                let mut s = String::new();
                match self {
                    Value::Str(x) => s = go_json(&serde_json::Value::from(x.as_str())),
                    _ => self.print(&mut s),
                }
                s
            }
            Value::Float(f) => {
                serde_json::Number::from_f64(*f).map_or("null".into(), |n| n.to_string())
            }
            Value::List(l) => format!(
                "[{}]",
                l.iter().map(Value::to_json).collect::<Vec<_>>().join(",")
            ),
            Value::Map(m) => format!(
                "{{{}}}",
                m.iter()
                    .map(|(k, v)| format!(
                        "{}:{}",
                        go_json(&serde_json::Value::from(k.as_str())),
                        v.to_json()
                    ))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Value::Struct(s) => s.json.clone(),
        }
    }
}

/// Compact JSON as Go's `json.Marshal` writes it: `<`, `>`, `&`, U+2028 and U+2029
/// escaped (Go does so for HTML safety), map keys in sorted order.
pub(crate) fn go_json(v: &serde_json::Value) -> String {
    let s = serde_json::to_string(v).unwrap_or_default();
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}
