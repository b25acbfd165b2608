//! Walking the tree over a value, as Go's `text/template` executes: dot, variables
//! scoped to their block, pipelines whose value feeds the next command's last argument,
//! and the built-in functions Ollama's templates call (plus Ollama's `json`).

use std::cmp::Ordering;

use super::parse::{Arg, Node, Pipeline};
use super::value::Value;

/// Nodes and loop turns one rendering may take: a template from a model file must not
/// spin a core (real ones take a few hundred per message).
pub(super) const FUEL: u64 = 5_000_000;

pub(super) struct Eval<'a> {
    root: &'a Value,
    vars: Vec<(String, Value)>,
    pub(super) out: String,
    fuel: u64,
    max_bytes: usize,
    /// The legacy form's last turn stops where this field (`Response`) is printed.
    cut_at: Option<&'a str>,
}

pub(super) enum Flow {
    Normal,
    Break,
    Continue,
    /// The cut field was reached: nothing more is written.
    Stop,
}

type R<T> = Result<T, String>;

impl<'a> Eval<'a> {
    pub(super) fn new(root: &'a Value, max_bytes: usize, cut_at: Option<&'a str>) -> Eval<'a> {
        Eval {
            root,
            vars: vec![(String::new(), root.clone())],
            out: String::new(),
            fuel: FUEL,
            max_bytes,
            cut_at,
        }
    }

    fn burn(&mut self) -> R<()> {
        if self.fuel == 0 {
            return Err("the template ran too long".into());
        }
        self.fuel -= 1;
        if self.out.len() > self.max_bytes {
            return Err(format!(
                "the template wrote more than {} bytes",
                self.max_bytes
            ));
        }
        Ok(())
    }

    pub(super) fn nodes(&mut self, nodes: &[Node], dot: &Value) -> R<Flow> {
        for n in nodes {
            self.burn()?;
            let flow = match n {
                Node::Text(t) => {
                    self.out.push_str(t);
                    Flow::Normal
                }
                Node::Output(p) => {
                    let v = self.pipeline(p, dot)?;
                    if p.vars.is_empty() {
                        v.print(&mut self.out);
                        if self.cut_at.is_some() && self.is_cut(p) {
                            return Ok(Flow::Stop);
                        }
                    } else {
                        self.bind(p, v)?;
                    }
                    Flow::Normal
                }
                Node::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    let mark = self.vars.len();
                    let v = self.pipeline(cond, dot)?;
                    let truth = v.truth();
                    if !cond.vars.is_empty() {
                        self.bind(cond, v)?;
                    }
                    let flow = self.nodes(if truth { then } else { otherwise }, dot)?;
                    self.vars.truncate(mark);
                    flow
                }
                Node::With {
                    pipe,
                    body,
                    otherwise,
                } => {
                    let mark = self.vars.len();
                    let v = self.pipeline(pipe, dot)?;
                    let flow = if v.truth() {
                        if !pipe.vars.is_empty() {
                            self.bind(pipe, v.clone())?;
                        }
                        self.nodes(body, &v)?
                    } else {
                        self.nodes(otherwise, dot)?
                    };
                    self.vars.truncate(mark);
                    flow
                }
                Node::Range {
                    pipe,
                    body,
                    otherwise,
                } => self.range(pipe, body, otherwise, dot)?,
                Node::Break => Flow::Break,
                Node::Continue => Flow::Continue,
            };
            match flow {
                Flow::Normal => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Normal)
    }

    fn is_cut(&self, p: &Pipeline) -> bool {
        let [cmd] = p.cmds.as_slice() else {
            return false;
        };
        let field = match cmd.as_slice() {
            [Arg::Field(f)] | [Arg::Var(_, f)] => f,
            _ => return false,
        };
        matches!(field.as_slice(), [name] if Some(name.as_str()) == self.cut_at)
    }

    fn range(
        &mut self,
        pipe: &Pipeline,
        body: &[Node],
        otherwise: &[Node],
        dot: &Value,
    ) -> R<Flow> {
        let v = self.cmds(pipe, dot)?;
        // Turns are made one at a time: `range 100000000000` must run out of fuel, not
        // allocate its turns first.
        let n = match &v {
            Value::Nil => 0,
            Value::List(l) => l.len(),
            Value::Map(m) => m.len(),
            Value::Int(n) => usize::try_from(*n).unwrap_or(0),
            other => return Err(format!("range can't iterate over {}", other.kind())),
        };
        if n == 0 {
            return self.nodes(otherwise, dot);
        }
        let mut keys = match &v {
            Value::Map(m) => Some(m.iter()),
            _ => None,
        };
        let items = (0..n).map(|i| match &v {
            Value::List(l) => (Value::Int(i as i64), l[i].clone()),
            Value::Map(_) => {
                let (k, x) = keys
                    .as_mut()
                    .and_then(Iterator::next)
                    .expect("n is the map's length");
                (Value::str(k.clone()), x.clone())
            }
            _ => (Value::Int(i as i64), Value::Int(i as i64)),
        });
        for (key, item) in items {
            self.burn()?;
            let mark = self.vars.len();
            match pipe.vars.as_slice() {
                [] => {}
                [one] => self.vars.push((one.clone(), item.clone())),
                [k, e] => {
                    self.vars.push((k.clone(), key));
                    self.vars.push((e.clone(), item.clone()));
                }
                _ => return Err("range takes at most two variables".into()),
            }
            let flow = self.nodes(body, &item)?;
            self.vars.truncate(mark);
            match flow {
                Flow::Break => break,
                Flow::Stop => return Ok(Flow::Stop),
                Flow::Normal | Flow::Continue => {}
            }
        }
        Ok(Flow::Normal)
    }

    fn bind(&mut self, p: &Pipeline, v: Value) -> R<()> {
        let [name] = p.vars.as_slice() else {
            return Err("only a range declares two variables".into());
        };
        if p.assign {
            let slot = self
                .vars
                .iter_mut()
                .rev()
                .find(|(n, _)| n == name)
                .ok_or_else(|| format!("undefined variable ${name}"))?;
            slot.1 = v;
        } else {
            self.vars.push((name.clone(), v));
        }
        Ok(())
    }

    fn pipeline(&mut self, p: &Pipeline, dot: &Value) -> R<Value> {
        self.cmds(p, dot)
    }

    fn cmds(&mut self, p: &Pipeline, dot: &Value) -> R<Value> {
        let mut prev = None;
        for cmd in &p.cmds {
            prev = Some(self.command(cmd, dot, prev.take())?);
        }
        Ok(prev.unwrap_or_default())
    }

    fn command(&mut self, args: &[Arg], dot: &Value, piped: Option<Value>) -> R<Value> {
        let Some(first) = args.first() else {
            return Err("empty command".into());
        };
        let Arg::Func(name) = first else {
            if args.len() > 1 || piped.is_some() {
                return Err("only functions take arguments".into());
            }
            return self.arg(first, dot);
        };
        let rest = &args[1..];
        // `and` and `or` stop at the first value that decides them, as Go's do.
        if name == "and" || name == "or" {
            let mut last = Value::Nil;
            let n = rest.len() + usize::from(piped.is_some());
            if n == 0 {
                return Err(format!("{name} needs arguments"));
            }
            for a in rest {
                last = self.arg(a, dot)?;
                if last.truth() == (name == "or") {
                    return Ok(last);
                }
            }
            return Ok(piped.unwrap_or(last));
        }
        let mut vals = Vec::with_capacity(rest.len() + 1);
        for a in rest {
            vals.push(self.arg(a, dot)?);
        }
        vals.extend(piped);
        call(name, &vals)
    }

    fn arg(&mut self, a: &Arg, dot: &Value) -> R<Value> {
        Ok(match a {
            Arg::Field(f) => walk(dot, f)?,
            Arg::Var(name, f) => {
                let v = if name.is_empty() {
                    self.root.clone()
                } else {
                    self.vars
                        .iter()
                        .rev()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                        .ok_or_else(|| format!("undefined variable ${name}"))?
                };
                walk(&v, f)?
            }
            Arg::Sub(p, f) => {
                let v = self.pipeline(p, dot)?;
                walk(&v, f)?
            }
            Arg::Func(name) => call(name, &[])?,
            Arg::Str(s) => Value::str(s.clone()),
            Arg::Int(i) => Value::Int(*i),
            Arg::Float(f) => Value::Float(*f),
            Arg::Bool(b) => Value::Bool(*b),
            Arg::Nil => Value::Nil,
        })
    }
}

