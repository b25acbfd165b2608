//! `oneOf` exclusivity. The automaton accepts the union of a `oneOf`'s branches, so
//! "exactly one branch" holds only if no document it produces fits a second branch.
//!
//! What a branch produces is read from its compiled shapes; what fits a branch is
//! read from the schema as written ([`Branch`]), since the shapes can be narrower
//! than JSON Schema (types inferred from keywords, objects closed by default) and a
//! document outside a branch's shape may still be valid under it. A produced
//! document is kept apart from another branch when:
//!
//! - its type is not one that branch allows (`type`, or the types of its `enum`),
//! - both branches are `enum`/`const` lists with no value in common, or
//! - it is an object, and one branch requires a key the other forbids
//!   (`additionalProperties: false` without declaring it), or requires a key whose
//!   `enum`/`const` has no value the other allows under it: the tagged union.
//!
//! One overlap is removed rather than reported: every integer beside every number
//! (`{"type": "integer"}` and `{"type": "number"}`, as written or in type lists).
//! An integer fits both, so no integer is valid: the integer shape is dropped and the
//! number made non-integral, which keeps exactly the valid documents.
//!
//! Anything else may overlap, and the caller reports the `oneOf` as not exclusive.

use serde_json::Value;

use super::Compiler;
use crate::schema::error::SchemaError;
use crate::schema::facets::{json_equal, Additional, Facets, Types};
use crate::schema::node::{DefId, IntegerSpec, Node, NumberSpec};

/// Finds the body of a definition; `None` for one still being compiled.
pub(crate) type Resolve<'a> = &'a dyn Fn(DefId) -> Option<&'a Node>;

/// One `oneOf` branch, merged with its siblings.
pub(crate) struct Branch {
    /// The compiled shapes (top-level unions spread).
    pub shapes: Vec<Node>,
    /// Types a value valid under the branch may have: `type` and the types of
    /// `enum`/`const` as written, every type when neither is.
    pub types: Types,
    /// `enum`/`const` as written: every valid value is one of these.
    pub values: Option<Vec<Value>>,
    /// Keys every valid object has.
    pub required: Vec<String>,
    /// Required keys with an `enum`/`const`: every valid object has one of these
    /// values under the key.
    pub tags: Vec<(String, Vec<Value>)>,
    /// What the branch allows under each key some branch requires.
    pub under: Vec<(String, Allowed)>,
}

/// What a branch allows under one key of a valid object.
#[derive(Clone, Debug)]
pub(crate) enum Allowed {
    /// The key never appears.
    Absent,
    /// Only these values.
    Values(Vec<Value>),
    /// Not known to be narrower than any value.
    Anything,
}

impl Compiler<'_> {
    /// What each `oneOf` branch says as written, for [`settle`]: its
    /// types and values, its required keys and their values, and what it allows
    /// under the keys any branch requires.
    pub(crate) fn branch_facts(
        &mut self,
        branches: Vec<(Vec<Node>, Option<Facets>)>,
    ) -> Result<Vec<Branch>, SchemaError> {
        let mut out = Vec::with_capacity(branches.len());
        let mut facets = Vec::with_capacity(branches.len());
        for (shapes, written) in branches {
            let f = written.expect("a oneOf branch keeps its facets");
            let shapes = shapes
                .into_iter()
                .flat_map(|n| match n {
                    Node::Union(v) => v,
                    other => vec![other],
                })
                .collect();
            let mut types = f.types.unwrap_or(Types::ALL);
            if let Some(values) = &f.enumeration {
                types = types.and(values.iter().fold(Types::NONE, |t, v| t.or(Types::of(v))));
            }
            let mut tags = Vec::new();
            for key in &f.required {
                if let Some((_, conj)) = f.properties.iter().find(|(n, _)| n == key) {
                    if let Some(values) = self.gather(conj)?.enumeration {
                        tags.push((key.clone(), values));
                    }
                }
            }
            out.push(Branch {
                shapes,
                types,
                values: f.enumeration.clone(),
                required: f.required.clone(),
                tags,
                under: Vec::new(),
            });
            facets.push(f);
        }
        let mut keys: Vec<String> = out
            .iter()
            .flat_map(|b| b.required.iter().cloned())
            .collect();
        keys.sort();
        keys.dedup();
        for (b, f) in out.iter_mut().zip(&facets) {
            for key in &keys {
                let values = match f.properties.iter().find(|(n, _)| n == key) {
                    Some((_, conj)) => self.gather(conj)?.enumeration,
                    None => match &f.additional {
                        // Only `additionalProperties: false` forbids a key in JSON
                        // Schema (llamay's default closing does not count here).
                        Additional::Closed => {
                            b.under.push((key.clone(), Allowed::Absent));
                            continue;
                        }
                        Additional::Schema(conj) => self.gather(conj)?.enumeration,
                        Additional::Unspecified => None,
                    },
                };
                let allowed = values.map_or(Allowed::Anything, Allowed::Values);
                b.under.push((key.clone(), allowed));
            }
        }
        Ok(out)
    }
}

/// A change that removes the integer/number overlap.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fix {
    /// Drop shape (branch, index): every integer, each also fitting a number branch.
    Drop(usize, usize),
    /// Make shape (branch, index) non-integral: every number, beside every integer.
    Split(usize, usize),
}

