//! A small Ollama-protocol registry on loopback for the pull tests, serving
//! manifests and blobs (with `Range`, a redirect like the real registry's, and
//! fault injection), plus helpers to build models from the tiny GGUF fixtures.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use llamay_store::{
    Digest, Layer, Manifest, PullOptions, MEDIA_CONFIG, MEDIA_MODEL, MEDIA_PARAMS, MEDIA_SYSTEM,
    MEDIA_TEMPLATE,
};

/// One request the registry saw: its path and `Range` header.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub range: Option<String>,
}

impl Seen {
    /// The first byte asked for (0 without a Range).
    pub fn range_start(&self) -> u64 {
        self.range
            .as_deref()
            .and_then(|r| r.strip_prefix("bytes="))
            .and_then(|r| r.split('-').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }
}

#[derive(Default)]
pub struct Inner {
    /// (repository, tag) -> manifest bytes
    pub manifests: HashMap<(String, String), Vec<u8>>,
    /// digest string -> bytes served (may differ from the digest on purpose)
    pub blobs: HashMap<String, Vec<u8>>,
    /// file name -> bytes, served at /files/<name>
    pub files: HashMap<String, Vec<u8>>,
    /// digest -> close the connection after this many body bytes, once
    pub drop_after: HashMap<String, u64>,
    /// pause between 64 KiB body pieces, to make transfers overlap
    pub piece_delay: Option<Duration>,
    /// answer every request with the whole body (200), as servers without Range do
    pub ignore_range: bool,
    pub seen: Vec<Seen>,
    /// body bytes sent per digest
    pub served: HashMap<String, u64>,
    /// key -> a size to claim instead of the real one: a whole-body answer (and a
    /// HEAD) says `Content-Length: <claim>`, a range answer states the real size
    /// in `Content-Range`
    pub claimed_size: HashMap<String, u64>,
    /// key -> (bytes, gate): after this many body bytes, wait until the gate opens
    pub hold: HashMap<String, (u64, tokio::sync::watch::Receiver<bool>)>,
}

/// A running test registry.
pub struct Registry {
    pub addr: SocketAddr,
    pub inner: Arc<Mutex<Inner>>,
}

impl Registry {
    pub fn start() -> Registry {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let (tx, rx) = std::sync::mpsc::channel();
        let state = inner.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                let app = Router::new()
                    .route("/v2/{ns}/{model}/manifests/{tag}", get(manifest))
                    .route("/v2/{ns}/{model}/blobs/{digest}", get(blob_redirect))
                    .route("/store/{digest}", get(blob))
                    .route("/files/{name}", get(file))
                    .with_state(state);
                axum::serve(listener, app).await.unwrap();
            });
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("registry started");
        Registry { addr, inner }
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Pull options aimed at this registry, with small chunks and short timeouts.
    /// It is on loopback, so private pulls are allowed.
    pub fn options(&self) -> PullOptions {
        PullOptions {
            registry: Some(self.base()),
            insecure: true,
            chunk_size: 256 << 10,
            parallel: 4,
            retries: 0,
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(10),
            allow_private: true,
            replace: false,
        }
    }

    /// Serves `model` as `library/<repo>:<tag>`; returns the manifest.
    pub fn add_model(&self, repo: &str, tag: &str, model: &TestModel) -> Manifest {
        let mut g = self.inner.lock().unwrap();
        for (_, bytes) in &model.blobs {
            g.blobs
                .insert(Digest::of_bytes(bytes).to_string(), bytes.clone());
        }
        g.manifests.insert(
            (format!("library/{repo}"), tag.to_string()),
            model.manifest.to_bytes(),
        );
        model.manifest.clone()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.inner.lock().unwrap().seen.clone()
    }

    /// Stops every answer for `key` after `bytes` body bytes until the returned
    /// gate is opened (`send(true)`).
    pub fn hold_after(&self, key: &str, bytes: u64) -> tokio::sync::watch::Sender<bool> {
        let (tx, rx) = tokio::sync::watch::channel(false);
        self.inner
            .lock()
            .unwrap()
            .hold
            .insert(key.to_string(), (bytes, rx));
        tx
    }

    pub fn served(&self, digest: &Digest) -> u64 {
        *self
            .inner
            .lock()
            .unwrap()
            .served
            .get(&digest.to_string())
            .unwrap_or(&0)
    }
}

/// A model's blobs and manifest, built from a tiny GGUF.
pub struct TestModel {
    pub gguf: PathBuf,
    pub gguf_digest: Digest,
    /// (media type, bytes), config first
    pub blobs: Vec<(String, Vec<u8>)>,
    pub manifest: Manifest,
}

