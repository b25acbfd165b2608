//! Mask-time benchmark on real vocabularies (SmolLM2 49k, Gemma 3 262k), replaying
//! greedily tokenised corpus documents through fresh matchers, as the benchmark
//! protocol does (one matcher per request, masks timed one by one).
//!
//! `cargo bench -p llamay-constrain --bench masks [-- smollm2|gemma3] [--docs N]`

#[path = "../tests/common/real_vocab.rs"]
mod real_vocab;

use llamay_constrain::{Constraint, TokenMask, Vocabulary};
use llamay_testdata::RealModel;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

fn tokenize(map: &HashMap<&[u8], u32>, max_len: usize, text: &[u8]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let n = (1..=max_len.min(text.len() - i))
            .rev()
            .find(|&n| map.contains_key(&text[i..i + n]))
            .expect("byte not in vocab");
        out.push(map[&text[i..i + n]]);
        i += n;
    }
    out
}

fn corpus_docs(limit: usize) -> Vec<(serde_json::Value, String)> {
    let dir = llamay_testdata::shared_dir().join("corpus");
    let mut files: Vec<_> = std::fs::read_dir(dir.join("jsonschemabench"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for p in files.iter().step_by((files.len() / limit).max(1)) {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        for t in v["tests"].as_array().into_iter().flatten().take(1) {
            docs.push((
                v["schema"].clone(),
                serde_json::to_string(&t["data"]).unwrap(),
            ));
        }
    }
    docs.truncate(limit);
    docs
}

struct Report {
    masks: Vec<f64>,
    misses: Vec<f64>,
    compile_us: Vec<f64>,
    rejected: usize,
    refused: usize,
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p) as usize]
}

fn run(
    label: &str,
    make: &dyn Fn(usize) -> Option<Constraint>,
    docs: &[Vec<u32>],
    vocab: &Arc<Vocabulary>,
) {
    if std::env::args().any(|a| a == "--only") && !std::env::args().any(|a| a == label) {
        return;
    }
    let mut r = Report {
        masks: Vec::new(),
        misses: Vec::new(),
        compile_us: Vec::new(),
        rejected: 0,
        refused: 0,
    };
    let mut mask = TokenMask::new(vocab.len());
    for (k, doc) in docs.iter().enumerate() {
        let t0 = Instant::now();
        let Some(c) = make(k) else {
            r.refused += 1;
            continue;
        };
        r.compile_us.push(t0.elapsed().as_secs_f64() * 1e6);
        let mut m = c.matcher();
        for &t in doc {
            let before = m.stats().states_wanting_mask;
            let t0 = Instant::now();
            m.mask(&mut mask);
            let us = t0.elapsed().as_secs_f64() * 1e6;
            r.masks.push(us);
            if m.stats().states_wanting_mask > before {
                r.misses.push(us);
            }
            if !mask.is_allowed(t) || m.commit(t).is_err() {
                r.rejected += 1;
                break;
            }
        }
    }
    let n = r.masks.len();
    let mean = r.masks.iter().sum::<f64>() / n as f64;
    let miss_mean = r.misses.iter().sum::<f64>() / r.misses.len().max(1) as f64;
    println!(
        "{label}: {} docs, {n} masks: mean {mean:.1} µs, p50 {:.1}, p90 {:.1}, p99 {:.1}, max {:.0} · computed {} ({:.1}%) mean {miss_mean:.1} µs · compile mean {:.0} µs · rejected {} · refused {}",
        docs.len(),
        pct(&mut r.masks, 0.5),
        pct(&mut r.masks, 0.9),
        pct(&mut r.masks, 0.99),
        pct(&mut r.masks, 1.0),
        r.misses.len(),
        100.0 * r.misses.len() as f64 / n as f64,
        r.compile_us.iter().sum::<f64>() / r.compile_us.len() as f64,
        r.rejected,
        r.refused
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n_docs = args
        .iter()
        .position(|a| a == "--docs")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(150);
    let which: Vec<RealModel> = RealModel::ALL
        .into_iter()
        .filter(|m| {
            args.iter()
                .any(|a| a == m.stem() || m.stem().to_lowercase().starts_with(&a.to_lowercase()))
                || !args
                    .iter()
                    .any(|a| a.starts_with("smol") || a.starts_with("gemma"))
        })
        .collect();
    let docs = corpus_docs(n_docs);
    let gbnf_dir = llamay_testdata::shared_dir().join("grammars");
    let json_gbnf = std::fs::read_to_string(gbnf_dir.join("json.gbnf")).unwrap();
    for m in which {
        let t0 = Instant::now();
        let rv = real_vocab::load(m);
        let vocab = rv.vocab.clone();
        println!(
            "== {} ({} tokens, tokenizer+vocab+trie {:.0} ms)",
            m.stem(),
            vocab.len(),
            t0.elapsed().as_secs_f64() * 1e3
        );
        let ids = real_vocab::ids_by_bytes(&vocab);
        let map: HashMap<&[u8], u32> = ids.iter().map(|(b, &t)| (b.as_slice(), t)).collect();
        let max_len = ids.keys().map(Vec::len).max().unwrap();
        let tok_docs: Vec<Vec<u32>> = docs
            .iter()
            .map(|(_, d)| tokenize(&map, max_len, d.as_bytes()))
            .collect();
        let objects: Vec<Vec<u32>> = docs
            .iter()
            .filter(|(_, d)| d.starts_with('{'))
            .map(|(_, d)| tokenize(&map, max_len, d.as_bytes()))
            .collect();
        let v = vocab.clone();
        run(
            "any-json",
            &|_| Some(Constraint::any_json(v.clone()).unwrap()),
            &tok_docs,
            &vocab,
        );
        let v = vocab.clone();
        run(
            "json.gbnf",
            &|_| Some(Constraint::from_gbnf(&json_gbnf, v.clone()).unwrap()),
            &objects,
            &vocab,
        );
        let v = vocab.clone();
        let schema = |k: usize| {
            llamay_constrain::Constraint::from_schema(&docs[k].0, v.clone())
                .ok()
                .map(|(c, _)| c)
        };
        run("schema", &schema, &tok_docs, &vocab);
    }
}
