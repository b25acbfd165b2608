//! Embeddings and rerank through the real binary: `llamay serve -embed -rerank` beside
//! the SmolLM2 generation model, and `llamay embed`, checked against llama.cpp's
//! references (`scripts/embed-reference`).

mod common;

use std::process::Command;

use common::serve::{client, post, Server};
use llamay_testdata::{cosine, embed_model, embed_reference, f32s_from_base64};
use serde_json::{json, Value};

fn reference(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(embed_reference(name)).unwrap()).unwrap()
}

fn start() -> Server {
    let (e, r) = (embed_model("minilm"), embed_model("reranker"));
    Server::start(&[
        "-embed",
        e.to_str().unwrap(),
        "-rerank",
        r.to_str().unwrap(),
        "-ctx",
        "1024",
    ])
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// A sample of the reference sentences: every 5th, and the longest ones.
fn sample(r: &Value) -> Vec<(String, Vec<f32>)> {
    r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(i, c)| i % 5 == 0 || c["ids"].as_array().unwrap().len() > 500)
        .map(|(_, c)| {
            (
                c["text"].as_str().unwrap().to_string(),
                f32s_from_base64(c["embedding"].as_str().unwrap()),
            )
        })
        .collect()
}

#[test]
fn embedding_routes_match_llama_cpp_in_each_shape() {
    let s = start();
    let c = client();
    let r = reference("minilm");
    let cases = sample(&r);
    let texts: Vec<&str> = cases.iter().map(|(t, _)| t.as_str()).collect();
    // OpenAI: many strings in one request, unit vectors, usage.
    let (st, body) = post(&c, &s.url("/v1/embeddings"), &json!({"input": texts}));
    assert_eq!(st, 200, "{body}");
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), cases.len());
    for (i, (d, (text, want))) in data.iter().zip(&cases).enumerate() {
        assert_eq!(d["index"], i);
        let got = floats(&d["embedding"]);
        let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        assert!(
            cosine(&got, want) >= 0.9999,
            "{text:?}: {}",
            cosine(&got, want)
        );
    }
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert_eq!(body["object"], "list");
    // Token ids as input give the same vector as the text.
    let ids = &r["cases"][0]["ids"];
    let (st, b2) = post(&c, &s.url("/v1/embeddings"), &json!({"input": [ids]}));
    assert_eq!(st, 200, "{b2}");
    assert!(cosine(&floats(&b2["data"][0]["embedding"]), &cases[0].1) >= 0.9999);
    // dimensions: truncated and renormalised.
    let (st, b3) = post(
        &c,
        &s.url("/v1/embeddings"),
        &json!({"input": texts[0], "dimensions": 32}),
    );
    assert_eq!(st, 200, "{b3}");
    let d32 = floats(&b3["data"][0]["embedding"]);
    assert_eq!(d32.len(), 32);
    assert!(cosine(&d32, &cases[0].1[..32]) >= 0.9999);
    // Ollama /api/embed and the older /api/embeddings.
    let (st, b4) = post(
        &c,
        &s.url("/api/embed"),
        &json!({"input": [texts[1], texts[2]]}),
    );
    assert_eq!(st, 200, "{b4}");
    assert_eq!(b4["embeddings"].as_array().unwrap().len(), 2);
    assert!(cosine(&floats(&b4["embeddings"][1]), &cases[2].1) >= 0.9999);
    assert!(b4["prompt_eval_count"].as_u64().unwrap() > 0);
    assert!(b4["total_duration"].as_u64().unwrap() > 0);
    let (st, b5) = post(&c, &s.url("/api/embeddings"), &json!({"prompt": texts[3]}));
    assert_eq!(st, 200, "{b5}");
    assert!(cosine(&floats(&b5["embedding"]), &cases[3].1) >= 0.9999);
}

