//! JSON building blocks on the IR, and the "any JSON value" grammar.
//!
//! Structural whitespace is [`Symbol::Ws`] (budgeted), placed so the grammar stays
//! unambiguous: after `{`, `[`, `,`, `:` and after each member/element, never twice in a row.

use super::builder::GrammarBuilder;
use super::charclass::CharClass;
use super::ir::*;
use crate::error::Result;

fn digits(lo: u32) -> Symbol {
    Symbol::chars([(lo, '9' as u32)])
}

/// `-? (0 | [1-9][0-9]*)`: a JSON integer.
pub fn integer_symbols() -> Vec<Symbol> {
    vec![
        Symbol::opt(Symbol::lit("-")),
        Symbol::alt(vec![
            vec![Symbol::lit("0")],
            vec![digits('1' as u32), Symbol::star(digits('0' as u32))],
        ]),
    ]
}

/// A JSON number: integer, optional fraction, optional exponent.
pub fn number_symbols() -> Vec<Symbol> {
    let mut v = integer_symbols();
    v.push(Symbol::opt(Symbol::seq(vec![
        Symbol::lit("."),
        Symbol::plus(digits('0' as u32)),
    ])));
    v.push(Symbol::opt(Symbol::seq(vec![
        Symbol::class(CharClass::of_chars("eE")),
        Symbol::opt(Symbol::class(CharClass::of_chars("+-"))),
        Symbol::plus(digits('0' as u32)),
    ])));
    v
}

/// Adds the rules of an unconstrained JSON value to `b` and returns the value rule, so a
/// schema lowering can use it for `{}` schemas or open `additionalProperties`. Rules are
/// named `json-value`, `json-object`, `json-member`, `json-array` (suffixed if taken).
pub fn add_any_value(b: &mut GrammarBuilder) -> RuleId {
    let value = b.declare("json-value");
    let member = b.rule(
        "json-member",
        vec![vec![
            Symbol::json_string(JsonString::any()),
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
    value
}

/// A grammar for any single JSON value, optionally preceded by whitespace (all
/// structural whitespace drawn from the default 64-character budget). Nothing may follow
/// the value, so a finished object or array is a finished document.
pub fn any_json() -> Result<Grammar> {
    let mut b = GrammarBuilder::new();
    let value = add_any_value(&mut b);
    let root = b.rule("root", vec![vec![Symbol::ws(), Symbol::rule(value)]]);
    b.build(root)
}
