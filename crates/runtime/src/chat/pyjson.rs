//! The `tojson` filter as Hugging Face templates expect it: transformers replaces
//! Jinja's own with Python's `json.dumps(x, ensure_ascii=False, indent=…,
//! separators=…, sort_keys=…)`, so a template that prints its tools shows the model
//! `{"name": "f", "parameters": {…}}` (spaces after `,` and `:`, keys in the order the
//! client wrote them, no HTML escaping), which is what it was trained on. minijinja's
//! filter writes compact, HTML-safe JSON instead.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};

pub(super) fn tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<Value> = kwargs.get("separators")?;
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => match v.kind() {
            ValueKind::Number => Some(" ".repeat(i64::try_from(v)?.clamp(0, 64) as usize)),
            ValueKind::String => Some(v.as_str().unwrap_or("").to_string()),
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: indent must be a number or a string",
                ))
            }
        },
    };
    // Python's defaults: ", " and ": ", or "," and ": " when indenting.
    let (item_sep, key_sep) = match separators {
        Some(s) if !s.is_none() => {
            let a = s.get_item(&Value::from(0))?;
            let b = s.get_item(&Value::from(1))?;
            (
                a.as_str().unwrap_or(",").to_string(),
                b.as_str().unwrap_or(":").to_string(),
            )
        }
        _ if indent.is_some() => (",".to_string(), ": ".to_string()),
        _ => (", ".to_string(), ": ".to_string()),
    };
    let w = Writer {
        indent,
        item_sep,
        key_sep,
        sort_keys: sort_keys.unwrap_or(false),
    };
    let mut out = String::new();
    w.value(&value, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

struct Writer {
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
}

impl Writer {
    fn newline(&self, level: usize, out: &mut String) {
        if let Some(ind) = &self.indent {
            out.push('\n');
            for _ in 0..level {
                out.push_str(ind);
            }
        }
    }

    fn value(&self, v: &Value, level: usize, out: &mut String) -> Result<(), Error> {
        if level > 256 {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson: nested too deeply",
            ));
        }
        match v.kind() {
            ValueKind::Undefined | ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number => out.push_str(&number(v)),
            ValueKind::String => string(v.as_str().unwrap_or(""), out),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = v.try_iter()?.collect();
                self.seq(&items, level, out)?;
            }
            ValueKind::Map => {
                let mut keys: Vec<Value> = v.try_iter()?.collect();
                if self.sort_keys {
                    keys.sort_by(|a, b| a.to_string().cmp(&b.to_string()));
                }
                if keys.is_empty() {
                    out.push_str("{}");
                    return Ok(());
                }
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&self.item_sep);
                    }
                    self.newline(level + 1, out);
                    match k.as_str() {
                        Some(s) => string(s, out),
                        None => string(&k.to_string(), out),
                    }
                    out.push_str(&self.key_sep);
                    self.value(&v.get_item(k)?, level + 1, out)?;
                }
                self.newline(level, out);
                out.push('}');
            }
            _ => string(&v.to_string(), out),
        }
        Ok(())
    }

    fn seq(&self, items: &[Value], level: usize, out: &mut String) -> Result<(), Error> {
        if items.is_empty() {
            out.push_str("[]");
            return Ok(());
        }
        out.push('[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(&self.item_sep);
            }
            self.newline(level + 1, out);
            self.value(item, level + 1, out)?;
        }
        self.newline(level, out);
        out.push(']');
        Ok(())
    }
}

/// A number as Python prints it: integers as digits, floats with a fraction
/// (`1.0`, `0.5`, `1e+20`).
fn number(v: &Value) -> String {
    if v.is_integer() {
        return v.to_string();
    }
    let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let s = format!("{f:?}");
    // Rust's `1e20` is Python's `1e+20`.
    match s.split_once('e') {
        Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
        _ => s,
    }
}

/// A JSON string as `json.dumps(ensure_ascii=False)` writes it.
fn string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(src: &str, ctx: Value) -> String {
        let mut env = minijinja::Environment::new();
        env.add_filter("tojson", tojson);
        env.render_str(src, ctx).unwrap()
    }

    #[test]
    fn writes_what_python_json_dumps_writes() {
        let v: serde_json::Value =
            serde_json::json!({"b": [1, 2.5, "x<&>"], "a": {"k": null, "t": true}, "é": "\n"});
        let ctx = minijinja::context! { v => Value::from_serialize(&v) };
        assert_eq!(
            render("{{ v | tojson }}", ctx.clone()),
            r#"{"b": [1, 2.5, "x<&>"], "a": {"k": null, "t": true}, "é": "\n"}"#
        );
        assert_eq!(
            render("{{ v.b | tojson(indent=2) }}", ctx.clone()),
            "[\n  1,\n  2.5,\n  \"x<&>\"\n]"
        );
        assert_eq!(
            render("{{ v.a | tojson(separators=(',', ':')) }}", ctx),
            r#"{"k":null,"t":true}"#
        );
        assert_eq!(
            render("{{ 1.0 | tojson }} {{ 3 | tojson }}", Value::UNDEFINED),
            "1.0 3"
        );
    }
}
