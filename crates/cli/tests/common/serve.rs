//! Starts the real `llamay serve` binary on a free loopback port, with the SmolLM2
//! test model and an empty, private model store.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use llamay_testdata::{real_model, RealModel};
use serde_json::Value;

pub struct Server {
    pub base: String,
    pub model: String,
    /// What `-m` was given: the model file's path.
    pub model_arg: String,
    /// The `llamay serving` log line it printed at start.
    pub log_line: String,
    child: Child,
    /// The store, removed on drop unless it was given (`start_in_store`).
    _store: Option<TempDir>,
    pub store: PathBuf,
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Server {
    pub fn start(extra: &[&str]) -> Server {
        Self::start_with(extra, &[])
    }

    /// Starts a server whose store first gets the test model imported under each
    /// of `names`.
    pub fn start_with(extra: &[&str], names: &[&str]) -> Server {
        Self::start_model(&real_model(RealModel::SmolLM2), extra, names)
    }

    /// Like [`Server::start_with`], serving the GGUF file `model`.
    pub fn start_model(model: &std::path::Path, extra: &[&str], names: &[&str]) -> Server {
        let model = model.to_path_buf();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let store =
            std::env::temp_dir().join(format!("llamay-serve-test-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&store).unwrap();
        let mut s = Self::spawn(&model, extra, names, &store, port);
        s._store = Some(TempDir(store));
        s
    }

    /// A server on the store at `store`, which outlives it (a restart's second
    /// server sees what the first wrote).
    pub fn start_in_store(
        model: &std::path::Path,
        extra: &[&str],
        store: &std::path::Path,
    ) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::spawn(model, extra, &[], store, port)
    }

    fn spawn(
        model: &std::path::Path,
        extra: &[&str],
        names: &[&str],
        store: &std::path::Path,
        port: u16,
    ) -> Server {
        let model = model.to_path_buf();
        let store = store.to_path_buf();
        for name in names {
            let st = Command::new(env!("CARGO_BIN_EXE_llamay"))
                .arg("import")
                .arg(&model)
                .arg(name)
                .env("LLAMAY_MODELS", &store)
                .env("OLLAMA_MODELS", store.join("no-ollama"))
                .output()
                .unwrap();
            assert!(
                st.status.success(),
                "{}",
                String::from_utf8_lossy(&st.stderr)
            );
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_llamay"))
            .arg("serve")
            .arg("-m")
            .arg(&model)
            .args(["-addr", &format!("127.0.0.1:{port}")])
            .args(extra)
            .env("LLAMAY_MODELS", &store)
            .env("OLLAMA_MODELS", store.join("no-ollama"))
            .env_remove("LLAMAY_API_KEY")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The log line goes to stderr once the model is loaded; keep draining both
        // pipes so the server never blocks on a full pipe.
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || for _ in BufReader::new(stdout).lines() {});
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("llamay serve printed no log line");
        assert!(line.contains("msg=\"llamay serving\""), "{line}");
        let base = format!("http://127.0.0.1:{port}");
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "server not listening"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let name = model.file_stem().unwrap().to_string_lossy().into_owned();
        Server {
            base,
            model: name,
            model_arg: model.to_string_lossy().into_owned(),
            log_line: line,
            child,
            _store: None,
            store,
        }
    }

    /// Sends SIGTERM and waits up to `limit` for the process to end: its exit
    /// status (`None`: still running at the limit) and how long it took.
    pub fn terminate(&mut self, limit: Duration) -> (Option<std::process::ExitStatus>, Duration) {
        let st = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success(), "kill -TERM failed");
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (Some(status), t0.elapsed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        (None, t0.elapsed())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking client that never retries.
pub fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

/// POSTs JSON; returns the status and the body parsed as JSON (or a string).
pub fn post(c: &reqwest::blocking::Client, url: &str, body: &Value) -> (u16, Value) {
    let r = c.post(url).json(body).send().unwrap();
    let status = r.status().as_u16();
    let text = r.text().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The seed's order schema.
pub fn order_schema() -> Value {
    serde_json::from_str(llamay_testdata::PRODUCT_PAGE_ORDER_SCHEMA).unwrap()
}

/// Checks a document against the order schema's rules (hand-written: no validator
/// crate in the workspace).
pub fn check_order(doc: &Value) {
    let o = doc.as_object().expect("an object");
    let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["delivery", "lines", "order_id"], "{doc}");
    let id = o["order_id"].as_str().unwrap();
    assert!(
        (1..=6).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit()),
        "{doc}"
    );
    let lines = o["lines"].as_array().unwrap();
    assert!((1..=5).contains(&lines.len()), "{doc}");
    for l in lines {
        let l = l.as_object().unwrap();
        assert_eq!(l.len(), 3, "{doc}");
        assert!(l["item"].as_str().unwrap().chars().count() <= 40);
        let q = l["qty"].as_i64().unwrap();
        assert!((1..=999).contains(&q));
        let p = l["unit_price"].as_f64().unwrap();
        assert!(
            p >= 0.0 && ((p * 100.0).round() - p * 100.0).abs() < 1e-6,
            "{doc}"
        );
    }
    match &o["delivery"] {
        Value::Null => {}
        Value::Object(d) => {
            assert_eq!(d.len(), 2, "{doc}");
            assert!(d["city"].is_string());
            let pc = d["postcode"].as_str().unwrap();
            assert!(
                pc.len() == 5 && pc.bytes().all(|b| b.is_ascii_digit()),
                "{doc}"
            );
        }
        other => panic!("delivery {other}"),
    }
}

/// Splits an SSE body into (event, data) pairs.
pub fn sse_events(body: &str) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    for block in body.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut event = None;
        let mut data = String::new();
        for line in block.lines() {
            if let Some(e) = line.strip_prefix("event: ") {
                event = Some(e.to_string());
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push_str(d);
            } else {
                panic!("not an SSE line: {line:?}");
            }
        }
        out.push((event, data));
    }
    out
}

/// The JSON chunks of an OpenAI SSE stream, checking that it ends with `data: [DONE]`.
pub fn openai_chunks(body: &str) -> Vec<serde_json::Value> {
    let events = sse_events(body);
    assert_eq!(
        events.last().map(|e| e.1.as_str()),
        Some("[DONE]"),
        "{body}"
    );
    events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect()
}
