//! Merged facets (no `anyOf` left) → one [`Node`] per JSON type they allow.

use serde_json::Value;

use super::Compiler;
use crate::schema::decimal::{gcd, pow10, Decimal};
use crate::schema::error::{NotEnforced, SchemaError};
use crate::schema::facets::{Additional, Facets, Types};
use crate::schema::node::{
    ArraySpec, Bound, IntegerSpec, Node, NumberSpec, ObjectSpec, Property, StringSpec,
};
use crate::schema::pattern::Pattern;
use crate::schema::AdditionalProperties;
use std::sync::Arc;

/// Largest length or item count the automaton counts to (the IR's repetition limit).
pub(super) const MAX_COUNT: u64 = 4096;

/// Most properties one object may declare.
pub(crate) const MAX_PROPERTIES: usize = 64;

/// The shape of `f`; `None` when no value satisfies it (the reason is noted).
pub(crate) fn finish(c: &mut Compiler, f: Facets) -> Result<Option<Node>, SchemaError> {
    c.count_node(&f.location)?;
    // Without `type`, the keywords written say which types are meant (`properties`
    // → object, `items` → array, `minLength` → string, `minimum` → number); none → any.
    let json_semantics = c.options.additional_properties == AdditionalProperties::Open;
    let types = match f.types {
        Some(t) => t,
        None if f.families == Types::NONE => Types::ALL,
        // A quote is llamay's own keyword: it always means a string (or a number).
        None if json_semantics && f.quote.is_none() => Types::ALL,
        None => f.families,
    };
    if types == Types::NONE {
        c.note_unsat(
            "type",
            &f.location,
            "no type is left (the types required do not intersect, or the schema is `false`)"
                .to_string(),
        );
        return Ok(None);
    }
    if let Some(members) = &f.enumeration {
        let mut kept = Vec::new();
        for m in members {
            if allows(c, &f, types, m)? {
                kept.push(m.clone());
            }
        }
        if kept.is_empty() {
            let why = "no enum or const member satisfies the other keywords".to_string();
            c.note_unsat("enum", &f.location, why);
            return Ok(None);
        }
        return Ok(Some(Node::Literals(kept)));
    }
    if types == Types::ALL && f.families == Types::NONE {
        return Ok(Some(Node::Any));
    }
    let mut out = Vec::new();
    if types.has(Types::NULL) {
        out.push(Node::Null);
    }
    if types.has(Types::BOOLEAN) {
        out.push(Node::Boolean);
    }
    if types.has(Types::NUMBER) {
        out.extend(number(c, &f, types)?);
    }
    if types.has(Types::STRING) {
        out.extend(string(c, &f)?);
    }
    if types.has(Types::ARRAY) {
        out.extend(array(c, &f)?);
    }
    if types.has(Types::OBJECT) {
        out.extend(object(c, &f)?);
    }
    Ok(match out.len() {
        0 => None,
        1 => out.pop(),
        _ => Some(Node::Union(out)),
    })
}

fn pattern(c: &mut Compiler, source: &str, at: &str) -> Result<Arc<Pattern>, SchemaError> {
    if let Some(p) = c.patterns.get(source) {
        return Ok(p.clone());
    }
    crate::schema::budget::check(at, "a pattern")?;
    let p = Arc::new(Pattern::compile(source, at)?);
    c.patterns.insert(source.to_string(), p.clone());
    Ok(p)
}

