//! One schema object read into flat constraints ("facets"), and the merge that
//! `allOf`, `$ref` siblings and `anyOf` siblings go through.
//!
//! Sub-schemas are not read here: they stay as [`Conj`]s (lists of JSON pointers
//! into the document, all of which must hold), compiled later by the builder.
//! That keeps reading finite in the face of recursive `$ref`s.

use serde_json::{Map, Value};

use super::decimal::Decimal;
use super::error::{child_pointer, location_of, NotEnforced, SchemaError, SchemaReport};
use super::keywords::{status, Status};
use super::node::Bound;

/// Most members an `enum` may list.
pub(super) const MAX_ENUM: usize = 64;
/// Most alternatives one `anyOf`/`oneOf` may list.
pub(super) const MAX_ALTERNATIVES: usize = 256;

/// Sub-schemas that must all hold, as JSON pointers; empty means `true`.
pub(super) type Conj = Vec<String>;

/// A set of JSON value types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(super) struct Types(pub u8);

impl Types {
    pub(super) const NULL: Types = Types(1);
    pub(super) const BOOLEAN: Types = Types(2);
    /// Whole numbers.
    pub(super) const INTEGER: Types = Types(4);
    /// Numbers with a non-zero fraction (`number` is INTEGER | FRACTION).
    pub(super) const FRACTION: Types = Types(8);
    pub(super) const STRING: Types = Types(16);
    pub(super) const ARRAY: Types = Types(32);
    pub(super) const OBJECT: Types = Types(64);
    pub(super) const NUMBER: Types = Types(4 | 8);
    pub(super) const ALL: Types = Types(127);
    pub(super) const NONE: Types = Types(0);

    pub(super) fn has(self, t: Types) -> bool {
        self.0 & t.0 != 0
    }
    pub(super) fn and(self, t: Types) -> Types {
        Types(self.0 & t.0)
    }
    pub(super) fn or(self, t: Types) -> Types {
        Types(self.0 | t.0)
    }
    fn from_name(name: &str) -> Option<Types> {
        Some(match name {
            "null" => Types::NULL,
            "boolean" => Types::BOOLEAN,
            "integer" => Types::INTEGER,
            "number" => Types::NUMBER,
            "string" => Types::STRING,
            "array" => Types::ARRAY,
            "object" => Types::OBJECT,
            _ => return None,
        })
    }
    /// The type of a JSON value (an integral number is an integer).
    pub(super) fn of(v: &Value) -> Types {
        match v {
            Value::Null => Types::NULL,
            Value::Bool(_) => Types::BOOLEAN,
            Value::Number(n) => match Decimal::from_json(n) {
                Some(d) if d.is_integer() => Types::INTEGER,
                _ => Types::FRACTION,
            },
            Value::String(_) => Types::STRING,
            Value::Array(_) => Types::ARRAY,
            Value::Object(_) => Types::OBJECT,
        }
    }
}

/// The keyword naming a lexicon a string's value must be a term of.
pub(super) const LEXICON: &str = "x-llamay-lexicon";

/// What `additionalProperties` says, after merging.
#[derive(Clone, Debug, PartialEq, Default)]
pub(super) enum Additional {
    /// Not written: closed when `properties` is declared, open otherwise.
    #[default]
    Unspecified,
    /// `false`.
    Closed,
    /// Extra keys' values must satisfy this.
    Schema(Conj),
}

/// The flat constraints of one schema (or of several merged).
#[derive(Clone, Debug, Default)]
pub(super) struct Facets {
    /// `type`, if any schema wrote one.
    pub types: Option<Types>,
    /// Type families that keywords were written for (used when no `type` is).
    pub families: Types,
    /// `enum`/`const`, intersected.
    pub enumeration: Option<Vec<Value>>,
    pub min_length: u64,
    pub max_length: Option<u64>,
    /// `(source, location)`.
    pub pattern: Option<(String, String)>,
    pub min: Option<Bound>,
    pub max: Option<Bound>,
    pub multiple_of: Option<Decimal>,
    /// `(step, location)` of the first step written, for messages.
    pub multiple_of_at: Option<String>,
    pub items: Conj,
    /// `prefixItems` present: element shapes are not enforced.
    pub items_unchecked: bool,
    pub min_items: u64,
    pub max_items: Option<u64>,
    /// Declared properties in declaration order (merged by name).
    pub properties: Vec<(String, Conj)>,
    pub has_properties: bool,
    pub required: Vec<String>,
    pub additional: Additional,
    /// Each entry is one `anyOf`/`oneOf` list; all must hold (one member of each).
    pub any_of: Vec<Alternatives>,
    /// Location of the first schema merged in, for messages.
    pub location: String,
    /// `x-llamay-quote`.
    pub quote: Option<super::quote::Quote>,
    /// `x-llamay-lexicon`: `(name, location)`.
    pub lexicon: Option<(String, String)>,
}