/// Makes the branches exclusive where it can; true when they are. On false the
/// branches are unchanged.
pub(crate) fn settle(branches: &mut [Branch], resolve: Resolve) -> bool {
    let Some(fixes) = overlap_fixes(branches, resolve) else {
        return false;
    };
    if fixes.is_empty() {
        return true;
    }
    let mut changed: Vec<Vec<Node>> = branches.iter().map(|b| b.shapes.clone()).collect();
    for (b, shapes) in changed.iter_mut().enumerate() {
        for (s, shape) in shapes.iter_mut().enumerate() {
            if fixes.contains(&Fix::Split(b, s)) {
                *shape = Node::Number(NumberSpec {
                    non_integral: true,
                    ..NumberSpec::default()
                });
            }
        }
        let mut s = 0;
        shapes.retain(|_| {
            s += 1;
            !fixes.contains(&Fix::Drop(b, s - 1))
        });
    }
    let before: Vec<Vec<Node>> = branches
        .iter_mut()
        .zip(changed)
        .map(|(b, c)| std::mem::replace(&mut b.shapes, c))
        .collect();
    if overlap_fixes(branches, resolve).is_some_and(|f| f.is_empty()) {
        return true;
    }
    for (b, shapes) in branches.iter_mut().zip(before) {
        b.shapes = shapes;
    }
    false
}

/// The fixes that would remove every overlap, or `None` when some overlap has none.
fn overlap_fixes(branches: &[Branch], resolve: Resolve) -> Option<Vec<Fix>> {
    let mut fixes = Vec::new();
    for (i, mine) in branches.iter().enumerate() {
        for (j, other) in branches.iter().enumerate() {
            if i == j || values_apart(mine, other) {
                continue;
            }
            for (s, shape) in mine.shapes.iter().enumerate() {
                let shared = types(shape, resolve, 0).and(other.types);
                for t in [
                    Types::NULL,
                    Types::BOOLEAN,
                    Types::INTEGER,
                    Types::FRACTION,
                    Types::STRING,
                    Types::ARRAY,
                    Types::OBJECT,
                ] {
                    if !shared.has(t) {
                        continue;
                    }
                    if t == Types::OBJECT && tagged_apart(mine, other) {
                        continue;
                    }
                    if t == Types::INTEGER
                        && every_integer(shape)
                        && other.shapes.iter().any(every_number)
                    {
                        fixes.push(Fix::Drop(i, s));
                        continue;
                    }
                    if t == Types::INTEGER
                        && every_number(shape)
                        && other.shapes.iter().any(every_integer)
                    {
                        fixes.push(Fix::Split(i, s));
                        continue;
                    }
                    return None;
                }
            }
        }
    }
    Some(fixes)
}

/// Both branches list their values, and none in common.
fn values_apart(a: &Branch, b: &Branch) -> bool {
    match (&a.values, &b.values) {
        (Some(x), Some(y)) => !x.iter().any(|v| y.iter().any(|w| json_equal(v, w))),
        _ => false,
    }
}

/// No object valid under `a` is valid under `b`: a key one of them requires never
/// appears under the other, or a key `a` requires with values it lists takes none of
/// them under `b`.
fn tagged_apart(a: &Branch, b: &Branch) -> bool {
    let allowed = |branch: &Branch, key: &str| {
        branch
            .under
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, allowed)| allowed.clone())
    };
    let missing = |x: &Branch, y: &Branch| {
        y.required
            .iter()
            .any(|k| matches!(allowed(x, k), Some(Allowed::Absent)))
    };
    let tagged = a.tags.iter().any(|(key, values)| match allowed(b, key) {
        Some(Allowed::Values(other)) => !values
            .iter()
            .any(|v| other.iter().any(|w| json_equal(v, w))),
        _ => false,
    });
    tagged || missing(a, b) || missing(b, a)
}

fn every_integer(n: &Node) -> bool {
    matches!(
        n,
        Node::Integer(IntegerSpec {
            min: None,
            max: None,
            multiple_of: 1
        })
    )
}

fn every_number(n: &Node) -> bool {
    matches!(n, Node::Number(s) if s.is_unconstrained())
}

/// Deepest chain of references followed for a shape's types.
const MAX_DEPTH: usize = 32;

/// The JSON types a shape produces (integral numbers as INTEGER, others FRACTION).
fn types(n: &Node, resolve: Resolve, depth: usize) -> Types {
    if depth > MAX_DEPTH {
        return Types::ALL;
    }
    match n {
        Node::Any => Types::ALL,
        Node::Union(v) => v
            .iter()
            .fold(Types::NONE, |t, m| t.or(types(m, resolve, depth + 1))),
        Node::Ref(id) => resolve(*id).map_or(Types::ALL, |m| types(m, resolve, depth + 1)),
        Node::Literals(v) => v.iter().fold(Types::NONE, |t, l| t.or(Types::of(l))),
        Node::Null => Types::NULL,
        Node::Boolean => Types::BOOLEAN,
        Node::Integer(_) => Types::INTEGER,
        Node::Number(s) if s.non_integral => Types::FRACTION,
        Node::Number(_) => Types::NUMBER,
        Node::String(_) => Types::STRING,
        Node::Array(_) => Types::ARRAY,
        Node::Object(_) => Types::OBJECT,
    }
}