fn string(c: &mut Compiler, f: &Facets) -> Result<Option<Node>, SchemaError> {
    if f.max_length.is_some_and(|m| m < f.min_length) {
        let why = format!(
            "minLength {} exceeds maxLength {}",
            f.min_length,
            f.max_length.unwrap()
        );
        c.note_unsat("maxLength", &f.location, why);
        return Ok(None);
    }
    let max_length = over_limit(c, f, "minLength", f.min_length, "maxLength", f.max_length)?;
    let pattern = match &f.pattern {
        Some((src, at)) => Some(pattern(c, src, at)?),
        None => None,
    };
    if let (Some(q), Some(_)) = (&f.quote, &pattern) {
        return Err(SchemaError::invalid(
            crate::schema::quote::QUOTE_KEYWORD,
            &q.location,
            "cannot be combined with \"pattern\": a quote is already the exact set of values",
        ));
    }
    if let Some((_, at)) = &f.lexicon {
        let other = [
            (f.quote.is_some(), crate::schema::quote::QUOTE_KEYWORD),
            (pattern.is_some(), "pattern (or format)"),
            (
                f.min_length > 0 || max_length.is_some(),
                "minLength/maxLength",
            ),
        ];
        if let Some((_, kw)) = other.iter().find(|(on, _)| *on) {
            return Err(SchemaError::invalid(
                crate::schema::facets::LEXICON,
                at,
                format!(
                    "cannot be combined with {kw}: a lexicon is already the exact set of values"
                ),
            ));
        }
    }
    Ok(Some(Node::String(StringSpec {
        min_length: f.min_length,
        max_length,
        pattern,
        quote: f.quote.clone(),
        lexicon: f.lexicon.as_ref().map(|(n, _)| n.clone()),
    })))
}

fn array(c: &mut Compiler, f: &Facets) -> Result<Option<Node>, SchemaError> {
    let mut max_items = f.max_items;
    let items = if f.items_unchecked {
        Some(Node::Any)
    } else {
        c.node(&f.items)?
    };
    let items = match items {
        Some(n) => n,
        None => {
            // No element can be valid: only the empty array is.
            max_items = Some(0);
            Node::Any
        }
    };
    if max_items.is_some_and(|m| m < f.min_items) {
        let why = format!(
            "minItems {} exceeds maxItems {}",
            f.min_items,
            max_items.unwrap()
        );
        c.note_unsat("minItems", &f.location, why);
        return Ok(None);
    }
    let max_items = over_limit(c, f, "minItems", f.min_items, "maxItems", max_items)?;
    Ok(Some(Node::Array(ArraySpec {
        items: Box::new(items),
        min_items: f.min_items,
        max_items,
    })))
}

fn object(c: &mut Compiler, f: &Facets) -> Result<Option<Node>, SchemaError> {
    // `additionalProperties` is closed by default when `properties` is declared.
    let additional_conj = match &f.additional {
        Additional::Unspecified if closed_by_default(c, f) => None,
        Additional::Unspecified => Some(vec![]),
        Additional::Closed => None,
        Additional::Schema(conj) => Some(conj.clone()),
    };
    let additional = match additional_conj {
        Some(conj) => c.node(&conj)?,
        None => None,
    };
    let mut declared = f.properties.clone();
    for r in &f.required {
        if declared.iter().any(|(n, _)| n == r) {
            continue;
        }
        if additional.is_none() {
            return Err(SchemaError::invalid(
                "required",
                &f.location,
                format!("names {r:?}, which is not among \"properties\"; a required key must be declared"),
            ));
        }
        // An open object carries the required key as one of its extra keys.
        let conj = match &f.additional {
            Additional::Schema(conj) => conj.clone(),
            _ => vec![],
        };
        declared.push((r.clone(), conj));
    }
    if declared.len() > MAX_PROPERTIES {
        return Err(SchemaError::invalid(
            "properties",
            &f.location,
            format!(
                "declares {} properties; llamay enforces at most {MAX_PROPERTIES}",
                declared.len()
            ),
        ));
    }
    let mut properties = Vec::with_capacity(declared.len());
    let mut impossible = Vec::new();
    for (name, conj) in declared {
        let required = f.required.contains(&name);
        let mark = c.unsat.len();
        match c.node(&conj)? {
            Some(node) => properties.push(Property {
                name,
                required,
                node,
            }),
            None if required => {
                let why = format!("required property {name:?} can have no value");
                c.note_unsat("required", &f.location, why);
                return Ok(None);
            }
            // An optional property no value fits simply never appears.
            None => {
                c.unsat.truncate(mark);
                impossible.push(name);
            }
        }
    }
    Ok(Some(Node::Object(ObjectSpec {
        properties,
        additional: additional.map(Box::new),
        impossible,
    })))
}