/// `.A.B` from `v`. A field nobody set is the zero value (`Nil`, printed as nothing).
fn walk(v: &Value, fields: &[String]) -> R<Value> {
    let mut cur = v.clone();
    for f in fields {
        cur = match &cur {
            Value::Map(m) => m.get(f).cloned().unwrap_or_default(),
            Value::Struct(s) => s.fields.get(f).cloned().unwrap_or_default(),
            Value::Nil => Value::Nil,
            other => return Err(format!("can't evaluate field {f} in type {}", other.kind())),
        };
    }
    Ok(cur)
}

fn call(name: &str, a: &[Value]) -> R<Value> {
    let want = |n: usize| -> R<()> {
        if a.len() == n {
            Ok(())
        } else {
            Err(format!("{name} takes {n} arguments, not {}", a.len()))
        }
    };
    Ok(match name {
        "not" => {
            want(1)?;
            Value::Bool(!a[0].truth())
        }
        "len" => {
            want(1)?;
            Value::Int(match &a[0] {
                Value::Str(s) => s.len(),
                Value::List(l) => l.len(),
                Value::Map(m) => m.len(),
                Value::Nil => 0,
                other => return Err(format!("len of {}", other.kind())),
            } as i64)
        }
        "index" => {
            let (first, keys) = a.split_first().ok_or("index needs a value")?;
            let mut cur = first.clone();
            for k in keys {
                cur = match (&cur, k) {
                    (Value::List(l), Value::Int(i)) => l
                        .get(usize::try_from(*i).map_err(|_| "negative index")?)
                        .cloned()
                        .ok_or_else(|| format!("index {i} out of range"))?,
                    (Value::Map(m), Value::Str(s)) => m.get(s).cloned().unwrap_or_default(),
                    (c, k) => return Err(format!("can't index {} with {}", c.kind(), k.kind())),
                };
            }
            cur
        }
        "slice" => slice(a)?,
        "eq" => {
            let (first, rest) = a.split_first().ok_or("eq needs two arguments")?;
            if rest.is_empty() {
                return Err("eq needs two arguments".into());
            }
            Value::Bool(rest.iter().any(|b| equal(first, b)))
        }
        "ne" => {
            want(2)?;
            Value::Bool(!equal(&a[0], &a[1]))
        }
        "lt" | "le" | "gt" | "ge" => {
            want(2)?;
            let o = order(&a[0], &a[1])?;
            Value::Bool(match name {
                "lt" => o == Ordering::Less,
                "le" => o != Ordering::Greater,
                "gt" => o == Ordering::Greater,
                _ => o != Ordering::Less,
            })
        }
        "printf" => {
            let (f, rest) = a.split_first().ok_or("printf needs a format")?;
            let Value::Str(f) = f else {
                return Err("printf's format is not a string".into());
            };
            Value::Str(printf(f, rest)?)
        }
        "print" | "println" => {
            let mut s = String::new();
            for (i, v) in a.iter().enumerate() {
                let strings = matches!(v, Value::Str(_))
                    || a.get(i.wrapping_sub(1))
                        .is_some_and(|p| matches!(p, Value::Str(_)));
                if i > 0 && (name == "println" || !strings) {
                    s.push(' ');
                }
                v.print(&mut s);
            }
            if name == "println" {
                s.push('\n');
            }
            Value::Str(s)
        }
        "json" => {
            want(1)?;
            Value::Str(a[0].to_json())
        }
        other => return Err(format!("function {other:?} not defined")),
    })
}

