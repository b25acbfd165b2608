//! The compiler: conjunctions of sub-schemas → [`Node`]s.
//!
//! Every sub-schema compile is memoized by its [`Conj`] (the pointers that must
//! hold). A conj met again while it is still being compiled is a recursion; met
//! again later, a shared definition; either way it becomes a [`Node::Ref`] to a
//! [`Def`]. Conjs compiled once stay inline.

mod exclusive;
mod shape;

use std::collections::HashMap;

use serde_json::Value;

use super::error::{location_of, NotEnforced, SchemaError, SchemaReport, ONE_OF_EXCLUSIVITY};
use super::facets::{Conj, Facets, MAX_ALTERNATIVES};
use super::node::{CompiledSchema, Def, DefId, Node};
pub(super) use shape::MAX_PROPERTIES;

/// Longest chain of `$ref`s and `allOf`s followed to read one schema.
pub(super) const MAX_REF_DEPTH: usize = 64;
/// Deepest nesting of sub-schemas compiled (guards the stack).
const MAX_NESTING: usize = 256;
/// A sub-schema met again is copied when it is at most this many nodes, shared
/// through a definition otherwise.
const INLINE_NODES: usize = 16;
/// Most `anyOf` alternatives merged with their siblings in one schema (the
/// product of several lists is explored depth first, contradictions pruned).
pub(super) const MAX_EXPANSIONS: usize = 20_000;

enum Slot {
    InProgress {
        id: DefId,
        referenced: bool,
    },
    Done {
        id: DefId,
        node: Option<Node>,
        shared: bool,
    },
}

pub(crate) struct Compiler<'a> {
    root: &'a Value,
    pub(crate) report: SchemaReport,
    memo: HashMap<Conj, Slot>,
    /// Bodies of definitions, by id; `None` until needed.
    defs: Vec<Option<(String, Option<Node>)>>,
    nesting: usize,
    pub(crate) nodes: usize,
    /// Alternatives merged so far while expanding `anyOf` combinations.
    expansions: usize,
    /// Why the last things found unsatisfiable were, innermost first.
    pub(crate) unsat: Vec<(String, String, String)>,
    pub(crate) patterns: HashMap<String, std::sync::Arc<super::pattern::Pattern>>,
    pub(crate) options: super::SchemaOptions,
}

