//! Automatic prefix caching: the KV blocks of every prompt a model has seen, found
//! again by the tokens they hold.
//!
//! A full block of [`KV_BLOCK_TOKENS`] positions is filed under a hash of its tokens
//! *and* of every token before it (the chain of its ancestors), so a lookup walks a
//! new prompt block by block and stops at the first block nobody has computed. The
//! cache holds each block by reference count (`Arc`), like any sequence does: a block
//! a sequence or a named context still holds is "in use"; one only the cache holds is
//! "unreferenced" and may be evicted, least recently used first (deepest first among
//! equals, so a chain is cut from its end), whenever the model's KV bytes pass the
//! pool bound.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use llamay_engine::{KvBlock, Model, KV_BLOCK_TOKENS};

/// One cached block: its tokens (checked on lookup, so a hash collision can only
/// cost a miss), the chain it continues, and when it was last used.
struct Node {
    block: Arc<KvBlock>,
    tokens: Box<[u32]>,
    parent: u64,
    depth: usize,
    last_used: u64,
}

#[derive(Default)]
struct Inner {
    nodes: HashMap<u64, Node>,
    tick: u64,
}

/// Counters of one model's cache, for `/v1/stats`.
#[derive(Default)]
pub struct PrefixCounters {
    /// Prompts looked up, and the tokens they held.
    pub lookups: AtomicU64,
    pub prompt_tokens: AtomicU64,
    /// Prompt tokens found cached (not computed again).
    pub hit_tokens: AtomicU64,
    /// Lookups that found at least one block.
    pub hits: AtomicU64,
    pub evicted_blocks: AtomicU64,
}

/// One loaded model's prefix cache, shared by its engine thread and the contexts.
pub struct PrefixCache {
    inner: Mutex<Inner>,
    /// Most bytes of KV blocks the model keeps alive (cache, contexts and running
    /// sequences together) before unreferenced cached blocks are evicted.
    bound: usize,
    pub counters: PrefixCounters,
}

