//! Compiled constraints are kept within a byte budget: a hundred distinct 400 KB
//! schemas leave the server's memory within the model, the budget and a margin.

mod common;

use common::serve::{client, post, Server};
use serde_json::{json, Value};

/// Resident memory of a process, from /proc.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// A schema of about 400 KB, distinct for each `seed`: 64 objects of 64 required
/// string properties with long names (within llamay's 64-property limit).
fn big_schema(seed: usize) -> Value {
    let inner = |j: usize| {
        let names: Vec<String> = (0..64)
            .map(|k| format!("s{seed:03}-{j:02}-{k:02}-abcdefghijklmnopqrstuvwxyz"))
            .collect();
        let props: serde_json::Map<String, Value> = names
            .iter()
            .map(|n| (n.clone(), json!({"type": "string", "maxLength": 4})))
            .collect();
        json!({"type": "object", "properties": props, "required": names})
    };
    let props: serde_json::Map<String, Value> =
        (0..64).map(|j| (format!("p{j:02}"), inner(j))).collect();
    let required: Vec<String> = (0..64).map(|j| format!("p{j:02}")).collect();
    json!({"type": "object", "properties": props, "required": required})
}

#[test]
fn a_hundred_large_schemas_stay_within_the_cache_budget() {
    const BUDGET_MB: u64 = 32;
    // Allocator slack, request buffers and compile temporaries.
    const MARGIN_MB: u64 = 96;
    let s = Server::start(&["-constraint-cache-mb", &BUDGET_MB.to_string()]);
    let c = client();
    let ask = |schema: Value| {
        let body = json!({"model": s.model, "messages": [{"role": "user", "content": "k"}],
            "max_tokens": 2, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}});
        let (st, v) = post(&c, &s.url("/v1/chat/completions"), &body);
        assert_eq!(st, 200, "{v}");
    };
    assert!(big_schema(0).to_string().len() > 390_000);
    ask(big_schema(0));
    let base = rss_bytes(s.pid());
    for i in 1..=100 {
        ask(big_schema(i));
    }
    let stats: Value = c.get(s.url("/v1/stats")).send().unwrap().json().unwrap();
    let cached = stats["models"][0]["constraint_cache_bytes"]
        .as_u64()
        .unwrap();
    assert!(cached <= BUDGET_MB << 20, "{stats}");
    assert!(
        stats["models"][0]["constraints_cached"].as_u64().unwrap() >= 1,
        "{stats}"
    );
    let grown = rss_bytes(s.pid()).saturating_sub(base);
    eprintln!(
        "cache {} MB in {} entries; RSS {} MB, grown {} MB",
        cached >> 20,
        stats["models"][0]["constraints_cached"],
        base >> 20,
        grown >> 20
    );
    assert!(
        grown <= (BUDGET_MB + MARGIN_MB) << 20,
        "RSS grew by {} MB over {} MB with a {BUDGET_MB} MB budget",
        grown >> 20,
        base >> 20
    );
}
