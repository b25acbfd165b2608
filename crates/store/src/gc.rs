//! Collecting blobs no manifest uses: `prune` (every unused blob, plus what
//! interrupted pulls left) and the collection after `rm` or a replacing pull,
//! copy or import (that manifest's blobs only).
//!
//! Both hold the store lock exclusive. Pulls, copies and imports hold it shared
//! from their first blob to their manifest, so a blob that is fetched but not yet
//! used by any manifest is never taken for garbage; the collection after `rm`
//! does not wait for them (it leaves its blobs for the next `prune`), `prune` can.

use std::fs;
use std::path::Path;

use crate::digest::Digest;
use crate::error::{IoContext, Result};
use crate::fsutil::StoreLock;
use crate::store::Store;

/// What `prune` did.
#[derive(Clone, Debug, Default)]
pub struct PruneReport {
    /// Blobs deleted because no manifest of llamay's store used them.
    pub deleted_blobs: Vec<Digest>,
    /// Other files deleted from `blobs/`: partial downloads, their bookkeeping and
    /// temp files that interrupted pulls left.
    pub deleted_files: Vec<String>,
    /// Bytes the deleted files took.
    pub freed_bytes: u64,
}

/// What a collection of some blobs did.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub deleted: Vec<Digest>,
    pub kept: Vec<Digest>,
    pub deferred: Vec<Digest>,
}

/// A leftover of an interrupted pull (never a finished blob).
fn is_leftover(file: &str) -> bool {
    (file.starts_with("sha256-") || file.starts_with("url-"))
        && (file.ends_with(".partial")
            || file.ends_with(".partial.json")
            || file.ends_with(".lock")
            || file.contains(".tmp-"))
}

/// The blob a file name in `blobs/` is, if it is exactly a finished blob's name.
fn blob_name(file: &str) -> Option<Digest> {
    let d = Digest::parse(file).ok()?;
    (d.file_name() == file).then_some(d)
}

impl Store {
    /// Deletes every blob no manifest of llamay's store uses and what interrupted
    /// pulls left behind, waiting first for the pulls, copies and imports in progress
    /// (in any process) to finish.
    pub fn prune(&self) -> Result<PruneReport> {
        let _collecting = StoreLock::exclusive(&self.lock_path())?;
        self.prune_held()
    }

    /// [`Store::prune`] if no pull, copy or import is in progress, else `None`
    /// (nothing is deleted).
    pub fn try_prune(&self) -> Result<Option<PruneReport>> {
        match StoreLock::try_exclusive(&self.lock_path())? {
            Some(_collecting) => self.prune_held().map(Some),
            None => Ok(None),
        }
    }

    fn prune_held(&self) -> Result<PruneReport> {
        let in_use = self.digests_in_use()?;
        let mut report = PruneReport::default();
        for (file, path) in files_in(&self.blobs_dir())? {
            let unused_blob = blob_name(&file).filter(|d| !in_use.contains(d));
            if unused_blob.is_none() && !is_leftover(&file) {
                continue;
            }
            let size = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).at(path),
            }
            report.freed_bytes += size;
            match unused_blob {
                Some(d) => report.deleted_blobs.push(d),
                None => report.deleted_files.push(file),
            }
        }
        // URL records of models that are gone.
        for (_, path) in files_in(&self.urls_dir())? {
            let digest = fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|v| Digest::parse(v["digest"].as_str()?).ok());
            if !digest.is_some_and(|d| in_use.contains(&d)) {
                let _ = fs::remove_file(&path);
            }
        }
        report.deleted_blobs.sort();
        report.deleted_files.sort();
        Ok(report)
    }

    /// Deletes those of `candidates` no manifest uses, unless a writer holds the
    /// store (then they are reported deferred).
    pub(crate) fn collect(&self, candidates: &[Digest]) -> Result<Collected> {
        let collecting = StoreLock::try_exclusive(&self.lock_path())?;
        let in_use = self.digests_in_use()?;
        let mut out = Collected::default();
        for d in candidates {
            if out.deleted.contains(d) || out.kept.contains(d) || out.deferred.contains(d) {
                continue;
            }
            if in_use.contains(d) {
                out.kept.push(d.clone());
            } else if collecting.is_none() {
                out.deferred.push(d.clone());
            } else {
                let blob = self.blob_path(d);
                match fs::remove_file(&blob) {
                    Ok(()) => out.deleted.push(d.clone()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e).at(blob),
                }
            }
        }
        Ok(out)
    }

    /// [`Store::collect`] after a replace, where failing to collect is no failure
    /// of the replace: the blobs stay for `prune`.
    pub(crate) fn collect_unused(&self, candidates: &[Digest]) {
        if !candidates.is_empty() {
            let _ = self.collect(candidates);
        }
    }
}

/// The plain files in a folder, by name (none if it does not exist).
fn files_in(dir: &Path) -> Result<Vec<(String, std::path::PathBuf)>> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).at(dir),
    };
    Ok(rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_and_blob_names() {
        let hex = "ab".repeat(32);
        assert!(blob_name(&format!("sha256-{hex}")).is_some());
        assert!(blob_name(&format!("sha256-{}", hex.to_uppercase())).is_none());
        assert!(blob_name(&format!("sha256-{hex}.partial")).is_none());
        assert!(is_leftover(&format!("sha256-{hex}.partial")));
        assert!(is_leftover(&format!("sha256-{hex}.partial.json")));
        assert!(is_leftover("url-0123.partial"));
        assert!(is_leftover(&format!("sha256-{hex}.tmp-12-0")));
        assert!(!is_leftover(&format!("sha256-{hex}")));
        assert!(!is_leftover("notes.txt"));
    }
}