/// One `anyOf` or `oneOf` list.
#[derive(Clone, Debug)]
pub(super) struct Alternatives {
    pub branches: Vec<Conj>,
    /// For a `oneOf`, the location of the schema holding it: its branches must also
    /// exclude one another, which the builder checks (and reports where it cannot).
    pub one_of_at: Option<String>,
}

/// What reading one schema object yields besides its facets.
pub(super) struct Read {
    pub facets: Facets,
    /// Pointers to merge in: `allOf` members and the `$ref` target.
    pub merge: Vec<String>,
}

fn as_count(v: &Value, keyword: &str, at: &str) -> Result<u64, SchemaError> {
    match v {
        Value::Number(n) => match Decimal::from_json(n) {
            Some(d) if d.is_integer() && !d.is_negative() => {
                Ok(u64::try_from(d.mantissa()).unwrap_or(u64::MAX))
            }
            _ => Err(SchemaError::invalid(
                keyword,
                at,
                "must be a non-negative integer",
            )),
        },
        _ => Err(SchemaError::invalid(
            keyword,
            at,
            "must be a non-negative integer",
        )),
    }
}

fn as_decimal(v: &Value, keyword: &str, at: &str) -> Result<Decimal, SchemaError> {
    match v {
        Value::Number(n) => Decimal::from_json(n).ok_or_else(|| {
            SchemaError::invalid(
                keyword,
                at,
                format!("{n} is too large or too precise to enforce"),
            )
        }),
        _ => Err(SchemaError::invalid(keyword, at, "must be a number")),
    }
}