pub const TEMPLATE: &str = "{{ .System }}\n{{ .Prompt }}";
pub const SYSTEM: &str = "You are a tiny test model.";
pub const PARAMS: &str = r#"{"stop":["<|end|>"],"temperature":0.5}"#;

impl TestModel {
    pub fn from_gguf(gguf: &Path, file_type: &str) -> TestModel {
        let weights = std::fs::read(gguf).unwrap();
        let gguf_digest = Digest::of_bytes(&weights);
        let config = format!(
            r#"{{"model_format":"gguf","model_family":"llama","file_type":"{file_type}","rootfs":{{"type":"layers","diff_ids":["{gguf_digest}"]}}}}"#
        );
        let blobs = vec![
            (MEDIA_CONFIG.to_string(), config.into_bytes()),
            (MEDIA_MODEL.to_string(), weights),
            (MEDIA_TEMPLATE.to_string(), TEMPLATE.as_bytes().to_vec()),
            (MEDIA_SYSTEM.to_string(), SYSTEM.as_bytes().to_vec()),
            (MEDIA_PARAMS.to_string(), PARAMS.as_bytes().to_vec()),
        ];
        TestModel {
            gguf: gguf.to_path_buf(),
            gguf_digest,
            manifest: manifest_of(&blobs),
            blobs,
        }
    }

    /// The model with one more layer (`media`, `bytes`), e.g. a vision projector.
    pub fn with_layer(mut self, media: &str, bytes: Vec<u8>) -> TestModel {
        self.blobs.push((media.to_string(), bytes));
        self.manifest = manifest_of(&self.blobs);
        self
    }

    /// Lays the model out in an Ollama-style `models` folder.
    pub fn write_ollama_store(&self, root: &Path, name_path: &str) {
        let mpath = root.join("manifests").join(name_path);
        std::fs::create_dir_all(mpath.parent().unwrap()).unwrap();
        std::fs::write(&mpath, self.manifest.to_bytes()).unwrap();
        std::fs::create_dir_all(root.join("blobs")).unwrap();
        for (_, bytes) in &self.blobs {
            let d = Digest::of_bytes(bytes);
            std::fs::write(root.join("blobs").join(d.file_name()), bytes).unwrap();
        }
    }
}

/// The manifest of `blobs` (config first).
fn manifest_of(blobs: &[(String, Vec<u8>)]) -> Manifest {
    let layer = |(media, bytes): &(String, Vec<u8>)| Layer {
        media_type: media.clone(),
        digest: Digest::of_bytes(bytes),
        size: bytes.len() as u64,
        from: None,
    };
    Manifest::new(layer(&blobs[0]), blobs[1..].iter().map(layer).collect())
}

/// The tiny fixture GGUF whose file name contains `part`.
pub fn tiny(part: &str) -> PathBuf {
    llamay_testdata::tiny_models()
        .into_iter()
        .find(|p| p.file_name().unwrap().to_string_lossy().contains(part))
        .unwrap_or_else(|| panic!("no tiny model matching {part}"))
}

/// Every file name in a folder (empty if it does not exist).
pub fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn record(st: &Arc<Mutex<Inner>>, path: String, headers: &HeaderMap) {
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    st.lock().unwrap().seen.push(Seen { path, range });
}

async fn manifest(
    State(st): State<Arc<Mutex<Inner>>>,
    UrlPath((ns, model, tag)): UrlPath<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    record(&st, format!("/v2/{ns}/{model}/manifests/{tag}"), &headers);
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    if accept != Some("application/vnd.docker.distribution.manifest.v2+json") {
        return (StatusCode::BAD_REQUEST, "wrong Accept").into_response();
    }
    let g = st.lock().unwrap();
    match g.manifests.get(&(format!("{ns}/{model}"), tag)) {
        Some(m) => (
            [(
                header::CONTENT_TYPE,
                "application/vnd.docker.distribution.manifest.v2+json",
            )],
            m.clone(),
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#,
        )
            .into_response(),
    }
}

/// Like registry.ollama.ai, blob requests are redirected elsewhere.
async fn blob_redirect(
    State(st): State<Arc<Mutex<Inner>>>,
    UrlPath((ns, model, digest)): UrlPath<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    record(&st, format!("/v2/{ns}/{model}/blobs/{digest}"), &headers);
    (
        StatusCode::TEMPORARY_REDIRECT,
        [(header::LOCATION, format!("/store/{digest}"))],
    )
        .into_response()
}

