//! Named contexts over HTTP on the real binary: create, continue from every API
//! shape (`llamay_context`) with the cached tokens in each shape's usage, fork,
//! snapshot, restart, restore (refused for another KV type); errors in each API's
//! own shape; the prefix cache's figures in `/v1/stats`.

mod common;

use std::time::Duration;

use common::serve::{client, post, Server};
use llamay_testdata::{real_model, RealModel};
use serde_json::{json, Value};

fn get(c: &reqwest::blocking::Client, url: &str) -> (u16, Value) {
    let r = c.get(url).send().unwrap();
    (r.status().as_u16(), r.json().unwrap())
}

/// A prompt of a few hundred tokens.
fn report() -> String {
    (0..60)
        .map(|i| {
            format!(
                "Station {i} recorded a river level of {} metres.",
                100 + i * 7
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn complete(c: &reqwest::blocking::Client, s: &Server, body: Value) -> (String, u64) {
    let (st, v) = post(c, &s.url("/v1/completions"), &body);
    assert_eq!(st, 200, "{v}");
    (
        v["choices"][0]["text"].as_str().unwrap().to_string(),
        v["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap(),
    )
}

#[test]
fn contexts_continue_fork_snapshot_and_restore_across_a_restart() {
    let c = client();
    let model = real_model(RealModel::SmolLM2);
    let mut s = Server::start_with(&[], &["other"]);
    let (st, ctx) = post(&c, &s.url("/v1/contexts"), &json!({"prompt": report()}));
    assert_eq!(st, 200, "{ctx}");
    let id = ctx["id"].as_str().unwrap().to_string();
    let tokens = ctx["tokens"].as_u64().unwrap();
    assert!(tokens > 300, "{ctx}");
    let (st, listed) = get(&c, &s.url("/v1/contexts"));
    assert_eq!(st, 200);
    assert!(listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["id"] == id.as_str()));
    assert_eq!(
        get(&c, &s.url(&format!("/v1/contexts/{id}"))).1["tokens"],
        tokens
    );

    let ask = |ctx: &str| {
        json!({"prompt": "\nQuestion: what did station 3 record?\nAnswer:", "max_tokens": 12,
               "temperature": 0, "llamay_context": ctx})
    };
    let (text, cached) = complete(&c, &s, ask(&id));
    assert_eq!(cached, tokens, "the whole context is reused");
    assert!(!text.is_empty());
    // Forks share the context: each continues it the same way.
    let (st, forks) = post(
        &c,
        &s.url(&format!("/v1/contexts/{id}/fork?n=3")),
        &json!({}),
    );
    assert_eq!(st, 200, "{forks}");
    let forks: Vec<String> = forks["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(forks.len(), 3);
    for f in &forks {
        assert_eq!(complete(&c, &s, ask(f)), (text.clone(), tokens), "fork {f}");
    }

    // Every generation route takes the context, and says what was cached its way.
    let (st, v) = post(
        &c,
        &s.url("/v1/messages"),
        &json!({"max_tokens": 4, "llamay_context": id,
                "messages": [{"role": "user", "content": "What did station 3 record?"}]}),
    );
    assert_eq!(st, 200, "{v}");
    assert!(
        v["usage"]["cache_read_input_tokens"].as_u64().unwrap() > 0,
        "{v}"
    );
    let (st, v) = post(
        &c,
        &s.url("/api/generate"),
        &json!({"prompt": " Station 3?", "stream": false, "llamay_context": id,
                "options": {"num_predict": 4}}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["llamay"]["cached_tokens"].as_u64().unwrap(),
        tokens,
        "{v}"
    );

    // Errors, each in its API's shape.
    let gone = json!({"max_tokens": 2, "llamay_context": "ctx_nope",
                      "messages": [{"role": "user", "content": "hi"}]});
    let (st, v) = post(&c, &s.url("/v1/chat/completions"), &gone);
    assert_eq!(st, 404, "{v}");
    assert_eq!(v["error"]["type"], "not_found_error", "{v}");
    let (st, v) = post(&c, &s.url("/v1/messages"), &gone);
    assert_eq!((st, v["type"].as_str()), (404, Some("error")), "{v}");
    let (st, v) = post(
        &c,
        &s.url("/api/chat"),
        &json!({"llamay_context": "ctx_nope", "stream": false,
                "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert!(st == 404 && v["error"].is_string(), "{st} {v}");
    let (st, v) = post(
        &c,
        &s.url("/v1/completions"),
        &json!({"model": "other", "prompt": "x", "max_tokens": 1, "llamay_context": id}),
    );
    assert_eq!(st, 400, "a context of another model: {v}");
    let (st, v) = post(
        &c,
        &s.url(&format!("/v1/contexts/{id}/fork?n=0")),
        &json!({}),
    );
    assert_eq!(st, 400, "{v}");
    let (st, v) = post(
        &c,
        &s.url("/v1/contexts"),
        &json!({"prompt": "a", "messages": []}),
    );
    assert_eq!(st, 400, "{v}");
    let (st, v) = post(
        &c,
        &s.url("/v1/contexts"),
        &json!({"snapshot": "sha256:0000000000000000000000000000000000000000000000000000000000000000"}),
    );
    assert_eq!(st, 404, "{v}");

    // The prefix cache's figures.
    let (_, stats) = get(&c, &s.url("/v1/stats"));
    let kv = &stats["models"][0]["kv_cache"];
    assert!(kv["cached_tokens"].as_u64().unwrap() >= 4 * tokens, "{kv}");
    assert!(kv["cached_blocks"].as_u64().unwrap() > 0 && kv["bound_bytes"].as_u64().unwrap() > 0);

    // Snapshot, restart, restore: the same continuation.
    let (st, snap) = post(
        &c,
        &s.url(&format!("/v1/contexts/{id}/snapshot")),
        &json!({}),
    );
    assert_eq!(st, 200, "{snap}");
    let digest = snap["snapshot"].as_str().unwrap().to_string();
    assert!(digest.starts_with("sha256:"), "{snap}");
    let (st, v) = get(&c, &s.url(&format!("/v1/contexts/{id}")));
    assert_eq!(st, 200, "{v}");
    let store = s.store.clone();
    let _ = s.terminate(Duration::from_secs(20));

    let mut f16 = Server::start_in_store(&model, &["-kv", "f16"], &store);
    let (st, v) = post(&c, &f16.url("/v1/contexts"), &json!({"snapshot": digest}));
    assert_eq!(st, 409, "another KV type: {v}");
    let (st, v) = post(&c, &f16.url("/v1/completions"), &ask(&id));
    assert_eq!(st, 404, "contexts do not outlive the server: {v}");
    let _ = f16.terminate(Duration::from_secs(20));

    let mut again = Server::start_in_store(&model, &[], &store);
    let (st, restored) = post(&c, &again.url("/v1/contexts"), &json!({"snapshot": digest}));
    assert_eq!(st, 200, "{restored}");
    assert_eq!(restored["tokens"], tokens);
    assert_eq!(restored["snapshot"], digest.as_str());
    let rid = restored["id"].as_str().unwrap();
    assert_eq!(complete(&c, &again, ask(rid)), (text, tokens), "restored");
    let (st, _) = c
        .delete(again.url(&format!("/v1/contexts/{rid}")))
        .send()
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(st, 200);
    assert_eq!(get(&c, &again.url(&format!("/v1/contexts/{rid}"))).0, 404);
    let _ = again.terminate(Duration::from_secs(20));
    let _ = std::fs::remove_dir_all(&store);
}

/// A pool too small for a context is a 507 naming the pool, not a crash.
#[test]
fn a_full_pool_refuses_contexts_with_507() {
    let c = client();
    let s = Server::start(&["-kv-cache-mb", "1"]);
    let (st, v) = post(&c, &s.url("/v1/contexts"), &json!({"prompt": report()}));
    assert_eq!(st, 507, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("-kv-cache-mb"),
        "{v}"
    );
    // Ordinary requests still run.
    let (st, v) = post(
        &c,
        &s.url("/v1/completions"),
        &json!({"prompt": "Hello", "max_tokens": 2}),
    );
    assert_eq!(st, 200, "{v}");
}