impl<'a> Compiler<'a> {
    pub(crate) fn new(root: &'a Value, options: super::SchemaOptions) -> Compiler<'a> {
        Compiler {
            options,
            root,
            report: SchemaReport::default(),
            memo: HashMap::new(),
            defs: Vec::new(),
            nesting: 0,
            nodes: 0,
            expansions: 0,
            unsat: Vec::new(),
            patterns: HashMap::new(),
        }
    }

    /// Compiles the whole document.
    pub(crate) fn run(mut self) -> Result<CompiledSchema, SchemaError> {
        let root = match self.node(&vec![String::new()])? {
            Some(n) => n,
            None => return Err(self.unsatisfiable()),
        };
        let mut report = std::mem::take(&mut self.report);
        report.finish();
        let (root, defs) = self.compact(root);
        check_guarded(&defs).map_err(|loc| {
            SchemaError::invalid(
                "$ref",
                &loc,
                "refers back to itself before any array or object is entered, so no \
                 document could ever finish",
            )
        })?;
        Ok(CompiledSchema { root, defs, report })
    }

    fn unsatisfiable(&self) -> SchemaError {
        match self.unsat.first() {
            Some((keyword, at, why)) => SchemaError::invalid(
                keyword,
                at,
                format!("cannot be satisfied: {why}, so no document could match the schema"),
            ),
            None => SchemaError::invalid("", "the schema", "cannot be satisfied by any document"),
        }
    }

    pub(crate) fn note_unsat(&mut self, keyword: &str, at: &str, why: String) {
        self.unsat.push((keyword.to_string(), at.to_string(), why));
    }

    pub(crate) fn count_node(&mut self, at: &str) -> Result<(), SchemaError> {
        self.nodes += 1;
        let limit = self.options.budget.nodes;
        if self.nodes > limit {
            return Err(SchemaError::invalid(
                "$ref",
                at,
                format!("expands the schema past {limit} nodes; llamay refuses it"),
            ));
        }
        super::budget::check(at, "its shape")
    }

    /// Compiles a conjunction; `None` when nothing can satisfy it.
    pub(crate) fn node(&mut self, conj: &Conj) -> Result<Option<Node>, SchemaError> {
        if conj.is_empty() {
            return Ok(Some(Node::Any));
        }
        match self.memo.get_mut(conj) {
            Some(Slot::InProgress { id, referenced }) => {
                *referenced = true;
                return Ok(Some(Node::Ref(*id)));
            }
            Some(Slot::Done { id, node, shared }) => {
                let Some(n) = node else { return Ok(None) };
                if *shared || size_at_most(n, INLINE_NODES).is_none() {
                    // Large: share it through a definition.
                } else {
                    return Ok(Some(n.clone()));
                }
                let id = *id;
                if !*shared {
                    *shared = true;
                    let body = n.clone();
                    self.defs[id] = Some((location_of(&conj[0]), Some(body)));
                }
                return Ok(Some(Node::Ref(id)));
            }
            None => {}
        }
        let at = location_of(&conj[0]);
        if self.nesting >= MAX_NESTING {
            return Err(SchemaError::invalid(
                "",
                &at,
                "nests sub-schemas too deeply",
            ));
        }
        let id = self.defs.len();
        self.defs.push(None);
        self.memo.insert(
            conj.clone(),
            Slot::InProgress {
                id,
                referenced: false,
            },
        );
        self.nesting += 1;
        let result = self.compile(conj);
        self.nesting -= 1;
        let node = result?;
        let Some(Slot::InProgress { referenced, .. }) = self.memo.remove(conj) else {
            unreachable!("memo slot replaced during its own compile")
        };
        self.memo.insert(
            conj.clone(),
            Slot::Done {
                id,
                node: node.clone(),
                shared: referenced,
            },
        );
        if referenced {
            self.defs[id] = Some((at, node.clone()));
            return Ok(node.map(|_| Node::Ref(id)));
        }
        Ok(node)
    }

    fn compile(&mut self, conj: &Conj) -> Result<Option<Node>, SchemaError> {
        let facets = self.gather(conj)?;
        let mut alternatives = Vec::new();
        self.alternatives(facets, &mut alternatives)?;
        Ok(union(alternatives))
    }

    /// Reads and merges every schema of `conj`, following `$ref`s and `allOf`s.
    pub(crate) fn gather(&mut self, conj: &Conj) -> Result<Facets, SchemaError> {
        let mut acc: Option<Facets> = None;
        for p in conj {
            let f = self.gather_one(p, 0)?;
            match &mut acc {
                None => acc = Some(f),
                Some(a) => a.merge(f)?,
            }
        }
        Ok(acc.unwrap_or_default())
    }

    fn gather_one(&mut self, pointer: &str, depth: usize) -> Result<Facets, SchemaError> {
        let at = location_of(pointer);
        if depth > MAX_REF_DEPTH {
            return Err(SchemaError::invalid(
                "$ref",
                &at,
                format!("follows more than {MAX_REF_DEPTH} references without reaching a schema"),
            ));
        }
        let root = self.root;
        let value = root.pointer(pointer).ok_or_else(|| {
            SchemaError::invalid(
                "$ref",
                &at,
                format!(
                    "points to {}, which is not in the document",
                    location_of(pointer)
                ),
            )
        })?;
        let read = Facets::read(value, pointer, &mut self.report)?;
        let mut facets = read.facets;
        for p in read.merge {
            if root.pointer(&p).is_none() {
                return Err(SchemaError::invalid(
                    "$ref",
                    &at,
                    format!(
                        "points to {}, which is not in the document",
                        location_of(&p)
                    ),
                ));
            }
            let inner = self.gather_one(&p, depth + 1)?;
            facets.merge(inner)?;
        }
        Ok(facets)
    }

    /// Expands `anyOf`/`oneOf` lists (siblings merged into each alternative) and
    /// appends the satisfiable alternatives' shapes to `out`. A `oneOf`'s branches are
    /// compiled apart, made exclusive where [`exclusive::settle`] can, and its
    /// exclusivity reported as not enforced where not.
    fn alternatives(&mut self, mut facets: Facets, out: &mut Vec<Node>) -> Result<(), SchemaError> {
        let Some(list) = (!facets.any_of.is_empty()).then(|| facets.any_of.remove(0)) else {
            if let Some(n) = shape::finish(self, facets)? {
                out.push(n);
            }
            return Ok(());
        };
        let mark = self.unsat.len();
        let before = out.len();
        let one_of = list.one_of_at.is_some();
        // Per branch: its shapes, and (for a `oneOf`) its facets as written.
        let mut branches: Vec<(Vec<Node>, Option<Facets>)> = Vec::new();
        let mut count = 0;
        for alt in list.branches {
            let mut shapes = Vec::new();
            let written;
            if facets.is_trivial() {
                // Nothing to merge: compile the alternative on its own (memoized, so a
                // recursive `$ref` alternative becomes a reference).
                if let Some(n) = self.node(&alt)? {
                    shapes.push(n);
                }
                written = if one_of {
                    Some(self.gather(&alt)?)
                } else {
                    None
                };
            } else {
                self.expansions += 1;
                if self.expansions > MAX_EXPANSIONS {
                    return Err(SchemaError::invalid(
                        "anyOf",
                        &facets.location,
                        format!(
                            "combines into more than {MAX_EXPANSIONS} cases to examine; \
                             llamay refuses it"
                        ),
                    ));
                }
                let mut merged = facets.clone();
                let extra = self.gather(&alt)?;
                merged.merge(extra)?;
                if merged.types == Some(super::facets::Types::NONE) {
                    // Contradictory types: no need to expand the remaining lists.
                    let why = "the types required do not intersect".to_string();
                    self.note_unsat("type", &merged.location, why);
                    continue;
                }
                written = one_of.then(|| merged.clone());
                self.alternatives(merged, &mut shapes)?;
            }
            count += shapes.len();
            if before + count > MAX_ALTERNATIVES {
                return Err(SchemaError::invalid(
                    "anyOf",
                    &facets.location,
                    format!("expands to more than {MAX_ALTERNATIVES} alternatives once combined"),
                ));
            }
            branches.push((shapes, written));
        }
        let shapes: Vec<Vec<Node>> = match &list.one_of_at {
            Some(at) => {
                let mut facts = self.branch_facts(branches)?;
                let defs = &self.defs;
                let resolve = |id: DefId| defs[id].as_ref().and_then(|(_, n)| n.as_ref());
                if !exclusive::settle(&mut facts, &resolve) {
                    self.report
                        .add(ONE_OF_EXCLUSIVITY, at, NotEnforced::Ignored);
                }
                facts.into_iter().map(|b| b.shapes).collect()
            }
            None => branches.into_iter().map(|(s, _)| s).collect(),
        };
        out.extend(shapes.into_iter().flatten());
        if out.len() > before {
            self.unsat.truncate(mark);
        }
        Ok(())
    }

    /// Keeps only the definitions that are referenced, renumbered.
    fn compact(&mut self, mut root: Node) -> (Node, Vec<Def>) {
        let mut map: HashMap<DefId, DefId> = HashMap::new();
        let mut defs = Vec::new();
        for (old, slot) in self.defs.iter_mut().enumerate() {
            if let Some((location, Some(node))) = slot.take() {
                map.insert(old, defs.len());
                defs.push(Def { location, node });
            }
        }
        renumber(&mut root, &map);
        for d in &mut defs {
            renumber(&mut d.node, &map);
        }
        (root, defs)
    }
}

fn union(mut alternatives: Vec<Node>) -> Option<Node> {
    match alternatives.len() {
        0 => None,
        1 => alternatives.pop(),
        _ => {
            let mut flat = Vec::new();
            for a in alternatives {
                match a {
                    Node::Union(inner) => flat.extend(inner),
                    other => flat.push(other),
                }
            }
            if flat.contains(&Node::Any) {
                return Some(Node::Any);
            }
            let mut unique: Vec<Node> = Vec::new();
            for n in flat {
                if !unique.contains(&n) {
                    unique.push(n);
                }
            }
            Some(if unique.len() == 1 {
                unique.pop().unwrap()
            } else {
                Node::Union(unique)
            })
        }
    }
}

/// `Some(size)` when `n` has at most `cap` nodes (references count as one).
fn size_at_most(n: &Node, cap: usize) -> Option<usize> {
    let mut total = 1;
    let add = |m: &Node, total: &mut usize| -> Option<()> {
        *total += size_at_most(m, cap.checked_sub(*total)?)?;
        (*total <= cap).then_some(())
    };
    match n {
        Node::Union(v) => v.iter().try_for_each(|m| add(m, &mut total))?,
        Node::Literals(v) => total += v.len(),
        Node::Array(a) => add(&a.items, &mut total)?,
        Node::Object(o) => {
            o.properties
                .iter()
                .try_for_each(|p| add(&p.node, &mut total))?;
            if let Some(a) = &o.additional {
                add(a, &mut total)?;
            }
        }
        _ => {}
    }
    (total <= cap).then_some(total)
}

fn renumber(n: &mut Node, map: &HashMap<DefId, DefId>) {
    match n {
        Node::Ref(id) => *id = map[id],
        Node::Union(v) => v.iter_mut().for_each(|m| renumber(m, map)),
        Node::Array(a) => renumber(&mut a.items, map),
        Node::Object(o) => {
            o.properties
                .iter_mut()
                .for_each(|p| renumber(&mut p.node, map));
            if let Some(a) = &mut o.additional {
                renumber(a, map);
            }
        }
        _ => {}
    }
}

/// Fails with a definition's location when some definition can reach itself
/// through unions and references alone (consuming no input).
fn check_guarded(defs: &[Def]) -> Result<(), String> {
    fn heads(n: &Node, out: &mut Vec<DefId>) {
        match n {
            Node::Ref(id) => out.push(*id),
            Node::Union(v) => v.iter().for_each(|m| heads(m, out)),
            _ => {}
        }
    }
    let edges: Vec<Vec<DefId>> = defs
        .iter()
        .map(|d| {
            let mut v = Vec::new();
            heads(&d.node, &mut v);
            v
        })
        .collect();
    // 0 = unvisited, 1 = on the stack, 2 = done.
    let mut mark = vec![0u8; defs.len()];
    for start in 0..defs.len() {
        if mark[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        mark[start] = 1;
        while let Some((v, i)) = stack.pop() {
            if i < edges[v].len() {
                stack.push((v, i + 1));
                let w = edges[v][i];
                match mark[w] {
                    0 => {
                        mark[w] = 1;
                        stack.push((w, 0));
                    }
                    1 => return Err(defs[w].location.clone()),
                    _ => {}
                }
            } else {
                mark[v] = 2;
            }
        }
    }
    Ok(())
}
