//! The normalized schema tree: what the constraint enforces, with every keyword
//! resolved, merged and checked. One variant per JSON value shape; alternatives
//! (`anyOf`, `oneOf`, type lists) are a [`Node::Union`]; `$ref`s that are shared or
//! recursive are [`Node::Ref`]s into [`CompiledSchema::defs`].

use super::decimal::Decimal;
use super::error::SchemaReport;
use super::pattern::Pattern;
use std::sync::Arc;

/// Index into [`CompiledSchema::defs`].
pub(super) type DefId = usize;

/// A compiled JSON Schema: every keyword resolved, merged and checked, with what is not
/// enforced in its [`report`](Self::report). [`check`](Self::check) judges a document
/// by it; [`lower`](Self::lower) and [`lower_into`](Self::lower_into) make it a grammar.
#[derive(Clone, Debug)]
pub struct CompiledSchema {
    // The tree itself is the crate's own (its nodes are `internals`, for the crate's
    // tests): callers check, lower and read the report.
    /// The document's shape.
    #[doc(hidden)]
    pub root: Node,
    /// Shared or recursive definitions, referenced by [`Node::Ref`].
    #[doc(hidden)]
    pub defs: Vec<Def>,
    /// Keywords that were accepted but are not enforced.
    pub report: SchemaReport,
}

/// One definition reached through `$ref`.
#[derive(Clone, Debug)]
pub struct Def {
    /// Dotted location of the referenced schema (`$defs.line`).
    pub location: String,
    /// Its shape.
    pub node: Node,
}

/// One JSON value shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// Any JSON value.
    Any,
    /// One of several shapes (never empty, never a single member).
    Union(Vec<Node>),
    /// The definition with this index.
    Ref(DefId),
    /// Exactly one of these values (`enum`/`const`, after dropping the members other
    /// keywords rule out). Written as compact JSON.
    Literals(Vec<serde_json::Value>),
    /// `null`.
    Null,
    /// `true` or `false`.
    Boolean,
    /// An integer, written as digits without fraction or exponent.
    Integer(IntegerSpec),
    /// A number that may have a fraction.
    Number(NumberSpec),
    /// A string.
    String(StringSpec),
    /// An array.
    Array(ArraySpec),
    /// An object.
    Object(ObjectSpec),
}

/// An integer in `[min, max]` (inclusive, exact), a multiple of `multiple_of`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntegerSpec {
    /// Least value, if bounded below.
    pub min: Option<i128>,
    /// Greatest value, if bounded above.
    pub max: Option<i128>,
    /// Positive step; 1 means none.
    pub multiple_of: u128,
}

/// A bound on a non-integer number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    /// The bound's exact value.
    pub value: Decimal,
    /// True for `exclusiveMinimum` / `exclusiveMaximum`.
    pub exclusive: bool,
}

/// A number (integers included). Unbounded and without step, any JSON number;
/// otherwise written without exponent (see the lowering).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NumberSpec {
    /// Lower bound.
    pub min: Option<Bound>,
    /// Upper bound.
    pub max: Option<Bound>,
    /// At most this many digits after the point (`multipleOf: 0.01` gives 2).
    pub max_fraction_digits: Option<u32>,
    /// Whole numbers excluded (a `oneOf` branch beside one that takes every integer);
    /// only set on a number that is otherwise unconstrained.
    pub non_integral: bool,
    /// `x-llamay-quote`: the number's text must be written in a source; then the
    /// other fields are unset and the quote's `shape` holds the bounds.
    pub quote: Option<Box<QuotedNumber>>,
}

/// A number whose text must occur in a source: one of the numbers written there that
/// fit `shape` (an unquoted [`Node::Integer`] or [`Node::Number`]).
#[derive(Clone, Debug, PartialEq)]
pub struct QuotedNumber {
    pub quote: super::quote::Quote,
    /// Integers only (no fraction, no exponent).
    pub integer: bool,
    pub shape: Node,
}

impl NumberSpec {
    /// True when nothing but "a JSON number" is required.
    pub fn is_unconstrained(&self) -> bool {
        self.min.is_none()
            && self.max.is_none()
            && self.max_fraction_digits.is_none()
            && !self.non_integral
            && self.quote.is_none()
    }
}

/// A string whose decoded value has `min_length..=max_length` code points and
/// matches `pattern`.
#[derive(Clone, Debug, PartialEq)]
pub struct StringSpec {
    /// Least length in code points.
    pub min_length: u64,
    /// Greatest length in code points.
    pub max_length: Option<u64>,
    /// The pattern the decoded value must match.
    pub pattern: Option<Arc<Pattern>>,
    /// `x-llamay-quote`: the decoded value must be a span of a source.
    pub quote: Option<super::quote::Quote>,
    /// `x-llamay-lexicon`: the value must be one term of this lexicon (by name).
    pub lexicon: Option<String>,
}

/// An array of `items`, `min_items..=max_items` long.
#[derive(Clone, Debug, PartialEq)]
pub struct ArraySpec {
    /// Every element's shape.
    pub items: Box<Node>,
    /// Least length.
    pub min_items: u64,
    /// Greatest length.
    pub max_items: Option<u64>,
}

/// An object: declared properties in any order, each at most once; closes only
/// once every required property is present.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectSpec {
    /// Declared properties, in declaration order.
    pub properties: Vec<Property>,
    /// Shape of values under undeclared keys; `None` means no other key is allowed.
    pub additional: Option<Box<Node>>,
    /// Declared keys no value can satisfy: they never appear, and an open object's
    /// undeclared keys may not spell them either.
    pub impossible: Vec<String>,
}

/// One declared property.
#[derive(Clone, Debug, PartialEq)]
pub struct Property {
    /// The key (decoded).
    pub name: String,
    /// True when the object must contain it.
    pub required: bool,
    /// The value's shape.
    pub node: Node,
}
