//! The tree's meaning as a validator: does a JSON value fit a [`CompiledSchema`]?
//!
//! This is the reference the lowering is tested against, and what the corpus tests
//! use to show the front-end keeps every valid document reachable.

use serde_json::Value;

use super::decimal::Decimal;
use super::facets::json_equal;
use super::node::{Bound, CompiledSchema, Node};

/// Why a value does not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaMismatch {
    /// An object has a key that is not declared and the object is closed.
    ExtraKey(String),
    /// The value's JSON type is not one the node allows (a schema with no `type`
    /// gets the type its keywords imply, so this also covers that deviation).
    WrongType(String),
    /// Anything else, described.
    Other(String),
}

impl SchemaMismatch {
    /// Prefixes the place inside the value where the mismatch is.
    fn inside(self, step: &str) -> SchemaMismatch {
        match self {
            SchemaMismatch::ExtraKey(k) => SchemaMismatch::ExtraKey(format!("{step}.{k}")),
            SchemaMismatch::WrongType(why) => SchemaMismatch::WrongType(format!("{step}: {why}")),
            SchemaMismatch::Other(why) => SchemaMismatch::Other(format!("{step}: {why}")),
        }
    }
}

/// Deepest nesting checked (recursive schemas on hostile values).
const MAX_DEPTH: usize = 512;

impl CompiledSchema {
    /// `Ok` when `value` fits the schema as compiled.
    pub fn check(&self, value: &Value) -> Result<(), SchemaMismatch> {
        self.check_node(&self.root, value, 0)
    }

    fn check_node(&self, node: &Node, v: &Value, depth: usize) -> Result<(), SchemaMismatch> {
        let other = |s: &str| Err(SchemaMismatch::Other(s.to_string()));
        if depth > MAX_DEPTH {
            return other("nested too deeply");
        }
        match (node, v) {
            (Node::Any, _) => Ok(()),
            (Node::Ref(id), _) => self.check_node(&self.defs[*id].node, v, depth + 1),
            (Node::Union(alts), _) => {
                let mut first = None;
                for a in alts {
                    match self.check_node(a, v, depth + 1) {
                        Ok(()) => return Ok(()),
                        Err(e) => {
                            // Prefer the explanation of a same-type alternative.
                            if first.is_none() || matches!(e, SchemaMismatch::ExtraKey(_)) {
                                first = Some(e);
                            }
                        }
                    }
                }
                Err(first.unwrap_or(SchemaMismatch::Other("no alternative".into())))
            }
            (Node::Literals(ls), _) => {
                if ls.iter().any(|l| json_equal(l, v)) {
                    Ok(())
                } else {
                    other("not one of the enum members")
                }
            }
            (Node::Null, Value::Null) | (Node::Boolean, Value::Bool(_)) => Ok(()),
            (Node::Integer(s), Value::Number(n)) => {
                let Some(d) = Decimal::from_json(n).filter(Decimal::is_integer) else {
                    return other("not an integer");
                };
                let i = d
                    .floor_scaled(0)
                    .ok_or(SchemaMismatch::Other("integer too large".into()))?;
                let step = i128::try_from(s.multiple_of).unwrap_or(i128::MAX);
                if s.min.is_some_and(|m| i < m) || s.max.is_some_and(|m| i > m) {
                    return other("integer out of bounds");
                }
                if i % step != 0 {
                    return other("integer not a multiple of the step");
                }
                Ok(())
            }
            (Node::Number(s), Value::Number(_)) if s.quote.is_some() => {
                // Whether the text occurs in the source is the caller's to check: the
                // tree has no sources.
                let q = s.quote.as_ref().unwrap();
                self.check_node(&q.shape, v, depth + 1)
            }
            (Node::Number(s), Value::Number(n)) => {
                let Some(d) = Decimal::from_json(n) else {
                    return other("number too large");
                };
                let inside = |b: &Option<Bound>, lower: bool| {
                    b.is_none_or(|b| {
                        let o = d.cmp(&b.value);
                        let o = if lower { o } else { o.reverse() };
                        o.is_gt() || (o.is_eq() && !b.exclusive)
                    })
                };
                if !inside(&s.min, true) || !inside(&s.max, false) {
                    return other("number out of bounds");
                }
                if s.max_fraction_digits.is_some_and(|k| d.scale() > k) {
                    return other("number has too many fraction digits");
                }
                if s.non_integral && d.is_integer() {
                    return other("number is whole");
                }
                Ok(())
            }
            (Node::String(s), Value::String(text)) => {
                let n = text.chars().count() as u64;
                if n < s.min_length || s.max_length.is_some_and(|m| n > m) {
                    return other("string length out of bounds");
                }
                if s.pattern.as_ref().is_some_and(|p| !p.matches(text)) {
                    return other("string does not match the pattern");
                }
                Ok(())
            }
            (Node::Array(s), Value::Array(items)) => {
                let n = items.len() as u64;
                if n < s.min_items || s.max_items.is_some_and(|m| n > m) {
                    return other("array length out of bounds");
                }
                for (i, item) in items.iter().enumerate() {
                    self.check_node(&s.items, item, depth + 1)
                        .map_err(|e| e.inside(&i.to_string()))?;
                }
                Ok(())
            }
            (Node::Object(s), Value::Object(members)) => {
                for p in &s.properties {
                    match members.get(&p.name) {
                        Some(v) => self
                            .check_node(&p.node, v, depth + 1)
                            .map_err(|e| e.inside(&p.name))?,
                        None if p.required => return other("required key missing"),
                        None => {}
                    }
                }
                for (k, v) in members {
                    if s.properties.iter().any(|p| p.name == *k) {
                        continue;
                    }
                    if s.impossible.contains(k) {
                        return other("a key no value can satisfy");
                    }
                    match &s.additional {
                        Some(a) => self.check_node(a, v, depth + 1).map_err(|e| e.inside(k))?,
                        None => return Err(SchemaMismatch::ExtraKey(k.clone())),
                    }
                }
                Ok(())
            }
            _ => Err(SchemaMismatch::WrongType(format!(
                "{} is not allowed here",
                kind(v)
            ))),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
