//! File-system disciplines the store relies on: atomic writes (temp file + rename,
//! so a reader never sees half a file), atomic create-if-absent, link-or-copy, an
//! exclusive lock file that is removed when released without racing a waiter, and
//! the store's own shared/exclusive lock.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use fs4::fs_std::FileExt;

use crate::error::{IoContext, Result};

/// A temp path beside `path`, unique to this process and call.
pub(crate) fn temp_beside(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}-{n}", std::process::id()));
    path.with_file_name(name)
}

/// Writes `bytes` to `path` atomically: readers see the old file or the new one.
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).at(dir)?;
    }
    let tmp = temp_beside(path);
    let res = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res.at(path)
}

/// Writes `bytes` to `path` only if nothing is there yet, atomically: a temp file
/// is hard-linked to `path`, which fails when `path` exists. Returns false (and
/// writes nothing) when it does.
pub(crate) fn atomic_create(path: &Path, bytes: &[u8]) -> Result<bool> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).at(dir)?;
    }
    let tmp = temp_beside(path);
    let res = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        match fs::hard_link(&tmp, path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            // A file system without hard links: exclusive creation still refuses an
            // existing file, though a reader could see the new one half-written.
            Err(_) => match OpenOptions::new().write(true).create_new(true).open(path) {
                Ok(mut f) => f
                    .write_all(bytes)
                    .and_then(|()| f.sync_all())
                    .map(|()| true),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(e),
            },
        }
    })();
    let _ = fs::remove_file(&tmp);
    res.at(path)
}

/// Puts `src`'s contents at `dst`: a hard link when both are on one file system,
/// else a copy (made under a temp name, then renamed, so `dst` is never partial).
/// Returns true when it linked.
pub(crate) fn link_or_copy(src: &Path, dst: &Path) -> Result<bool> {
    if let Some(dir) = dst.parent() {
        fs::create_dir_all(dir).at(dir)?;
    }
    let tmp = temp_beside(dst);
    let linked = fs::hard_link(src, &tmp).is_ok();
    if !linked {
        if let Err(e) = fs::copy(src, &tmp) {
            let _ = fs::remove_file(&tmp);
            return Err(e).at(src);
        }
    }
    if let Err(e) = fs::rename(&tmp, dst) {
        let _ = fs::remove_file(&tmp);
        return Err(e).at(dst);
    }
    Ok(linked)
}

/// An exclusive advisory lock held on a lock file. On drop the file is removed
/// first and unlocked second; a waiter that then gets the lock on the removed file
/// notices (the path no longer names its file) and tries again, so the lock files
/// never pile up and two holders never coexist.
pub(crate) struct FileLock {
    path: PathBuf,
    _file: File,
}

impl FileLock {
    /// Blocks until the lock at `path` is ours.
    pub(crate) fn acquire(path: &Path) -> Result<FileLock> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).at(dir)?;
        }
        loop {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(path)
                .at(path)?;
            FileExt::lock_exclusive(&file).at(path)?;
            if still_named_by(&file, path) {
                return Ok(FileLock {
                    path: path.to_path_buf(),
                    _file: file,
                });
            }
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(unix)]
fn still_named_by(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn still_named_by(_file: &File, path: &Path) -> bool {
    path.exists()
}

/// The store-wide lock: whoever adds blobs and then a manifest that uses them
/// (pull, copy, import) holds it shared for the whole time, and collecting unused
/// blobs holds it exclusive, so a blob a pull has fetched (but no manifest uses
/// yet) is never taken for garbage. The lock file stays in place.
pub(crate) struct StoreLock {
    _file: File,
}

impl StoreLock {
    fn open(path: &Path) -> Result<File> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).at(dir)?;
        }
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .at(path)
    }

    /// Blocks until no collection is running, then holds writers off collection.
    pub(crate) fn shared(path: &Path) -> Result<StoreLock> {
        let file = Self::open(path)?;
        FileExt::lock_shared(&file).at(path)?;
        Ok(StoreLock { _file: file })
    }

    /// Blocks until no writer holds the store.
    pub(crate) fn exclusive(path: &Path) -> Result<StoreLock> {
        let file = Self::open(path)?;
        FileExt::lock_exclusive(&file).at(path)?;
        Ok(StoreLock { _file: file })
    }

    /// The exclusive lock if nobody holds the store now, else `None`.
    pub(crate) fn try_exclusive(path: &Path) -> Result<Option<StoreLock>> {
        let file = Self::open(path)?;
        let got = FileExt::try_lock_exclusive(&file).at(path)?;
        Ok(got.then_some(StoreLock { _file: file }))
    }
}

/// Removes empty folders from `dir` up to (not including) `stop`.
pub(crate) fn prune_empty_dirs(mut dir: &Path, stop: &Path) {
    while dir.starts_with(stop) && dir != stop {
        if fs::remove_dir(dir).is_err() {
            break;
        }
        match dir.parent() {
            Some(p) => dir = p,
            None => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn lock_excludes_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("x.lock");
        let inside = Arc::new(AtomicUsize::new(0));
        let max_seen = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (lock, inside, max_seen) = (lock.clone(), inside.clone(), max_seen.clone());
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        let _g = FileLock::acquire(&lock).unwrap();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        max_seen.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(max_seen.load(Ordering::SeqCst), 1);
        assert!(!lock.exists());
    }

    #[test]
    fn store_lock_shared_holders_keep_collection_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.lock");
        let a = StoreLock::shared(&path).unwrap();
        let b = StoreLock::shared(&path).unwrap();
        assert!(StoreLock::try_exclusive(&path).unwrap().is_none());
        drop(a);
        assert!(StoreLock::try_exclusive(&path).unwrap().is_none());
        drop(b);
        let x = StoreLock::try_exclusive(&path).unwrap().expect("free now");
        assert!(StoreLock::try_exclusive(&path).unwrap().is_none());
        drop(x);
    }

    #[test]
    fn atomic_create_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a").join("m");
        assert!(atomic_create(&path, b"first").unwrap());
        assert!(!atomic_create(&path, b"second").unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"first");
        assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
    }
}
