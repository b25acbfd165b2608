//! Pulling: Ollama's registry protocol (manifest, then sha256-addressed blobs)
//! and direct `.gguf` URLs, both resumable and verified.
//!
//! Concurrency discipline: a blob is downloaded only while holding the lock file
//! `blobs/sha256-<hex>.lock`; whoever gets the lock second finds the finished blob
//! and skips it. Blobs enter `blobs/` by rename after their sha256 checked out,
//! manifests by atomic rename after all their blobs are in, so two pulls of one
//! model (threads or processes) both succeed with one copy on disk.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_LENGTH};
use reqwest::StatusCode;

use crate::digest::Digest;
use crate::download::{one_line, Transfer};
use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{link_or_copy, FileLock};
use crate::manifest::{
    Layer, Manifest, ModelConfig, MAX_MANIFEST_BYTES, MEDIA_MANIFEST, MEDIA_MODEL,
};
use crate::name::{url_file_name, ModelName, ModelRef};
use crate::progress::{Progress, PullEvent};
use crate::store::{check_gguf_magic, ResolvedModel, Store};

/// Blobs larger than this are refused (a manifest's sizes are untrusted).
const MAX_BLOB_BYTES: u64 = 1 << 40;
/// Progress events for one blob are at least this far apart (except the last).
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// How to pull.
#[derive(Clone, Debug)]
pub struct PullOptions {
    /// Base URL of the registry (`https://host[:port]`), used instead of the name's
    /// host. When `None`, `$LLAMAY_REGISTRY` if set, else `https://<host>`
    /// (`http://` with `insecure`).
    pub registry: Option<String>,
    /// Allow plain-http registries and unverified TLS certificates.
    pub insecure: bool,
    /// Blobs larger than this are fetched as several ranges in parallel.
    pub chunk_size: u64,
    /// Ranges fetched at once.
    pub parallel: usize,
    /// Further attempts per range after a network failure (each resumes).
    pub retries: u32,
    pub connect_timeout: Duration,
    /// A connection silent for this long counts as failed.
    pub read_timeout: Duration,
}

impl Default for PullOptions {
    fn default() -> Self {
        PullOptions {
            registry: None,
            insecure: false,
            chunk_size: 64 << 20,
            parallel: 4,
            retries: 3,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
        }
    }
}

impl PullOptions {
    /// The registry base URL for `name`, without a trailing `/`.
    pub fn registry_base(&self, name: &ModelName) -> String {
        let base = self
            .registry
            .clone()
            .or_else(|| {
                std::env::var("LLAMAY_REGISTRY")
                    .ok()
                    .filter(|s| !s.is_empty())
            })
            .unwrap_or_else(|| {
                let scheme = if self.insecure { "http" } else { "https" };
                format!("{scheme}://{}", name.host)
            });
        base.trim_end_matches('/').to_string()
    }

