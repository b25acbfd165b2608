//! Models load on first use, unload after their keep-alive, and at most
//! `-max-loaded` stay loaded.

mod common;

use std::time::{Duration, Instant};

use common::serve::{client, post, Server};
use serde_json::{json, Value};

fn loaded(c: &reqwest::blocking::Client, s: &Server) -> Vec<String> {
    let v: Value = c.get(s.url("/api/ps")).send().unwrap().json().unwrap();
    let mut names: Vec<String> = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

fn ask(c: &reqwest::blocking::Client, s: &Server, model: &str) -> Value {
    let (st, v) = post(
        c,
        &s.url("/api/generate"),
        &json!({"model": model, "prompt": "hi", "stream": false, "options": {"num_predict": 2}}),
    );
    assert_eq!(st, 200, "{v}");
    v
}

#[test]
fn models_load_on_first_use_and_at_most_max_loaded_stay() {
    let s = Server::start_with(&["-max-loaded", "2"], &["alpha:1", "beta:1"]);
    let c = client();
    assert_eq!(loaded(&c, &s), vec![s.model.clone()]);
    // Store names and the serve model are all listed.
    let tags: Value = c.get(s.url("/api/tags")).send().unwrap().json().unwrap();
    let names: Vec<&str> = tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"alpha:1")
            && names.contains(&"beta:1")
            && names.contains(&s.model.as_str()),
        "{names:?}"
    );
    let v: Value = c.get(s.url("/v1/models")).send().unwrap().json().unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 3, "{v}");

    assert_eq!(ask(&c, &s, "alpha:1")["model"], "alpha:1");
    assert_eq!(loaded(&c, &s), ["SmolLM2-135M-Instruct.Q4_1", "alpha:1"]);
    // A third model evicts the least recently used idle one (the serve model).
    ask(&c, &s, "beta:1");
    assert_eq!(loaded(&c, &s), ["alpha:1", "beta:1"]);
    // keep_alive 0 on an empty generate unloads at once (Ollama's convention).
    let (st, v) = post(
        &c,
        &s.url("/api/generate"),
        &json!({"model": "alpha:1", "keep_alive": 0}),
    );
    assert_eq!(
        (st, v["done_reason"].as_str()),
        (200, Some("unload")),
        "{v}"
    );
    assert_eq!(loaded(&c, &s), ["beta:1"]);
    // Deleting a model from the store unloads it and it is then not found.
    let r = c
        .delete(s.url("/api/delete"))
        .json(&json!({"model": "beta:1"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(loaded(&c, &s).is_empty());
    let (st, _) = post(
        &c,
        &s.url("/api/chat"),
        &json!({"model": "beta:1", "messages": [{"role": "user", "content": "x"}]}),
    );
    assert_eq!(st, 404);
    // Copy makes a new name that loads.
    let (st, _) = post(
        &c,
        &s.url("/api/copy"),
        &json!({"source": "alpha:1", "destination": "gamma:2"}),
    );
    assert_eq!(st, 200);
    assert_eq!(ask(&c, &s, "gamma:2")["model"], "gamma:2");
}

#[test]
fn an_idle_model_unloads_after_its_keep_alive() {
    let s = Server::start(&["-keep-alive", "1"]);
    let c = client();
    ask(&c, &s, &s.model);
    let t0 = Instant::now();
    while !loaded(&c, &s).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(8), "still loaded");
        std::thread::sleep(Duration::from_millis(200));
    }
    // And it loads again on the next request.
    ask(&c, &s, &s.model);
    assert_eq!(loaded(&c, &s), vec![s.model.clone()]);
    // A per-request keep_alive outlives the default.
    ask_keep(&c, &s, "1m");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(loaded(&c, &s), vec![s.model.clone()]);
}

fn ask_keep(c: &reqwest::blocking::Client, s: &Server, keep: &str) {
    let (st, v) = post(
        c,
        &s.url("/api/chat"),
        &json!({"model": s.model, "messages": [{"role": "user", "content": "x"}], "stream": false, "keep_alive": keep, "options": {"num_predict": 1}}),
    );
    assert_eq!(st, 200, "{v}");
}

#[test]
fn the_exact_model_argument_names_the_model_on_every_shape_and_a_404_lists_the_names() {
    let s = Server::start(&[]);
    let c = client();
    let path = s.model_arg.as_str();
    let openai =
        json!({"model": path, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2});
    let (st, v) = post(&c, &s.url("/v1/chat/completions"), &openai);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["model"], s.model.as_str());
    let anthropic =
        json!({"model": path, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]});
    let (st, v) = post(&c, &s.url("/v1/messages"), &anthropic);
    assert_eq!(st, 200, "{v}");
    assert_eq!(ask(&c, &s, path)["model"], s.model.as_str());

    let (st, v) = post(
        &c,
        &s.url("/v1/chat/completions"),
        &json!({"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(st, 404, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("no-such-model") && msg.contains(&s.model) && msg.contains(path),
        "{msg}"
    );
}
