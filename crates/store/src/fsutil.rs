//! File-system disciplines the store relies on: atomic writes (temp file + rename,
//! so a reader never sees half a file), link-or-copy, and an exclusive lock file
//! that is removed when released without racing a waiter.

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
}