fn slice(a: &[Value]) -> R<Value> {
    let (first, idx) = a.split_first().ok_or("slice needs a value")?;
    let bound = |v: &Value| -> R<usize> {
        match v {
            Value::Int(i) => usize::try_from(*i).map_err(|_| "negative slice index".to_string()),
            other => Err(format!("slice index is a {}", other.kind())),
        }
    };
    let len = match first {
        Value::List(l) => l.len(),
        Value::Str(s) => s.len(),
        other => return Err(format!("can't slice {}", other.kind())),
    };
    let lo = idx.first().map(bound).transpose()?.unwrap_or(0);
    let hi = idx.get(1).map(bound).transpose()?.unwrap_or(len);
    if idx.len() > 2 || lo > hi || hi > len {
        return Err(format!("slice [{lo}:{hi}] out of range of {len}"));
    }
    Ok(match first {
        Value::List(l) => Value::list(l[lo..hi].to_vec()),
        Value::Str(s) => Value::str(s.get(lo..hi).ok_or("slice splits a character")?),
        _ => unreachable!("checked above"),
    })
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => num(a) == num(b),
        _ => false,
    }
}

fn num(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        _ => f64::NAN,
    }
}

fn order(a: &Value, b: &Value) -> R<Ordering> {
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => Ok(x.cmp(y)),
        (Value::Int(x), Value::Int(y)) => Ok(x.cmp(y)),
        (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => num(a)
            .partial_cmp(&num(b))
            .ok_or_else(|| "NaN compared".to_string()),
        _ => Err(format!("can't compare {} with {}", a.kind(), b.kind())),
    }
}

/// The verbs templates use: `%s`, `%v`, `%d`, `%q`, `%f`, `%%`.
fn printf(f: &str, args: &[Value]) -> R<String> {
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = f.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let verb = chars.next().ok_or("printf format ends with %")?;
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(v) = args.next() else {
            out.push_str(&format!("%!{verb}(MISSING)"));
            continue;
        };
        match verb {
            's' | 'v' | 'd' => v.print(&mut out),
            'q' => {
                let mut s = String::new();
                v.print(&mut s);
                out.push_str(&serde_json::to_string(&s).unwrap_or_default());
            }
            'f' => out.push_str(&format!("{:.6}", num(v))),
            other => return Err(format!("printf verb %{other} is not supported")),
        }
    }
    Ok(out)
}
