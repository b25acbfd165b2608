//! Refusals and the not-enforced report.

use std::fmt;

/// A schema llamay refuses to compile, naming the keyword and where it sits.
///
/// `location` is the dotted path of the schema object holding the keyword
/// (`properties.a`, `items`, `$defs.line.properties.qty`, `anyOf.1`), or
/// `the schema` for the root. `message` is the whole sentence shown to the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    /// The offending keyword (`not`, `pattern`, `$ref`, `allOf`, ...).
    pub keyword: String,
    /// Dotted location of the schema holding it.
    pub location: String,
    /// The full human-readable refusal.
    pub message: String,
}

impl SchemaError {
    /// A refusal with a message of its own.
    pub fn new(keyword: &str, location: &str, message: String) -> SchemaError {
        SchemaError {
            keyword: keyword.to_string(),
            location: location.to_string(),
            message,
        }
    }

    /// A keyword the constraint never honours (`not`, `if`, `patternProperties`, ...),
    /// in the product page's wording.
    pub fn unsupported(keyword: &str, location: &str) -> SchemaError {
        let message = format!(
            "{location} uses \"{keyword}\", which llamay's constraint cannot honour; \
             send a schema without it rather than one that is silently not enforced"
        );
        SchemaError::new(keyword, location, message)
    }

    /// `{location}: {what}` for a keyword whose value llamay cannot take.
    pub fn invalid(keyword: &str, location: &str, what: impl fmt::Display) -> SchemaError {
        let message = format!("{location}: \"{keyword}\" {what}");
        SchemaError::new(keyword, location, message)
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SchemaError {}

/// Why a keyword appears in the [`SchemaReport`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NotEnforced {
    /// A JSON Schema keyword that is parsed but not enforced (`format`, `uniqueItems`, ...).
    Ignored,
    /// A bound above what the automaton counts to (4096 characters or items); the
    /// rest of the keyword's schema is enforced, the bound is not.
    OverLimit,
    /// A key that is no JSON Schema keyword llamay knows (a typo, a vendor extension
    /// without the `x-` prefix, an OpenAPI word such as `nullable`).
    Unknown,
}

/// The [`ReportEntry::keyword`] of a `oneOf` whose branches the constraint cannot keep
/// apart: each document fits one branch or more, "exactly one" is not enforced.
pub(super) const ONE_OF_EXCLUSIVITY: &str = "oneOf exclusivity";

/// One keyword that was not enforced, and where.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReportEntry {
    /// The keyword as written; for a `oneOf` enforced only as `anyOf`,
    /// `"oneOf exclusivity"` (kind [`NotEnforced::Ignored`]).
    pub keyword: String,
    /// Dotted location of the schema holding it (see [`SchemaError`]).
    pub location: String,
    /// Ignored keyword or unknown key.
    pub kind: NotEnforced,
}

/// Everything in a compiled schema that the constraint does not enforce.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaReport {
    /// Sorted, without duplicates (a definition referenced twice is reported once).
    pub entries: Vec<ReportEntry>,
    /// Where `x-llamay-quote` is enforced (dotted locations, sorted, once each); filled
    /// when the schema is lowered with its sources.
    pub quotes: Vec<String>,
    /// Where a `format` is enforced, as `name at location` (sorted, once each).
    pub formats: Vec<String>,
    /// Where `x-llamay-lexicon` is enforced, as `name at location` (sorted, once each).
    pub lexicons: Vec<String>,
}

impl SchemaReport {
    /// True when every keyword of the schema is enforced.
    pub fn is_fully_enforced(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries of one kind.
    pub fn of_kind(&self, kind: NotEnforced) -> impl Iterator<Item = &ReportEntry> {
        self.entries.iter().filter(move |e| e.kind == kind)
    }

    pub(crate) fn add(&mut self, keyword: &str, location: &str, kind: NotEnforced) {
        self.entries.push(ReportEntry {
            keyword: keyword.to_string(),
            location: location.to_string(),
            kind,
        });
    }

    pub(crate) fn finish(&mut self) {
        self.entries.sort();
        self.entries.dedup();
        self.formats.sort();
        self.formats.dedup();
        self.lexicons.sort();
        self.lexicons.dedup();
    }
}

/// `keyword at location: what` (`format at properties.day: not enforced`).
impl fmt::Display for ReportEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            NotEnforced::Ignored => "not enforced",
            NotEnforced::OverLimit => "above 4096, not enforced",
            NotEnforced::Unknown => "unknown keyword, ignored",
        };
        write!(f, "{} at {}: {what}", self.keyword, self.location)
    }
}

/// The entries, `; `-separated.
impl fmt::Display for SchemaReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// Turns a JSON pointer (`/$defs/line/properties/qty`) into the dotted location
/// used in messages (`$defs.line.properties.qty`); the root is `the schema`.
pub(super) fn location_of(pointer: &str) -> String {
    if pointer.is_empty() {
        return "the schema".to_string();
    }
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

/// Appends one reference token to a JSON pointer.
pub(super) fn child_pointer(pointer: &str, token: &str) -> String {
    format!("{pointer}/{}", token.replace('~', "~0").replace('/', "~1"))
}
