//! A model served out of an Ollama store is prompted through its template layer (a Go
//! template), with its system layer as the default system message and its params
//! layer's stop strings, as Ollama prompts it. The weights are Gemma 3 270M's, which
//! carry no Jinja template of their own, and the layer is Ollama's own
//! `gemma3-instruct` template.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use llamay_store::{Digest, Layer, Manifest};
use llamay_testdata::{real_model, shared_dir, RealModel};
use serde_json::{json, Value};

const SYSTEM: &str = "You answer in one short sentence.";

/// An Ollama `models` folder holding `name_path` (`registry.ollama.ai/library/x/tag`).
fn ollama_store(root: &Path, name_path: &str, template: &str) {
    let weights = std::fs::read(real_model(RealModel::Gemma3)).unwrap();
    let config =
        br#"{"model_format":"gguf","model_family":"gemma3","file_type":"Q4_K_M"}"#.to_vec();
    let blobs: Vec<(&str, Vec<u8>)> = vec![
        ("application/vnd.docker.container.image.v1+json", config),
        ("application/vnd.ollama.image.model", weights),
        (
            "application/vnd.ollama.image.template",
            template.as_bytes().to_vec(),
        ),
        (
            "application/vnd.ollama.image.system",
            SYSTEM.as_bytes().to_vec(),
        ),
        (
            "application/vnd.ollama.image.params",
            br#"{"stop":["<end_of_turn>"],"temperature":0.1}"#.to_vec(),
        ),
    ];
    let layer = |(media, bytes): &(&str, Vec<u8>)| Layer {
        media_type: media.to_string(),
        digest: Digest::of_bytes(bytes),
        size: bytes.len() as u64,
        from: None,
    };
    let manifest = Manifest::new(layer(&blobs[0]), blobs[1..].iter().map(layer).collect());
    let mpath = root.join("manifests").join(name_path);
    std::fs::create_dir_all(mpath.parent().unwrap()).unwrap();
    std::fs::write(&mpath, manifest.to_bytes()).unwrap();
    std::fs::create_dir_all(root.join("blobs")).unwrap();
    for (_, bytes) in &blobs {
        std::fs::write(
            root.join("blobs").join(Digest::of_bytes(bytes).file_name()),
            bytes,
        )
        .unwrap();
    }
}

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_ollama_models_template_layer_is_its_prompt() {
    let dir = std::env::temp_dir().join(format!("llamay-ollama-tmpl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ollama = dir.join("ollama");
    let template =
        std::fs::read_to_string(shared_dir().join("ollama-templates/gemma3-instruct.gotmpl"))
            .unwrap();
    ollama_store(
        &ollama,
        "registry.ollama.ai/library/gemma3-layered/latest",
        &template,
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = Serve(
        Command::new(env!("CARGO_BIN_EXE_llamay"))
            .args([
                "serve",
                "-m",
                "gemma3-layered",
                "-addr",
                &format!("127.0.0.1:{port}"),
                "-ctx",
                "1024",
            ])
            .env("LLAMAY_MODELS", dir.join("llamay"))
            .env("OLLAMA_MODELS", &ollama)
            .env_remove("LLAMAY_API_KEY")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::blocking::Client::new();
    let t0 = Instant::now();
    while http.get(format!("{base}/health")).send().is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the server did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let ask = |messages: Value| -> Value {
        let r = http
            .post(format!("{base}/v1/chat/completions"))
            .json(
                &json!({"model": "gemma3-layered", "messages": messages, "max_tokens": 8,
                          "temperature": 0, "llamay_echo_prompt": true}),
            )
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json().unwrap()
    };
    // The system layer stands in for a system message the request does not send; the
    // Go template puts it in the first user turn, as Ollama renders it.
    let v = ask(json!([{"role": "user", "content": "Hello, how are you?"}]));
    assert_eq!(
        v["llamay"]["prompt"],
        format!("<start_of_turn>user\n{SYSTEM}\n\nHello, how are you?<end_of_turn>\n<start_of_turn>model\n")
    );
    // A system message of the request's own wins; the rendering is Ollama's own text.
    let messages = json!([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello, how are you?"},
        {"role": "assistant", "content": "I'm doing great. How can I help you today?"},
        {"role": "user", "content": "I'd like to show off how chat templating works!"}]);
    let want = std::fs::read_to_string(
        shared_dir()
            .join("ollama-templates/testdata/gemma3-instruct.gotmpl/system-user-assistant-user"),
    )
    .unwrap();
    let v = ask(messages);
    assert_eq!(v["llamay"]["prompt"], want);
    // And the prompt generated from is that text: its token count is the server's.
    let prompt_tokens = v["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(prompt_tokens > 30 && prompt_tokens < 80, "{prompt_tokens}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
