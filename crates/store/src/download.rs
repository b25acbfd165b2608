//! A resumable, parallel, ranged HTTP download into a `.partial` file.
//!
//! The blob is cut into chunks; each chunk is fetched with a `Range` request and
//! written at its offset. Bookkeeping (`.partial.json`: the total and, per chunk,
//! how many bytes from its start are on disk) is saved at least every
//! [`PERSIST_EVERY`] bytes and whenever the transfer stops, and only ever counts
//! bytes already written, so a later transfer continues each chunk where it
//! stopped instead of starting from zero. Verification is the caller's job: a
//! `.partial` file is never taken for a finished blob.
//!
//! The declared size is a claim, not a fact: the file is never grown past the bytes
//! actually received (no preallocation), every response must agree with the size
//! (`Content-Range` total, a 200's `Content-Length`, no 416), and a transfer that
//! fails keeps its `.partial` only when it can be resumed (the server honoured a
//! range and told no contradicting size); otherwise nothing is left behind.

use std::fs::{self, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use reqwest::header::{CONTENT_RANGE, RANGE};
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::atomic_write;
use crate::outbound::find_refused;

/// Bookkeeping is saved after at least this many new bytes.
const PERSIST_EVERY: u64 = 1 << 20;
/// At most this many chunks, whatever the declared size (which may be a lie):
/// larger files get larger chunks, so the bookkeeping stays small.
const MAX_CHUNKS: u64 = 1024;

/// What to download and how.
pub(crate) struct Transfer<'a> {
    pub client: &'a reqwest::Client,
    pub url: String,
    /// The `.partial` data file.
    pub data: PathBuf,
    /// The `.partial.json` bookkeeping file.
    pub state: PathBuf,
    pub total: u64,
    pub chunk_size: u64,
    pub parallel: usize,
    /// Further attempts per chunk after a failed one.
    pub retries: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Chunk {
    start: u64,
    end: u64,
    /// Bytes from `start` already on disk.
    done: u64,
}

impl Chunk {
    fn remaining(&self) -> u64 {
        self.end - self.start - self.done
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct State {
    total: u64,
    chunks: Vec<Chunk>,
    /// The server answered a range with 206, so what is on disk can be resumed.
    #[serde(default)]
    ranged: bool,
}

impl State {
    fn fresh(total: u64, chunk_size: u64) -> State {
        let size = chunk_size.max(1).max(total.div_ceil(MAX_CHUNKS));
        let mut chunks = Vec::new();
        let mut start = 0;
        while start < total {
            let end = total.min(start.saturating_add(size));
            chunks.push(Chunk {
                start,
                end,
                done: 0,
            });
            start = end;
        }
        State {
            total,
            chunks,
            ranged: false,
        }
    }

    /// True if the chunks tile `0..total` and no `done` overruns its chunk.
    fn is_consistent(&self) -> bool {
        let mut at = 0;
        for c in &self.chunks {
            if c.start != at || c.end <= c.start || c.done > c.end - c.start {
                return false;
            }
            at = c.end;
        }
        at == self.total
    }

    /// True if a data file of `len` bytes holds every byte this state counts.
    fn fits(&self, len: u64) -> bool {
        len <= self.total
            && self
                .chunks
                .iter()
                .all(|c| c.done == 0 || c.start + c.done <= len)
    }

    fn completed(&self) -> u64 {
        self.chunks.iter().map(|c| c.done).sum()
    }
}

/// Shared between the chunk tasks.
struct Shared {
    state: State,
    unsaved: u64,
}

/// Settles a transfer whose `run` is dropped midway (its pull was cancelled, e.g.
/// because the client that asked for it left) as a failed one.
struct Stopped<'t, 'c> {
    transfer: &'t Transfer<'c>,
    shared: &'t Mutex<Shared>,
    cancelled: bool,
}

impl Drop for Stopped<'_, '_> {
    fn drop(&mut self) {
        if self.cancelled {
            let guard = lock(self.shared);
            let _ = self.transfer.keep_or_discard(&guard.state, false);
        }
    }
}

/// Why one attempt at a chunk failed, and whether another attempt may help.
enum Failure {
    Retry(StoreError),
    Fatal(StoreError),
}

impl Transfer<'_> {
    /// Downloads everything not yet on disk. `on_bytes` gets the total completed
    /// after each write (from several tasks, so it must be cheap).
    pub(crate) async fn run(&self, on_bytes: &(dyn Fn(u64) + Sync)) -> Result<()> {
        let state = self.load_or_create()?;
        on_bytes(state.completed());
        let todo: Vec<usize> = (0..state.chunks.len())
            .filter(|&i| state.chunks[i].remaining() > 0)
            .collect();
        let shared = Mutex::new(Shared { state, unsaved: 0 });
        let mut stopped = Stopped {
            transfer: self,
            shared: &shared,
            cancelled: true,
        };
        let result = futures_util::stream::iter(todo)
            .map(|i| self.fetch_chunk(i, &shared, on_bytes))
            .buffer_unordered(self.parallel.max(1))
            .try_collect::<Vec<()>>()
            .await;
        stopped.cancelled = false;
        drop(stopped);
        let guard = lock(&shared);
        match result {
            Ok(_) => self.save(&guard.state),
            Err(e) => {
                let lie = matches!(e, StoreError::SizeMismatch { .. });
                self.keep_or_discard(&guard.state, lie)?;
                Err(e)
            }
        }
    }

    /// After a transfer stopped short: record what is on disk so the next pull
    /// resumes, unless there is nothing to resume (the server never honoured a
    /// range) or it is built on a size lie: then leave nothing behind.
    fn keep_or_discard(&self, state: &State, size_lie: bool) -> Result<()> {
        if size_lie || !state.ranged {
            self.discard();
            Ok(())
        } else {
            self.save(state)
        }
    }

    /// Removes the `.partial` and its bookkeeping.
    pub(crate) fn discard(&self) {
        let _ = fs::remove_file(&self.data);
        let _ = fs::remove_file(&self.state);
    }

    fn load_or_create(&self) -> Result<State> {
        let resumable = fs::read(&self.state)
            .ok()
            .and_then(|b| serde_json::from_slice::<State>(&b).ok())
            .filter(|s| s.total == self.total && s.is_consistent())
            .filter(|s| fs::metadata(&self.data).is_ok_and(|m| s.fits(m.len())));
        if let Some(s) = resumable {
            return Ok(s);
        }
        if let Some(dir) = self.data.parent() {
            fs::create_dir_all(dir).at(dir)?;
        }
        // Empty, not preallocated: the file grows only by bytes received.
        fs::File::create(&self.data).at(&self.data)?;
        let state = State::fresh(self.total, self.chunk_size);
        self.save(&state)?;
        Ok(state)
    }

    fn save(&self, state: &State) -> Result<()> {
        let bytes = serde_json::to_vec(state).expect("state always serialises");
        atomic_write(&self.state, &bytes)
    }

    async fn fetch_chunk(
        &self,
        i: usize,
        shared: &Mutex<Shared>,
        on_bytes: &(dyn Fn(u64) + Sync),
    ) -> Result<()> {
        let mut attempt = 0;
        loop {
            match self.fetch_chunk_once(i, shared, on_bytes).await {
                Ok(()) => return Ok(()),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Retry(e)) => {
                    if attempt >= self.retries {
                        return Err(e);
                    }
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                }
            }
        }
    }

    async fn fetch_chunk_once(
        &self,
        i: usize,
        shared: &Mutex<Shared>,
        on_bytes: &(dyn Fn(u64) + Sync),
    ) -> std::result::Result<(), Failure> {
        let chunk = lock(shared).state.chunks[i];
        if chunk.remaining() == 0 {
            return Ok(());
        }
        let from = chunk.start + chunk.done;
        let resp = self
            .client
            .get(&self.url)
            .header(RANGE, format!("bytes={from}-{}", chunk.end - 1))
            .send()
            .await
            .map_err(|e| match find_refused(&e) {
                // A redirect to a refused address will not go better on a retry.
                Some(r) => Failure::Fatal(r.into()),
                None => Failure::Retry(StoreError::Registry(one_line(&e))),
            })?;
        let status = resp.status();
        let size_lie = |found: String| {
            Failure::Fatal(StoreError::SizeMismatch {
                url: self.url.clone(),
                declared: self.total,
                found,
            })
        };
        // A server that ignores Range answers 200 with the whole blob: skip to `from`.
        let mut skip = match status {
            StatusCode::PARTIAL_CONTENT => {
                match check_content_range(resp.headers().get(CONTENT_RANGE), from, self.total) {
                    Ok(()) => {}
                    Err(RangeProblem::Size(found)) => return Err(size_lie(found)),
                    Err(RangeProblem::Start(e)) => return Err(Failure::Fatal(e)),
                }
                lock(shared).state.ranged = true;
                0
            }
            StatusCode::OK => {
                if let Some(n) = resp.content_length().filter(|&n| n != self.total) {
                    return Err(size_lie(format!("the server sent {n} (Content-Length)")));
                }
                from
            }
            StatusCode::RANGE_NOT_SATISFIABLE => {
                return Err(size_lie(format!(
                    "the server has no byte {from} (HTTP 416)"
                )))
            }
            s if s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS => {
                return Err(Failure::Retry(StoreError::Registry(format!(
                    "GET {}: HTTP {s}",
                    self.url
                ))))
            }
            s => {
                return Err(Failure::Fatal(StoreError::Registry(format!(
                    "GET {}: HTTP {s}",
                    self.url
                ))))
            }
        };
        let mut file = OpenOptions::new()
            .write(true)
            .open(&self.data)
            .and_then(|mut f| f.seek(SeekFrom::Start(from)).map(|_| f))
            .at(&self.data)
            .map_err(Failure::Fatal)?;
        let mut remaining = chunk.remaining();
        let mut body = resp.bytes_stream();
        while remaining > 0 {
            let piece = match body.next().await {
                Some(Ok(p)) => p,
                Some(Err(e)) => return Err(Failure::Retry(StoreError::Registry(one_line(&e)))),
                None => {
                    return Err(Failure::Retry(StoreError::Registry(format!(
                        "connection closed with {remaining} bytes of a chunk missing"
                    ))))
                }
            };
            let mut piece: &[u8] = &piece;
            if skip > 0 {
                let n = skip.min(piece.len() as u64) as usize;
                piece = &piece[n..];
                skip -= n as u64;
            }
            let n = remaining.min(piece.len() as u64) as usize;
            if n == 0 {
                continue;
            }
            file.write_all(&piece[..n])
                .at(&self.data)
                .map_err(Failure::Fatal)?;
            remaining -= n as u64;
            let completed = {
                let mut g = lock(shared);
                g.state.chunks[i].done += n as u64;
                g.unsaved += n as u64;
                if g.unsaved >= PERSIST_EVERY {
                    g.unsaved = 0;
                    self.save(&g.state).map_err(Failure::Fatal)?;
                }
                g.state.completed()
            };
            on_bytes(completed);
        }
        Ok(())
    }
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What is wrong with a 206's `Content-Range`.
enum RangeProblem {
    /// It does not start where asked.
    Start(StoreError),
    /// Its complete length is not the declared size.
    Size(String),
}

/// A 206 must cover the range asked for (`bytes <from>-<to>/<total>`), and its
/// complete length (unless `*`) must be the declared size.
fn check_content_range(
    header: Option<&reqwest::header::HeaderValue>,
    from: u64,
    total: u64,
) -> std::result::Result<(), RangeProblem> {
    let Some(h) = header else { return Ok(()) };
    let spec = h.to_str().ok().and_then(|s| s.strip_prefix("bytes "));
    let (range, length) = spec
        .and_then(|s| s.split_once('/'))
        .map_or((spec, None), |(r, l)| (Some(r), Some(l)));
    let start = range
        .and_then(|s| s.split('-').next())
        .and_then(|s| s.parse::<u64>().ok());
    if start != Some(from) {
        return Err(RangeProblem::Start(StoreError::Registry(format!(
            "asked for bytes from {from}, the server sent {h:?}"
        ))));
    }
    match length.map(str::trim) {
        None | Some("*") => Ok(()),
        Some(l) if l.parse::<u64>() == Ok(total) => Ok(()),
        Some(l) => Err(RangeProblem::Size(format!(
            "the server says the file has {l} (Content-Range)"
        ))),
    }
}

/// An error and its causes on one line.
pub(crate) fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_state_tiles_the_blob() {
        let s = State::fresh(10, 4);
        assert_eq!(
            s.chunks
                .iter()
                .map(|c| (c.start, c.end))
                .collect::<Vec<_>>(),
            vec![(0, 4), (4, 8), (8, 10)]
        );
        assert!(s.is_consistent());
        assert!(State::fresh(0, 4).is_consistent());
        let huge = State::fresh(1 << 40, 64 << 20);
        assert_eq!(huge.chunks.len() as u64, MAX_CHUNKS);
        assert!(huge.is_consistent());
        let mut bad = State::fresh(10, 4);
        bad.chunks[1].done = 5;
        assert!(!bad.is_consistent());
        bad.chunks[1].done = 0;
        bad.total = 11;
        assert!(!bad.is_consistent());
    }

    #[test]
    fn a_data_file_fits_only_if_it_holds_every_counted_byte() {
        let mut s = State::fresh(10, 4);
        assert!(s.fits(0));
        s.chunks[1].done = 2; // bytes 4..6
        assert!(!s.fits(5));
        assert!(s.fits(6));
        assert!(!s.fits(11), "longer than declared");
    }

    #[test]
    fn content_range_must_start_where_asked_and_state_the_declared_size() {
        let h = |s: &str| reqwest::header::HeaderValue::from_str(s).unwrap();
        let check = |s: &str| check_content_range(Some(&h(s)), 4, 10);
        assert!(check("bytes 4-9/10").is_ok());
        assert!(check("bytes 4-9/*").is_ok());
        assert!(matches!(check("bytes 0-9/10"), Err(RangeProblem::Start(_))));
        assert!(matches!(
            check("bytes 4-9/1099511627776"),
            Err(RangeProblem::Size(_))
        ));
        assert!(check_content_range(None, 4, 10).is_ok());
    }
}
