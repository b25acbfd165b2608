//! Soundness over the shared corpus with a real vocabulary (SmolLM2's 49,152 tokens):
//! random constrained walks over every compiling schema (and the GBNF grammars) never
//! dead-end, keep the mask and commits consistent, and finish in documents that parse,
//! hold no duplicate keys, stay within the whitespace budget, satisfy llamay's own tree
//! check, and validate with the `jsonschema` crate when every keyword is enforced.
//!
//! CI runs a deterministic sample; `LLAMAY_SOUNDNESS_SCHEMAS=all` walks every schema,
//! `LLAMAY_SOUNDNESS_WALKS=N` sets the walks per schema.

mod common;
#[path = "common/corpus.rs"]
mod corpus;
#[path = "common/json_check.rs"]
mod json_check;
#[path = "common/real_vocab.rs"]
mod real_vocab;
#[path = "common/recognise.rs"]
mod recognise;

use common::Rng;
use llamay_constrain::{Constraint, TokenMask, Vocabulary};
use llamay_testdata::RealModel;
use serde_json::Value;
use std::collections::HashSet;

/// What a walk found wrong, or the document it produced.
enum Outcome {
    Finished(Vec<u8>),
    /// Hit the token cap before the walk could end.
    Cut,
}

/// Walks one matcher: each step takes a uniformly random allowed token; after `soft`
/// steps it ends whenever the end token is allowed and, with probability 0.9, draws from
/// the allowed tokens `closer` marks. Checks every step for a dead end, a special token
/// in the mask, the end token allowed exactly when accepting, a commit refused after its
/// token was allowed, and (at random steps) a mask that differs from a plain trie walk.
fn walk(
    c: &Constraint,
    eog: u32,
    closer: &[bool],
    rng: &mut Rng,
    soft: usize,
    hard: usize,
) -> Result<Outcome, String> {
    let vocab = c.vocab();
    let mut m = c.matcher();
    let mut mask = TokenMask::new(vocab.len());
    let mut plain = TokenMask::new(vocab.len());
    let mut bytes = Vec::new();
    let mut allowed = Vec::new();
    let mut closing = Vec::new();
    for step in 0..hard {
        m.mask(&mut mask);
        let show = || String::from_utf8_lossy(&bytes).into_owned();
        allowed.clear();
        allowed.extend(mask.allowed());
        if allowed.is_empty() {
            return Err(format!("dead end after {:?}", show()));
        }
        if let Some(&t) = allowed
            .iter()
            .find(|&&t| vocab.is_special(t) && !vocab.is_eog(t))
        {
            return Err(format!("special token {t} allowed after {:?}", show()));
        }
        if mask.is_allowed(eog) != m.is_accepting() {
            return Err(format!("end token allowed != accepting after {:?}", show()));
        }
        // Now and then, the mask from the caches and shortcuts against a plain walk.
        if rng.chance(0.1) {
            m.mask_by_plain_walk(&mut plain);
            if plain != mask {
                return Err(format!(
                    "mask differs from a plain walk ({} vs {} tokens) after {:?}",
                    mask.count(),
                    plain.count(),
                    show()
                ));
            }
        }
        let pick = if step >= soft && mask.is_allowed(eog) {
            eog
        } else {
            closing.clear();
            if step >= soft && rng.chance(0.9) {
                closing.extend(allowed.iter().copied().filter(|&t| closer[t as usize]));
            }
            let pool = if closing.is_empty() {
                &allowed
            } else {
                &closing
            };
            let mut t = pool[rng.below(pool.len())];
            if t == eog && step < soft / 4 && pool.len() > 1 {
                while t == eog {
                    t = pool[rng.below(pool.len())];
                }
            }
            t
        };
        m.commit(pick)
            .map_err(|e| format!("allowed token {pick} refused ({e}) after {:?}", show()))?;
        if vocab.is_eog(pick) {
            return Ok(Outcome::Finished(bytes));
        }
        bytes.extend_from_slice(vocab.token_bytes(pick).unwrap());
    }
    Ok(Outcome::Cut)
}

/// Tokens a walk prefers once it should finish: short runs of bytes that close strings,
/// objects and arrays, or extend numbers.
fn closers(v: &Vocabulary, set: &[u8]) -> Vec<bool> {
    (0..v.len() as u32)
        .map(|t| {
            let b = v.token_bytes(t).unwrap_or_default();
            !b.is_empty() && b.len() <= 3 && b.iter().all(|c| set.contains(c))
        })
        .collect()
}

/// Whitespace bytes outside strings (what the budget counts).
fn structural_ws(doc: &[u8]) -> u32 {
    let (mut n, mut in_str, mut esc) = (0, false, false);
    for &b in doc {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
        } else if b == b'"' {
            in_str = true;
        } else if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            n += 1;
        }
    }
    n
}

