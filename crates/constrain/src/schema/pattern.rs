//! `pattern`: RE2 syntax checked, translated and measured.
//!
//! JSON Schema patterns are ECMA-262 regular expressions; llamay reads them as RE2
//! (the `regex-syntax` dialect) with two ECMA meanings kept: `\d` and `\w` are
//! ASCII classes (RE2 with Unicode on would widen them). Lookaround,
//! back-references, word boundaries and multi-line anchors are refused. A pattern
//! is unanchored unless it says `^`/`$`: the decoded string must *contain* a
//! match, so the pattern is wrapped as `.*(?:pattern).*` and matched whole
//! (a `^`/`$` inside still pins it to the value's start/end).

use regex_syntax::ast::{self, Ast, ClassAsciiKind, ClassPerlKind, ClassSet, ClassSetItem};
use regex_syntax::hir::{self, Hir, HirKind, Look};
use std::sync::Arc;

use super::error::SchemaError;
use crate::grammar::ByteDfa;

/// Most DFA states a pattern may need.
pub(super) const MAX_PATTERN_STATES: usize = 2000;

/// A schema's `pattern` as llamay reads it (RE2 syntax, ASCII `\d` and `\w`), checked
/// and determinised within the DFA state limit; the runtime reads `llamay_regex` with it.
#[derive(Clone)]
pub struct Pattern {
    /// The pattern as the schema wrote it.
    pub source: String,
    /// The whole-value language as a regex to match in whole (anchored at both
    /// ends): `(?s:.*)(?:pattern)(?s:.*)`, with the ASCII `\d`/`\w` rewrite applied.
    pub regex: String,
    /// States of its DFA (byte-level, as counted here).
    pub states: usize,
    dfa: Arc<ByteDfa>,
}

impl std::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pattern({:?}, {} states)", self.source, self.states)
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.source == other.source
    }
}

impl Pattern {
    /// Parses and checks `source`; `location` names the schema for errors.
    pub fn compile(source: &str, location: &str) -> Result<Pattern, SchemaError> {
        let refuse = |what: &str| {
            SchemaError::invalid(
                "pattern",
                location,
                format!("{source:?} uses {what}, which llamay's constraint cannot honour"),
            )
        };
        let mut parsed = ast::parse::ParserBuilder::new()
            .build()
            .parse(source)
            .map_err(|e| match e.kind() {
                ast::ErrorKind::UnsupportedBackreference => refuse("a back-reference"),
                ast::ErrorKind::UnsupportedLookAround => refuse("lookaround"),
                _ => SchemaError::invalid(
                    "pattern",
                    location,
                    format!("{source:?} is not an RE2 regular expression: {}", e.kind()),
                ),
            })?;
        ascii_perl_classes(&mut parsed);
        let inner = hir::translate::TranslatorBuilder::new()
            .utf8(true)
            .build()
            .translate(source, &parsed)
            .map_err(|e| {
                SchemaError::invalid(
                    "pattern",
                    location,
                    format!("{source:?} is not an RE2 regular expression: {}", e.kind()),
                )
            })?;
        if let Some(what) = refused_look(&inner) {
            return Err(refuse(what));
        }
        // The rewritten pattern is printed back from its syntax tree (faithful, unlike
        // printing the HIR) and wrapped so it may match anywhere in the value.
        let mut core = String::new();
        ast::print::Printer::new()
            .print(&parsed, &mut core)
            .map_err(|_| refuse("unprintable syntax"))?;
        let regex = format!("(?s:.*)(?:{core})(?s:.*)");
        // The wrapped pattern must parse too (the DFA's own parse only says "too big").
        regex_syntax::ParserBuilder::new()
            .utf8(true)
            .build()
            .parse(&regex)
            .map_err(|e| {
                SchemaError::invalid(
                    "pattern",
                    location,
                    format!("{source:?} cannot be compiled: {e}"),
                )
            })?;
        let too_big = || {
            SchemaError::invalid(
                "pattern",
                location,
                format!("{source:?} needs more than {MAX_PATTERN_STATES} automaton states"),
            )
        };
        // Built once for the check here and the lowering later, and shared with every
        // other schema that says the same.
        let dfa = crate::grammar::shared_dfa::language(&regex, MAX_PATTERN_STATES)
            .map_err(|_| too_big())?;
        let states = dfa.len();
        Ok(Pattern {
            source: source.to_string(),
            regex,
            states,
            dfa,
        })
    }

    /// True when the whole of `text` is in the pattern's language.
    pub fn matches(&self, text: &str) -> bool {
        self.dfa.matches(text.as_bytes())
    }

