//! A named context on disk: its tokens and KV blocks, in one content-addressed blob
//! of the model store (`Store::put_snapshot`), tied to what the values mean.
//!
//! ```text
//! "LLAMAYKV" (8 bytes)  version: u32 LE (2)  header length: u32 LE
//! header: JSON {model_digest, kv_type, engine_version, block_tokens, block_bytes,
//!               tokens, blocks, recurrent_bytes}
//! tokens × u32 LE
//! blocks × block_bytes (each `KvBlock::to_le_bytes`)
//! recurrent_bytes (a hybrid model's state after the last token,
//!                  `RecurrentState::to_le_bytes`; none when 0)
//! ```
//!
//! Version 1 (before hybrid models) has no `recurrent_bytes` and no state: it is
//! read as version 2 with `recurrent_bytes` 0.
//!
//! [`parse`] reads untrusted bytes (a blob anyone could have written into the
//! store): every length is checked against the bytes there before anything is
//! allocated, and it never panics (fuzzed: `fuzz/fuzz_targets/kv_snapshot.rs`).

use llamay_engine::{Model, SeqState, KV_BLOCK_TOKENS};
use serde::{Deserialize, Serialize};

const MAGIC: &[u8; 8] = b"LLAMAYKV";
const VERSION: u32 = 2;
/// Longest header accepted: it is a handful of short fields.
const MAX_HEADER: usize = 64 << 10;

/// What a snapshot's values are: they mean the same only for the same model file,
/// KV element type, block layout and engine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotHeader {
    /// `sha256:…` of the model's GGUF file.
    pub model_digest: String,
    /// `f32` or `f16`.
    pub kv_type: String,
    /// The engine's version and KV layout (see [`engine_version`]).
    pub engine_version: String,
    /// Positions per block (`KV_BLOCK_TOKENS` when written).
    pub block_tokens: usize,
    /// Bytes of each block on disk (the model's `kv_block_bytes`).
    pub block_bytes: usize,
    /// Tokens the snapshot holds.
    pub tokens: usize,
    /// Blocks the snapshot holds: `tokens` divided by `block_tokens`, rounded up.
    pub blocks: usize,
    /// Bytes of the recurrent state after the last token (a hybrid model's
    /// `Model::recurrent_bytes`; 0 for other models, and in version 1, which has no
    /// such field).
    #[serde(default)]
    pub recurrent_bytes: usize,
}

/// The engine version a snapshot records: the crate version and the block size,
/// both of which change what the bytes mean.
pub fn engine_version() -> String {
    format!(
        "llamay-engine {} kv-block {}",
        env!("CARGO_PKG_VERSION"),
        llamay_engine::KV_BLOCK_TOKENS
    )
}

/// A parsed snapshot: the header, the tokens, and each block's bytes (borrowed).
#[derive(Debug)]
pub struct Snapshot<'a> {
    /// What the values mean, to check against a model with [`mismatch`].
    pub header: SnapshotHeader,
    /// The prefix's token ids.
    pub tokens: Vec<u32>,
    /// Each block's bytes, `header.block_bytes` each, for `Model::block_from_bytes`.
    pub blocks: Vec<&'a [u8]>,
    /// The recurrent state's bytes, `header.recurrent_bytes` (empty for a model
    /// without one), for `Model::recurrent_from_bytes`.
    pub recurrent: &'a [u8],
}