/// Decodes the fragment of a local `$ref` into a JSON pointer.
fn local_pointer(reference: &str, at: &str) -> Result<String, SchemaError> {
    let Some(fragment) = reference.strip_prefix('#') else {
        return Err(SchemaError::invalid(
            "$ref",
            at,
            format!(
                "{reference:?} is a remote reference; llamay's constraint only follows local \
                 JSON pointers such as \"#/$defs/name\""
            ),
        ));
    };
    if !(fragment.is_empty() || fragment.starts_with('/')) {
        return Err(SchemaError::invalid(
            "$ref",
            at,
            format!(
                "{reference:?} names an anchor; llamay's constraint only follows JSON pointers \
                 such as \"#/$defs/name\""
            ),
        ));
    }
    percent_decode(fragment)
        .ok_or_else(|| SchemaError::invalid("$ref", at, format!("{reference:?} is badly escaped")))
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl Facets {
    /// Reads the schema at `pointer` (already looked up as `value`).
    pub(super) fn read(
        value: &Value,
        pointer: &str,
        report: &mut SchemaReport,
    ) -> Result<Read, SchemaError> {
        let at = location_of(pointer);
        let mut f = Facets {
            location: at.clone(),
            ..Facets::default()
        };
        let obj: &Map<String, Value> = match value {
            Value::Bool(true) => {
                return Ok(Read {
                    facets: f,
                    merge: vec![],
                })
            }
            Value::Bool(false) => {
                f.types = Some(Types::NONE);
                return Ok(Read {
                    facets: f,
                    merge: vec![],
                });
            }
            Value::Object(o) => o,
            _ => {
                return Err(SchemaError::new(
                    "",
                    &at,
                    format!("{at} is not a schema: a schema is an object or a boolean"),
                ))
            }
        };
        let mut merge = Vec::new();
        let mut format = None;
        for (key, v) in obj {
            match status(key) {
                Some(Status::Refused) => return Err(SchemaError::unsupported(key, &at)),
                Some(Status::Annotation) => {}
                Some(Status::Ignored) if key == "format" => {
                    match v
                        .as_str()
                        .and_then(|n| super::format::pattern(n).map(|p| (n, p)))
                    {
                        Some(known) => format = Some(known),
                        None => report.add(key, &at, NotEnforced::Ignored),
                    }
                }
                Some(Status::Ignored) => {
                    let no_effect = key == "uniqueItems" && *v == Value::Bool(false);
                    if !no_effect {
                        report.add(key, &at, NotEnforced::Ignored);
                    }
                    if key == "prefixItems" {
                        f.items_unchecked = true;
                        f.families = f.families.or(Types::ARRAY);
                    }
                }
                None => report.add(key, &at, NotEnforced::Unknown),
                Some(Status::Enforced) => f.read_keyword(key, v, pointer, &at, obj, &mut merge)?,
            }
        }
        if let Some((name, _)) = &f.lexicon {
            report.lexicons.push(format!("{name} at {at}"));
        }
        if let Some((name, source)) = format {
            // A format is a pattern of our own writing; beside the schema's own
            // `pattern` (two patterns cannot be merged) it stays ignored.
            if f.pattern.is_some() {
                report.add("format", &at, NotEnforced::Ignored);
            } else {
                f.pattern = Some((source, at.clone()));
                f.families = f.families.or(Types::STRING);
                if let Some(cap) = super::format::max_length(name) {
                    f.max_length = Some(f.max_length.map_or(cap, |m| m.min(cap)));
                }
                report.formats.push(format!("{name} at {at}"));
            }
        }
        if f.items_unchecked && !f.items.is_empty() {
            // Beside `prefixItems`, `items` covers only the later elements: not enforced either.
            report.add("items", &at, NotEnforced::Ignored);
            f.items.clear();
        }
        Ok(Read { facets: f, merge })
    }

    fn read_keyword(
        &mut self,
        key: &str,
        v: &Value,
        pointer: &str,
        at: &str,
        obj: &Map<String, Value>,
        merge: &mut Vec<String>,
    ) -> Result<(), SchemaError> {
        let here = |k: &str| child_pointer(pointer, k);
        match key {
            LEXICON => {
                let name = v.as_str().filter(|n| !n.is_empty()).ok_or_else(|| {
                    SchemaError::invalid(key, at, "must be the name of a lexicon the server has")
                })?;
                self.lexicon = Some((name.to_string(), at.to_string()));
                if self.types.is_none() {
                    self.families = self.families.or(Types::STRING);
                }
            }
            super::quote::QUOTE_KEYWORD => {
                self.quote = Some(super::quote::Quote::read(v, at)?);
                if self.types.is_none() {
                    self.families = self.families.or(Types::STRING);
                }
            }
            "type" => {
                let names: Vec<&Value> = match v {
                    Value::Array(a) => a.iter().collect(),
                    other => vec![other],
                };
                let mut t = Types::NONE;
                for n in names {
                    let parsed = n.as_str().and_then(Types::from_name).ok_or_else(|| {
                        SchemaError::invalid("type", at, format!("has an unknown type {n}"))
                    })?;
                    t = t.or(parsed);
                }
                self.types = Some(t);
            }
            "properties" => {
                let Value::Object(props) = v else {
                    return Err(SchemaError::invalid(key, at, "must be an object"));
                };
                let base = here("properties");
                for name in props.keys() {
                    self.properties
                        .push((name.clone(), vec![child_pointer(&base, name)]));
                }
                self.has_properties = true;
                self.families = self.families.or(Types::OBJECT);
            }
            "required" => match v {
                Value::Array(names) => {
                    for n in names {
                        let n = n.as_str().ok_or_else(|| {
                            SchemaError::invalid(key, at, "must be a list of strings")
                        })?;
                        if !self.required.iter().any(|r| r == n) {
                            self.required.push(n.to_string());
                        }
                    }
                    self.families = self.families.or(Types::OBJECT);
                }
                // Draft 3's per-property `required: true` has no meaning in later drafts.
                _ => return Err(SchemaError::invalid(key, at, "must be a list of strings")),
            },
            "additionalProperties" => {
                self.additional = match v {
                    Value::Bool(true) => Additional::Schema(vec![]),
                    Value::Bool(false) => Additional::Closed,
                    _ => Additional::Schema(vec![here(key)]),
                };
                self.families = self.families.or(Types::OBJECT);
            }
            "items" => {
                if v.is_array() {
                    return Err(SchemaError::invalid(
                        key,
                        at,
                        "is a list of schemas (tuple form), which llamay's constraint cannot \
                         honour; use one schema for every item",
                    ));
                }
                self.items = vec![here(key)];
                self.families = self.families.or(Types::ARRAY);
            }
            "minItems" => {
                self.min_items = as_count(v, key, at)?;
                self.families = self.families.or(Types::ARRAY);
            }
            "maxItems" => {
                self.max_items = Some(as_count(v, key, at)?);
                self.families = self.families.or(Types::ARRAY);
            }
            "minLength" => {
                self.min_length = as_count(v, key, at)?;
                self.families = self.families.or(Types::STRING);
            }
            "maxLength" => {
                self.max_length = Some(as_count(v, key, at)?);
                self.families = self.families.or(Types::STRING);
            }
            "pattern" => {
                let s = v
                    .as_str()
                    .ok_or_else(|| SchemaError::invalid(key, at, "must be a string"))?;
                self.pattern = Some((s.to_string(), at.to_string()));
                self.families = self.families.or(Types::STRING);
            }
            "enum" => {
                let Value::Array(members) = v else {
                    return Err(SchemaError::invalid(key, at, "must be a list"));
                };
                if members.len() > MAX_ENUM {
                    return Err(SchemaError::invalid(
                        key,
                        at,
                        format!(
                            "has {} members; llamay enforces at most {MAX_ENUM}",
                            members.len()
                        ),
                    ));
                }
                self.intersect_enum(members.clone());
            }
            "const" => self.intersect_enum(vec![v.clone()]),
            "minimum" | "exclusiveMinimum" | "maximum" | "exclusiveMaximum" => {
                self.read_bound(key, v, at, obj)?;
            }
            "multipleOf" => {
                let step = as_decimal(v, key, at)?;
                if step.is_negative() || step.is_zero() {
                    return Err(SchemaError::invalid(key, at, "must be greater than 0"));
                }
                self.multiple_of = Some(step);
                self.multiple_of_at = Some(at.to_string());
                self.families = self.families.or(Types::NUMBER);
            }
            "$ref" => {
                let r = v
                    .as_str()
                    .ok_or_else(|| SchemaError::invalid(key, at, "must be a string"))?;
                merge.push(local_pointer(r, at)?);
            }
            "allOf" => {
                let Value::Array(members) = v else {
                    return Err(SchemaError::invalid(key, at, "must be a list of schemas"));
                };
                let base = here(key);
                merge.extend((0..members.len()).map(|i| child_pointer(&base, &i.to_string())));
            }
            "anyOf" | "oneOf" => {
                let Value::Array(members) = v else {
                    return Err(SchemaError::invalid(key, at, "must be a list of schemas"));
                };
                if members.is_empty() {
                    return Err(SchemaError::invalid(
                        key,
                        at,
                        "must list at least one schema",
                    ));
                }
                if members.len() > MAX_ALTERNATIVES {
                    return Err(SchemaError::invalid(
                        key,
                        at,
                        format!(
                            "has {} alternatives; llamay enforces at most {MAX_ALTERNATIVES}",
                            members.len()
                        ),
                    ));
                }
                let base = here(key);
                self.any_of.push(Alternatives {
                    branches: (0..members.len())
                        .map(|i| vec![child_pointer(&base, &i.to_string())])
                        .collect(),
                    one_of_at: (key == "oneOf").then(|| at.to_string()),
                });
            }
            _ => unreachable!("keyword table and reader disagree on {key}"),
        }
        Ok(())
    }

    fn read_bound(
        &mut self,
        key: &str,
        v: &Value,
        at: &str,
        obj: &Map<String, Value>,
    ) -> Result<(), SchemaError> {
        self.families = self.families.or(Types::NUMBER);
        // Draft 4: `exclusiveMinimum: true` makes `minimum` exclusive.
        if let Value::Bool(b) = v {
            if !key.starts_with("exclusive") {
                return Err(SchemaError::invalid(key, at, "must be a number"));
            }
            let base = if key == "exclusiveMinimum" {
                "minimum"
            } else {
                "maximum"
            };
            if !obj.contains_key(base) {
                return Ok(());
            }
            let value = as_decimal(&obj[base], base, at)?;
            let bound = Bound {
                value,
                exclusive: *b,
            };
            self.tighten(key == "exclusiveMinimum", bound);
            return Ok(());
        }
        let lower = key == "minimum" || key == "exclusiveMinimum";
        let exclusive = key.starts_with("exclusive");
        if !exclusive {
            let flag = if lower {
                "exclusiveMinimum"
            } else {
                "exclusiveMaximum"
            };
            if obj.get(flag).is_some_and(Value::is_boolean) {
                return Ok(()); // read together with the draft-4 flag
            }
        }
        let value = as_decimal(v, key, at)?;
        self.tighten(lower, Bound { value, exclusive });
        Ok(())
    }

    fn tighten(&mut self, lower: bool, b: Bound) {
        let slot = if lower { &mut self.min } else { &mut self.max };
        let replace = match slot {
            None => true,
            Some(old) => {
                let ord = b.value.cmp(&old.value);
                if lower {
                    ord.is_gt() || (ord.is_eq() && b.exclusive)
                } else {
                    ord.is_lt() || (ord.is_eq() && b.exclusive)
                }
            }
        };
        if replace {
            *slot = Some(b);
        }
    }

    fn intersect_enum(&mut self, members: Vec<Value>) {
        self.enumeration = Some(match self.enumeration.take() {
            None => members,
            Some(old) => old
                .into_iter()
                .filter(|a| members.iter().any(|b| json_equal(a, b)))
                .collect(),
        });
    }

    /// True when the facets constrain nothing at all.
    pub(super) fn is_trivial(&self) -> bool {
        self.types.is_none()
            && self.families == Types::NONE
            && self.enumeration.is_none()
            && self.any_of.is_empty()
            && !self.items_unchecked
    }

    /// Conjunction with `other`. Fails only where the product page says a merge is
    /// refused rather than unsatisfiable (two different patterns) or where a
    /// combined step does not fit.
    pub(super) fn merge(&mut self, other: Facets) -> Result<(), SchemaError> {
        self.types = match (self.types, other.types) {
            (Some(a), Some(b)) => Some(a.and(b)),
            (a, b) => a.or(b),
        };
        self.families = self.families.or(other.families);
        if let Some(e) = other.enumeration {
            self.intersect_enum(e);
        }
        self.min_length = self.min_length.max(other.min_length);
        self.max_length = min_opt(self.max_length, other.max_length);
        match (&self.pattern, other.pattern) {
            (Some((a, _)), Some((b, b_at))) if *a != b => {
                return Err(SchemaError::invalid(
                    "allOf",
                    &self.location,
                    format!(
                        "combines two different patterns ({a:?} and {b:?} at {b_at}), which \
                         llamay's constraint cannot honour together"
                    ),
                ));
            }
            (None, Some(p)) => self.pattern = Some(p),
            _ => {}
        }
        if let Some(b) = other.min {
            self.tighten(true, b);
        }
        if let Some(b) = other.max {
            self.tighten(false, b);
        }
        self.multiple_of = match (self.multiple_of, other.multiple_of) {
            (Some(a), Some(b)) => Some(a.lcm(&b).ok_or_else(|| {
                SchemaError::invalid(
                    "multipleOf",
                    &self.location,
                    format!("steps {a} and {b} have no common multiple llamay can represent"),
                )
            })?),
            (a, b) => a.or(b),
        };
        if self.multiple_of_at.is_none() {
            self.multiple_of_at = other.multiple_of_at;
        }
        if !other.items.is_empty() {
            self.items.extend(other.items);
        }
        self.items_unchecked |= other.items_unchecked;
        self.min_items = self.min_items.max(other.min_items);
        self.max_items = min_opt(self.max_items, other.max_items);
        for (name, conj) in other.properties {
            match self.properties.iter_mut().find(|(n, _)| *n == name) {
                Some((_, mine)) => mine.extend(conj),
                None => self.properties.push((name, conj)),
            }
        }
        self.has_properties |= other.has_properties;
        for r in other.required {
            if !self.required.contains(&r) {
                self.required.push(r);
            }
        }
        self.additional = match (std::mem::take(&mut self.additional), other.additional) {
            (Additional::Closed, _) | (_, Additional::Closed) => Additional::Closed,
            (Additional::Schema(mut a), Additional::Schema(b)) => {
                a.extend(b);
                Additional::Schema(a)
            }
            (Additional::Unspecified, x) | (x, Additional::Unspecified) => x,
        };
        self.any_of.extend(other.any_of);
        match (&self.lexicon, other.lexicon) {
            (Some((a, a_at)), Some((b, b_at))) if *a != b => {
                return Err(SchemaError::invalid(
                    LEXICON,
                    &self.location,
                    format!(
                        "combines two different lexicons ({a} at {a_at} and {b} at {b_at}); \
                         a value is one term of one lexicon"
                    ),
                ));
            }
            (None, Some(b)) => self.lexicon = Some(b),
            _ => {}
        }
        match (&self.quote, other.quote) {
            (Some(a), Some(b)) if (&a.source, a.normalize) != (&b.source, b.normalize) => {
                return Err(SchemaError::invalid(
                    super::quote::QUOTE_KEYWORD,
                    &self.location,
                    format!(
                        "combines two different quotes ({} at {} and {} at {}), which \
                         llamay's constraint cannot honour together",
                        a.source, a.location, b.source, b.location
                    ),
                ));
            }
            (Some(a), Some(b)) => {
                let min = a.min_chars.max(b.min_chars);
                self.quote.as_mut().unwrap().min_chars = min;
            }
            (None, Some(b)) => self.quote = Some(b),
            _ => {}
        }
        Ok(())
    }
}

fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// JSON equality with numbers compared by value (`1 == 1.0`).
pub(super) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (Decimal::from_json(x), Decimal::from_json(y)) {
                (Some(x), Some(y)) => x == y,
                _ => x == y,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}