    fn client(&self) -> Result<reqwest::Client> {
        reqwest::Client::builder()
            .user_agent(concat!("llamay/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(self.connect_timeout)
            .read_timeout(self.read_timeout)
            .https_only(!self.insecure)
            .danger_accept_invalid_certs(self.insecure)
            .build()
            .map_err(|e| StoreError::Other(format!("cannot set up HTTP: {}", one_line(&e))))
    }

    fn check_scheme(&self, url: &str) -> Result<()> {
        if url.starts_with("https://") || (self.insecure && url.starts_with("http://")) {
            Ok(())
        } else if url.starts_with("http://") {
            Err(StoreError::Other(format!(
                "{url} is plain http; pass --insecure to allow it"
            )))
        } else {
            Err(StoreError::Other(format!("{url} is not an http(s) URL")))
        }
    }
}

/// What a pull did.
#[derive(Clone, Debug)]
pub struct PullReport {
    pub name: ModelName,
    /// sha256 of the manifest as stored.
    pub manifest_digest: Digest,
    /// Blobs the model has (config included).
    pub blobs: usize,
    /// Blobs this pull found already in the store.
    pub blobs_present: usize,
}

/// Maps a request failure to a one-line error: unreachable (connect or timeout)
/// or a registry error.
fn net_error(e: reqwest::Error, name: &str, registry: &str) -> StoreError {
    if e.is_connect() || e.is_timeout() {
        StoreError::Unreachable {
            name: name.to_string(),
            registry: registry.to_string(),
            reason: root_cause(&e),
        }
    } else {
        StoreError::Registry(one_line(&e))
    }
}

/// The innermost cause (`Connection refused`, a DNS failure...): the outer layers
/// only repeat the URL.
fn root_cause(e: &dyn std::error::Error) -> String {
    let mut cause = e;
    while let Some(c) = cause.source() {
        cause = c;
    }
    cause.to_string().replace('\n', " ")
}

/// Pulls `name` from its registry into `store`: manifest, then every blob not
/// already present (verified), then the manifest is written.
pub async fn pull(
    store: &Store,
    name: &ModelName,
    opts: &PullOptions,
    progress: &dyn Progress,
) -> Result<PullReport> {
    let base = opts.registry_base(name);
    opts.check_scheme(&base)?;
    let client = opts.client()?;
    progress.on_event(PullEvent::Status("pulling manifest".into()));
    let manifest_url = format!("{base}/v2/{}/manifests/{}", name.repository(), name.tag);
    let resp = client
        .get(&manifest_url)
        .header(ACCEPT, MEDIA_MANIFEST)
        .send()
        .await
        .map_err(|e| net_error(e, &name.short(), &base))?;
    match resp.status() {
        s if s.is_success() => {}
        StatusCode::NOT_FOUND => {
            return Err(StoreError::NotInRegistry {
                name: name.short(),
                registry: base,
            })
        }
        s @ (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) => {
            return Err(StoreError::Registry(format!(
                "{base} refused the manifest of '{}' (HTTP {s}); registry authentication is not supported",
                name.short()
            )))
        }
        s => {
            return Err(StoreError::Registry(format!(
                "GET {manifest_url}: HTTP {s}"
            )))
        }
    }
    let bytes = read_limited(resp, MAX_MANIFEST_BYTES)
        .await
        .map_err(|e| match e {
            StoreError::Registry(r) => {
                StoreError::Registry(format!("manifest of '{}': {r}", name.short()))
            }
            e => e,
        })?;
    let manifest = Manifest::parse(&bytes).map_err(|reason| StoreError::BadManifest {
        path: manifest_url.clone(),
        reason,
    })?;
    if manifest.layer(MEDIA_MODEL).is_none() {
        return Err(StoreError::NoModelLayer(name.short()));
    }
    let mut blobs: Vec<&Layer> = Vec::new();
    for l in manifest.blobs() {
        if l.size > MAX_BLOB_BYTES {
            return Err(StoreError::BadManifest {
                path: manifest_url.clone(),
                reason: format!("blob {} claims {} bytes", l.digest, l.size),
            });
        }
        if !blobs.iter().any(|b| b.digest == l.digest) {
            blobs.push(l);
        }
    }
    let mut present = 0;
    for layer in &blobs {
        let url = format!("{base}/v2/{}/blobs/{}", name.repository(), layer.digest);
        if !fetch_blob(store, &client, &url, layer, opts, progress).await? {
            present += 1;
        }
    }
    progress.on_event(PullEvent::Status("writing manifest".into()));
    store.write_manifest_bytes(name, &bytes)?;
    progress.on_event(PullEvent::Status("success".into()));
    Ok(PullReport {
        name: name.clone(),
        manifest_digest: Digest::of_bytes(&bytes),
        blobs: blobs.len(),
        blobs_present: present,
    })
}

/// Reads a response body, refusing more than `max` bytes.
async fn read_limited(resp: reqwest::Response, max: usize) -> Result<Vec<u8>> {
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(StoreError::Registry(format!(
            "body larger than {max} bytes"
        )));
    }
    let mut out = Vec::new();
    let mut body = resp.bytes_stream();
    while let Some(piece) = body.next().await {
        let piece = piece.map_err(|e| StoreError::Registry(one_line(&e)))?;
        if out.len() + piece.len() > max {
            return Err(StoreError::Registry(format!(
                "body larger than {max} bytes"
            )));
        }
        out.extend_from_slice(&piece);
    }
    Ok(out)
}

/// Calls `progress` with throttled byte counts.
struct Throttle<'a> {
    last: Mutex<Option<Instant>>,
    emit: &'a (dyn Fn(u64) + Sync),
    total: u64,
}

impl Throttle<'_> {
    fn bytes(&self, completed: u64) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let due = last.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY);
        if due || completed == self.total {
            *last = Some(Instant::now());
            (self.emit)(completed);
        }
    }
}

