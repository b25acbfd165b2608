//! The keyword table (SPEC §5): what each JSON Schema keyword is to llamay.

/// What the constraint does with a keyword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Status {
    /// Compiled into the constraint.
    Enforced,
    /// Parsed, not enforced, and listed in the report.
    Ignored,
    /// An annotation or structural keyword: dropped without a word.
    Annotation,
    /// Refused with the product page's message.
    Refused,
}

/// Keywords compiled into the constraint.
pub(super) const ENFORCED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "$ref",
    "anyOf",
    "oneOf",
    "allOf",
    "x-llamay-quote",
    "x-llamay-lexicon",
];

/// Keywords parsed but not enforced; each occurrence is reported. The first eight
/// are the product page's; the rest are other drafts' validation keywords that
/// only ever narrow what is valid, so ignoring them keeps every valid document
/// reachable.
pub(super) const IGNORED: &[&str] = &[
    "format",
    "uniqueItems",
    "prefixItems",
    "contains",
    "minProperties",
    "maxProperties",
    "propertyNames",
    "dependentRequired",
    "minContains",
    "maxContains",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "unevaluatedItems",
];

/// Keywords dropped silently: annotations, identifiers, definitions containers and
/// keywords with no effect in the forms llamay accepts (`additionalItems` only
/// matters beside tuple-form `items`, which is refused).
pub(super) const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "example",
    "$schema",
    "$id",
    "id",
    "$comment",
    "$defs",
    "definitions",
    "readOnly",
    "writeOnly",
    "deprecated",
    "$vocabulary",
    "$dynamicAnchor",
    "$recursiveAnchor",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "additionalItems",
];

/// Keywords refused wherever they sit in a schema that is used.
pub(super) const REFUSED: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "$anchor",
    "$dynamicRef",
    "$recursiveRef",
];

/// The status of `keyword`, or `None` for a key that is no keyword llamay knows.
/// Keys starting with `x-` are vendor extensions, treated as annotations.
pub(super) fn status(keyword: &str) -> Option<Status> {
    if ENFORCED.contains(&keyword) {
        Some(Status::Enforced)
    } else if IGNORED.contains(&keyword) {
        Some(Status::Ignored)
    } else if ANNOTATIONS.contains(&keyword) || keyword.starts_with("x-") {
        Some(Status::Annotation)
    } else if REFUSED.contains(&keyword) {
        Some(Status::Refused)
    } else {
        None
    }
}
