//! Recursive-descent parser for GBNF text.

use super::lines::LineIndex;
use crate::error::{Error, Result};
use crate::grammar::{CharClass, Grammar, GrammarBuilder, RuleId, Symbol, MAX_REPEAT};
use rustc_hash::FxHashMap;

/// Most nested parentheses accepted (keeps recursion bounded on hostile input).
const MAX_NESTING: usize = 128;

/// Parses GBNF text into a validated grammar whose start rule is `root`.
pub fn parse_gbnf(text: &str) -> Result<Grammar> {
    let mut p = Parser {
        src: text.as_bytes(),
        text,
        lines: LineIndex::new(text),
        pos: 0,
        b: GrammarBuilder::new(),
        refs: FxHashMap::default(),
        depth: 0,
    };
    p.parse()
}

struct Parser<'a> {
    src: &'a [u8],
    text: &'a str,
    /// Line and column of any offset, so errors and rule origins cost no rescan.
    lines: LineIndex<'a>,
    pos: usize,
    b: GrammarBuilder,
    /// First place each rule name was referenced, for "undefined rule" errors.
    refs: FxHashMap<RuleId, usize>,
    depth: usize,
}

fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_'
}

impl Parser<'_> {
    fn err<T>(&self, pos: usize, msg: impl Into<String>) -> Result<T> {
        let (l, c) = self.lines.line_col(pos);
        Err(Error::grammar_at(msg, l, c))
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    /// Skips blanks and comments; newlines only when `newline_ok`.
    fn skip_space(&mut self, newline_ok: bool) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' => self.pos += 1,
                b'\r' | b'\n' if newline_ok => self.pos += 1,
                b'#' => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn name(&mut self) -> Option<&str> {
        let start = self.pos;
        while self.peek().is_some_and(is_name_byte) {
            self.pos += 1;
        }
        (self.pos > start).then(|| &self.text[start..self.pos])
    }

    fn rule_id(&mut self, name: &str) -> RuleId {
        match self.b.lookup(name) {
            Some(id) => id,
            None => self.b.declare(name),
        }
    }

    fn parse(&mut self) -> Result<Grammar> {
        self.skip_space(true);
        while self.pos < self.src.len() {
            let start = self.pos;
            let Some(name) = self.name().map(str::to_string) else {
                return self.err(start, "expected a rule name");
            };
            self.skip_space(false);
            if !self.src[self.pos..].starts_with(b"::=") {
                return self.err(self.pos, format!("expected `::=` after rule name `{name}`"));
            }
            self.pos += 3;
            self.skip_space(true);
            let id = self.rule_id(&name);
            if self.b.is_defined(id) {
                return self.err(start, format!("rule `{name}` is defined twice"));
            }
            let alts = self.alternatives(false)?;
            self.b.define(id, alts);
            let (l, c) = self.lines.line_col(start);
            self.b.set_origin(id, l, c);
            match self.peek() {
                None | Some(b'\n' | b'\r') => {}
                Some(_) => return self.err(self.pos, "expected end of line after the rule"),
            }
            self.skip_space(true);
        }
        let mut undefined: Vec<(usize, RuleId)> = self
            .refs
            .iter()
            .filter(|(id, _)| !self.b.is_defined(**id))
            .map(|(id, pos)| (*pos, *id))
            .collect();
        undefined.sort();
        if let Some(&(pos, id)) = undefined.first() {
            return self.err(pos, format!("undefined rule `{}`", self.b.name(id)));
        }
        let Some(root) = self.b.lookup("root") else {
            return Err(Error::grammar("the grammar has no `root` rule"));
        };
        if !self.b.is_defined(root) {
            return Err(Error::grammar("the grammar has no `root` rule"));
        }
        std::mem::take(&mut self.b).build(root)
    }

    fn alternatives(&mut self, nested: bool) -> Result<Vec<Vec<Symbol>>> {
        let mut alts = vec![self.sequence(nested)?];
        while self.peek() == Some(b'|') {
            self.pos += 1;
            self.skip_space(true);
            alts.push(self.sequence(nested)?);
        }
        Ok(alts)
    }

    fn sequence(&mut self, nested: bool) -> Result<Vec<Symbol>> {
        let mut seq: Vec<Symbol> = Vec::new();
        loop {
            let start = self.pos;
            let Some(c) = self.peek() else { break };
            let sym = match c {
                b'"' => self.string()?,
                b'[' => self.class()?,
                b'.' => {
                    self.pos += 1;
                    Symbol::class(CharClass::any())
                }
                b'(' => {
                    self.depth += 1;
                    if self.depth > MAX_NESTING {
                        return self.err(
                            start,
                            format!("parentheses nested deeper than {MAX_NESTING}"),
                        );
                    }
                    self.pos += 1;
                    self.skip_space(true);
                    let alts = self.alternatives(true)?;
                    if self.peek() != Some(b')') {
                        return self.err(start, "unclosed `(`");
                    }
                    self.pos += 1;
                    self.depth -= 1;
                    Symbol::Group(alts)
                }
                b'<' | b'!' => return self.token_terminal(start),
                b'?' | b'*' | b'+' | b'{' => {
                    let Some(last) = seq.pop() else {
                        return self.err(start, format!("`{}` has nothing to repeat", c as char));
                    };
                    let (min, max) = self.repetition()?;
                    seq.push(Symbol::repeat(last, min, max));
                    self.skip_space(nested);
                    continue;
                }
                c if is_name_byte(c) => {
                    let name = self.name().unwrap().to_string();
                    let id = self.rule_id(&name);
                    self.refs.entry(id).or_insert(start);
                    Symbol::rule(id)
                }
                _ => break,
            };
            seq.push(sym);
            self.skip_space(nested);
        }
        Ok(seq)
    }

    fn token_terminal<T>(&self, start: usize) -> Result<T> {
        let end = self.src[start..]
            .iter()
            .position(|&c| c == b'>' || c == b'\n')
            .map_or(self.src.len(), |i| start + i + 1);
        let shown = self.text.get(start..end).unwrap_or("<");
        self.err(
            start,
            format!("token terminal `{}` is not supported: it names one model's vocabulary, and llamay constrains bytes; write the text as a string literal", shown.trim_end()),
        )
    }

    fn number(&mut self) -> Result<Option<u64>> {
        let start = self.pos;
        let mut v: u64 = 0;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            v = v.saturating_mul(10).saturating_add(u64::from(c - b'0'));
            self.pos += 1;
        }
        Ok((self.pos > start).then_some(v))
    }

    fn repetition(&mut self) -> Result<(u32, Option<u32>)> {
        let start = self.pos;
        let c = self.src[self.pos];
        self.pos += 1;
        match c {
            b'?' => return Ok((0, Some(1))),
            b'*' => return Ok((0, None)),
            b'+' => return Ok((1, None)),
            _ => {}
        }
        self.skip_space(false);
        let Some(min) = self.number()? else {
            return self.err(self.pos, "expected a number in `{...}`");
        };
        self.skip_space(false);
        let max = match self.peek() {
            Some(b'}') => Some(min),
            Some(b',') => {
                self.pos += 1;
                self.skip_space(false);
                let m = self.number()?;
                self.skip_space(false);
                m
            }
            _ => return self.err(self.pos, "expected `,` or `}` in repetition"),
        };
        if self.peek() != Some(b'}') {
            return self.err(self.pos, "expected `}` to close the repetition");
        }
        self.pos += 1;
        let top = max.unwrap_or(min);
        if top > u64::from(MAX_REPEAT) {
            return self.err(start, format!("repetition bound {top} is above the limit of {MAX_REPEAT} (each count is a separate state)"));
        }
        if max.is_some_and(|m| m < min) {
            return self.err(
                start,
                format!(
                    "repetition {{{min},{}}} has its minimum above its maximum",
                    max.unwrap()
                ),
            );
        }
        Ok((min as u32, max.map(|m| m as u32)))
    }

    /// One character of a string or class, escapes decoded, as a code point.
    fn char(&mut self, in_class: bool) -> Result<u32> {
        let start = self.pos;
        let rest = &self.text[self.pos..];
        let c = rest.chars().next().unwrap();
        self.pos += c.len_utf8();
        if c != '\\' {
            return Ok(c as u32);
        }
        let Some(e) = self.peek() else {
            return self.err(start, "unfinished escape");
        };
        self.pos += 1;
        let hex = |p: &mut Self, n: usize| -> Result<u32> {
            let digits = p
                .text
                .get(p.pos..p.pos + n)
                .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()));
            let Some(d) = digits else {
                return p.err(start, format!("`\\{}` needs {n} hex digits", e as char));
            };
            p.pos += n;
            Ok(u32::from_str_radix(d, 16).unwrap())
        };
        let v = match e {
            b'x' => hex(self, 2)?,
            b'u' => hex(self, 4)?,
            b'U' => hex(self, 8)?,
            b'n' => 10,
            b't' => 9,
            b'r' => 13,
            b'\\' | b'"' | b'[' | b']' | b'-' | b'/' | b'^' => u32::from(e),
            _ if in_class && e == b'.' => u32::from(e),
            _ => {
                return self.err(
                    start,
                    format!(
                        "unknown escape `\\{}`",
                        self.text[start + 1..].chars().next().unwrap()
                    ),
                )
            }
        };
        if char::from_u32(v).is_none() {
            return self.err(
                start,
                format!("escape U+{v:X} is not a Unicode scalar value"),
            );
        }
        Ok(v)
    }

    fn string(&mut self) -> Result<Symbol> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None | Some(b'\n') => {
                    return self.err(start, "unterminated string: no closing `\"` on this line")
                }
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Symbol::lit(out.as_bytes()));
                }
                Some(_) => out.push(char::from_u32(self.char(false)?).unwrap()),
            }
        }
    }

    fn class(&mut self) -> Result<Symbol> {
        let start = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        loop {
            match self.peek() {
                None | Some(b'\n') => {
                    return self.err(
                        start,
                        "unterminated character class: no closing `]` on this line",
                    )
                }
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {
                    let lo = self.char(true)?;
                    let hi = if self.peek() == Some(b'-')
                        && self.src.get(self.pos + 1).is_some_and(|&c| c != b']')
                    {
                        self.pos += 1;
                        let at = self.pos;
                        let hi = self.char(true)?;
                        if hi < lo {
                            return self.err(at, "character range runs backwards");
                        }
                        hi
                    } else {
                        lo
                    };
                    ranges.push((lo, hi));
                }
            }
        }
        let class = CharClass::new(ranges);
        let class = if negated { class.negate() } else { class };
        if class.is_empty() {
            return self.err(start, "character class matches no character");
        }
        Ok(Symbol::class(class))
    }
}