    /// The whole-value language's DFA; it may accept nothing (refused when lowered).
    pub fn dfa(&self) -> &Arc<ByteDfa> {
        &self.dfa
    }
}

/// The refused assertion a pattern uses, if any.
fn refused_look(h: &Hir) -> Option<&'static str> {
    match h.kind() {
        HirKind::Look(look) => match look {
            Look::Start | Look::End => None,
            Look::StartLF | Look::EndLF | Look::StartCRLF | Look::EndCRLF => {
                Some("a multi-line anchor")
            }
            _ => Some("a word boundary"),
        },
        HirKind::Repetition(r) => refused_look(&r.sub),
        HirKind::Capture(c) => refused_look(&c.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().find_map(refused_look),
        _ => None,
    }
}

/// Rewrites `\d`, `\D`, `\w`, `\W` (also inside brackets) to ASCII classes, their
/// ECMA-262 meaning; `\s` keeps RE2's Unicode meaning, which is ECMA's too.
fn ascii_perl_classes(a: &mut Ast) {
    match a {
        Ast::ClassPerl(p) => {
            if let Some(kind) = ascii_kind(&p.kind) {
                let item = ClassSetItem::Ascii(ast::ClassAscii {
                    span: p.span,
                    kind,
                    negated: false,
                });
                *a = Ast::class_bracketed(ast::ClassBracketed {
                    span: p.span,
                    negated: p.negated,
                    kind: ClassSet::Item(item),
                });
            }
        }
        Ast::ClassBracketed(b) => ascii_in_set(&mut b.kind),
        Ast::Repetition(r) => ascii_perl_classes(&mut r.ast),
        Ast::Group(g) => ascii_perl_classes(&mut g.ast),
        Ast::Alternation(x) => x.asts.iter_mut().for_each(ascii_perl_classes),
        Ast::Concat(x) => x.asts.iter_mut().for_each(ascii_perl_classes),
        _ => {}
    }
}

fn ascii_in_set(set: &mut ClassSet) {
    match set {
        ClassSet::Item(item) => ascii_in_item(item),
        ClassSet::BinaryOp(op) => {
            ascii_in_set(&mut op.lhs);
            ascii_in_set(&mut op.rhs);
        }
    }
}

fn ascii_in_item(item: &mut ClassSetItem) {
    match item {
        ClassSetItem::Perl(p) => {
            if let Some(kind) = ascii_kind(&p.kind) {
                *item = ClassSetItem::Ascii(ast::ClassAscii {
                    span: p.span,
                    kind,
                    negated: p.negated,
                });
            }
        }
        ClassSetItem::Bracketed(b) => ascii_in_set(&mut b.kind),
        ClassSetItem::Union(u) => u.items.iter_mut().for_each(ascii_in_item),
        _ => {}
    }
}

fn ascii_kind(k: &ClassPerlKind) -> Option<ClassAsciiKind> {
    match k {
        ClassPerlKind::Digit => Some(ClassAsciiKind::Digit),
        ClassPerlKind::Word => Some(ClassAsciiKind::Word),
        ClassPerlKind::Space => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Pattern {
        Pattern::compile(s, "the schema").unwrap()
    }

    #[test]
    fn anchoring() {
        assert!(p("^[0-9]{5}$").matches("69001"));
        assert!(!p("^[0-9]{5}$").matches("690012"));
        assert!(p("[0-9]").matches("ab1cd"));
        assert!(!p("[0-9]").matches("abcd"));
        assert!(p("^ab").matches("abzzz"));
        assert!(!p("^ab").matches("zab"));
        assert!(p("ab$").matches("zab"));
    }

    #[test]
    fn ecma_classes_are_ascii() {
        assert!(!p("^\\d$").matches("\u{0663}"));
        assert!(p("^\\D$").matches("\u{0663}"));
        assert!(p("^[\\w-]+$").matches("a_b-9"));
        assert!(!p("^[\\w]+$").matches("é"));
        assert!(p("^.$").matches("é"));
    }

    #[test]
    fn refusals() {
        for (src, word) in [
            ("(?=a)b", "lookaround"),
            ("(a)\\1", "back-reference"),
            ("\\bword", "word boundary"),
            ("(?m)^a$", "multi-line anchor"),
        ] {
            let e = Pattern::compile(src, "properties.a").unwrap_err();
            assert!(e.message.contains(word), "{src}: {}", e.message);
            assert_eq!(e.location, "properties.a");
            assert_eq!(e.keyword, "pattern");
        }
        let e = Pattern::compile("a{1000}b{1000}c{1000}", "items").unwrap_err();
        assert!(e.message.contains("2000"), "{}", e.message);
    }
}
