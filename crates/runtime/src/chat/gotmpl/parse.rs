//! Text and actions -> the tree the evaluator walks.

use super::lex::{pieces, tokens, Piece, Tok};
use super::GoTemplateError;

#[derive(Debug)]
pub(super) enum Node {
    Text(String),
    /// An action whose value is printed (nothing is printed for a declaration).
    Output(Pipeline),
    If {
        cond: Pipeline,
        then: Vec<Node>,
        otherwise: Vec<Node>,
    },
    Range {
        pipe: Pipeline,
        body: Vec<Node>,
        otherwise: Vec<Node>,
    },
    With {
        pipe: Pipeline,
        body: Vec<Node>,
        otherwise: Vec<Node>,
    },
    Break,
    Continue,
}

#[derive(Debug)]
pub(super) struct Pipeline {
    /// Variables declared (`:=`) or assigned (`=`) from the pipeline's value.
    pub(super) vars: Vec<String>,
    pub(super) assign: bool,
    pub(super) cmds: Vec<Vec<Arg>>,
}

#[derive(Debug)]
pub(super) enum Arg {
    Field(Vec<String>),
    Var(String, Vec<String>),
    Func(String),
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Nil,
    Sub(Box<Pipeline>, Vec<String>),
}

pub(super) fn parse(src: &str) -> Result<Vec<Node>, GoTemplateError> {
    let pieces = pieces(src)?;
    let mut p = Parser { src, pieces, at: 0 };
    let (nodes, end) = p.list()?;
    match end {
        None => Ok(nodes),
        Some((word, at)) => Err(GoTemplateError::at(
            src,
            at,
            &format!("unexpected {{{{{word}}}}}"),
        )),
    }
}

struct Parser<'a> {
    src: &'a str,
    pieces: Vec<Piece>,
    at: usize,
}

/// How a list ended: `end`, `else`, `else if …`, `else with …` (the action's words and
/// where it was), or the end of the template (`None`).
type Ending = Option<(String, usize)>;

impl Parser<'_> {
    fn err(&self, at: usize, msg: &str) -> GoTemplateError {
        GoTemplateError::at(self.src, at, msg)
    }

    fn list(&mut self) -> Result<(Vec<Node>, Ending), GoTemplateError> {
        let mut nodes = Vec::new();
        while self.at < self.pieces.len() {
            let piece = std::mem::replace(&mut self.pieces[self.at], Piece::Text(String::new()));
            self.at += 1;
            let (action, at) = match piece {
                Piece::Text(t) => {
                    nodes.push(Node::Text(t));
                    continue;
                }
                Piece::Action(a, at) => (a, at),
            };
            let (word, rest) = split_word(&action);
            match word {
                "end" | "else" => return Ok((nodes, Some((action.clone(), at)))),
                "if" => nodes.push(self.if_tail(rest, at)?),
                "range" | "with" => {
                    let pipe = self.pipeline(rest, at)?;
                    let (body, end) = self.list()?;
                    let otherwise = self.else_part(end, at, word)?;
                    nodes.push(if word == "range" {
                        Node::Range {
                            pipe,
                            body,
                            otherwise,
                        }
                    } else {
                        Node::With {
                            pipe,
                            body,
                            otherwise,
                        }
                    });
                }
                "break" => nodes.push(Node::Break),
                "continue" => nodes.push(Node::Continue),
                "define" | "template" | "block" => {
                    return Err(self.err(at, &format!("{{{{{word}}}}} is not supported")))
                }
                _ => nodes.push(Node::Output(self.pipeline(&action, at)?)),
            }
        }
        Ok((nodes, None))
    }

    /// `if COND` after its keyword: the branch, then `else`, `else if` or `end`.
    fn if_tail(&mut self, cond: &str, at: usize) -> Result<Node, GoTemplateError> {
        let cond = self.pipeline(cond, at)?;
        let (then, end) = self.list()?;
        let otherwise = self.else_part(end, at, "if")?;
        Ok(Node::If {
            cond,
            then,
            otherwise,
        })
    }

    /// What follows a block's first list: nothing (`end`), an `else` list, or a chained
    /// `else if` / `else with`, which shares the block's `end`.
    fn else_part(
        &mut self,
        end: Ending,
        at: usize,
        block: &str,
    ) -> Result<Vec<Node>, GoTemplateError> {
        let Some((action, end_at)) = end else {
            return Err(self.err(at, &format!("{{{{{block}}}}} has no {{{{end}}}}")));
        };
        let (word, rest) = split_word(&action);
        if word == "end" {
            return Ok(Vec::new());
        }
        let (next, cond) = split_word(rest);
        match next {
            "" => {
                let (otherwise, end) = self.list()?;
                match end {
                    Some((a, _)) if a == "end" => Ok(otherwise),
                    _ => Err(self.err(
                        end_at,
                        &format!("{{{{else}}}} of {{{{{block}}}}} has no {{{{end}}}}"),
                    )),
                }
            }
            "if" => Ok(vec![self.if_tail(cond, end_at)?]),
            "with" => {
                let pipe = self.pipeline(cond, end_at)?;
                let (body, end) = self.list()?;
                let otherwise = self.else_part(end, end_at, "with")?;
                Ok(vec![Node::With {
                    pipe,
                    body,
                    otherwise,
                }])
            }
            _ => Err(self.err(end_at, &format!("unexpected {{{{{action}}}}}"))),
        }
    }

    fn pipeline(&self, text: &str, at: usize) -> Result<Pipeline, GoTemplateError> {
        let toks = tokens(text).map_err(|e| self.err(at, &e))?;
        pipeline(&toks).map_err(|e| self.err(at, &e))
    }
}

fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim();
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], s[i..].trim()),
        None => (s, ""),
    }
}

fn pipeline(toks: &[Tok]) -> Result<Pipeline, String> {
    let mut vars = Vec::new();
    let mut assign = false;
    let mut rest = toks;
    // `$a := …`, `$a, $b := …`, `$a = …`
    let mut i = 0;
    while let Some(Tok::Var(name, f)) = rest.get(i) {
        if !f.is_empty() {
            break;
        }
        match rest.get(i + 1) {
            Some(Tok::Comma) => {
                vars.push(name.clone());
                i += 2;
            }
            Some(t @ (Tok::Declare | Tok::Assign)) => {
                vars.push(name.clone());
                assign = *t == Tok::Assign;
                rest = &rest[i + 2..];
                break;
            }
            _ => {
                vars.clear();
                break;
            }
        }
    }
    if vars.is_empty() {
        rest = toks;
    }
    let mut cmds = Vec::new();
    let mut cmd = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        match &rest[i] {
            Tok::Pipe => {
                if cmd.is_empty() {
                    return Err("empty command in a pipeline".into());
                }
                cmds.push(std::mem::take(&mut cmd));
            }
            Tok::LParen => {
                let close = matching_paren(rest, i)?;
                let inner = pipeline(&rest[i + 1..close])?;
                let Tok::RParen(fields) = &rest[close] else {
                    unreachable!("matching_paren returns a `)`")
                };
                cmd.push(Arg::Sub(Box::new(inner), fields.clone()));
                i = close;
            }
            Tok::RParen(_) => return Err("unmatched )".into()),
            Tok::Field(f) => cmd.push(Arg::Field(f.clone())),
            Tok::Var(n, f) => cmd.push(Arg::Var(n.clone(), f.clone())),
            Tok::Ident(name) => cmd.push(match name.as_str() {
                "true" => Arg::Bool(true),
                "false" => Arg::Bool(false),
                "nil" => Arg::Nil,
                _ => Arg::Func(name.clone()),
            }),
            Tok::Str(s) => cmd.push(Arg::Str(s.clone())),
            Tok::Int(n) => cmd.push(Arg::Int(*n)),
            Tok::Float(f) => cmd.push(Arg::Float(*f)),
            Tok::Declare | Tok::Assign | Tok::Comma => return Err("unexpected := , or =".into()),
        }
        i += 1;
    }
    if cmd.is_empty() {
        return Err("missing value".into());
    }
    cmds.push(cmd);
    Ok(Pipeline { vars, assign, cmds })
}

fn matching_paren(toks: &[Tok], open: usize) -> Result<usize, String> {
    let mut depth = 0;
    for (i, t) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::LParen => depth += 1,
            Tok::RParen(_) => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i);
                }
            }
            _ => {}
        }
    }
    Err("unclosed (".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_nest_and_chain() {
        let t = parse("{{ if .A }}a{{ else if .B }}b{{ else }}c{{ end }}{{ range $i, $m := .L }}{{ $i }}{{ else }}none{{ end }}").unwrap();
        assert_eq!(t.len(), 2);
        let Node::If { otherwise, .. } = &t[0] else {
            panic!()
        };
        assert!(matches!(&otherwise[0], Node::If { otherwise, .. } if otherwise.len() == 1));
        let Node::Range {
            pipe, otherwise, ..
        } = &t[1]
        else {
            panic!()
        };
        assert_eq!(pipe.vars, ["i", "m"]);
        assert_eq!(otherwise.len(), 1);
    }

    #[test]
    fn malformed_templates_are_errors_with_a_place() {
        for bad in [
            "{{ if .A }}x",
            "{{ end }}",
            "{{ range .L }}{{ else }}",
            "{{ template \"x\" }}",
            "{{ ( .A }}",
            "{{ .A | }}",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.to_string().contains("line 1"), "{bad}: {e}");
        }
    }
}
