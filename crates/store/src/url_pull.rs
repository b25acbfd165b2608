//! Pulling a `.gguf` file by URL: named after the file, resumable and verified,
//! and never taking over a name that holds another model unless asked to.
//!
//! Each URL pull records which GGUF its URL gave (`urls/<key>.json`). A name made
//! by this very URL may be pulled again (already done once the stored blob hashes
//! right, else fetched anew); any other name already in the store is refused
//! (`StoreError::Exists`) before anything is sent, unless `replace` is set, and
//! even then the manifest is rewritten only when the new file differs.

use reqwest::header::CONTENT_LENGTH;
use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::download::Transfer;
use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{atomic_create, atomic_write};
use crate::manifest::{Layer, ModelConfig, MEDIA_MODEL};
use crate::name::{url_file_name, url_model_name, ModelName};
use crate::progress::{Progress, PullEvent};
use crate::pull::{
    hash_file, hold_store, lock_blob, net_error, PullOptions, PullReport, Throttle, MAX_BLOB_BYTES,
};
use crate::store::{check_gguf_magic, Store};

/// Which GGUF a URL gave when it was last pulled.
#[derive(Serialize, Deserialize)]
struct UrlRecord {
    url: String,
    digest: Digest,
}

/// A URL's short key: names its lock, its partial download and its record.
fn url_key(url: &str) -> String {
    Digest::of_bytes(url.as_bytes()).hex()[..32].to_string()
}

fn record_path(store: &Store, url: &str) -> std::path::PathBuf {
    store.urls_dir().join(format!("{}.json", url_key(url)))
}

fn read_record(store: &Store, url: &str) -> Option<Digest> {
    let bytes = std::fs::read(record_path(store, url)).ok()?;
    let r: UrlRecord = serde_json::from_slice(&bytes).ok()?;
    (r.url == url).then_some(r.digest)
}

fn write_record(store: &Store, url: &str, digest: &Digest) -> Result<()> {
    let r = UrlRecord {
        url: url.to_string(),
        digest: digest.clone(),
    };
    let bytes = serde_json::to_vec(&r).expect("a record always serialises");
    atomic_write(&record_path(store, url), &bytes)
}

/// The GGUF layer of `name` in llamay's store, if this URL's last pull made it.
fn made_by(store: &Store, url: &str, name: &ModelName) -> Option<Layer> {
    let recorded = read_record(store, url)?;
    let layer = store.own_manifest(name)?.layer(MEDIA_MODEL)?.clone();
    (layer.digest == recorded).then_some(layer)
}

/// Whether pulling `url` may write `name`: free, made by this URL, or `replace`.
fn check_name_free(store: &Store, url: &str, name: &ModelName, replace: bool) -> Result<()> {
    if replace || !store.contains(name)? || made_by(store, url, name).is_some() {
        Ok(())
    } else {
        Err(StoreError::Exists(name.short()))
    }
}

/// Pulls a `.gguf` file by URL (following redirects, resumable), names it after
/// the file and writes a manifest so it lists like a registry model. A model it
/// replaced has its unused blobs collected.
pub async fn pull_url(
    store: &Store,
    url: &str,
    opts: &PullOptions,
    progress: &dyn Progress,
) -> Result<PullReport> {
    let name = url_model_name(url)?;
    opts.check_target(url)?;
    // A clash is refused before anything is sent.
    check_name_free(store, url, &name, opts.replace)?;
    let (report, replaced) = pull_url_held(store, url, &name, opts, progress).await?;
    // After the store lock is released: collection needs it exclusive.
    store.collect_unused(&replaced);
    Ok(report)
}

/// [`pull_url`] under the store lock; also returns the blobs of the manifest it
/// replaced.
async fn pull_url_held(
    store: &Store,
    url: &str,
    name: &ModelName,
    opts: &PullOptions,
    progress: &dyn Progress,
) -> Result<(PullReport, Vec<Digest>)> {
    let file_name = url_file_name(url)?;
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
    // It is only a claim: the transfer checks it against what the GETs say and send.
    let total = resp
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .filter(|&n| n <= MAX_BLOB_BYTES)
        .ok_or_else(|| StoreError::Registry(format!("{url} did not state a usable file size")))?;
    let _writing = hold_store(store).await?;
    let key = url_key(url);
    let at = |suffix: &str| store.blobs_dir().join(format!("url-{key}{suffix}"));
    let _lock = lock_blob(&at(".lock")).await?;
    let emit = |completed| {
        progress.on_event(PullEvent::File {
            file_name: file_name.clone(),
            total,
            completed,
        })
    };
    // Pulled from this URL before (perhaps by a concurrent pull we waited for), and
    // the blob still hashes right: nothing to do.
    if let Some(layer) = made_by(store, url, name).filter(|l| l.size == total) {
        if store.has_blob(&layer)
            && hash_file(&store.blob_path(&layer.digest)).await? == layer.digest
        {
            emit(total);
            progress.on_event(PullEvent::Status("success".into()));
            let report = report_for(store, name, 2)?;
            return Ok((report, Vec::new()));
        }
    }
    check_name_free(store, url, name, opts.replace)?;
    let transfer = Transfer {
        client: &client,
        url: url.to_string(),
        data: at(".partial"),
        state: at(".partial.json"),
        total,
        chunk_size: opts.chunk_size,
        parallel: opts.parallel,
        retries: opts.retries,
    };
    let throttle = Throttle::new(&emit, total);
    transfer.run(&|n| throttle.bytes(n)).await?;
    progress.on_event(PullEvent::Status("verifying sha256 digest".into()));
    if let Err(e) = check_gguf_magic(&transfer.data) {
        transfer.discard();
        return Err(e);
    }
    let digest = hash_file(&transfer.data).await?;
    let layer = Layer {
        media_type: MEDIA_MODEL.to_string(),
        digest: digest.clone(),
        size: total,
        from: None,
    };
    if store.has_blob(&layer) && hash_file(&store.blob_path(&digest)).await? == digest {
        transfer.discard();
    } else {
        let final_path = store.blob_path(&digest);
        std::fs::rename(&transfer.data, &final_path).at(&final_path)?;
        let _ = std::fs::remove_file(&transfer.state);
    }
    progress.on_event(PullEvent::Status("writing manifest".into()));
    let old = store.own_manifest(name);
    let same_model = old
        .as_ref()
        .and_then(|m| m.layer(MEDIA_MODEL))
        .is_some_and(|l| l.digest == digest);
    let mut replaced = Vec::new();
    if !same_model {
        let bytes = store.model_manifest_bytes(layer, &ModelConfig::default())?;
        let path = store.manifest_path(name);
        if opts.replace || made_by(store, url, name).is_some() {
            atomic_write(&path, &bytes)?;
            replaced = old.map(|m| m.digests()).unwrap_or_default();
        } else if !atomic_create(&path, &bytes)? {
            // Another pull took the name while this one downloaded; its blob is
            // left for `prune`.
            return Err(StoreError::Exists(name.short()));
        }
    }
    write_record(store, url, &digest)?;
    progress.on_event(PullEvent::Status("success".into()));
    Ok((report_for(store, name, 0)?, replaced))
}

/// The report for a URL model now in llamay's store.
fn report_for(store: &Store, name: &ModelName, blobs_present: usize) -> Result<PullReport> {
    Ok(PullReport {
        name: name.clone(),
        manifest_digest: Digest::of_file(&store.manifest_path(name))?,
        blobs: 2,
        blobs_present,
    })
}
