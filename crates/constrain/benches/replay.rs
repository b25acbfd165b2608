//! Replays requests recorded from the mask harness (`shared/bench/constrain`): each line
//! of the file is one protocol request (`{"id", "format", "grammar", "tokens"}`), walked
//! as `llamay mask-worker` walks it (JSON Schema semantics, a fresh compile and matcher
//! per request, masks written into 32-bit words). Prints the mask percentiles and the
//! slowest steps, each replayed again on a fresh compile (best of 3; what lives on the
//! vocabulary stays warm) to tell a slow mask from a preemption on a loaded machine;
//! `--case ID` walks one request only (for `valgrind --tool=callgrind`), `--fresh N`
//! walks the requests N times, each on a vocabulary loaded afresh, `--show`
//! prints the text before each slow step, `REPLAY_DIGEST=1` a hash of each walk's
//! masks (to check that a change keeps them bit-identical), and `--mark FILE` (lines
//! `ID STEP`) writes those masks through a function of their own, so that
//! `valgrind --tool=callgrind --toggle-collect='*marked*'` counts them alone.
//!
//! Record the requests by putting `tee` in front of the worker:
//!
//! ```text
//! --peer-cmd "llamay=sh -c 'tee -a /tmp/reqs-{gguf}.jsonl | llamay mask-worker --gguf {gguf}'"
//! ```
//!
//! `cargo bench -p llamay-constrain --bench replay -- FILE smollm2|gemma3 [--case ID] [--top K] [--repeat N] [--steps N] [--cold MIB] [--fresh N] [--band US] [--mark FILE]`

#[path = "../tests/common/real_vocab.rs"]
mod real_vocab;

use llamay_constrain::{AdditionalProperties, Constraint, SchemaOptions, Vocabulary};
use llamay_testdata::RealModel;
use std::sync::Arc;
use std::time::Instant;

struct Request {
    id: String,
    format: String,
    grammar: String,
    tokens: Vec<u32>,
}

fn read(path: &str) -> Vec<Request> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut seen = std::collections::HashSet::new();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| Request {
            id: v["id"].as_str().unwrap_or("").to_string(),
            format: v["format"].as_str().unwrap_or("").to_string(),
            grammar: v["grammar"].as_str().unwrap_or("").to_string(),
            tokens: v["tokens"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t.as_u64().map(|t| t as u32))
                .collect(),
        })
        // A request recorded twice (a resumed run) is walked once.
        .filter(|r| seen.insert(r.id.clone()))
        .collect()
}

fn compile(r: &Request, vocab: &Arc<Vocabulary>) -> Option<Constraint> {
    let options = SchemaOptions {
        additional_properties: AdditionalProperties::Open,
        ..SchemaOptions::default()
    };
    match r.format.as_str() {
        "json_schema" => {
            let schema: serde_json::Value = serde_json::from_str(&r.grammar).ok()?;
            llamay_constrain::Constraint::from_schema_with(&schema, vocab.clone(), &options)
                .ok()
                .map(|(c, _)| c)
        }
        "gbnf" => Constraint::from_gbnf(&r.grammar, vocab.clone()).ok(),
        "regex" => Constraint::from_regex(&r.grammar, vocab.clone()).ok(),
        _ => None,
    }
}

thread_local! {
    static MARKED: std::cell::RefCell<std::collections::HashSet<(String, usize)>> = Default::default();
}

/// The masks named by `--mark FILE` (lines `ID STEP`) are written through here, so
/// `valgrind --tool=callgrind --toggle-collect='*marked*'` counts just them.
#[inline(never)]
fn marked(m: &mut llamay_constrain::Matcher, words: &mut [u32]) {
    m.write_mask_words(words)
}

