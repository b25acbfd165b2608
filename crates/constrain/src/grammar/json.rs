//! JSON building blocks on the IR, and the "any JSON value" and "any JSON object"
//! grammars.
//!
//! Structural whitespace is [`Symbol::Ws`] (budgeted), placed so the grammar stays
//! unambiguous: after `{`, `[`, `,`, `:` and after each member/element, never twice in a row.

use std::sync::OnceLock;

use super::builder::GrammarBuilder;
use super::ir::*;
use crate::error::Result;

/// Digits of a JSON number's integer part (19, the width of an i64).
pub(crate) const MAX_INT_DIGITS: u32 = 19;
/// Digits after the decimal point (more than any f64 can use).
pub(crate) const MAX_FRAC_DIGITS: u32 = 32;
/// Digits of an exponent: |e| ≤ 99 keeps every number inside f64's range, so every
/// JSON parser reads the value (serde_json refuses `1e400`).
pub(crate) const MAX_EXP_DIGITS: u32 = 2;

/// A JSON number: integer, optional fraction, optional exponent. Every part is
/// bounded: a small model whose likeliest token is another digit would otherwise
/// write digits until the token limit, or a number no parser can hold. One DFA
/// terminal, shared, rather than repetitions (which would be expanded per use).
pub(crate) fn number_symbols() -> Vec<Symbol> {
    static NUMBER: OnceLock<Symbol> = OnceLock::new();
    vec![NUMBER
        .get_or_init(|| {
            let re = format!(
                "-?(?:0|[1-9][0-9]{{0,{}}})(?:\\.[0-9]{{1,{MAX_FRAC_DIGITS}}})?(?:[eE][+-]?[0-9]{{1,{MAX_EXP_DIGITS}}})?",
                MAX_INT_DIGITS - 1
            );
            Symbol::regex(&re).expect("the number pattern compiles")
        })
        .clone()]
}

/// Adds the rules of an unconstrained JSON value to `b` and returns the value rule, so a
/// schema lowering can use it for `{}` schemas or open `additionalProperties`. Rules are
/// named `json-value`, `json-object`, `json-member`, `json-array` (suffixed if taken).
pub(crate) fn add_any_value(b: &mut GrammarBuilder) -> RuleId {
    add_value_rules(b).0
}

/// The rules of [`add_any_value`], returning the value rule and the object rule.
fn add_value_rules(b: &mut GrammarBuilder) -> (RuleId, RuleId) {
    let value = b.declare("json-value");
    let member = b.rule(
        "json-member",
        vec![vec![
            Symbol::json_string(JsonString::any().as_object_key()),
            Symbol::ws(),
            Symbol::lit(":"),
            Symbol::ws(),
            Symbol::rule(value),
        ]],
    );
    let object = b.rule(
        "json-object",
        vec![vec![
            Symbol::lit("{"),
            Symbol::ws(),
            Symbol::alt(vec![
                vec![Symbol::lit("}")],
                vec![
                    Symbol::rule(member),
                    Symbol::ws(),
                    Symbol::star(Symbol::seq(vec![
                        Symbol::lit(","),
                        Symbol::ws(),
                        Symbol::rule(member),
                        Symbol::ws(),
                    ])),
                    Symbol::lit("}"),
                ],
            ]),
        ]],
    );
    let array = b.rule(
        "json-array",
        vec![vec![
            Symbol::lit("["),
            Symbol::ws(),
            Symbol::alt(vec![
                vec![Symbol::lit("]")],
                vec![
                    Symbol::rule(value),
                    Symbol::ws(),
                    Symbol::star(Symbol::seq(vec![
                        Symbol::lit(","),
                        Symbol::ws(),
                        Symbol::rule(value),
                        Symbol::ws(),
                    ])),
                    Symbol::lit("]"),
                ],
            ]),
        ]],
    );
    b.define(
        value,
        vec![
            vec![Symbol::rule(object)],
            vec![Symbol::rule(array)],
            vec![Symbol::json_string(JsonString::any())],
            number_symbols(),
            vec![Symbol::lit("true")],
            vec![Symbol::lit("false")],
            vec![Symbol::lit("null")],
        ],
    );
    (value, object)
}

impl Grammar {
    /// A grammar for any single JSON value, optionally preceded by whitespace (all
    /// structural whitespace drawn from the default 64-character budget). Nothing may
    /// follow the value, so a finished object or array is a finished document.
    pub fn any_json() -> Result<Grammar> {
        let mut b = GrammarBuilder::new();
        let value = add_any_value(&mut b);
        let root = b.rule("root", vec![vec![Symbol::ws(), Symbol::rule(value)]]);
        b.build(root)
    }

    /// A grammar for any JSON object (JSON mode: OpenAI's `json_object` and Ollama's
    /// `format: "json"` answer an object, and the clients built on them parse one),
    /// optionally preceded by whitespace; its members are any JSON values.
    pub fn json_object() -> Result<Grammar> {
        let mut b = GrammarBuilder::new();
        let (_, object) = add_value_rules(&mut b);
        let root = b.rule("root", vec![vec![Symbol::ws(), Symbol::rule(object)]]);
        b.build(root)
    }
}
