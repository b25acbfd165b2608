//! Contexts of mixture-of-experts models, in-process: the tiny random-weight Qwen 3 MoE
//! and gpt-oss (`scripts/make-moe-models`; gpt-oss slides its even layers over 8
//! positions, so the context runs far past its window). A continuation through a
//! context, through each of its forks and through its snapshot restored is the same
//! greedy text as the whole prompt computed from scratch.

use crate::common::{App, Setup};
use serde_json::{json, Value};

const QUESTION: &str = "\nQuestion: what did station 3 record?\nAnswer:";

fn report() -> String {
    (0..12)
        .map(|i| format!("Station {i} recorded {} metres.", 100 + i * 7))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The greedy continuation of `body`'s prompt and how many prompt tokens were cached.
async fn complete(app: &App, body: Value) -> (String, u64) {
    let r = app.post("/v1/completions", body).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let v = r.json();
    (
        v["choices"][0]["text"].as_str().unwrap().to_string(),
        v["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contexts_forks_and_snapshots_of_expert_models_keep_the_text() {
    for name in ["qwen3moe-Q8_0", "gpt-oss-Q8_0"] {
        let app = App::with(Setup {
            model: Some(llamay_testdata::moe_model(name)),
            store: true,
            ..Setup::default()
        });
        let ask = |ctx: Option<&str>, prompt: &str| {
            json!({"model": app.model, "prompt": prompt, "max_tokens": 12, "temperature": 0,
                   "llamay_context": ctx})
        };
        // From scratch, on a server of its own (no cached block to share): the report
        // and the question in one prompt.
        let fresh = {
            let other = App::with(Setup {
                model: Some(llamay_testdata::moe_model(name)),
                ..Setup::default()
            });
            let mut body = ask(None, &format!("{}{QUESTION}", report()));
            body["model"] = json!(other.model);
            complete(&other, body).await
        };
        assert_eq!(fresh.1, 0, "{name}: nothing cached");

        let r = app.post("/v1/contexts", json!({"prompt": report()})).await;
        assert_eq!(r.status.as_u16(), 200, "{name}: {}", r.text);
        let ctx = r.json();
        let id = ctx["id"].as_str().unwrap().to_string();
        let tokens = ctx["tokens"].as_u64().unwrap();
        assert!(tokens > 64, "{name}: {ctx}");
        let (text, cached) = complete(&app, ask(Some(&id), QUESTION)).await;
        assert_eq!(text, fresh.0, "{name}: through the context");
        assert_eq!(cached, tokens, "{name}: the whole context is reused");

        let r = app
            .post(&format!("/v1/contexts/{id}/fork?n=2"), json!({}))
            .await;
        assert_eq!(r.status.as_u16(), 200, "{name}: {}", r.text);
        for fork in r.json()["data"].as_array().unwrap() {
            let fid = fork["id"].as_str().unwrap();
            assert_eq!(
                complete(&app, ask(Some(fid), QUESTION)).await,
                (text.clone(), tokens),
                "{name}: fork {fid}"
            );
        }

        let r = app
            .post(&format!("/v1/contexts/{id}/snapshot"), json!({}))
            .await;
        assert_eq!(r.status.as_u16(), 200, "{name}: {}", r.text);
        let digest = r.json()["snapshot"].as_str().unwrap().to_string();
        let r = app.post("/v1/contexts", json!({"snapshot": digest})).await;
        assert_eq!(r.status.as_u16(), 200, "{name}: {}", r.text);
        let restored = r.json();
        assert_eq!(restored["tokens"], tokens);
        let rid = restored["id"].as_str().unwrap();
        assert_ne!(rid, id);
        assert_eq!(
            complete(&app, ask(Some(rid), QUESTION)).await,
            (text.clone(), tokens),
            "{name}: restored from its snapshot"
        );
    }
}