/// Takes the blob's lock off the async threads (waiting may take a whole download).
async fn lock_blob(path: &Path) -> Result<FileLock> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || FileLock::acquire(&path))
        .await
        .map_err(|e| StoreError::Other(format!("lock task failed: {e}")))?
}

/// Makes sure one blob is in the store. Returns true if this call downloaded it.
async fn fetch_blob(
    store: &Store,
    client: &reqwest::Client,
    url: &str,
    layer: &Layer,
    opts: &PullOptions,
    progress: &dyn Progress,
) -> Result<bool> {
    let digest = &layer.digest;
    let emit = |completed| {
        progress.on_event(PullEvent::Blob {
            digest: digest.clone(),
            total: layer.size,
            completed,
        })
    };
    if store.has_blob(layer) {
        emit(layer.size);
        return Ok(false);
    }
    let final_path = store.blob_path(digest);
    let with_suffix = |s: &str| final_path.with_file_name(format!("{}{s}", digest.file_name()));
    let _lock = lock_blob(&with_suffix(".lock")).await?;
    // Another pull may have finished it while we waited for the lock.
    if store.has_blob(layer) {
        emit(layer.size);
        return Ok(false);
    }
    // Ollama verified its blobs when it pulled them: link instead of downloading.
    if let Some(theirs) = store.ollama_blob(layer) {
        link_or_copy(&theirs, &final_path)?;
        emit(layer.size);
        return Ok(false);
    }
    let transfer = Transfer {
        client,
        url: url.to_string(),
        data: with_suffix(".partial"),
        state: with_suffix(".partial.json"),
        total: layer.size,
        chunk_size: opts.chunk_size,
        parallel: opts.parallel,
        retries: opts.retries,
    };
    let throttle = Throttle {
        last: Mutex::new(None),
        emit: &emit,
        total: layer.size,
    };
    transfer.run(&|n| throttle.bytes(n)).await?;
    progress.on_event(PullEvent::Status("verifying sha256 digest".into()));
    let actual = hash_file(&transfer.data).await?;
    if &actual != digest {
        // A corrupt blob cannot be resumed into a good one: drop it entirely.
        let _ = std::fs::remove_file(&transfer.data);
        let _ = std::fs::remove_file(&transfer.state);
        return Err(StoreError::DigestMismatch {
            expected: digest.to_string(),
            actual: actual.to_string(),
        });
    }
    std::fs::rename(&transfer.data, &final_path).at(&final_path)?;
    let _ = std::fs::remove_file(&transfer.state);
    Ok(true)
}

async fn hash_file(path: &Path) -> Result<Digest> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || Digest::of_file(&path))
        .await
        .map_err(|e| StoreError::Other(format!("hash task failed: {e}")))?
}

/// The store name a URL pull gives its file: the file name without `.gguf`.
pub fn url_model_name(url: &str) -> Result<ModelName> {
    let file = url_file_name(url)?;
    ModelName::from_file_stem(&file[..file.len() - ".gguf".len()])
}