#[test]
fn bad_inputs_are_400s_in_each_shape() {
    let s = start();
    let c = client();
    let long = "word ".repeat(700);
    // Too long: the index is named (OpenAI never truncates).
    let (st, b) = post(
        &c,
        &s.url("/v1/embeddings"),
        &json!({"input": ["ok", long]}),
    );
    assert_eq!(st, 400, "{b}");
    assert!(
        b["error"]["message"].as_str().unwrap().contains("input[1]"),
        "{b}"
    );
    assert_eq!(b["error"]["type"], "invalid_request_error");
    // Ollama truncates unless told not to.
    let (st, b) = post(&c, &s.url("/api/embed"), &json!({"input": ["ok", long]}));
    assert_eq!(st, 200, "{b}");
    let (st, b) = post(
        &c,
        &s.url("/api/embed"),
        &json!({"input": ["ok", long], "truncate": false}),
    );
    assert_eq!(st, 400, "{b}");
    assert!(b["error"].as_str().unwrap().contains("input[1]"), "{b}");
    // Empty input.
    for body in [
        json!({"input": []}),
        json!({"input": ""}),
        json!({"input": ["a", ""]}),
    ] {
        let (st, b) = post(&c, &s.url("/v1/embeddings"), &body);
        assert_eq!(st, 400, "{body}: {b}");
    }
    let (st, b) = post(&c, &s.url("/api/embed"), &json!({"input": []}));
    assert_eq!(st, 400, "{b}");
    // A generation request to an encoder names the capability, in each shape.
    let embed_name = s_name(&c, &s);
    let (st, b) = post(
        &c,
        &s.url("/v1/chat/completions"),
        &json!({"model": embed_name, "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(st, 400, "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("generation"),
        "{b}"
    );
    let (st, b) = post(
        &c,
        &s.url("/api/chat"),
        &json!({"model": embed_name, "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(st, 400, "{b}");
    assert!(
        b["error"].as_str().unwrap().contains("embedding model"),
        "{b}"
    );
    // A rerank request to the generation model names the capability it lacks.
    let (st, b) = post(
        &c,
        &s.url("/rerank"),
        &json!({"model": s.model, "query": "q", "documents": ["d"]}),
    );
    assert_eq!(st, 400, "{b}");
    assert!(
        b["error"]["message"].as_str().unwrap().contains("rerank"),
        "{b}"
    );
    // The generation model still generates.
    let (st, b) = post(
        &c,
        &s.url("/v1/chat/completions"),
        &json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}),
    );
    assert_eq!(st, 200, "{b}");
}

/// The `-embed` model's name, as the embedding route reports it.
fn s_name(c: &reqwest::blocking::Client, s: &Server) -> String {
    let (_, b) = post(c, &s.url("/v1/embeddings"), &json!({"input": "x"}));
    b["model"].as_str().unwrap().to_string()
}

/// The generation model serves embeddings too (its last token's normed hidden state,
/// as llama.cpp pools a decoder), when a request names it.
#[test]
fn decoder_embeddings_match_llama_cpp() {
    let s = start();
    let c = client();
    let r = reference("smollm2");
    let cases = r["last"].as_array().unwrap();
    let texts: Vec<&str> = cases.iter().map(|c| c["text"].as_str().unwrap()).collect();
    let (st, b) = post(
        &c,
        &s.url("/v1/embeddings"),
        &json!({"model": s.model, "input": texts}),
    );
    assert_eq!(st, 200, "{b}");
    for (d, case) in b["data"].as_array().unwrap().iter().zip(cases) {
        let want = f32s_from_base64(case["embedding"].as_str().unwrap());
        let cos = cosine(&floats(&d["embedding"]), &want);
        assert!(cos >= 0.999, "{}: {cos}", case["text"]);
    }
}

#[test]
fn rerank_matches_llama_cpp_sorted_with_indices() {
    let s = start();
    let c = client();
    let r = reference("reranker");
    let sets = r["sets"].as_array().unwrap();
    for (k, set) in sets.iter().enumerate() {
        let docs = set["documents"].as_array().unwrap();
        let path = if k % 2 == 0 { "/rerank" } else { "/v1/rerank" };
        // Half the sets send documents as {text}.
        let sent: Vec<Value> = docs
            .iter()
            .map(|d| {
                if k % 3 == 0 {
                    json!({"text": d})
                } else {
                    d.clone()
                }
            })
            .collect();
        let (st, b) = post(
            &c,
            &s.url(path),
            &json!({"query": set["query"], "documents": sent, "return_documents": true}),
        );
        assert_eq!(st, 200, "{b}");
        let results = b["results"].as_array().unwrap();
        assert_eq!(results.len(), docs.len());
        let mut last = f64::INFINITY;
        for res in results {
            let i = res["index"].as_u64().unwrap() as usize;
            let score = res["relevance_score"].as_f64().unwrap();
            let want = set["results"][i]["score"].as_f64().unwrap();
            assert!(
                (score - want).abs() <= 1e-3,
                "set {k} doc {i}: {score} vs {want}"
            );
            assert!(score <= last, "sorted by relevance_score");
            last = score;
            assert_eq!(res["document"]["text"], docs[i]);
        }
    }
    let (st, b) = post(
        &c,
        &s.url("/rerank"),
        &json!({"query": "cat", "documents": ["a", "b", "c"], "top_n": 2}),
    );
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["results"].as_array().unwrap().len(), 2);
    assert!(b["results"][0].get("document").is_none());
    for body in [
        json!({"query": "", "documents": ["a"]}),
        json!({"query": "q", "documents": []}),
        json!({"query": "q", "documents": [3]}),
    ] {
        let (st, b) = post(&c, &s.url("/rerank"), &body);
        assert_eq!(st, 400, "{body}: {b}");
        assert_eq!(b["error"]["code"], 400, "llama.cpp's error shape: {b}");
    }
}

/// Eight streaming chat clients keep generating, with no error, while embeddings are
/// requested over and over on the same server.
#[test]
fn generation_streams_while_embedding() {
    let s = start();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let embedder = scope.spawn(|| {
            let c = client();
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) || n < 3 {
                let texts: Vec<String> = (0..32)
                    .map(|i| format!("sentence number {i} {n}"))
                    .collect();
                let (st, b) = post(&c, &s.url("/v1/embeddings"), &json!({"input": texts}));
                assert_eq!(st, 200, "{b}");
                n += 1;
            }
            n
        });
        let streams: Vec<_> = (0..8)
            .map(|k| {
                let s = &s;
                scope.spawn(move || {
                    let resp = client()
                        .post(s.url("/v1/chat/completions"))
                        .json(&json!({
                            "messages": [{"role": "user", "content": format!("Count to {k}.")}],
                            "max_tokens": 24, "stream": true, "temperature": 0
                        }))
                        .send()
                        .unwrap();
                    assert_eq!(resp.status().as_u16(), 200);
                    let body = resp.text().unwrap();
                    assert!(body.contains("data: [DONE]"), "{body}");
                    assert!(!body.contains("\"error\""), "{body}");
                    body.matches("\"content\"").count()
                })
            })
            .collect();
        for st in streams {
            assert!(st.join().unwrap() > 1, "the stream carried text");
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(embedder.join().unwrap() >= 3);
    });
}

#[test]
fn embed_command_prints_one_vector_per_line() {
    let r = reference("minilm");
    let cases = sample(&r);
    let dir = std::env::temp_dir().join(format!("llamay-embed-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("texts.txt");
    let lines: Vec<&str> = cases
        .iter()
        .map(|(t, _)| t.as_str())
        .filter(|t| !t.is_empty() && !t.contains('\n'))
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let model = embed_model("minilm");
    let out = Command::new(env!("CARGO_BIN_EXE_llamay"))
        .args([
            "embed",
            "-m",
            model.to_str().unwrap(),
            "-f",
            file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let got: Vec<Vec<f32>> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), lines.len());
    for (g, line) in got.iter().zip(&lines) {
        let want = &cases.iter().find(|(t, _)| t == line).unwrap().1;
        assert!(cosine(g, want) >= 0.9999, "{line:?}");
    }
    // Texts as arguments; an empty one fails naming it.
    let out = Command::new(env!("CARGO_BIN_EXE_llamay"))
        .args(["embed", "-m", model.to_str().unwrap(), "one", ""])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("text[1]"));
    let _ = std::fs::remove_dir_all(&dir);
}
