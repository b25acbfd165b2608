//! The KV manager: who keeps a model's KV blocks alive beyond one sequence.
//!
//! The engine stores keys and values in reference-counted blocks
//! (`llamay_engine::KvBlock`) and counts their bytes; this room decides which
//! blocks outlive the sequence that computed them: the automatic prefix cache
//! ([`prefix`]), with its pool bound and LRU eviction, and the named contexts
//! ([`contexts`]), whose blocks are pinned while they exist and can be written to
//! the model store ([`snapshot`]). The design is in docs/contexts.md.

pub(crate) mod contexts;
pub(crate) mod prefix;
pub mod snapshot;

use std::sync::Arc;

use llamay_engine::{KvBlock, Model, ModelError, RecurrentState, SeqState};

pub use contexts::{ContextInfo, Contexts};
pub use prefix::{PrefixCache, CHECKPOINT_TOKENS};

/// A computed prefix: its tokens and the blocks holding their keys and values
/// (positions `..tokens.len()`; the last block may be partly filled), and for a
/// hybrid model the recurrent state after its last token.
#[derive(Clone)]
pub struct Prefix {
    /// The prefix's token ids.
    pub tokens: Arc<[u32]>,
    /// Their keys and values, `KV_BLOCK_TOKENS` positions a block; holding them here
    /// keeps them from eviction.
    pub blocks: Arc<[Arc<KvBlock>]>,
    /// A hybrid model's recurrent state at `tokens.len()` (`None` for other models):
    /// forks share it, and each sequence continuing the prefix starts from a copy.
    pub state: Option<Arc<RecurrentState>>,
}

impl Prefix {
    /// Its length in tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether it holds no tokens.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Bytes of its blocks and its recurrent state.
    pub fn bytes(&self) -> usize {
        let state = self.state.as_ref().map_or(0, |s| s.bytes());
        self.blocks.iter().map(|b| b.bytes()).sum::<usize>() + state
    }

    /// The prefix of what `seq` holds: its first `tokens.len()` positions' blocks,
    /// and its recurrent state (a hybrid model's sequence must hold exactly `tokens`).
    pub fn of_sequence(tokens: Arc<[u32]>, seq: &SeqState) -> Prefix {
        let n = tokens.len().div_ceil(llamay_engine::KV_BLOCK_TOKENS);
        Prefix {
            blocks: seq.blocks()[..n.min(seq.blocks().len())].into(),
            state: seq
                .recurrent()
                .filter(|r| r.positions() == tokens.len())
                .map(|r| Arc::new(r.clone())),
            tokens,
        }
    }

    /// A sequence of `model` continuing this prefix: its blocks shared, its recurrent
    /// state copied (a hybrid model's prefix without one cannot be continued).
    pub fn sequence(&self, model: &Model) -> Result<SeqState, ModelError> {
        match &self.state {
            Some(s) => model.sequence_from_parts(&self.blocks, RecurrentState::clone(s)),
            None => model.sequence_from_blocks(&self.blocks, self.len()),
        }
    }
}

/// The pool bound when none is given: a quarter of the machine's memory, at most
/// 8 GiB (2 GiB where the total cannot be read).
pub(crate) fn default_pool_bytes() -> usize {
    const GIB: usize = 1 << 30;
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<usize>().ok())
        })
        .map(|kb| kb * 1024);
    match total {
        Some(t) => (t / 4).clamp(256 << 20, 8 * GIB),
        None => 2 * GIB,
    }
}