/// Walks a request: the time of each mask, `stop` steps at most; `None` if refused.
fn walk(r: &Request, vocab: &Arc<Vocabulary>, stop: usize) -> Option<(f64, Vec<f64>, bool)> {
    let t0 = Instant::now();
    let c = compile(r, vocab)?;
    let compile_us = t0.elapsed().as_secs_f64() * 1e6;
    let mut m = c.matcher();
    let mut words = vec![0u32; vocab.len().div_ceil(32)];
    let mut times = Vec::new();
    let digest = std::env::var_os("REPLAY_DIGEST").is_some();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for k in 0..=r.tokens.len().min(stop) {
        let t0 = Instant::now();
        if MARKED.with(|s| s.borrow().contains(&(r.id.clone(), k))) {
            marked(&mut m, &mut words);
        } else {
            m.write_mask_words(&mut words);
        }
        times.push(t0.elapsed().as_secs_f64() * 1e6);
        if digest {
            use std::hash::Hash;
            words.hash(&mut h);
        }
        if k == r.tokens.len() || k == stop {
            if digest {
                use std::hash::Hasher;
                println!("digest {} {:016x}", r.id, h.finish());
            }
            break;
        }
        let t = r.tokens[k];
        if words[t as usize / 32] >> (t % 32) & 1 == 0 || m.commit(t).is_err() {
            return Some((compile_us, times, false));
        }
    }
    Some((compile_us, times, true))
}

/// Masks of at least `lo` µs grouped by the last bytes before them: where the tail's
/// time goes (`--band LO`).
fn band(steps: &[(f64, usize, usize)], lo: f64, reqs: &[Request], vocab: &Vocabulary) {
    let mut groups: std::collections::HashMap<String, (usize, f64, Vec<String>)> =
        Default::default();
    let total: f64 = steps.iter().map(|s| s.0).sum();
    let mut inband = 0.0;
    for &(t, k, s) in steps.iter().filter(|s| s.0 >= lo) {
        let text: Vec<u8> = reqs[k].tokens[..s]
            .iter()
            .flat_map(|&t| vocab.token_bytes(t).unwrap_or(&[]).to_vec())
            .collect();
        let tail = String::from_utf8_lossy(&text[text.len().saturating_sub(3)..]).into_owned();
        let bucket = [100.0, 300.0, 1000.0, f64::MAX]
            .iter()
            .position(|&b| t < b)
            .unwrap();
        let bucket = ["<100", "<300", "<1000", ">=1000"][bucket];
        let g = groups.entry(format!("{tail:?} {bucket}")).or_default();
        g.0 += 1;
        g.1 += t;
        if g.2.len() < 4 {
            g.2.push(format!("{} step {s} {t:.0} µs", reqs[k].id));
        }
        inband += t;
    }
    let mut g: Vec<_> = groups.into_iter().collect();
    g.sort_by(|a, b| b.1 .1.partial_cmp(&a.1 .1).unwrap());
    println!(
        "masks >= {lo} µs: {:.1}% of all mask time; by the last 3 bytes before them:",
        100.0 * inband / total
    );
    for (tail, (n, t, examples)) in g.iter().take(25) {
        println!(
            "  {tail:>18} {n:>6} masks {t:>8.0} µs  e.g. {}",
            examples.join(", ")
        );
    }
}

