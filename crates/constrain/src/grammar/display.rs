//! Renders IR as GBNF-like text, for messages (e.g. the right-recursive suggestion) and
//! debugging. Extra node kinds use a pseudo-syntax: `%ws`, `%unordered{..}`,
//! `%regex/../`, `%json-string`.

use super::ir::*;
use std::fmt::{self, Write};

fn escape_char(out: &mut String, c: char, in_class: bool) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\\' => out.push_str("\\\\"),
        '"' if !in_class => out.push_str("\\\""),
        ']' | '[' | '-' | '^' if in_class => {
            out.push('\\');
            out.push(c);
        }
        c if (c as u32) < 0x20 || c as u32 == 0x7F => {
            let _ = write!(out, "\\x{:02X}", c as u32);
        }
        c => out.push(c),
    }
}

fn render_literal(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            escape_char(out, c, false);
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02X}");
        }
    }
    out.push('"');
}

/// Renders one symbol.
pub(crate) fn render_symbol(g: &Grammar, s: &Symbol, out: &mut String) {
    match s {
        Symbol::Literal(b) => render_literal(out, b),
        Symbol::Bytes(set) => {
            out.push('[');
            for b in set.iter() {
                let _ = write!(out, "\\x{b:02X}");
            }
            out.push_str("]%bytes");
        }
        Symbol::Class(c) => {
            out.push('[');
            for &(lo, hi) in c.ranges() {
                let (lo, hi) = (
                    char::from_u32(lo).unwrap_or('?'),
                    char::from_u32(hi).unwrap_or('?'),
                );
                escape_char(out, lo, true);
                if hi != lo {
                    out.push('-');
                    escape_char(out, hi, true);
                }
            }
            out.push(']');
        }
        Symbol::Rule(r) => out.push_str(g.rules.get(r.0 as usize).map_or("?", |r| &r.name)),
        Symbol::Group(alts) => {
            out.push('(');
            for (i, a) in alts.iter().enumerate() {
                if i > 0 {
                    out.push_str(" | ");
                }
                out.push_str(&render_seq(g, a));
            }
            out.push(')');
        }
        Symbol::Repeat { inner, min, max } => {
            render_symbol(g, inner, out);
            match (min, max) {
                (0, Some(1)) => out.push('?'),
                (0, None) => out.push('*'),
                (1, None) => out.push('+'),
                (m, None) => {
                    let _ = write!(out, "{{{m},}}");
                }
                (m, Some(n)) if m == n => {
                    let _ = write!(out, "{{{m}}}");
                }
                (m, Some(n)) => {
                    let _ = write!(out, "{{{m},{n}}}");
                }
            }
        }
        Symbol::Unordered(u) => {
            out.push_str("%unordered{");
            for (i, m) in u.members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                render_literal(out, &m.key);
                out.push(' ');
                out.push_str(&render_seq(g, &m.value));
                if m.required {
                    out.push_str(" !required");
                }
            }
            if let Some(a) = &u.additional {
                out.push_str(", ..");
                out.push_str(&render_seq(g, a));
            }
            out.push('}');
        }
        Symbol::Ws => out.push_str("%ws"),
        Symbol::Regex(d) => {
            let _ = write!(out, "%regex/{}/", d.pattern());
        }
        Symbol::JsonString(j) => {
            out.push_str("%json-string");
            if let Some(p) = &j.pattern {
                let _ = write!(out, "/{}/", p.pattern());
            }
            if let Some(q) = &j.quote {
                let _ = write!(out, "%quote({} bytes)", q.text().len());
            }
            if j.min_chars > 0 || j.max_chars.is_some() {
                let _ = write!(
                    out,
                    "{{{},{}}}",
                    j.min_chars,
                    j.max_chars.map(|m| m.to_string()).unwrap_or_default()
                );
            }
        }
    }
}

/// Renders a sequence, symbols separated by spaces (`""` when empty).
pub(crate) fn render_seq(g: &Grammar, seq: &[Symbol]) -> String {
    if seq.is_empty() {
        return "\"\"".into();
    }
    let mut out = String::new();
    for (i, s) in seq.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        render_symbol(g, s, &mut out);
    }
    out
}

impl fmt::Display for Grammar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.rules {
            let alts: Vec<String> = r.alts.iter().map(|a| render_seq(self, a)).collect();
            writeln!(f, "{} ::= {}", r.name, alts.join(" | "))?;
        }
        Ok(())
    }
}