/// Whether every number outside strings has at most 15 significant digits and an
/// exponent of one digit (so serde_json and llamay's decimal check's `f64` holds it exactly enough for
/// bounds and integrality checks).
fn numbers_fit_f64(doc: &[u8]) -> bool {
    let (mut in_str, mut esc) = (false, false);
    let (mut digits, mut exp_digits, mut in_exp) = (0, 0, false);
    for &b in doc {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'0'..=b'9' if in_exp => exp_digits += 1,
            b'0'..=b'9' => digits += 1,
            b'e' | b'E' => in_exp = true,
            b'.' | b'-' | b'+' => {}
            _ => (digits, exp_digits, in_exp) = (0, 0, false),
        }
        if digits > 15 || exp_digits > 1 {
            return false;
        }
    }
    true
}

/// Checks a finished document; `None` if it is sound.
fn judge(
    doc: &[u8],
    tree: &llamay_constrain::CompiledSchema,
    declared: &HashSet<String>,
    validator: Option<&jsonschema::Validator>,
) -> Option<String> {
    let Ok(text) = std::str::from_utf8(doc) else {
        return Some("not UTF-8".into());
    };
    if !json_check::is_json(doc) {
        return Some("not JSON".into());
    }
    if structural_ws(doc) > llamay_constrain::schema_limits().whitespace_budget {
        return Some(format!("{} whitespace bytes", structural_ws(doc)));
    }
    if !numbers_fit_f64(doc) {
        return None; // serde_json would round them: the recogniser above is the check
    }
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return Some("serde_json refuses it".into());
    };
    let repeats = serde_json::from_str::<KeyRepeats>(text).map_or(vec![], |r| r.0);
    if let Some(k) = repeats.iter().find(|k| declared.contains(*k)) {
        return Some(format!("declared key {k:?} repeats"));
    }
    if let Some(k) = repeats.first() {
        return Some(format!("undeclared key {k:?} repeats"));
    }
    if let Err(e) = tree.check(&value) {
        return Some(format!("llamay's own check refuses it: {e:?}"));
    }
    if let Some(v) = validator {
        // `multipleOf` in f64 misjudges decimals (9.19 is "not a multiple of 0.01");
        // the tree check above decides it exactly.
        let e = v.iter_errors(&value).find(|e| {
            !matches!(
                e.kind,
                jsonschema::error::ValidationErrorKind::MultipleOf { .. }
            )
        });
        if let Some(e) = e {
            return Some(format!("jsonschema: {e} at {}", e.instance_path));
        }
    }
    None
}

#[test]
fn random_walks_over_the_schema_corpus_are_sound() {
    let rv = real_vocab::load(RealModel::SmolLM2);
    let closer = closers(&rv.vocab, b"\"}]");
    let all = corpus::everything("LLAMAY_SOUNDNESS_SCHEMAS");
    let walks = corpus::env_usize("LLAMAY_SOUNDNESS_WALKS", 4);
    let stride = if all { 1 } else { 4 };
    let started = std::time::Instant::now();
    let (mut schemas, mut refused, mut validated_schemas) = (0, 0, 0);
    let (mut finished, mut cut, mut validated) = (0, 0, 0);
    let mut wrong: Vec<String> = Vec::new();
    let mut rng = Rng::new(2024);
    for (k, case) in corpus::cases().into_iter().enumerate() {
        if !case.name.starts_with("seed/") && k % stride != 0 {
            continue;
        }
        let Ok(tree) = llamay_constrain::compile_schema(&case.schema) else {
            refused += 1;
            continue;
        };
        let Ok((c, report)) =
            llamay_constrain::Constraint::from_schema(&case.schema, rv.vocab.clone())
        else {
            refused += 1;
            continue;
        };
        schemas += 1;
        let validator = corpus::judged(&report)
            .then(|| jsonschema::validator_for(&case.schema).ok())
            .flatten();
        validated_schemas += usize::from(validator.is_some());
        let mut declared = HashSet::new();
        declared_names(&case.schema, &mut declared);
        for _ in 0..walks {
            match walk(&c, rv.eog, &closer, &mut rng, 24, 600) {
                Err(e) => wrong.push(format!("{}: {e}", case.name)),
                Ok(Outcome::Cut) => cut += 1,
                Ok(Outcome::Finished(doc)) => {
                    finished += 1;
                    validated += usize::from(validator.is_some());
                    match judge(&doc, &tree, &declared, validator.as_ref()) {
                        None => {}
                        Some(e) => {
                            let short: String =
                                String::from_utf8_lossy(&doc).chars().take(300).collect();
                            wrong.push(format!("{}: {e}: {short}", case.name));
                        }
                    }
                }
            }
        }
    }
    println!(
        "{schemas} schemas walked ({refused} refused), {validated_schemas} fully enforced; \
         {finished} walks finished ({validated} validated by jsonschema), {cut} cut at the \
         token cap, {} unsound, in {:?}",
        wrong.len(),
        started.elapsed()
    );
    for w in wrong.iter().take(40) {
        println!("  {w}");
    }
    assert!(schemas >= if all { 1500 } else { 380 }, "{schemas} schemas");
    assert!(finished >= schemas * walks * 9 / 10, "{finished} finished");
    assert!(wrong.is_empty(), "{} unsound walks", wrong.len());
}

