//! Lexicon benchmark: 1,000,000 generated terms loaded from file bytes, then masks on a
//! real vocabulary (Gemma 3's 262,144 tokens by default) along 1,000 random walks,
//! each checked to end on a term.
//!
//! `cargo bench -p llamay-constrain --bench lexicon [-- smollm2|gemma3] [TERMS] [WALKS]`

#[path = "../tests/common/real_vocab.rs"]
mod real_vocab;

use llamay_constrain::{Constraint, Lexicon, TokenMask};
use llamay_testdata::RealModel;
use std::collections::HashSet;
use std::time::{Duration, Instant};

use llamay_testdata::XorShift as Rng;

/// `n` distinct terms: product-like ids, words and non-ASCII names.
fn file(n: usize) -> Vec<u8> {
    let words = [
        "alpha",
        "Bravo",
        "charlie delta",
        "écho",
        "Fox-trot",
        "golf_",
        "名古屋",
        "hôtel",
    ];
    let mut rng = Rng(0x9E3779B97F4A7C15);
    let mut out = String::new();
    for i in 0..n {
        let w = words[rng.below(words.len())];
        let w2 = words[rng.below(words.len())];
        out.push_str(&format!("{w} {w2} {:x}-{i}\n", rng.next() % 0xFFFF));
    }
    out.into_bytes()
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let model = match args.first().map(String::as_str) {
        Some("smollm2") => RealModel::SmolLM2,
        _ => RealModel::Gemma3,
    };
    let n: usize = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let walks: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let rv = real_vocab::load(model);
    let bytes = file(n);
    let t0 = Instant::now();
    let lex = Lexicon::parse("bench", &bytes).unwrap();
    let load = t0.elapsed();
    let t0 = Instant::now();
    let c = Constraint::from_lexicon(&lex, rv.vocab.clone()).unwrap();
    let compile = t0.elapsed();
    let terms: HashSet<&[u8]> = bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let mut rng = Rng(42);
    let mut mask = TokenMask::new(rv.vocab.len());
    let mut times: Vec<Duration> = Vec::new();
    // The slowest masks with the output before them, replayed below.
    let mut slowest: Vec<(Duration, Vec<u32>)> = Vec::new();
    let mut terms_out = 0;
    for _ in 0..walks {
        let mut m = c.matcher();
        let mut out = Vec::new();
        let mut ids = Vec::new();
        loop {
            let t0 = Instant::now();
            m.mask(&mut mask);
            let d = t0.elapsed();
            times.push(d);
            if slowest.len() < 5 || d > slowest[4].0 {
                slowest.push((d, ids.clone()));
                slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
                slowest.truncate(5);
            }
            let allowed: Vec<u32> = mask.allowed().collect();
            assert!(
                !allowed.is_empty(),
                "dead end after {:?}",
                String::from_utf8_lossy(&out)
            );
            // Stop at a term half the time it is possible, else keep going.
            let pool: Vec<u32> = allowed
                .into_iter()
                .filter(|&t| !rv.vocab.is_eog(t))
                .collect();
            let pick = if mask.is_allowed(rv.eog) && (pool.is_empty() || rng.below(2) == 0) {
                rv.eog
            } else {
                pool[rng.below(pool.len())]
            };
            m.commit(pick).unwrap();
            ids.push(pick);
            if pick == rv.eog {
                break;
            }
            out.extend_from_slice(rv.vocab.token_bytes(pick).unwrap());
        }
        assert!(
            terms.contains(out.as_slice()),
            "{:?} is not a term",
            String::from_utf8_lossy(&out)
        );
        terms_out += 1;
    }
    // A wall-clock maximum on a busy machine is often a preemption: replay each of the
    // slowest masks on a fresh constraint (nothing cached), best of 3.
    let replayed: Vec<Duration> = slowest
        .iter()
        .map(|(_, prefix)| {
            (0..3)
                .map(|_| {
                    let c = Constraint::from_lexicon(&lex, rv.vocab.clone()).unwrap();
                    let mut m = c.matcher();
                    for &t in prefix {
                        m.mask(&mut mask);
                        m.commit(t).unwrap();
                    }
                    let t0 = Instant::now();
                    m.mask(&mut mask);
                    t0.elapsed()
                })
                .min()
                .unwrap()
        })
        .collect();
    let first = times[0];
    let later_max = times[1..].iter().max().copied().unwrap_or_default();
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = times.iter().map(|&d| us(d)).sum::<f64>() / times.len() as f64;
    println!(
        "{model:?}: {} terms ({} distinct) loaded in {:.0} ms, constraint in {:.1} ms; {walks} walks, {terms_out} ended on a term; {} masks: mean {mean:.0} us, p50 {:.0}, p99 {:.0}, max {:.0} us (the first mask {:.0} us, the slowest after it {:.0} us); the 5 slowest replayed cold, best of 3: {:?} us",
        n,
        lex.len(),
        load.as_secs_f64() * 1e3,
        compile.as_secs_f64() * 1e3,
        times.len(),
        us(times[times.len() / 2]),
        us(times[times.len() * 99 / 100]),
        us(*times.last().unwrap()),
        us(first),
        us(later_max),
        replayed.iter().map(|&d| us(d).round()).collect::<Vec<f64>>(),
    );
}