fn pct(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v.get(((v.len() as f64 - 1.0) * p) as usize)
        .copied()
        .unwrap_or(0.0)
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1)?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let path = args
        .first()
        .expect("usage: replay FILE smollm2|gemma3 [--case ID]");
    let model = RealModel::ALL
        .into_iter()
        .find(|m| args.iter().any(|a| a == "gemma3") == (*m == RealModel::Gemma3))
        .unwrap_or(RealModel::SmolLM2);
    let case: Option<String> = arg(&args, "--case");
    if let Some(path) = arg::<String>(&args, "--mark") {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        MARKED.with(|m| {
            m.borrow_mut().extend(text.lines().filter_map(|l| {
                let (id, step) = l.split_once(' ')?;
                Some((id.to_string(), step.trim().parse().ok()?))
            }))
        });
    }
    let top: usize = arg(&args, "--top").unwrap_or(12);
    let repeat: usize = arg(&args, "--repeat").unwrap_or(1);
    // Only the first masks of each walk (e.g. to profile a fresh matcher's start).
    let stop: usize = arg(&args, "--steps").unwrap_or(usize::MAX);
    // Writes over this many MiB between requests, as another engine running between
    // them does in the harness: what a walk keeps warm in cache is then gone.
    let mut cold = vec![0u8; arg::<usize>(&args, "--cold").unwrap_or(0) << 20];
    let reqs: Vec<Request> = read(path)
        .into_iter()
        .filter(|r| case.as_ref().is_none_or(|c| &r.id == c))
        .collect();
    // `--fresh N`: the requests walked N times, each on a vocabulary loaded afresh (no
    // masks shared from an earlier walk), the mask time of each round printed: a
    // steadier figure for first walks than single masks on a noisy machine.
    if let Some(rounds) = arg::<usize>(&args, "--fresh") {
        let mut totals = Vec::new();
        for _ in 0..rounds {
            let vocab = real_vocab::load(model).vocab.clone();
            let t: f64 = reqs
                .iter()
                .filter_map(|r| walk(r, &vocab, stop))
                .map(|(_, times, _)| times.iter().sum::<f64>())
                .sum();
            totals.push(t);
        }
        println!(
            "fresh rounds: mask time {:.0} µs best, {:.0} median ({totals:.0?})",
            pct(&totals, 0.0),
            pct(&totals, 0.5)
        );
        return;
    }
    let rv = real_vocab::load(model);
    let vocab = rv.vocab.clone();
    println!("{}: {} requests from {path}", model.stem(), reqs.len());
    let (mut masks, mut compiles) = (Vec::new(), Vec::new());
    let mut steps: Vec<(f64, usize, usize)> = Vec::new();
    let (mut refused, mut rejected) = (0, 0);
    for _ in 0..repeat {
        for (k, r) in reqs.iter().enumerate() {
            for (i, b) in cold.iter_mut().enumerate() {
                *b = b.wrapping_add(i as u8);
            }
            match walk(r, &vocab, stop) {
                None => refused += 1,
                Some((c, times, ok)) => {
                    compiles.push(c);
                    rejected += usize::from(!ok);
                    for (s, &t) in times.iter().enumerate() {
                        steps.push((t, k, s));
                    }
                    masks.extend(times);
                }
            }
        }
    }
    let mean = masks.iter().sum::<f64>() / masks.len().max(1) as f64;
    println!(
        "{} masks: mean {mean:.2} µs, p50 {:.1}, p95 {:.1}, p99 {:.1}, max {:.0} · compile p50 {:.0} µs · refused {refused} · rejected {rejected}",
        masks.len(),
        pct(&masks, 0.5),
        pct(&masks, 0.95),
        pct(&masks, 0.99),
        pct(&masks, 1.0),
        pct(&compiles, 0.5),
    );
    steps.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
    if let Some(lo) = arg::<f64>(&args, "--band") {
        band(&steps, lo, &reqs, &vocab);
    }
    println!("slowest steps (wall, then replayed on a fresh compile, best of 3):");
    for &(t, k, s) in steps.iter().take(top) {
        let best = (0..3)
            .filter_map(|_| walk(&reqs[k], &vocab, s).map(|(_, v, _)| v[s]))
            .fold(f64::MAX, f64::min);
        println!(
            "  {t:>9.1} µs  {best:>9.1} µs  {} step {s} of {}",
            reqs[k].id,
            reqs[k].tokens.len() + 1
        );
        if args.iter().any(|a| a == "--show") {
            let text: Vec<u8> = reqs[k].tokens[..s]
                .iter()
                .flat_map(|&t| vocab.token_bytes(t).unwrap_or(&[]).to_vec())
                .collect();
            let tail = &text[text.len().saturating_sub(80)..];
            println!("      after …{}", String::from_utf8_lossy(tail));
        }
    }
}