async fn blob(
    State(st): State<Arc<Mutex<Inner>>>,
    UrlPath(digest): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    record(&st, format!("/store/{digest}"), &headers);
    let (bytes, drop_after, delay, ignore_range) = {
        let mut g = st.lock().unwrap();
        let Some(b) = g.blobs.get(&digest).cloned() else {
            return StatusCode::NOT_FOUND.into_response();
        };
        let drop_after = g.drop_after.remove(&digest);
        (b, drop_after, g.piece_delay, g.ignore_range)
    };
    let headers = if ignore_range {
        HeaderMap::new()
    } else {
        headers
    };
    serve_ranged(st, digest, bytes, &headers, drop_after, delay)
}

async fn file(
    State(st): State<Arc<Mutex<Inner>>>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    record(&st, format!("/files/{name}"), &headers);
    let (bytes, delay) = {
        let g = st.lock().unwrap();
        let Some(b) = g.files.get(&name).cloned() else {
            return StatusCode::NOT_FOUND.into_response();
        };
        (b, g.piece_delay)
    };
    serve_ranged(st, name, bytes, &headers, None, delay)
}

/// Serves `bytes` honouring a single `Range: bytes=a-[b]`, optionally closing the
/// connection after `drop_after` body bytes.
fn serve_ranged(
    st: Arc<Mutex<Inner>>,
    key: String,
    bytes: Vec<u8>,
    headers: &HeaderMap,
    drop_after: Option<u64>,
    delay: Option<Duration>,
) -> Response {
    let total = bytes.len() as u64;
    let (claimed, hold) = {
        let g = st.lock().unwrap();
        (g.claimed_size.get(&key).copied(), g.hold.get(&key).cloned())
    };
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|r| r.strip_prefix("bytes="))
        .map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, ""));
            let a: u64 = a.parse().unwrap_or(0);
            let b: u64 = b
                .parse()
                .map(|b: u64| b.min(total - 1))
                .unwrap_or(total - 1);
            (a, b)
        });
    let (status, start, end) = match range {
        Some((a, b)) if a <= b && a < total => (StatusCode::PARTIAL_CONTENT, a, b + 1),
        Some(_) => return StatusCode::RANGE_NOT_SATISFIABLE.into_response(),
        None => (StatusCode::OK, 0, total),
    };
    let body_bytes = Bytes::from(bytes).slice(start as usize..end as usize);
    let len = body_bytes.len() as u64;
    let limit = drop_after.map_or(len, |n| n.min(len));
    let stream = async_stream(
        st,
        key,
        body_bytes,
        limit,
        drop_after.is_some(),
        delay,
        hold,
    );
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    let stated = match claimed {
        Some(c) if status == StatusCode::OK => c,
        _ => len,
    };
    h.insert(header::CONTENT_LENGTH, stated.into());
    h.insert(header::ACCEPT_RANGES, "bytes".parse().unwrap());
    if status == StatusCode::PARTIAL_CONTENT {
        h.insert(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{total}", end - 1)
                .parse()
                .unwrap(),
        );
    }
    resp
}

/// The body as 64 KiB pieces; after `limit` bytes, an error if `fail` (hyper then
/// drops the connection mid-body); after `hold`'s bytes, a wait for its gate.
fn async_stream(
    st: Arc<Mutex<Inner>>,
    key: String,
    body: Bytes,
    limit: u64,
    fail: bool,
    delay: Option<Duration>,
    hold: Option<(u64, tokio::sync::watch::Receiver<bool>)>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    futures_util::stream::unfold(0u64, move |sent| {
        let (st, key, body) = (st.clone(), key.clone(), body.clone());
        let hold = hold.clone();
        async move {
            if let Some((after, mut gate)) = hold.clone() {
                if sent >= after {
                    let _ = gate.wait_for(|open| *open).await;
                }
            }
            if sent >= limit {
                if fail && sent < body.len() as u64 {
                    // Let the bytes already sent leave the socket before the drop.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    return Some((
                        Err(std::io::Error::other("injected connection drop")),
                        u64::MAX,
                    ));
                }
                return None;
            }
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            let mut n = (64u64 << 10).min(limit - sent);
            if let Some((after, gate)) = &hold {
                if sent < *after && !*gate.borrow() {
                    n = n.min(after - sent);
                }
            }
            let piece = body.slice(sent as usize..(sent + n) as usize);
            *st.lock().unwrap().served.entry(key).or_default() += n;
            Some((Ok(piece), sent + n))
        }
    })
}

pub fn name(s: &str) -> llamay_store::ModelName {
    llamay_store::ModelName::parse(s).unwrap()
}

/// An empty store in a temporary folder (removed with the guard).
pub fn fresh_store() -> (tempfile::TempDir, llamay_store::Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = llamay_store::Store::new(dir.path().join("models"), None);
    (dir, store)
}
