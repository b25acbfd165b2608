//! Completeness over the shared corpus with real tokenizers: every valid instance that
//! llamay's schema tree keeps is accepted token by token, through the mask, as the
//! SmolLM2 and Gemma 3 tokenizers split it and as random shorter tokens split it, and
//! ends accepting. Invalid instances are forced through the matcher and counted when
//! accepted to the end; for schemas whose keywords are all enforced that count is zero.
//!
//! CI runs a deterministic sample; `LLAMAY_COMPLETENESS=all` runs every schema, and
//! `LLAMAY_COMPLETENESS_SEMANTICS=open` reads them with JSON Schema's own semantics
//! (open objects, no inferred types: what `llamay mask-worker` benchmarks).

mod common;
#[path = "common/corpus.rs"]
mod corpus;
#[path = "common/real_vocab.rs"]
mod real_vocab;

use common::Rng;
use llamay_constrain::{
    AdditionalProperties, Constraint, SchemaMismatch, SchemaOptions, TokenMask,
};
use llamay_testdata::RealModel;
use std::collections::HashMap;

/// Feeds `tokens` through the mask and commits; `Err` names the first refused token.
fn feed(c: &Constraint, eog: u32, tokens: &[u32], mask: &mut TokenMask) -> Result<(), String> {
    let mut m = c.matcher();
    for (k, &t) in tokens.iter().enumerate() {
        m.mask(mask);
        if !mask.is_allowed(t) {
            return Err(format!("token {k} ({t}) not in the mask"));
        }
        m.commit(t)
            .map_err(|e| format!("token {k} ({t}) allowed but refused: {e}"))?;
    }
    m.mask(mask);
    match mask.is_allowed(eog) {
        true => Ok(()),
        false => Err("the end token is not allowed at the end".into()),
    }
}

/// `text` cut at random into tokens of at most 6 bytes that the vocabulary holds (single
/// bytes always are), or `None` if some byte is no token.
fn random_split(text: &[u8], ids: &HashMap<Vec<u8>, u32>, rng: &mut Rng) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let mut n = (1 + rng.below(6)).min(text.len() - i);
        while n > 1 && !ids.contains_key(&text[i..i + n]) {
            n -= 1;
        }
        out.push(*ids.get(&text[i..i + n])?);
        i += n;
    }
    Some(out)
}

struct Tok {
    rv: real_vocab::RealVocab,
    ids: HashMap<Vec<u8>, u32>,
}

#[test]
fn valid_instances_pass_token_by_token_and_invalid_ones_do_not() {
    let toks: Vec<Tok> = RealModel::ALL
        .iter()
        .map(|&m| {
            let rv = real_vocab::load(m);
            let ids = real_vocab::ids_by_bytes(&rv.vocab);
            Tok { rv, ids }
        })
        .collect();
    let stride = if corpus::everything("LLAMAY_COMPLETENESS") {
        1
    } else {
        2
    };
    let started = std::time::Instant::now();
    let mut rng = Rng::new(31);
    let (mut schemas, mut fed, mut by_design, mut misspelt) = (0, 0, 0, 0);
    let mut accepted_invalid = [0usize; 2]; // judged, not judged
    let mut rejected_invalid = 0;
    let mut wrong: Vec<String> = Vec::new();
    let options = match std::env::var("LLAMAY_COMPLETENESS_SEMANTICS").as_deref() {
        Ok("open") => SchemaOptions {
            additional_properties: AdditionalProperties::Open,
            ..SchemaOptions::default()
        },
        _ => SchemaOptions::default(),
    };
    for (k, case) in corpus::cases().into_iter().enumerate() {
        if !case.name.starts_with("seed/") && k % stride != 0 {
            continue;
        }
        let Ok(tree) = llamay_constrain::compile_schema_with(&case.schema, &options) else {
            continue;
        };
        let built: Vec<Constraint> = toks
            .iter()
            .filter_map(|t| {
                llamay_constrain::Constraint::from_schema_with(
                    &case.schema,
                    t.rv.vocab.clone(),
                    &options,
                )
                .ok()
            })
            .map(|(c, _)| c)
            .collect();
        if built.len() != toks.len() {
            wrong.push(format!("{}: compiles for one vocabulary only", case.name));
            continue;
        }
        schemas += 1;
        let judged = corpus::judged(&tree.report);
        for (data, valid) in &case.tests {
            let text = serde_json::to_string(data).unwrap();
            if !valid {
                let mut m = built[0].matcher();
                if m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting() {
                    accepted_invalid[usize::from(!judged)] += 1;
                    if judged {
                        let short: String = text.chars().take(200).collect();
                        wrong.push(format!("{}: invalid instance accepted: {short}", case.name));
                    }
                } else {
                    rejected_invalid += 1;
                }
                continue;
            }
            match tree.check(data) {
                Ok(()) => {}
                Err(SchemaMismatch::ExtraKey(_) | SchemaMismatch::WrongType(_)) => {
                    by_design += 1;
                    continue;
                }
                Err(SchemaMismatch::Other(why)) => {
                    wrong.push(format!(
                        "{}: tree refuses a valid instance: {why}",
                        case.name
                    ));
                    continue;
                }
            }
            let short: String = text.chars().take(200).collect();
            for (t, c) in toks.iter().zip(&built) {
                let mut mask = TokenMask::new(t.rv.vocab.len());
                let real = t.rv.tokenizer.encode(text.as_bytes(), false, false);
                let bytes: Vec<u8> = real
                    .iter()
                    .flat_map(|&i| t.rv.vocab.token_bytes(i).unwrap().to_vec())
                    .collect();
                if bytes != text.as_bytes() {
                    misspelt += 1;
                    continue;
                }
                let split = random_split(text.as_bytes(), &t.ids, &mut rng);
                for (how, tokens) in [("tokenizer", Some(real)), ("random split", split)] {
                    let Some(tokens) = tokens else { continue };
                    fed += 1;
                    if let Err(e) = feed(c, t.rv.eog, &tokens, &mut mask) {
                        wrong.push(format!(
                            "{} ({} tokens, {how}): {e}: {short}",
                            case.name,
                            t.rv.vocab.len()
                        ));
                    }
                }
            }
        }
    }
    println!(
        "{schemas} schemas; {fed} tokenized valid instances fed ({by_design} valid instances \
         outside the tree by design: undeclared keys of closed objects, inferred types; \
         {misspelt} tokenizations not spelling the text); invalid instances: \
         {rejected_invalid} rejected, {} accepted of fully enforced schemas, {} accepted of \
         others; {} wrong, in {:?}",
        accepted_invalid[0],
        accepted_invalid[1],
        wrong.len(),
        started.elapsed()
    );
    for w in wrong.iter().take(40) {
        println!("  {w}");
    }
    assert!(fed > 4000, "{fed} fed");
    assert_eq!(misspelt, 0, "tokenizations that do not spell the text");
    assert!(wrong.is_empty(), "{} wrong", wrong.len());
}