/// Whether an object that writes no `additionalProperties` is closed (see
/// [`AdditionalProperties`]).
fn closed_by_default(c: &Compiler, f: &Facets) -> bool {
    f.has_properties && c.options.additional_properties == AdditionalProperties::Closed
}

fn number(c: &mut Compiler, f: &Facets, types: Types) -> Result<Option<Node>, SchemaError> {
    if let Some(q) = &f.quote {
        // The bounds are compiled as usual; the quote picks the source's numbers
        // that fit them once the source is known (when lowering).
        let plain = Facets {
            quote: None,
            ..f.clone()
        };
        let Some(shape) = number(c, &plain, types)? else {
            return Ok(None);
        };
        let integer = matches!(shape, Node::Integer(_));
        return Ok(Some(Node::Number(NumberSpec {
            quote: Some(Box::new(crate::schema::node::QuotedNumber {
                quote: q.clone(),
                integer,
                shape,
            })),
            ..NumberSpec::default()
        })));
    }
    let at = f.multiple_of_at.as_deref().unwrap_or(&f.location);
    let step = f.multiple_of;
    let integers_only = !types.has(Types::FRACTION) || step.is_some_and(|s| s.is_integer());
    if integers_only {
        return integer(c, f, step.map(|s| integer_step(&s)));
    }
    let max_fraction_digits = match step {
        None => None,
        Some(s) => match s.power_of_ten() {
            Some(k) if k < 0 => Some((-k) as u32),
            _ => {
                return Err(SchemaError::invalid(
                    "multipleOf",
                    at,
                    format!(
                        "{s} on a number is neither a whole number nor a power of ten such as \
                         0.01, which llamay's constraint cannot honour"
                    ),
                ))
            }
        },
    };
    if let (Some(lo), Some(hi)) = (f.min, f.max) {
        let ord = lo.value.cmp(&hi.value);
        if ord.is_gt() || (ord.is_eq() && (lo.exclusive || hi.exclusive)) {
            let why = format!(
                "the lower bound {} is above the upper bound {}",
                lo.value, hi.value
            );
            c.note_unsat("minimum", &f.location, why);
            return Ok(None);
        }
    }
    Ok(Some(Node::Number(NumberSpec {
        min: f.min,
        max: f.max,
        max_fraction_digits,
        non_integral: false,
        quote: None,
    })))
}

/// The integer step equivalent to a decimal step: integers `n` with `n / (p/10^s)`
/// whole are the multiples of `p / gcd(p, 10^s)`.
fn integer_step(step: &Decimal) -> Option<u128> {
    let ten = pow10(step.scale())?;
    let p = step.mantissa();
    Some(p / gcd(p, ten))
}

