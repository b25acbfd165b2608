//! Pulling: Ollama's registry protocol (manifest, then sha256-addressed blobs),
//! resumable and verified; direct `.gguf` URLs are in `url_pull`.
//!
//! Concurrency discipline: a pull holds the store lock shared from its first blob
//! to its manifest, so collecting unused blobs never takes one it has fetched. A
//! blob is downloaded only while holding the lock file `blobs/sha256-<hex>.lock`;
//! whoever gets the lock second finds the finished blob and skips it. Blobs enter
//! `blobs/` by rename after their sha256 checked out (a blob already there is
//! hashed again before it counts), manifests by atomic rename after all their blobs
//! are in, so two pulls of one model (threads or processes) both succeed with one
//! copy on disk.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::header::ACCEPT;
use reqwest::StatusCode;

use crate::digest::Digest;
use crate::download::{one_line, Transfer};
use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{link_or_copy, FileLock, StoreLock};
use crate::manifest::{Layer, Manifest, MAX_MANIFEST_BYTES, MEDIA_MANIFEST, MEDIA_MODEL};
use crate::name::ModelName;
use crate::outbound::{self, find_refused, PublicOnly};
use crate::progress::{Progress, PullEvent};
use crate::store::Store;

/// Blobs larger than this are refused (a manifest's sizes are untrusted).
pub(crate) const MAX_BLOB_BYTES: u64 = 1 << 40;
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
    /// Allow loopback, link-local and private addresses (after DNS, and across
    /// redirects). Off by default: the CLI's own pulls turn it on (the user typed
    /// the address), a server's only when its operator said so.
    pub allow_private: bool,
    /// Let a URL pull replace a different model already stored under its name.
    pub replace: bool,
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
            allow_private: false,
            replace: false,
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

    pub(crate) fn client(&self) -> Result<reqwest::Client> {
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("llamay/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(self.connect_timeout)
            .read_timeout(self.read_timeout)
            .https_only(!self.insecure)
            .danger_accept_invalid_certs(self.insecure)
            .redirect(outbound::redirect_policy(self.insecure, self.allow_private));
        if !self.allow_private {
            builder = builder.dns_resolver(Arc::new(PublicOnly));
        }
        builder
            .build()
            .map_err(|e| StoreError::Other(format!("cannot set up HTTP: {}", one_line(&e))))
    }

    /// The scheme `insecure` allows, and (unless `allow_private`) no literal
    /// non-public IP: checked before anything is sent.
    pub(crate) fn check_target(&self, url: &str) -> Result<()> {
        if !(url.starts_with("https://") || (self.insecure && url.starts_with("http://"))) {
            return Err(if url.starts_with("http://") {
                StoreError::Other(format!("{url} is plain http; pass --insecure to allow it"))
            } else {
                StoreError::Other(format!("{url} is not an http(s) URL"))
            });
        }
        if !self.allow_private {
            let parsed = reqwest::Url::parse(url)
                .map_err(|e| StoreError::Other(format!("{url} is not a valid URL: {e}")))?;
            outbound::check_literal(&parsed)?;
        }
        Ok(())
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

/// Maps a request failure to a one-line error: a refused address, unreachable
/// (connect or timeout) or a registry error.
pub(crate) fn net_error(e: reqwest::Error, name: &str, registry: &str) -> StoreError {
    if let Some(r) = find_refused(&e) {
        r.into()
    } else if e.is_connect() || e.is_timeout() {
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
/// already present (verified), then the manifest is written; the blobs only the
/// manifest it replaced used are collected.
pub async fn pull(
    store: &Store,
    name: &ModelName,
    opts: &PullOptions,
    progress: &dyn Progress,
) -> Result<PullReport> {
    let (report, replaced) = pull_held(store, name, opts, progress).await?;
    // After the store lock is released: collection needs it exclusive.
    store.collect_unused(&replaced);
    Ok(report)
}

/// [`pull`] under the store lock; also returns the blobs of the manifest it replaced.
async fn pull_held(
    store: &Store,
    name: &ModelName,
    opts: &PullOptions,
    progress: &dyn Progress,
) -> Result<(PullReport, Vec<Digest>)> {
    let base = opts.registry_base(name);
    opts.check_target(&base)?;
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
    let _writing = hold_store(store).await?;
    let mut present = 0;
    for layer in &blobs {
        let url = format!("{base}/v2/{}/blobs/{}", name.repository(), layer.digest);
        if !fetch_blob(store, &client, &url, layer, opts, progress).await? {
            present += 1;
        }
    }
    progress.on_event(PullEvent::Status("writing manifest".into()));
    let replaced = store
        .own_manifest(name)
        .map(|m| m.digests())
        .unwrap_or_default();
    store.write_manifest_bytes(name, &bytes)?;
    progress.on_event(PullEvent::Status("success".into()));
    let report = PullReport {
        name: name.clone(),
        manifest_digest: Digest::of_bytes(&bytes),
        blobs: blobs.len(),
        blobs_present: present,
    };
    Ok((report, replaced))
}

/// Takes the store lock shared, off the async threads (a collection may be running).
pub(crate) async fn hold_store(store: &Store) -> Result<StoreLock> {
    let path = store.lock_path();
    tokio::task::spawn_blocking(move || StoreLock::shared(&path))
        .await
        .map_err(|e| StoreError::Other(format!("lock task failed: {e}")))?
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
pub(crate) struct Throttle<'a> {
    last: Mutex<Option<Instant>>,
    emit: &'a (dyn Fn(u64) + Sync),
    total: u64,
}

impl<'a> Throttle<'a> {
    pub(crate) fn new(emit: &'a (dyn Fn(u64) + Sync), total: u64) -> Throttle<'a> {
        Throttle {
            last: Mutex::new(None),
            emit,
            total,
        }
    }

    pub(crate) fn bytes(&self, completed: u64) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let due = last.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY);
        if due || completed == self.total {
            *last = Some(Instant::now());
            (self.emit)(completed);
        }
    }
}

/// Takes the blob's lock off the async threads (waiting may take a whole download).
pub(crate) async fn lock_blob(path: &Path) -> Result<FileLock> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || FileLock::acquire(&path))
        .await
        .map_err(|e| StoreError::Other(format!("lock task failed: {e}")))?
}

/// Makes sure one blob is in the store, verified. Returns true if this call
/// downloaded it.
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
    let final_path = store.blob_path(digest);
    let with_suffix = |s: &str| final_path.with_file_name(format!("{}{s}", digest.file_name()));
    // Under the lock: another pull may be finishing it.
    let _lock = lock_blob(&with_suffix(".lock")).await?;
    if store.has_blob(layer) {
        // The right size is not the right contents: hash before it counts.
        if hash_file(&final_path).await? == *digest {
            emit(layer.size);
            return Ok(false);
        }
        std::fs::remove_file(&final_path).at(&final_path)?;
    }
    // A blob in the Ollama store (verified here too): link instead of downloading.
    if let Some(theirs) = store.ollama_blob(layer) {
        if hash_file(&theirs).await? == *digest {
            link_or_copy(&theirs, &final_path)?;
            emit(layer.size);
            return Ok(false);
        }
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
    let throttle = Throttle::new(&emit, layer.size);
    transfer.run(&|n| throttle.bytes(n)).await?;
    progress.on_event(PullEvent::Status("verifying sha256 digest".into()));
    let actual = hash_file(&transfer.data).await?;
    if &actual != digest {
        // A corrupt blob cannot be resumed into a good one: drop it entirely.
        transfer.discard();
        return Err(StoreError::DigestMismatch {
            expected: digest.to_string(),
            actual: actual.to_string(),
        });
    }
    std::fs::rename(&transfer.data, &final_path).at(&final_path)?;
    let _ = std::fs::remove_file(&transfer.state);
    Ok(true)
}

pub(crate) async fn hash_file(path: &Path) -> Result<Digest> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || Digest::of_file(&path))
        .await
        .map_err(|e| StoreError::Other(format!("hash task failed: {e}")))?
}