/// The hash of a block of `tokens` following the chain `parent` (FNV-1a over the
/// parent hash and the token ids: stable across runs, so a snapshot's hashes mean
/// the same after a restart).
fn chain_hash(parent: u64, tokens: &[u32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    parent.to_le_bytes().into_iter().for_each(&mut eat);
    for t in tokens {
        t.to_le_bytes().into_iter().for_each(&mut eat);
    }
    h
}

/// The hash of the empty prefix, the root every chain starts from.
const ROOT: u64 = 0;

/// A prefix found in the cache: its blocks and how many positions they hold.
pub struct Found {
    pub blocks: Vec<Arc<KvBlock>>,
    pub tokens: usize,
}

impl PrefixCache {
    pub fn new(bound: usize) -> PrefixCache {
        PrefixCache {
            inner: Mutex::new(Inner::default()),
            bound,
            counters: PrefixCounters::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn bound(&self) -> usize {
        self.bound
    }

    /// The longest cached prefix of `prompt`, in whole blocks, leaving at least one
    /// token to feed (the next-token logits come from feeding it). Counted in the
    /// hit statistics.
    pub fn lookup(&self, prompt: &[u32]) -> Found {
        let found = self.longest(prompt, prompt.len().saturating_sub(1));
        let c = &self.counters;
        c.lookups.fetch_add(1, Ordering::Relaxed);
        c.prompt_tokens
            .fetch_add(prompt.len() as u64, Ordering::Relaxed);
        if found.tokens > 0 {
            c.hits.fetch_add(1, Ordering::Relaxed);
            c.hit_tokens
                .fetch_add(found.tokens as u64, Ordering::Relaxed);
        }
        found
    }

    /// The longest cached prefix of `tokens` of at most `limit` positions, in whole
    /// blocks (no statistics).
    pub fn longest(&self, tokens: &[u32], limit: usize) -> Found {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let mut blocks = Vec::new();
        let mut parent = ROOT;
        for chunk in tokens[..limit.min(tokens.len())].chunks_exact(KV_BLOCK_TOKENS) {
            let h = chain_hash(parent, chunk);
            match inner.nodes.get_mut(&h) {
                Some(n) if n.parent == parent && *n.tokens == *chunk => {
                    n.last_used = tick;
                    blocks.push(n.block.clone());
                }
                _ => break,
            }
            parent = h;
        }
        let tokens = blocks.len() * KV_BLOCK_TOKENS;
        Found { blocks, tokens }
    }

    /// Files the full blocks of a sequence that holds `tokens` (its positions, in
    /// order) in `blocks`. Blocks already cached for the same tokens are kept (the
    /// first computed wins; both hold the same values).
    pub fn insert(&self, tokens: &[u32], blocks: &[Arc<KvBlock>]) {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let mut parent = ROOT;
        for (depth, (chunk, block)) in tokens.chunks_exact(KV_BLOCK_TOKENS).zip(blocks).enumerate()
        {
            let h = chain_hash(parent, chunk);
            match inner.nodes.get_mut(&h) {
                Some(n) if n.parent == parent && *n.tokens == *chunk => n.last_used = tick,
                // A collision with another chain: leave the first one filed.
                Some(_) => break,
                None => {
                    inner.nodes.insert(
                        h,
                        Node {
                            block: block.clone(),
                            tokens: chunk.into(),
                            parent,
                            depth,
                            last_used: tick,
                        },
                    );
                }
            }
            parent = h;
        }
    }

    /// Evicts unreferenced blocks, least recently used (then deepest) first, until
    /// `model`'s KV bytes are within the bound or nothing more can go. Returns
    /// whether the model is within the bound.
    pub fn enforce(&self, model: &Model) -> bool {
        self.evict_to(model, self.bound)
    }

    /// Whether `blocks` more blocks fit in the pool beside what is alive now,
    /// evicting unreferenced blocks to make room. Always true for a pool of 0 bytes,
    /// which caches nothing and bounds nothing.
    pub fn make_room(&self, model: &Model, blocks: usize) -> bool {
        if self.bound == 0 {
            return true;
        }
        match self.bound.checked_sub(blocks * model.kv_block_bytes()) {
            Some(target) => self.evict_to(model, target),
            None => false,
        }
    }

    /// Evicts unreferenced blocks (LRU, deepest first) until `model`'s KV bytes are
    /// at most `target`; whether they are.
    fn evict_to(&self, model: &Model, target: usize) -> bool {
        if model.kv_bytes_live() <= target {
            return true;
        }
        let mut inner = self.lock();
        let mut free: Vec<(u64, usize, u64)> = inner
            .nodes
            .iter()
            .filter(|(_, n)| Arc::strong_count(&n.block) == 1)
            .map(|(&h, n)| (n.last_used, usize::MAX - n.depth, h))
            .collect();
        free.sort_unstable();
        let mut evicted = 0;
        for (_, _, h) in free {
            if model.kv_bytes_live() <= target {
                break;
            }
            // Dropping the node drops the cache's (only) reference to the block.
            inner.nodes.remove(&h);
            evicted += 1;
        }
        self.counters
            .evicted_blocks
            .fetch_add(evicted, Ordering::Relaxed);
        model.kv_bytes_live() <= target
    }

    /// Blocks filed, and how many of them nobody but the cache holds.
    pub fn blocks(&self) -> (usize, usize) {
        let inner = self.lock();
        let free = inner
            .nodes
            .values()
            .filter(|n| Arc::strong_count(&n.block) == 1)
            .count();
        (inner.nodes.len(), free)
    }

    /// Drops every unreferenced block (tests, `DELETE` of everything).
    pub fn clear_unreferenced(&self) {
        self.lock()
            .nodes
            .retain(|_, n| Arc::strong_count(&n.block) > 1);
    }

    /// The cache's figures for `/v1/stats`.
    pub fn stats_json(&self, model: &Model) -> serde_json::Value {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let c = &self.counters;
        let (blocks, free) = self.blocks();
        let prompt = get(&c.prompt_tokens);
        serde_json::json!({
            "block_tokens": KV_BLOCK_TOKENS,
            "block_bytes": model.kv_block_bytes(),
            "bound_bytes": self.bound,
            "live_bytes": model.kv_bytes_live(),
            "cached_blocks": blocks,
            "cached_blocks_unreferenced": free,
            "lookups": get(&c.lookups),
            "hits": get(&c.hits),
            "prompt_tokens": prompt,
            "cached_tokens": get(&c.hit_tokens),
            "token_hit_rate": if prompt == 0 { 0.0 } else { get(&c.hit_tokens) as f64 / prompt as f64 },
            "evicted_blocks": get(&c.evicted_blocks),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::chain_hash;

    #[test]
    fn chains_hash_their_ancestors() {
        let a = [1u32; 32];
        let b = [2u32; 32];
        let ha = chain_hash(0, &a);
        assert_ne!(chain_hash(ha, &b), chain_hash(0, &b));
        assert_eq!(chain_hash(ha, &b), chain_hash(chain_hash(0, &a), &b));
    }
}
