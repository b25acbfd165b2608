//! JSON Schema front-end: a schema (any `serde_json::Value`) → a normalized,
//! resolved [`CompiledSchema`] tree, following the keyword table of SPEC §5 →
//! the grammar IR (`lower`) → a [`Constraint`](crate::Constraint).
//!
//! ```
//! use llamay_constrain::{compile_schema, schema_grammar};
//! let schema = serde_json::json!({"type": "object",
//!     "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
//!     "required": ["city", "unit"]});
//! let tree = compile_schema(&schema).unwrap();
//! assert!(tree.report.is_fully_enforced());
//! assert!(tree.check(&serde_json::json!({"unit": "c", "city": "Paris"})).is_ok());
//! let (_grammar, _report) = schema_grammar(&schema).unwrap();
//! let e = compile_schema(&serde_json::json!({"properties": {"a": {"not": {}}}})).unwrap_err();
//! assert_eq!(e.to_string(), "properties.a uses \"not\", which llamay's constraint cannot \
//!     honour; send a schema without it rather than one that is silently not enforced");
//! ```
//!
//! Decisions beyond the table, so callers know what they get:
//! - **Locations** in messages are the dotted path of the schema object holding the
//!   keyword (`properties.a`, `items`, `$defs.line.properties.qty`, `anyOf.1`);
//!   the root is `the schema`. A keyword reached through `$ref` is located where
//!   it is written, not where it is used. Dots inside property names are not escaped.
//! - **Only schemas that are used are read**: a refused keyword inside a `$defs`
//!   entry nothing references does not refuse the schema.
//! - **Type inference** extends the table's rule: with no `type`, the keywords
//!   written name the types (`properties`/`required`/`additionalProperties` →
//!   object, `items`/`minItems`/`maxItems`/`prefixItems` → array,
//!   `minLength`/`maxLength`/`pattern` → string, bounds/`multipleOf` → number);
//!   with none of them, any JSON value. The inference happens after merging, so
//!   `{"anyOf":[{"type":"integer"},{"type":"string"}],"minLength":1}` keeps both.
//! - **`required` without `properties`**: a required name that is not a declared
//!   property is refused when the object is closed (the default when `properties`
//!   is declared); an object left open (`additionalProperties` true or a schema,
//!   or no `properties` at all) gets the key as a property of the additional shape.
//! - **`$ref` with siblings** is merged with them (2019-09 semantics), like `allOf`.
//! - **`oneOf`** accepts what its branches accept; "exactly one" is enforced where
//!   the branches can be told apart (by type, by `enum`/`const` values, by a required
//!   key's values or absence: the tagged union; every integer beside every number
//!   leaves the non-integral numbers), and reported as
//!   [`ONE_OF_EXCLUSIVITY`] where not (see `exclusive.rs`).
//! - **Unknown keys** are ignored and reported with [`NotEnforced::Unknown`]; keys
//!   starting with `x-` are vendor annotations and ignored silently. Other drafts'
//!   validation keywords (`dependencies`, `dependentSchemas`, `unevaluated*`,
//!   `min/maxContains`) are reported as ignored like `format`. `uniqueItems: false`
//!   is not reported (it asks nothing).
//! - **`prefixItems`**: elements are not constrained at all (an `items` beside it is
//!   reported too), so a valid document is never cut off.
//! - **Refused** besides `not`, `if`/`then`/`else`, `patternProperties`: `$anchor`,
//!   `$dynamicRef`, `$recursiveRef`, tuple `items`, remote `$ref`, limits
//!   (64 properties, 64 enum members, 256 alternatives per list and after
//!   combining, 2,000 pattern DFA states, 64 chained references, 100,000 nodes),
//!   a `multipleOf` on a non-integer that is neither whole nor a power of ten, two
//!   different patterns merged, a reference cycle that consumes no input, and a
//!   schema no document can satisfy.
//! - **Unsatisfiable parts** are dropped where JSON Schema allows it: an `anyOf`
//!   alternative, a type of a type list, an optional property (it never appears),
//!   array items (only `[]` remains); otherwise the schema is refused.
//! - **`enum`/`const`** members that other keywords rule out are dropped; the
//!   check is shallow for array and object members (lengths, required and closed
//!   keys, not nested shapes).
//! - **Numbers**: a `number` with a whole `multipleOf` is an integer; an integer
//!   with a decimal step becomes the equivalent integer step (`multipleOf: 2.5` on
//!   integers is `multipleOf: 5`). Bounds are kept exact (see `decimal`).

mod budget;
mod check;
mod decimal;
mod digits;
mod error;
mod format;
mod keywords;
mod lower;
mod node;
mod pattern;
mod quote;

mod build;
mod facets;

pub use budget::CompileBudget;
pub use check::SchemaMismatch;
pub use decimal::Decimal;
pub use error::{NotEnforced, ReportEntry, SchemaError, SchemaReport};
pub use format::ENFORCED_FORMATS;
pub use node::{CompiledSchema, IntegerSpec, Node};
pub use pattern::Pattern;
pub use quote::{Quote, QuoteSource, Sources, QUOTE_KEYWORD};

/// Compiles a JSON Schema into its normalized tree (what [`CompiledSchema::check`] judges
/// documents by and [`CompiledSchema::lower`] turns into a grammar), or refuses it.
pub fn compile_schema(schema: &serde_json::Value) -> Result<CompiledSchema, SchemaError> {
    compile_schema_with(schema, &SchemaOptions::default())
}