/// Pulls a `.gguf` file by URL (following redirects, resumable), names it after
/// the file and writes a manifest so it lists like a registry model.
pub async fn pull_url(
    store: &Store,
    url: &str,
    opts: &PullOptions,
    progress: &dyn Progress,
) -> Result<PullReport> {
    let name = url_model_name(url)?;
    let file_name = url_file_name(url)?;
    opts.check_scheme(url)?;
    let client = opts.client()?;
    let host = url.split('/').nth(2).unwrap_or(url).to_string();
    let resp = client
        .head(url)
        .send()
        .await
        .map_err(|e| net_error(e, url, &host))?;
    if !resp.status().is_success() {
        return Err(StoreError::Registry(format!(
            "HEAD {url}: HTTP {}",
            resp.status()
        )));
    }
    // `content_length()` reports the (empty) body of a HEAD; the header has the size.
    let total = resp
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .filter(|&n| n <= MAX_BLOB_BYTES)
        .ok_or_else(|| StoreError::Registry(format!("{url} did not state a usable file size")))?;
    let key = Digest::of_bytes(url.as_bytes());
    let stem = store.blobs_dir().join(format!("url-{}", &key.hex()[..32]));
    let with_suffix = |s: &str| stem.with_file_name(format!("url-{}{s}", &key.hex()[..32]));
    let _lock = lock_blob(&with_suffix(".lock")).await?;
    let emit = |completed| {
        progress.on_event(PullEvent::File {
            file_name: file_name.clone(),
            total,
            completed,
        })
    };
    // Already pulled (perhaps by a concurrent pull we waited for): nothing to do.
    if let Some(done) = already_pulled(store, &name, total) {
        emit(total);
        progress.on_event(PullEvent::Status("success".into()));
        return Ok(done);
    }
    let transfer = Transfer {
        client: &client,
        url: url.to_string(),
        data: with_suffix(".partial"),
        state: with_suffix(".partial.json"),
        total,
        chunk_size: opts.chunk_size,
        parallel: opts.parallel,
        retries: opts.retries,
    };
    let throttle = Throttle {
        last: Mutex::new(None),
        emit: &emit,
        total,
    };
    transfer.run(&|n| throttle.bytes(n)).await?;
    progress.on_event(PullEvent::Status("verifying sha256 digest".into()));
    let discard = || {
        let _ = std::fs::remove_file(&transfer.data);
        let _ = std::fs::remove_file(&transfer.state);
    };
    if let Err(e) = check_gguf_magic(&transfer.data) {
        discard();
        return Err(e);
    }
    let digest = hash_file(&transfer.data).await?;
    let layer = Layer {
        media_type: MEDIA_MODEL.to_string(),
        digest: digest.clone(),
        size: total,
        from: None,
    };
    if store.has_blob(&layer) {
        discard();
    } else {
        let final_path = store.blob_path(&digest);
        std::fs::rename(&transfer.data, &final_path).at(&final_path)?;
        let _ = std::fs::remove_file(&transfer.state);
    }
    progress.on_event(PullEvent::Status("writing manifest".into()));
    store.write_model_manifest(&name, layer, &ModelConfig::default())?;
    progress.on_event(PullEvent::Status("success".into()));
    let manifest_digest = Digest::of_file(&store.manifest_path(&name))?;
    Ok(PullReport {
        name,
        manifest_digest,
        blobs: 2,
        blobs_present: 0,
    })
}

/// The report for a URL model already in llamay's store with a GGUF of `size`.
fn already_pulled(store: &Store, name: &ModelName, size: u64) -> Option<PullReport> {
    let bytes = std::fs::read(store.manifest_path(name)).ok()?;
    let manifest = Manifest::parse(&bytes).ok()?;
    let layer = manifest.layer(MEDIA_MODEL)?;
    (layer.size == size && store.has_blob(layer)).then(|| PullReport {
        name: name.clone(),
        manifest_digest: Digest::of_bytes(&bytes),
        blobs: manifest.blobs().count(),
        blobs_present: manifest.blobs().count(),
    })
}

/// Resolves a model, pulling it first when it is a name (or URL) not in the store.
pub async fn ensure(
    store: &Store,
    model: &str,
    opts: &PullOptions,
    progress: &dyn Progress,
) -> Result<ResolvedModel> {
    let (name, url) = match ModelRef::parse(model)? {
        ModelRef::File(_) => return store.resolve(model),
        ModelRef::Url(url) => (url_model_name(&url)?, Some(url)),
        ModelRef::Name(name) => (name, None),
    };
    if !store.contains(&name)? {
        match &url {
            Some(url) => pull_url(store, url, opts, progress).await?,
            None => pull(store, &name, opts, progress).await?,
        };
    }
    store.resolve_name(&name)
}

/// Blocking forms for the CLI (each runs its own small runtime; do not call them
/// from inside an async runtime — use the async functions there).
pub mod blocking {
    use super::*;

    fn runtime() -> Result<tokio::runtime::Runtime> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Other(format!("cannot start the async runtime: {e}")))
    }

    /// [`super::pull`], blocking.
    pub fn pull(
        store: &Store,
        name: &ModelName,
        opts: &PullOptions,
        progress: &dyn Progress,
    ) -> Result<PullReport> {
        runtime()?.block_on(super::pull(store, name, opts, progress))
    }

    /// [`super::pull_url`], blocking.
    pub fn pull_url(
        store: &Store,
        url: &str,
        opts: &PullOptions,
        progress: &dyn Progress,
    ) -> Result<PullReport> {
        runtime()?.block_on(super::pull_url(store, url, opts, progress))
    }

    /// [`super::ensure`], blocking.
    pub fn ensure(
        store: &Store,
        model: &str,
        opts: &PullOptions,
        progress: &dyn Progress,
    ) -> Result<ResolvedModel> {
        runtime()?.block_on(super::ensure(store, model, opts, progress))
    }
}
