//! Spare mask buffers, shared by the matchers of one vocabulary.
//!
//! A matcher keeps a copy of every mask it computes (for the states it comes back to),
//! and a fresh matcher starts with none: over a 262k-token vocabulary each copy is a
//! 32 KiB allocation, and allocating and freeing them per request showed up as a tenth
//! of a mask worker's time. Buffers of finished matchers are kept here for the next.

use crate::mask::TokenMask;
use std::sync::Mutex;

/// Most bytes of spare buffers kept per vocabulary.
const POOL_BYTES: usize = 8 << 20;

/// A bounded stack of spare masks of one length.
#[derive(Debug)]
pub(crate) struct MaskPool {
    spare: Mutex<Vec<TokenMask>>,
    n_tokens: usize,
    limit: usize,
}

impl MaskPool {
    pub(crate) fn new(n_tokens: usize) -> Self {
        let bytes = n_tokens.div_ceil(64).max(1) * 8;
        MaskPool {
            spare: Mutex::new(Vec::new()),
            n_tokens,
            limit: (POOL_BYTES / bytes).max(1),
        }
    }

    /// A mask of the vocabulary's length, with unspecified contents.
    pub(crate) fn take(&self) -> TokenMask {
        self.lock()
            .pop()
            .unwrap_or_else(|| TokenMask::new(self.n_tokens))
    }

    /// Keeps `masks` for later takers, as far as the pool has room.
    pub(crate) fn give(&self, masks: impl IntoIterator<Item = TokenMask>) {
        let mut spare = self.lock();
        let room = self.limit.saturating_sub(spare.len());
        spare.extend(
            masks
                .into_iter()
                .filter(|m| m.len() == self.n_tokens)
                .take(room),
        );
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<TokenMask>> {
        // A poisoned pool holds whole buffers still: keep using it.
        self.spare.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_is_bounded_and_keeps_only_its_length() {
        let pool = MaskPool::new(262_144);
        pool.give((0..1000).map(|_| TokenMask::new(262_144)));
        pool.give([TokenMask::new(10)]);
        assert_eq!(pool.lock().len(), pool.limit);
        assert!(pool.limit < 1000);
        assert_eq!(pool.take().len(), 262_144);
        let empty = MaskPool::new(5);
        assert_eq!(empty.take().len(), 5);
    }
}