fn integer(
    c: &mut Compiler,
    f: &Facets,
    step: Option<Option<u128>>,
) -> Result<Option<Node>, SchemaError> {
    let too_big = |kw: &str, b: &Bound| {
        SchemaError::invalid(
            kw,
            &f.location,
            format!("{} is too large to enforce exactly", b.value),
        )
    };
    let min = match &f.min {
        None => None,
        Some(b) => {
            let v = b
                .value
                .ceil_scaled(0)
                .ok_or_else(|| too_big("minimum", b))?;
            Some(if b.exclusive && b.value.is_integer() {
                v + 1
            } else {
                v
            })
        }
    };
    let max = match &f.max {
        None => None,
        Some(b) => {
            let v = b
                .value
                .floor_scaled(0)
                .ok_or_else(|| too_big("maximum", b))?;
            Some(if b.exclusive && b.value.is_integer() {
                v - 1
            } else {
                v
            })
        }
    };
    let multiple_of = match step {
        None => 1,
        Some(Some(s)) => s,
        Some(None) => {
            let at = f.multiple_of_at.as_deref().unwrap_or(&f.location);
            return Err(SchemaError::invalid(
                "multipleOf",
                at,
                "is too fine to enforce exactly",
            ));
        }
    };
    // Narrow the bounds to the first and last multiples.
    let min = min.map(|v| round_to_step(v, multiple_of, true));
    let max = max.map(|v| round_to_step(v, multiple_of, false));
    if let (Some(lo), Some(hi)) = (min, max) {
        if lo > hi {
            let why = "no integer lies within the bounds".to_string();
            c.note_unsat("minimum", &f.location, why);
            return Ok(None);
        }
    }
    Ok(Some(Node::Integer(IntegerSpec {
        min,
        max,
        multiple_of,
    })))
}

/// The nearest multiple of `step` at or above (`up`) or at or below `v`.
fn round_to_step(v: i128, step: u128, up: bool) -> i128 {
    let Ok(s) = i128::try_from(step) else {
        return v;
    };
    let r = v.rem_euclid(s);
    if r == 0 {
        v
    } else if up {
        v.saturating_add(s - r)
    } else {
        v - r
    }
}

/// True when `v` satisfies the facets' own keywords (shallowly for arrays and
/// objects: lengths, required and closed keys, not their members' shapes).
fn allows(c: &mut Compiler, f: &Facets, types: Types, v: &Value) -> Result<bool, SchemaError> {
    let t = Types::of(v);
    if !types.has(t) {
        return Ok(false);
    }
    Ok(match v {
        Value::Number(n) => {
            let Some(d) = Decimal::from_json(n) else {
                return Ok(false);
            };
            let above = f.min.is_none_or(|b| {
                let o = d.cmp(&b.value);
                o.is_gt() || (o.is_eq() && !b.exclusive)
            });
            let below = f.max.is_none_or(|b| {
                let o = d.cmp(&b.value);
                o.is_lt() || (o.is_eq() && !b.exclusive)
            });
            let step = f
                .multiple_of
                .is_none_or(|s| d.is_multiple_of(&s) == Some(true));
            above && below && step
        }
        Value::String(s) => {
            let n = s.chars().count() as u64;
            let len_ok = n >= f.min_length && f.max_length.is_none_or(|m| n <= m);
            let pat_ok = match &f.pattern {
                None => true,
                Some((src, at)) => pattern(c, src, at)?.matches(s),
            };
            len_ok && pat_ok
        }
        Value::Array(a) => {
            let n = a.len() as u64;
            n >= f.min_items && f.max_items.is_none_or(|m| n <= m)
        }
        Value::Object(o) => {
            let closed = matches!(f.additional, Additional::Closed)
                || (matches!(f.additional, Additional::Unspecified) && closed_by_default(c, f));
            let keys_ok = !closed || o.keys().all(|k| f.properties.iter().any(|(n, _)| n == k));
            keys_ok && f.required.iter().all(|r| o.contains_key(r))
        }
        _ => true,
    })
}

/// Refuses a lower count above [`MAX_COUNT`]; drops (and reports) an upper one.
fn over_limit(
    c: &mut Compiler,
    f: &Facets,
    min_kw: &str,
    min: u64,
    max_kw: &str,
    max: Option<u64>,
) -> Result<Option<u64>, SchemaError> {
    if min > MAX_COUNT {
        return Err(SchemaError::invalid(
            min_kw,
            &f.location,
            format!("{min} is above {MAX_COUNT}, the most llamay's constraint counts to"),
        ));
    }
    Ok(match max {
        Some(m) if m > MAX_COUNT => {
            c.report.add(max_kw, &f.location, NotEnforced::OverLimit);
            None
        }
        m => m,
    })
}
