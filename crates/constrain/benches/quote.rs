//! `x-llamay-quote` benchmark: compiling a quote over a 1 MB source (schema to a ready
//! constraint), and the masks of a quoted string beside an ordinary one (`maxLength`,
//! no quote) on a real vocabulary, each replaying the same tokenised value through a
//! fresh matcher. "cold" compiles afresh on a fresh vocabulary, as a first request with
//! a new source would: the only masks ready are those the vocabulary precomputes (the
//! ordinary string's) and those compiling walks (the quoted string's first, inside the
//! quotes, whose time is the compile's); "warm" reuses the constraint, as a second
//! request with the same source would.
//!
//! `cargo bench -p llamay-constrain --bench quote [-- smollm2|gemma3]`; with
//! `QUOTE_BENCH_PROFILE=1|plain`, one cold request and nothing else, for callgrind.

#[path = "../tests/common/real_vocab.rs"]
mod real_vocab;

use llamay_constrain::{schema_grammar_with, Constraint, Sources, TokenMask, Vocabulary};
use llamay_testdata::RealModel;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A 1 MiB document: invoice-like lines, numbers in several notations, quotes,
/// backslashes and non-ASCII text, in a deterministic order.
fn source() -> String {
    let lines = [
        "Invoice INV-{n} from Müller & Söhne GmbH, Zürich",
        "Total due: {n},50 € (incl. 19 % MwSt.)",
        "Ship to \"Dock {n}\", path C:\\orders\\{n}.pdf",
        "Amount: $1,{n}.00 — payable within 30 days",
        "备注：请于{n}日前付款 😀",
        "Line {n}: 3 x widgets @ 4.50 EUR each",
    ];
    let mut s = String::new();
    let mut x: u64 = 0x2545F4914F6CDD1D;
    let mut n = 0u64;
    while s.len() < 1 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        n += 1;
        s.push_str(
            &lines[(x % lines.len() as u64) as usize].replace("{n}", &(x % 10_000 + n).to_string()),
        );
        s.push('\n');
    }
    s
}

fn best(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..runs).map(|_| f()).min().unwrap()
}

/// CPU time this thread has run (Linux's schedstat, in ns), which other processes on a
/// loaded machine do not inflate the way they do wall time; `None` elsewhere.
fn thread_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(
        s.split_whitespace().next()?.parse().ok()?,
    ))
}

/// Masks for each token of `tokens` through a fresh matcher: total time.
fn masks(c: &Constraint, tokens: &[u32]) -> Duration {
    let mut m = c.matcher();
    let mut mask = TokenMask::new(c.vocab().len());
    let mut total = Duration::ZERO;
    for &t in tokens {
        let t0 = Instant::now();
        m.mask(&mut mask);
        let d = t0.elapsed();
        if std::env::var_os("QUOTE_BENCH_STEPS").is_some() {
            eprint!("{:.0}us ", d.as_secs_f64() * 1e6);
        }
        total += d;
        assert!(mask.is_allowed(t), "token {t} refused");
        m.commit(t).unwrap();
    }
    total
}

fn main() {
    let which = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let models: Vec<RealModel> = match which.as_deref() {
        Some("gemma3") => vec![RealModel::Gemma3],
        Some("smollm2") => vec![RealModel::SmolLM2],
        _ => RealModel::ALL.to_vec(),
    };
    let src = source();
    if std::env::args().any(|a| a == "--automaton-only") {
        // For `time` on a loaded machine: CPU seconds of 10 builds.
        for _ in 0..10 {
            llamay_constrain::SpanAutomaton::new(&src, Default::default()).unwrap();
        }
        return;
    }
    let sources = Sources {
        input: Some(src.clone()),
        ..Sources::default()
    };
    let quoted = serde_json::json!({"type": "string", "maxLength": 64, "x-llamay-quote": true});
    let plain = serde_json::json!({"type": "string", "maxLength": 64});
    // A value that occurs in the source (its first line's invoice number and supplier).
    let value = src
        .lines()
        .next()
        .unwrap()
        .chars()
        .take(48)
        .collect::<String>();
    let text = serde_json::to_string(&value).unwrap();
    println!(
        "source: {} bytes; value {text} ({} bytes)",
        src.len(),
        text.len()
    );
    for m in models {
        let rv = real_vocab::load(m);
        let tokens = rv.tokenizer.encode(text.as_bytes(), false, false);
        let fresh = || {
            Arc::new(Vocabulary::new(
                rv.tokenizer.vocab_bytes(),
                rv.tokenizer.eog_ids(),
                &rv.tokenizer.control_ids(),
            ))
        };
        let compile = |schema: &serde_json::Value, vocab: Arc<Vocabulary>| {
            let (g, _) = schema_grammar_with(schema, &sources).unwrap();
            Constraint::from_grammar(&g, vocab).unwrap()
        };
        if let Some(p) = std::env::var_os("QUOTE_BENCH_PROFILE") {
            // One cold request (`=plain`: of the ordinary string), for a profiler
            // (`valgrind --tool=callgrind --toggle-collect='*quote::masks*'`).
            let schema = if p == "plain" { &plain } else { &quoted };
            let c = compile(schema, fresh());
            println!("{m:?}: cold masks {:?}", masks(&c, &tokens));
            continue;
        }
        let vocab = fresh();
        let sam = best(5, || {
            let t0 = Instant::now();
            let a = llamay_constrain::SpanAutomaton::new(&src, Default::default()).unwrap();
            let d = t0.elapsed();
            drop(a);
            d
        });
        let mut compile_cpu = Duration::MAX;
        let compile_quote = best(7, || {
            let (t0, c0) = (Instant::now(), thread_cpu());
            let c = compile(&quoted, vocab.clone());
            let d = t0.elapsed();
            if let (Some(a), Some(b)) = (c0, thread_cpu()) {
                compile_cpu = compile_cpu.min(b - a);
            }
            drop(c);
            d
        });
        let cold = |schema: &serde_json::Value| {
            best(7, || {
                let c = compile(schema, fresh());
                masks(&c, &tokens)
            })
        };
        let (cold_q, cold_p) = (cold(&quoted), cold(&plain));
        let warm = |schema: &serde_json::Value| {
            let c = compile(schema, fresh());
            masks(&c, &tokens);
            best(20, || masks(&c, &tokens))
        };
        let (warm_q, warm_p) = (warm(&quoted), warm(&plain));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "{m:?}: {} tokens; compile (1 MB quote, schema -> constraint) {:.1} ms wall, {:.1} ms CPU (suffix automaton alone {:.1} ms)\n  \
             masks cold: quoted {:.2} ms, ordinary {:.2} ms, ratio {:.2}\n  \
             masks warm: quoted {:.3} ms, ordinary {:.3} ms, ratio {:.2}",
            tokens.len(),
            ms(compile_quote),
            ms(compile_cpu),
            ms(sam),
            ms(cold_q),
            ms(cold_p),
            ms(cold_q) / ms(cold_p),
            ms(warm_q),
            ms(warm_p),
            ms(warm_q) / ms(warm_p)
        );
    }
}
