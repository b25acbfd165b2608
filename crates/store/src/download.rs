//! A resumable, parallel, ranged HTTP download into a preallocated `.partial` file.
//!
//! The blob is cut into chunks; each chunk is fetched with a `Range` request and
//! written at its offset. Bookkeeping (`.partial.json`: the total and, per chunk,
//! how many bytes from its start are on disk) is saved at least every
//! [`PERSIST_EVERY`] bytes and whenever the transfer stops, and only ever counts
//! bytes already written, so a later transfer continues each chunk where it
//! stopped instead of starting from zero. Verification is the caller's job: a
//! `.partial` file is never taken for a finished blob.

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

/// Bookkeeping is saved after at least this many new bytes.
const PERSIST_EVERY: u64 = 1 << 20;

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
}

impl State {
    fn fresh(total: u64, chunk_size: u64) -> State {
        let size = chunk_size.max(1);
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
        State { total, chunks }
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

    fn completed(&self) -> u64 {
        self.chunks.iter().map(|c| c.done).sum()
    }
}

/// Shared between the chunk tasks.
struct Shared {
    state: State,
    unsaved: u64,
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
        let result = futures_util::stream::iter(todo)
            .map(|i| self.fetch_chunk(i, &shared, on_bytes))
            .buffer_unordered(self.parallel.max(1))
            .try_collect::<Vec<()>>()
            .await;
        // Whatever happened, record what is on disk so the next pull resumes.
        let guard = shared.lock().unwrap_or_else(|e| e.into_inner());
        self.save(&guard.state)?;
        result.map(|_| ())
    }

    fn load_or_create(&self) -> Result<State> {
        let resumable = fs::read(&self.state)
            .ok()
            .and_then(|b| serde_json::from_slice::<State>(&b).ok())
            .filter(|s| s.total == self.total && s.is_consistent())
            .filter(|_| fs::metadata(&self.data).is_ok_and(|m| m.len() == self.total));
        if let Some(s) = resumable {
            return Ok(s);
        }
        if let Some(dir) = self.data.parent() {
            fs::create_dir_all(dir).at(dir)?;
        }
        let f = fs::File::create(&self.data).at(&self.data)?;
        f.set_len(self.total).at(&self.data)?;
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
            .map_err(|e| Failure::Retry(StoreError::Registry(one_line(&e))))?;
        let status = resp.status();
        // A server that ignores Range answers 200 with the whole blob: skip to `from`.
        let mut skip = match status {
            StatusCode::PARTIAL_CONTENT => {
                check_content_range(resp.headers().get(CONTENT_RANGE), from)
                    .map_err(Failure::Fatal)?;
                0
            }
            StatusCode::OK => from,
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

/// A 206 must cover the range asked for (`bytes <from>-...`).
fn check_content_range(header: Option<&reqwest::header::HeaderValue>, from: u64) -> Result<()> {
    let Some(h) = header else { return Ok(()) };
    let start = h
        .to_str()
        .ok()
        .and_then(|s| s.strip_prefix("bytes "))
        .and_then(|s| s.split('-').next())
        .and_then(|s| s.parse::<u64>().ok());
    if start == Some(from) {
        Ok(())
    } else {
        Err(StoreError::Registry(format!(
            "asked for bytes from {from}, the server sent {h:?}"
        )))
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
        let mut bad = State::fresh(10, 4);
        bad.chunks[1].done = 5;
        assert!(!bad.is_consistent());
        bad.chunks[1].done = 0;
        bad.total = 11;
        assert!(!bad.is_consistent());
    }
}
