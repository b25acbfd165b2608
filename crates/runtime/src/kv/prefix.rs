//! Automatic prefix caching: the KV blocks of every prompt a model has seen, found
//! again by the tokens they hold.
//!
//! A full block of [`KV_BLOCK_TOKENS`] positions is filed under a hash of its tokens
//! *and* of every token before it (the chain of its ancestors), so a lookup walks a
//! new prompt block by block and stops at the first block nobody has computed. A
//! sequence's partly filled last block is filed too, and where the walk stops the
//! child of the last block found that shares the most leading tokens with the rest
//! of the prompt lends its first rows: the sequence writes after them into a copy
//! (copy-on-write), so a repeated prompt, or one that goes on mid-block, skips all
//! of its computed tokens rather than all but the last partial block. The
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
    /// The blocks filed after each chain (full and partly filled), for the lookup's
    /// last, partial step.
    children: HashMap<u64, Vec<u64>>,
    tick: u64,
}

impl Inner {
    fn file(&mut self, h: u64, node: Node) {
        self.children.entry(node.parent).or_default().push(h);
        self.nodes.insert(h, node);
    }

    fn unfile(&mut self, h: u64) {
        let Some(node) = self.nodes.remove(&h) else {
            return;
        };
        if let Some(kids) = self.children.get_mut(&node.parent) {
            kids.retain(|&k| k != h);
            if kids.is_empty() {
                self.children.remove(&node.parent);
            }
        }
    }

    /// The child of `parent` sharing the most leading tokens with `rest` (at least
    /// one, fewer than a block), and how many.
    fn best_child(
        &mut self,
        parent: u64,
        rest: &[u32],
        tick: u64,
    ) -> Option<(Arc<KvBlock>, usize)> {
        let kids = self.children.get(&parent)?;
        let (h, m) = kids
            .iter()
            .map(|h| {
                let n = &self.nodes[h];
                let m = n
                    .tokens
                    .iter()
                    .zip(rest)
                    .take_while(|(a, b)| a == b)
                    .count();
                (*h, m)
            })
            .max_by_key(|&(_, m)| m)?;
        if m == 0 {
            return None;
        }
        let n = self.nodes.get_mut(&h)?;
        n.last_used = tick;
        Some((n.block.clone(), m))
    }
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
    /// Lookup, hit and eviction counts since the model loaded, for `/v1/stats`.
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

/// A prefix found in the cache: its blocks and how many positions they hold. The
/// last block may hold more rows than `tokens` counts (a partial match): a sequence
/// built on it writes there through a copy.
pub struct Found {
    pub blocks: Vec<Arc<KvBlock>>,
    pub tokens: usize,
}

impl PrefixCache {
    /// An empty cache keeping at most `bound` bytes of KV blocks alive.
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

    /// The byte bound on the model's live KV blocks (cached, pinned and running).
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// The longest cached prefix of `prompt`, leaving at least one token to feed
    /// (the next-token logits come from feeding it). Counted in the hit statistics.
    ///
    /// A partly matched last block comes as a private copy: the sequence writes into
    /// it next, and copying now rather than at that write lets the pool count the
    /// copy as the sequence's own block (the cached original becomes evictable).
    pub fn lookup(&self, prompt: &[u32]) -> Found {
        let mut found = self.longest(prompt, prompt.len().saturating_sub(1));
        if !found.tokens.is_multiple_of(KV_BLOCK_TOKENS) {
            if let Some(last) = found.blocks.last_mut() {
                *last = Arc::new(KvBlock::clone(last));
            }
        }
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

    /// The longest cached prefix of `tokens` of at most `limit` positions: whole
    /// blocks along the chain, then the leading rows of the best child where the
    /// chain stops (no statistics).
    pub fn longest(&self, tokens: &[u32], limit: usize) -> Found {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let tokens = &tokens[..limit.min(tokens.len())];
        let mut blocks = Vec::new();
        let mut parent = ROOT;
        for chunk in tokens.chunks_exact(KV_BLOCK_TOKENS) {
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
        let mut n = blocks.len() * KV_BLOCK_TOKENS;
        if let Some((block, m)) = inner.best_child(parent, &tokens[n..], tick) {
            blocks.push(block);
            n += m;
        }
        Found { blocks, tokens: n }
    }

    /// Files the full blocks of a running sequence that holds `tokens` (its
    /// positions, in order) in `blocks`. Its partly filled last block is left out:
    /// the cache holding it would make the sequence's next write copy it, a block
    /// the pool's reservation does not count. Blocks already cached for the same
    /// tokens are kept (the first computed wins; both hold the same values).
    pub fn insert(&self, tokens: &[u32], blocks: &[Arc<KvBlock>]) {
        let full = tokens.len() / KV_BLOCK_TOKENS * KV_BLOCK_TOKENS;
        self.file(&tokens[..full], blocks);
    }

    /// Files all the blocks of a sequence nobody writes into any more (a finished
    /// reply, a context), the partly filled last one included.
    pub fn insert_settled(&self, tokens: &[u32], blocks: &[Arc<KvBlock>]) {
        self.file(tokens, blocks);
    }

    fn file(&self, tokens: &[u32], blocks: &[Arc<KvBlock>]) {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let mut parent = ROOT;
        for (depth, (chunk, block)) in tokens.chunks(KV_BLOCK_TOKENS).zip(blocks).enumerate() {
            let h = chain_hash(parent, chunk);
            match inner.nodes.get_mut(&h) {
                Some(n) if n.parent == parent && *n.tokens == *chunk => n.last_used = tick,
                // A collision with another chain: leave the first one filed.
                Some(_) => break,
                None => {
                    inner.file(
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
            inner.unfile(h);
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
        let mut inner = self.lock();
        let free: Vec<u64> = inner
            .nodes
            .iter()
            .filter(|(_, n)| Arc::strong_count(&n.block) == 1)
            .map(|(&h, _)| h)
            .collect();
        for h in free {
            inner.unfile(h);
        }
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
