//! The GBNF front-end: llama.cpp's grammar format, parsed onto the [grammar IR](crate::grammar).
//!
//! Supported: `name ::= alternatives` rules (a rule ends at the end of its line unless
//! inside parentheses or right after `|`/`::=`), `|`, `( )`, `?`, `*`, `+`, `{m}`,
//! `{m,}`, `{m,n}`, string literals, character classes with ranges and `^` negation over
//! Unicode code points, `.` (any character), escapes `\x.. \u.... \U........ \n \t \r
//! \\ \" \[ \] \- \/`, `#` comments; `root` is the start rule.
//!
//! Refused, with `line:column`: left recursion (suggesting the right-recursive form),
//! token terminals (`<think>`, `<[1000]>`), repetition bounds above 4096, undefined or
//! twice-defined rules, unterminated strings and classes, bad escapes.

mod lines;
mod parser;

pub use parser::parse_gbnf;

#[cfg(test)]
mod tests;
