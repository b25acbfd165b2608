//! Eight requests carrying 14,000-rule grammars at once: parsing and compiling them
//! happens off the async runtime's threads, so `/health` keeps answering.

mod common;

use std::time::{Duration, Instant};

use common::serve::{client, Server};
use serde_json::json;

/// A rule name in base 36, to keep 14,000 rules under the 256 KiB grammar limit.
fn name(mut i: usize) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut s = Vec::new();
    loop {
        s.push(digits[i % 36]);
        i /= 36;
        if i == 0 {
            break;
        }
    }
    s.reverse();
    format!("r{}", String::from_utf8(s).unwrap())
}

/// A chain of `n` rules, each naming the next (about 16 bytes a rule).
fn chain(n: usize) -> String {
    let mut g = String::from("root::=r0\n");
    for i in 0..n - 1 {
        g.push_str(&format!("{}::=\"a\" {}\n", name(i), name(i + 1)));
    }
    g.push_str(&format!("{}::=\"a\"\n", name(n - 1)));
    g
}

#[test]
fn health_answers_within_100_ms_while_eight_huge_grammars_compile() {
    let s = Server::start(&[]);
    let grammar = chain(14_000);
    assert!(grammar.len() < 256 << 10, "{} bytes", grammar.len());
    let body = json!({"model": s.model, "messages": [{"role": "user", "content": "a"}], "max_tokens": 2, "llamay_grammar": grammar});
    let senders: Vec<_> = (0..8)
        .map(|_| {
            let (url, body) = (s.url("/v1/chat/completions"), body.clone());
            std::thread::spawn(move || {
                let r = client().post(url).json(&body).send().unwrap();
                r.status().as_u16()
            })
        })
        .collect();
    let c = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut worst = Duration::ZERO;
    let mut probes = 0;
    while !senders.iter().all(|t| t.is_finished()) {
        let t0 = Instant::now();
        let r = c.get(s.url("/health")).send().unwrap();
        assert_eq!(r.status().as_u16(), 200);
        worst = worst.max(t0.elapsed());
        probes += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    for t in senders {
        assert_eq!(t.join().unwrap(), 200);
    }
    assert!(
        probes >= 3,
        "the grammars compiled too fast to probe ({probes} probes)"
    );
    assert!(
        worst < Duration::from_millis(100),
        "/health took {worst:?} at worst over {probes} probes"
    );
}
