//! Splitting a Go `text/template` into text and actions, and an action into tokens.
//! Trim markers follow Go: `{{- ` eats the whitespace before the action, ` -}}` the
//! whitespace after it (the space beside the dash is what makes it a marker).

use super::GoTemplateError;

#[derive(Debug, PartialEq)]
pub(super) enum Piece {
    Text(String),
    /// An action's inside, without its delimiters or trim markers, and where it starts.
    Action(String, usize),
}

pub(super) fn pieces(src: &str) -> Result<Vec<Piece>, GoTemplateError> {
    let mut out = Vec::new();
    let mut rest = src;
    let mut offset = 0;
    let mut trim_next = false;
    while !rest.is_empty() {
        let Some(open) = rest.find("{{") else {
            push_text(&mut out, rest, trim_next, false);
            break;
        };
        let after = &rest[open + 2..];
        let trim_before = after.starts_with('-') && after[1..].starts_with(is_space);
        push_text(&mut out, &rest[..open], trim_next, trim_before);
        let body_start = if trim_before { 2 } else { 0 };
        let at = offset + open;
        let (len, close) = action_end(&after[body_start..])
            .ok_or_else(|| GoTemplateError::at(src, at, "unclosed action"))?;
        let mut body = &after[body_start..body_start + len];
        trim_next = false;
        if body.ends_with('-') && body[..body.len() - 1].ends_with(is_space) {
            body = &body[..body.len() - 1];
            trim_next = true;
        }
        let body = body.trim();
        if !(body.starts_with("/*") && body.ends_with("*/")) {
            out.push(Piece::Action(body.to_string(), at));
        }
        let consumed = open + 2 + body_start + close;
        offset += consumed;
        rest = &rest[consumed..];
    }
    Ok(out)
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn push_text(out: &mut Vec<Piece>, text: &str, trim_start: bool, trim_end: bool) {
    let mut t = text;
    if trim_start {
        t = t.trim_start_matches(is_space);
    }
    if trim_end {
        t = t.trim_end_matches(is_space);
    }
    if !t.is_empty() {
        out.push(Piece::Text(t.to_string()));
    }
}

/// The length of an action's inside and the offset just past its `}}`, skipping
/// `}}` inside quoted strings and comments.
fn action_end(s: &str) -> Option<(usize, usize)> {
    let b = s.as_bytes();
    let mut i = 0;
    if s.trim_start().starts_with("/*") {
        let end = s.find("*/")?;
        let close = s[end..].find("}}")? + end;
        return Some((close, close + 2));
    }
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' => {
                let q = b[i];
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'`' => {
                i += 1;
                while i < b.len() && b[i] != b'`' {
                    i += 1;
                }
            }
            b'}' if b.get(i + 1) == Some(&b'}') => return Some((i, i + 2)),
            _ => {}
        }
        i += 1;
    }
    None
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    /// `.A.B` (an empty list is `.`).
    Field(Vec<String>),
    /// `$name` with its field chain (`$` alone is the root).
    Var(String, Vec<String>),
    Ident(String),
    Str(String),
    Int(i64),
    Float(f64),
    LParen,
    /// `)`, with the field chain that may follow it (`(index .X 0).Name`).
    RParen(Vec<String>),
    Pipe,
    Declare,
    Assign,
    Comma,
}

