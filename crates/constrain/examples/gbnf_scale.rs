//! Parse and compile times of large generated GBNF grammars, to spot steps that grow
//! faster than the grammar.
//!
//! `cargo run --release -p llamay-constrain --example gbnf_scale [-- RULES]` (default
//! 14,000 rules; each shape is also timed at a quarter of that, so a super-linear step
//! shows as a ratio well above 4).

use llamay_constrain::{parse_gbnf, Constraint, TokenMask, Vocabulary};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Grammar shapes a generator might emit.
fn shapes(n: usize) -> Vec<(&'static str, String)> {
    let mut chain = String::from("root ::= r0\n");
    let mut deep = String::from("root ::= r0\n");
    let mut nullable = String::from("root ::= r0 \"end\"\n");
    let mut flat = String::from("root ::= ");
    let mut words = String::new();
    for i in 0..n {
        let last = i + 1 == n;
        // A literal or the next rule.
        chain += &format!("r{i} ::= \"é{i}\" r{} | \"x\"\r\n", i + 1);
        // Only the last rule ends: each rule's "can finish" waits on the next one's.
        deep += &if last {
            format!("r{i} ::= \"x\"\n")
        } else {
            format!("r{i} ::= \"a\" r{}\n", i + 1)
        };
        // Only the last rule is empty: each rule's nullability waits on the next one's.
        nullable += &if last {
            format!("r{i} ::= \"\"\n")
        } else {
            format!("r{i} ::= r{} \"b\"?\n", i + 1)
        };
        flat += &format!("{}w{i}", if i == 0 { "" } else { " | " });
        words += &format!("w{i} ::= \"word{i}\" [a-z]*\n");
    }
    chain += &format!("r{n} ::= \"x\"\n");
    flat += "\n";
    flat += &words;
    vec![
        ("chain", chain),
        ("deep", deep),
        ("nullable", nullable),
        ("flat", flat),
    ]
}

fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(14_000);
    let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let vocab = Arc::new(Vocabulary::new(toks, &[], &[]));
    println!("shape      rules   bytes     parse     compile   first mask");
    for rules in [n / 4, n] {
        for (name, text) in shapes(rules) {
            let mut g = None;
            let parse = time(|| g = Some(parse_gbnf(&text).unwrap()));
            let g = g.unwrap();
            let mut c = None;
            let compile = time(|| c = Some(Constraint::from_grammar(&g, vocab.clone()).unwrap()));
            let c = c.unwrap();
            let mut mask = TokenMask::new(vocab.len());
            let first = time(|| c.matcher().mask(&mut mask));
            println!(
                "{name:<9} {rules:>6} {:>7} {:>9.1?} {:>9.1?} {:>9.1?}",
                text.len(),
                parse,
                compile,
                first
            );
        }
    }
}