/// Every property name the schema declares anywhere.
fn declared_names(schema: &Value, out: &mut HashSet<String>) {
    match schema {
        Value::Object(o) => {
            if let Some(Value::Object(props)) = o.get("properties") {
                out.extend(props.keys().cloned());
            }
            o.values().for_each(|v| declared_names(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| declared_names(v, out)),
        _ => {}
    }
}

/// The keys any object of a JSON value repeats.
struct KeyRepeats(Vec<String>);

impl<'de> serde::Deserialize<'de> for KeyRepeats {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = KeyRepeats;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E>(self, _: bool) -> Result<KeyRepeats, E> {
                Ok(KeyRepeats(vec![]))
            }
            fn visit_i64<E>(self, _: i64) -> Result<KeyRepeats, E> {
                Ok(KeyRepeats(vec![]))
            }
            fn visit_u64<E>(self, _: u64) -> Result<KeyRepeats, E> {
                Ok(KeyRepeats(vec![]))
            }
            fn visit_f64<E>(self, _: f64) -> Result<KeyRepeats, E> {
                Ok(KeyRepeats(vec![]))
            }
            fn visit_str<E>(self, _: &str) -> Result<KeyRepeats, E> {
                Ok(KeyRepeats(vec![]))
            }
            fn visit_unit<E>(self) -> Result<KeyRepeats, E> {
                Ok(KeyRepeats(vec![]))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<KeyRepeats, A::Error> {
                let mut out = vec![];
                while let Some(KeyRepeats(r)) = a.next_element()? {
                    out.extend(r);
                }
                Ok(KeyRepeats(out))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<KeyRepeats, A::Error> {
                let (mut out, mut seen) = (vec![], HashSet::new());
                while let Some(k) = a.next_key::<String>()? {
                    if !seen.insert(k.clone()) {
                        out.push(k);
                    }
                    out.extend(a.next_value::<KeyRepeats>()?.0);
                }
                Ok(KeyRepeats(out))
            }
        }
        d.deserialize_any(V)
    }
}

fn grammar_files() -> Vec<(String, String)> {
    let shared = llamay_testdata::shared_dir();
    let mut out = Vec::new();
    for d in [shared.join("grammars"), shared.join("corpus/seed/grammars")] {
        let mut names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy();
                n.ends_with(".gbnf") && !n.starts_with("bad-")
            })
            .collect();
        names.sort();
        for p in names {
            let text = std::fs::read_to_string(&p).unwrap();
            out.push((p.to_string_lossy().into_owned(), text));
        }
    }
    out
}

#[test]
fn random_walks_over_the_gbnf_grammars_are_sound() {
    let rv = real_vocab::load(RealModel::SmolLM2);
    let closer = closers(&rv.vocab, b"\n)}]\";0=");
    let walks = corpus::env_usize("LLAMAY_SOUNDNESS_WALKS", 3) * 4;
    let mut rng = Rng::new(77);
    let (mut grammars, mut finished, mut cut) = (0, 0, 0);
    let mut wrong = Vec::new();
    for (name, text) in grammar_files() {
        let g = llamay_constrain::parse_gbnf(&text).unwrap();
        let c = Constraint::from_grammar(&g, rv.vocab.clone()).unwrap();
        grammars += 1;
        for _ in 0..walks {
            match walk(&c, rv.eog, &closer, &mut rng, 30, 800) {
                Err(e) => wrong.push(format!("{name}: {e}")),
                Ok(Outcome::Cut) => cut += 1,
                Ok(Outcome::Finished(doc)) => {
                    finished += 1;
                    if !recognise::recognises(&g, &doc) {
                        wrong.push(format!(
                            "{name}: the recogniser refuses {:?}",
                            String::from_utf8_lossy(&doc)
                        ));
                    }
                }
            }
        }
    }
    println!(
        "{grammars} grammars, {finished} walks finished, {cut} cut, {} unsound",
        wrong.len()
    );
    for w in wrong.iter().take(20) {
        println!("  {w}");
    }
    assert!(grammars >= 12, "{grammars} grammars");
    assert!(finished >= grammars * walks * 3 / 4, "{finished} finished");
    assert!(wrong.is_empty(), "{} unsound walks", wrong.len());
}