/// Why bytes are not a snapshot.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotError {
    /// The bytes do not start with `LLAMAYKV`.
    #[error("not a llamay KV snapshot (bad magic)")]
    Magic,
    /// A format version other than 1 and 2.
    #[error("snapshot format version {0} is not supported (this llamay reads 1 and 2)")]
    Version(u32),
    /// The bytes end inside the named part.
    #[error("snapshot is cut short: {0}")]
    Truncated(&'static str),
    /// The header is too long, is not the expected JSON, or its counts do not fit
    /// together.
    #[error("snapshot header is invalid: {0}")]
    Header(String),
    /// Bytes left over after the last block (their count).
    #[error("snapshot has {0} bytes after its last block")]
    Trailing(usize),
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Reads a snapshot, checking that its parts fit together (block count for its
/// tokens, exact length). Whether it fits a *model* is the caller's check.
pub fn parse(bytes: &[u8]) -> Result<Snapshot<'_>, SnapshotError> {
    if bytes.len() < 16 {
        return Err(if bytes.starts_with(MAGIC) || MAGIC.starts_with(bytes) {
            SnapshotError::Truncated("the fixed header")
        } else {
            SnapshotError::Magic
        });
    }
    if &bytes[..8] != MAGIC {
        return Err(SnapshotError::Magic);
    }
    let version = u32_at(bytes, 8).ok_or(SnapshotError::Truncated("the version"))?;
    if !(1..=VERSION).contains(&version) {
        return Err(SnapshotError::Version(version));
    }
    let header_len =
        u32_at(bytes, 12).ok_or(SnapshotError::Truncated("the header length"))? as usize;
    if header_len > MAX_HEADER {
        return Err(SnapshotError::Header(format!(
            "{header_len} bytes, more than {MAX_HEADER}"
        )));
    }
    let header_bytes = bytes
        .get(16..16 + header_len)
        .ok_or(SnapshotError::Truncated("the header"))?;
    let header: SnapshotHeader =
        serde_json::from_slice(header_bytes).map_err(|e| SnapshotError::Header(e.to_string()))?;
    if version == 1 && header.recurrent_bytes != 0 {
        return Err(SnapshotError::Header(
            "a version 1 snapshot carries no recurrent state".into(),
        ));
    }
    if header.block_tokens == 0 || header.block_bytes == 0 {
        return Err(SnapshotError::Header("empty blocks".into()));
    }
    if header.blocks != header.tokens.div_ceil(header.block_tokens) {
        return Err(SnapshotError::Header(format!(
            "{} blocks cannot hold exactly {} tokens of {} a block",
            header.blocks, header.tokens, header.block_tokens
        )));
    }
    let body = &bytes[16 + header_len..];
    let token_bytes = header
        .tokens
        .checked_mul(4)
        .filter(|&n| n <= body.len())
        .ok_or(SnapshotError::Truncated("the tokens"))?;
    let tokens = body[..token_bytes]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let rest = &body[token_bytes..];
    let block_bytes = header
        .blocks
        .checked_mul(header.block_bytes)
        .filter(|&n| n <= rest.len())
        .ok_or(SnapshotError::Truncated("the blocks"))?;
    let (blocks, rest) = rest.split_at(block_bytes);
    if rest.len() < header.recurrent_bytes {
        return Err(SnapshotError::Truncated("the recurrent state"));
    }
    if rest.len() > header.recurrent_bytes {
        return Err(SnapshotError::Trailing(rest.len() - header.recurrent_bytes));
    }
    let blocks = blocks.chunks_exact(header.block_bytes).collect();
    Ok(Snapshot {
        header,
        tokens,
        blocks,
        recurrent: rest,
    })
}

/// Why a snapshot's values do not fit `model` (whose file hashes to `model_digest`):
/// another model file, KV type, block layout, recurrent state or engine; `None` when
/// they fit.
pub fn mismatch(h: &SnapshotHeader, model: &Model, model_digest: &str) -> Option<String> {
    let ours = (
        model_digest.to_string(),
        model.kv_type().name().to_string(),
        engine_version(),
        KV_BLOCK_TOKENS,
        model.kv_block_bytes(),
        model.recurrent_bytes(),
    );
    let theirs = (
        h.model_digest.clone(),
        h.kv_type.clone(),
        h.engine_version.clone(),
        h.block_tokens,
        h.block_bytes,
        h.recurrent_bytes,
    );
    let what = |t: &(String, String, String, usize, usize, usize)| {
        let state = match t.5 {
            0 => String::new(),
            n => format!(", a {n} B recurrent state"),
        };
        format!(
            "{}, KV type {}, {} ({} B blocks of {}{state})",
            t.0, t.1, t.2, t.4, t.3
        )
    };
    (ours != theirs).then(|| {
        format!(
            "it was taken with model file {}; this model has {}",
            what(&theirs),
            what(&ours)
        )
    })
}

/// The header of a snapshot of `tokens` for `model`, with a recurrent state of
/// `recurrent_bytes` (0: none).
pub fn header_for(
    model: &Model,
    model_digest: &str,
    tokens: usize,
    blocks: usize,
    recurrent_bytes: usize,
) -> SnapshotHeader {
    SnapshotHeader {
        model_digest: model_digest.to_string(),
        kv_type: model.kv_type().name().into(),
        engine_version: engine_version(),
        block_tokens: KV_BLOCK_TOKENS,
        block_bytes: model.kv_block_bytes(),
        tokens,
        blocks,
        recurrent_bytes,
    }
}

/// A snapshot of the first `tokens.len()` positions of `seq` (`llamay run
/// -prompt-cache` writes one after each prompt). A hybrid model's sequence is written
/// only up to its recurrent state's position, the one place the state holds for.
pub fn of_sequence(model: &Model, model_digest: &str, seq: &SeqState, tokens: &[u32]) -> Vec<u8> {
    let mut n = tokens.len().min(seq.len());
    let state = match seq.recurrent() {
        Some(r) if r.positions() == n => r.to_le_bytes(),
        Some(_) => {
            n = 0;
            Vec::new()
        }
        None => Vec::new(),
    };
    // `take`, not a slice: a GPU sequence holds no CPU blocks, and its snapshot is
    // refused when read back rather than here.
    let blocks: Vec<Vec<u8>> = seq
        .blocks()
        .iter()
        .take(n.div_ceil(KV_BLOCK_TOKENS))
        .map(|b| b.to_le_bytes())
        .collect();
    write(
        &header_for(model, model_digest, n, blocks.len(), state.len()),
        &tokens[..n],
        &blocks,
        &state,
    )
}

/// A sequence holding the longest common prefix of `prompt` and the snapshot in
/// `bytes` (a prompt cache file), read without a forward pass; an error says why
/// the file cannot serve (damaged, another model).
pub fn resume(
    model: &Model,
    model_digest: &str,
    bytes: &[u8],
    prompt: &[u32],
) -> Result<SeqState, String> {
    let snap = parse(bytes).map_err(|e| e.to_string())?;
    if let Some(why) = mismatch(&snap.header, model, model_digest) {
        return Err(why);
    }
    let common = snap
        .tokens
        .iter()
        .zip(prompt)
        .take_while(|(a, b)| a == b)
        .count()
        .min(model.n_ctx());
    // A hybrid model's state holds only after all of the snapshot's tokens.
    if !snap.recurrent.is_empty() && common < snap.tokens.len() {
        return Ok(model.new_sequence());
    }
    let used = common.div_ceil(KV_BLOCK_TOKENS);
    let blocks = snap.blocks[..used]
        .iter()
        .map(|b| model.block_from_bytes(b))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let seq = match snap.recurrent {
        [] => model.sequence_from_blocks(&blocks, common),
        state => model
            .recurrent_from_bytes(state, common)
            .and_then(|state| model.sequence_from_parts(&blocks, state)),
    };
    seq.map_err(|e| e.to_string())
}

/// Writes a snapshot of `tokens` held by `blocks` (each already as bytes) and the
/// recurrent state `recurrent` (`header.recurrent_bytes` of them; empty for none).
pub fn write(
    header: &SnapshotHeader,
    tokens: &[u32],
    blocks: &[Vec<u8>],
    recurrent: &[u8],
) -> Vec<u8> {
    let head = serde_json::to_vec(header).expect("a header always serialises");
    let mut out = Vec::with_capacity(
        16 + head.len()
            + 4 * tokens.len()
            + blocks.iter().map(Vec::len).sum::<usize>()
            + recurrent.len(),
    );
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(head.len() as u32).to_le_bytes());
    out.extend_from_slice(&head);
    for t in tokens {
        out.extend_from_slice(&t.to_le_bytes());
    }
    for b in blocks {
        out.extend_from_slice(b);
    }
    out.extend_from_slice(recurrent);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(tokens: usize, blocks: usize) -> SnapshotHeader {
        SnapshotHeader {
            model_digest: "sha256:00".into(),
            kv_type: "f32".into(),
            engine_version: engine_version(),
            block_tokens: 4,
            block_bytes: 3,
            tokens,
            blocks,
            recurrent_bytes: 0,
        }
    }

    #[test]
    fn snapshots_round_trip() {
        let bytes = write(
            &header(5, 2),
            &[1, 2, 3, 4, 5],
            &[vec![1, 2, 3], vec![4, 5, 6]],
            &[],
        );
        let s = parse(&bytes).unwrap();
        assert_eq!(s.header, header(5, 2));
        assert_eq!(s.tokens, [1, 2, 3, 4, 5]);
        assert_eq!(s.blocks, [&[1u8, 2, 3][..], &[4, 5, 6][..]]);
        assert!(s.recurrent.is_empty());
    }

    /// A hybrid model's snapshot carries its recurrent state after the blocks; one
    /// cut inside the state, or with bytes after it, is refused.
    #[test]
    fn recurrent_states_round_trip_and_are_checked() {
        let h = SnapshotHeader {
            recurrent_bytes: 4,
            ..header(5, 2)
        };
        let blocks = [vec![1, 2, 3], vec![4, 5, 6]];
        let bytes = write(&h, &[1, 2, 3, 4, 5], &blocks, &[9, 8, 7, 6]);
        let s = parse(&bytes).unwrap();
        assert_eq!((&s.header, s.recurrent), (&h, &[9u8, 8, 7, 6][..]));
        assert_eq!(s.blocks, [&[1u8, 2, 3][..], &[4, 5, 6][..]]);
        assert_eq!(
            parse(&bytes[..bytes.len() - 1]).unwrap_err(),
            SnapshotError::Truncated("the recurrent state")
        );
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(parse(&long).unwrap_err(), SnapshotError::Trailing(1));
    }

    /// The bytes a version 1 writer made (no `recurrent_bytes` in the header).
    fn version_1(h: &SnapshotHeader, tokens: &[u32], blocks: &[Vec<u8>]) -> Vec<u8> {
        let mut json = serde_json::to_value(h).unwrap();
        json.as_object_mut().unwrap().remove("recurrent_bytes");
        let head = serde_json::to_vec(&json).unwrap();
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&(head.len() as u32).to_le_bytes());
        out.extend_from_slice(&head);
        tokens
            .iter()
            .for_each(|t| out.extend_from_slice(&t.to_le_bytes()));
        blocks.iter().for_each(|b| out.extend_from_slice(b));
        out
    }

    #[test]
    fn version_1_snapshots_still_load() {
        let blocks = [vec![1, 2, 3], vec![4, 5, 6]];
        let old = version_1(&header(5, 2), &[1, 2, 3, 4, 5], &blocks);
        let s = parse(&old).unwrap();
        assert_eq!((s.header, s.tokens), (header(5, 2), vec![1, 2, 3, 4, 5]));
        assert!(s.recurrent.is_empty());
        // Version 1 had no state: one claimed there is a damaged header.
        let claims = SnapshotHeader {
            recurrent_bytes: 4,
            ..header(5, 2)
        };
        let mut bad = write(&claims, &[1, 2, 3, 4, 5], &blocks, &[0; 4]);
        bad[8] = 1;
        assert!(matches!(parse(&bad).unwrap_err(), SnapshotError::Header(_)));
    }

    #[test]
    fn damaged_snapshots_are_refused_by_name() {
        let good = write(
            &header(5, 2),
            &[1, 2, 3, 4, 5],
            &[vec![1, 2, 3], vec![4, 5, 6]],
            &[],
        );
        assert_eq!(parse(b"GGUF").unwrap_err(), SnapshotError::Magic);
        assert_eq!(
            parse(&good[..6]).unwrap_err(),
            SnapshotError::Truncated("the fixed header")
        );
        for cut in [20, good.len() - 4, good.len() - 1] {
            assert!(matches!(
                parse(&good[..cut]).unwrap_err(),
                SnapshotError::Truncated(_) | SnapshotError::Header(_)
            ));
        }
        let mut long = good.clone();
        long.push(0);
        assert_eq!(parse(&long).unwrap_err(), SnapshotError::Trailing(1));
        let mut v3 = good.clone();
        v3[8] = 3;
        assert_eq!(parse(&v3).unwrap_err(), SnapshotError::Version(3));
        let bad = write(&header(5, 1), &[1, 2, 3, 4, 5], &[vec![1, 2, 3]], &[]);
        assert!(matches!(parse(&bad).unwrap_err(), SnapshotError::Header(_)));
        // A header claiming more tokens than there are bytes allocates nothing.
        let huge = write(&header(usize::MAX / 2, usize::MAX / 8 + 1), &[], &[], &[]);
        assert!(parse(&huge).is_err());
    }
}