/// [`compile_schema`] under other [`SchemaOptions`].
pub fn compile_schema_with(
    schema: &serde_json::Value,
    options: &SchemaOptions,
) -> Result<CompiledSchema, SchemaError> {
    budget::within(&options.budget, || {
        build::Compiler::new(schema, *options).run()
    })
}

/// How a schema is read where llamay's API default and JSON Schema's own differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SchemaOptions {
    /// What an object that declares `properties` and writes no
    /// `additionalProperties` does with other keys.
    pub additional_properties: AdditionalProperties,
    /// How much the compile may take.
    pub budget: budget::CompileBudget,
}

/// The default of `additionalProperties`, and with it how a schema without `type` is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AdditionalProperties {
    /// The API's default (SPEC §5): an object that declares `properties` is closed, and
    /// the keywords a schema without `type` writes name its types (`properties` ->
    /// an object), so a model is never invited to invent keys or shapes.
    #[default]
    Closed,
    /// JSON Schema's own semantics: undeclared keys are allowed (with any value), and a
    /// schema without `type` accepts every type, its keywords applying only to theirs
    /// (`{"properties": ...}` also accepts `"text"`). What a benchmark of JSON Schema
    /// semantics compares (`llamay mask-worker`), and a request's
    /// `llamay_options: {"additional_properties": "open"}`.
    Open,
}

impl AdditionalProperties {
    /// Reads the wire value (`"open"` / `"closed"`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "open" => Some(Self::Open),
            "closed" => Some(Self::Closed),
            _ => None,
        }
    }

    /// The wire value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
        }
    }
}

/// Compiles a schema and lowers it to the grammar IR, with its not-enforced report.
/// A schema with `x-llamay-quote` is refused here (it has no sources): see
/// [`schema_grammar_with`].
pub fn schema_grammar(
    schema: &serde_json::Value,
) -> Result<(crate::grammar::Grammar, SchemaReport), SchemaError> {
    schema_grammar_with(schema, &Sources::none())
}

/// [`schema_grammar`] with the texts `x-llamay-quote` values must be spans of; the
/// report's [`SchemaReport::quotes`] lists where quotes are enforced.
pub fn schema_grammar_with(
    schema: &serde_json::Value,
    sources: &Sources,
) -> Result<(crate::grammar::Grammar, SchemaReport), SchemaError> {
    schema_grammar_with_options(schema, sources, &SchemaOptions::default())
}

/// [`schema_grammar_with`] under other [`SchemaOptions`].
pub fn schema_grammar_with_options(
    schema: &serde_json::Value,
    sources: &Sources,
    options: &SchemaOptions,
) -> Result<(crate::grammar::Grammar, SchemaReport), SchemaError> {
    let (compiled, g, quotes) = budget::within(&options.budget, || {
        let compiled = build::Compiler::new(schema, *options).run()?;
        let (g, quotes) = lower::lower_with(&compiled, sources)?;
        Ok::<_, SchemaError>((compiled, g, quotes))
    })?;
    let mut report = compiled.report;
    report.quotes = quotes;
    Ok((g, report))
}

// Here rather than beside the other constructors in `constraint.rs`: the schema
// front-end builds on the constraint, not the other way round.
impl crate::Constraint {
    /// Compiles a JSON Schema into a ready constraint for `vocab`, with its
    /// not-enforced report (a schema with `x-llamay-quote` is refused: no sources).
    pub fn from_schema(
        schema: &serde_json::Value,
        vocab: std::sync::Arc<crate::Vocabulary>,
    ) -> Result<(crate::Constraint, SchemaReport), SchemaError> {
        Self::from_schema_with(schema, vocab, &SchemaOptions::default())
    }

    /// [`Constraint::from_schema`](crate::Constraint::from_schema) under other
    /// [`SchemaOptions`].
    pub fn from_schema_with(
        schema: &serde_json::Value,
        vocab: std::sync::Arc<crate::Vocabulary>,
        options: &SchemaOptions,
    ) -> Result<(crate::Constraint, SchemaReport), SchemaError> {
        let (g, report) = schema_grammar_with_options(schema, &Sources::none(), options)?;
        let c = crate::Constraint::from_grammar(&g, vocab).map_err(|e| {
            SchemaError::new(
                "",
                "the schema",
                format!("the schema could not be compiled: {e}"),
            )
        })?;
        Ok((c, report))
    }
}

/// The limits a schema is held to (SPEC §5), as a catalog reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchemaLimits {
    /// Properties one object may declare.
    pub properties_per_object: usize,
    /// Members of one `enum`.
    pub enum_members: usize,
    /// Alternatives of one `anyOf` / `oneOf`.
    pub any_of_alternatives: usize,
    /// DFA states of one `pattern`.
    pub pattern_states: usize,
    /// Depth of `$ref` recursion.
    pub recursion_depth: usize,
    /// Characters of structural whitespace per document.
    pub whitespace_budget: u32,
}

/// The limits this build enforces on a schema, for a catalog to report.
pub fn schema_limits() -> SchemaLimits {
    SchemaLimits {
        properties_per_object: build::MAX_PROPERTIES,
        enum_members: facets::MAX_ENUM,
        any_of_alternatives: facets::MAX_ALTERNATIVES,
        pattern_states: pattern::MAX_PATTERN_STATES,
        recursion_depth: build::MAX_REF_DEPTH,
        whitespace_budget: crate::grammar::DEFAULT_WS_BUDGET,
    }
}