pub(super) fn tokens(action: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let chars: Vec<char> = action.chars().collect();
    let mut i = 0;
    let ident = |i: &mut usize| -> String {
        let start = *i;
        while *i < chars.len() && (chars[*i].is_alphanumeric() || chars[*i] == '_') {
            *i += 1;
        }
        chars[start..*i].iter().collect()
    };
    let fields = |i: &mut usize| -> Vec<String> {
        let mut f = Vec::new();
        while *i < chars.len() && chars[*i] == '.' {
            *i += 1;
            let start = *i;
            while *i < chars.len() && (chars[*i].is_alphanumeric() || chars[*i] == '_') {
                *i += 1;
            }
            if *i > start {
                f.push(chars[start..*i].iter().collect());
            } else {
                break;
            }
        }
        f
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '|' => {
                out.push(Tok::Pipe);
                i += 1;
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            '(' => {
                out.push(Tok::LParen);
                i += 1;
            }
            ')' => {
                i += 1;
                out.push(Tok::RParen(fields(&mut i)));
            }
            ':' if chars.get(i + 1) == Some(&'=') => {
                out.push(Tok::Declare);
                i += 2;
            }
            '=' => {
                out.push(Tok::Assign);
                i += 1;
            }
            '.' => {
                let f = fields(&mut i);
                if f.is_empty() {
                    i += 1;
                }
                out.push(Tok::Field(f));
            }
            '$' => {
                i += 1;
                let name = ident(&mut i);
                out.push(Tok::Var(name, fields(&mut i)));
            }
            '"' => {
                i += 1;
                let mut s = String::new();
                loop {
                    let Some(&c) = chars.get(i) else {
                        return Err("unterminated string".into());
                    };
                    i += 1;
                    match c {
                        '"' => break,
                        '\\' => {
                            let e = chars.get(i).copied().ok_or("unterminated string")?;
                            i += 1;
                            s.push(match e {
                                'n' => '\n',
                                't' => '\t',
                                'r' => '\r',
                                '\\' => '\\',
                                '"' => '"',
                                '\'' => '\'',
                                '0' => '\0',
                                other => return Err(format!("unknown escape \\{other}")),
                            });
                        }
                        c => s.push(c),
                    }
                }
                out.push(Tok::Str(s));
            }
            '`' => {
                i += 1;
                let start = i;
                while i < chars.len() && chars[i] != '`' {
                    i += 1;
                }
                if i >= chars.len() {
                    return Err("unterminated raw string".into());
                }
                out.push(Tok::Str(chars[start..i].iter().collect()));
                i += 1;
            }
            c if c.is_ascii_digit()
                || (c == '-' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())) =>
            {
                let start = i;
                i += 1;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                if let Ok(n) = text.parse::<i64>() {
                    out.push(Tok::Int(n));
                } else if let Ok(f) = text.parse::<f64>() {
                    out.push(Tok::Float(f));
                } else {
                    return Err(format!("bad number {text}"));
                }
            }
            c if c.is_alphabetic() || c == '_' => out.push(Tok::Ident(ident(&mut i))),
            other => return Err(format!("unexpected {other:?}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_markers_eat_whitespace_on_their_side() {
        let p = pieces("a \n {{- .X -}} \n b {{.Y}} c").unwrap();
        assert_eq!(
            p,
            [
                Piece::Text("a".into()),
                Piece::Action(".X".into(), 4),
                Piece::Text("b ".into()),
                Piece::Action(".Y".into(), 19),
                Piece::Text(" c".into()),
            ]
        );
        // `{{-3}}` is the number -3, not a trim marker.
        assert_eq!(
            pieces("x {{-3}}").unwrap()[1],
            Piece::Action("-3".into(), 2)
        );
        assert_eq!(
            pieces("{{/* note */}}x").unwrap(),
            [Piece::Text("x".into())]
        );
        assert!(pieces("{{ .X").is_err());
        assert_eq!(
            pieces("{{ \"}}\" }}").unwrap(),
            [Piece::Action("\"}}\"".into(), 0)]
        );
    }

    #[test]
    fn actions_tokenize() {
        assert_eq!(
            tokens(r#"$x := printf "%s\n" (len $.Messages).Y"#).unwrap(),
            [
                Tok::Var("x".into(), vec![]),
                Tok::Declare,
                Tok::Ident("printf".into()),
                Tok::Str("%s\n".into()),
                Tok::LParen,
                Tok::Ident("len".into()),
                Tok::Var("".into(), vec!["Messages".into()]),
                Tok::RParen(vec!["Y".into()]),
            ]
        );
        assert_eq!(tokens(". | eq 1").unwrap()[0], Tok::Field(vec![]));
        assert_eq!(tokens("-2 1.5").unwrap(), [Tok::Int(-2), Tok::Float(1.5)]);
    }
}
