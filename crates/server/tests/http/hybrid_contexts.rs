//! Contexts of a hybrid model (Qwen 3.5: Gated DeltaNet layers keep a recurrent state
//! beside the full-attention layers' KV), in-process on the tiny random-weight files
//! (`scripts/make-hybrid-models`). A continuation through a context, through each of
//! eight forks and through its snapshot restored on another server over the same
//! store is the greedy text of the whole prompt computed from scratch; the snapshot
//! restored onto another model is refused with a 409 that says why.

use crate::common::{App, Setup};
use serde_json::{json, Value};

/// One word: the random weights' linear layers forget within a few tokens, so a
/// continuation this short is what shows a wrong recurrent state (a restored state of
/// zeros changes the text; after a 12-token question it did not).
const QUESTION: &str = " Station";

fn report() -> String {
    (0..30)
        .map(|i| format!("Station {i} recorded {} metres.", 100 + i * 7))
        .collect::<Vec<_>>()
        .join(" ")
}

fn server(name: &str, store_at: Option<std::path::PathBuf>) -> App {
    App::with(Setup {
        model: Some(llamay_testdata::hybrid_model(name)),
        store: true,
        store_at,
        ..Setup::default()
    })
}

/// The greedy continuation of `prompt` (through context `ctx`) and how many prompt
/// tokens were cached.
async fn complete(app: &App, ctx: Option<&str>, prompt: &str) -> (String, u64) {
    let body = json!({"model": app.model, "prompt": prompt, "max_tokens": 12,
                      "temperature": 0, "llamay_context": ctx});
    let r = app.post("/v1/completions", body).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let v: Value = r.json();
    (
        v["choices"][0]["text"].as_str().unwrap().to_string(),
        v["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contexts_forks_and_snapshots_of_hybrid_models_keep_the_text() {
    let name = "qwen35-F32";
    // From scratch, on a server of its own: the report and the question in one prompt.
    let fresh = complete(
        &server(name, None),
        None,
        &format!("{}{QUESTION}", report()),
    )
    .await;
    assert_eq!(fresh.1, 0, "nothing cached");

    let app = server(name, None);
    let r = app.post("/v1/contexts", json!({"prompt": report()})).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let ctx = r.json();
    let id = ctx["id"].as_str().unwrap().to_string();
    let tokens = ctx["tokens"].as_u64().unwrap();
    assert!(tokens > 300, "{ctx}");
    let through = complete(&app, Some(&id), QUESTION).await;
    assert_eq!(through, (fresh.0.clone(), tokens), "through the context");

    let r = app
        .post(&format!("/v1/contexts/{id}/fork?n=8"), json!({}))
        .await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let forks: Vec<String> = r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(forks.len(), 8);
    // All eight at once: each continues from its own copy of the shared state.
    let texts =
        futures_util::future::join_all(forks.iter().map(|f| complete(&app, Some(f), QUESTION)))
            .await;
    for (f, got) in forks.iter().zip(texts) {
        assert_eq!(got, (fresh.0.clone(), tokens), "fork {f}");
    }

    let r = app
        .post(&format!("/v1/contexts/{id}/snapshot"), json!({}))
        .await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let digest = r.json()["snapshot"].as_str().unwrap().to_string();

    // A restart: another server over the same store restores it.
    let restarted = server(name, app.store_dir());
    let r = restarted
        .post("/v1/contexts", json!({"snapshot": digest}))
        .await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let restored = r.json();
    assert_eq!(restored["tokens"], tokens);
    let rid = restored["id"].as_str().unwrap();
    assert_eq!(
        complete(&restarted, Some(rid), QUESTION).await,
        (fresh.0.clone(), tokens),
        "restored from its snapshot after a restart"
    );

    // Another hybrid model over the same store: a 409 naming the model file.
    let other = server("qwen35moe-F32", app.store_dir());
    let r = other
        .post("/v1/contexts", json!({"snapshot": digest}))
        .await;
    assert_eq!(r.status.as_u16(), 409, "{}", r.text);
    assert!(
        r.text.contains("does not fit model") && r.text.contains("model file"),
        "{}",
        r.text
    );
}
