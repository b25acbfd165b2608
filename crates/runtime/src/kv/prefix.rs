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
//!
//! A hybrid model (Qwen 3.5) also needs the recurrent state at the position a
//! sequence starts from, and that state cannot be cut back: a block can carry a
//! checkpoint, the state after its last token, and a lookup stops at the deepest
//! block of the chain that has one (a partly filled block only when all its tokens
//! match). The scheduler feeds such a model's prompts in pieces ending at
//! [`CHECKPOINT_TOKENS`] boundaries and files the state after each. A checkpoint is
//! counted in the model's live bytes like the blocks and goes with its block; past
//! the bound, checkpoints of blocks still in use are dropped too (least recently used
//! first), leaving the blocks.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use llamay_engine::{KvBlock, Model, ModelError, RecurrentState, SeqState, KV_BLOCK_TOKENS};

/// Positions between a hybrid model's checkpoints: two blocks, the delta rule's chunk
/// (`engine/src/model/delta_rule.rs` runs prompts 64 tokens at a time), so a prompt
/// cut at every checkpoint still runs in whole chunks. A request sharing a prefix
/// recomputes at most this many tokens of it.
pub const CHECKPOINT_TOKENS: usize = 2 * KV_BLOCK_TOKENS;

/// One cached block: its tokens (checked on lookup, so a hash collision can only
/// cost a miss), the chain it continues, when it was last used, and for a hybrid
/// model the recurrent state after its last token, where one was taken there.
struct Node {
    block: Arc<KvBlock>,
    state: Option<RecurrentState>,
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
    /// one, fewer than a block), and how many; with `whole`, only a child all of
    /// whose tokens match and that carries a checkpoint (a hybrid model's).
    fn best_child(
        &mut self,
        parent: u64,
        rest: &[u32],
        tick: u64,
        whole: bool,
    ) -> Option<(u64, usize)> {
        let kids = self.children.get(&parent)?;
        let (h, m) = kids
            .iter()
            .filter_map(|h| {
                let n = &self.nodes[h];
                let m = n
                    .tokens
                    .iter()
                    .zip(rest)
                    .take_while(|(a, b)| a == b)
                    .count();
                let usable = !whole || (m == n.tokens.len() && n.state.is_some());
                usable.then_some((*h, m))
            })
            .max_by_key(|&(_, m)| m)?;
        if m == 0 {
            return None;
        }
        self.nodes.get_mut(&h)?.last_used = tick;
        Some((h, m))
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
    /// Checkpoints dropped while their blocks stayed (blocks still in use).
    pub evicted_checkpoints: AtomicU64,
}

/// One loaded model's prefix cache, shared by its engine thread and the contexts.
pub struct PrefixCache {
    inner: Mutex<Inner>,
    /// Most bytes of KV blocks the model keeps alive (cache, contexts and running
    /// sequences together) before unreferenced cached blocks are evicted.
    bound: usize,
    /// The model keeps a recurrent state (hybrid): a prefix is usable only up to a
    /// checkpoint.
    hybrid: bool,
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
/// built on it writes there through a copy. A hybrid model's comes with a copy of
/// the checkpoint at `tokens`.
pub struct Found {
    pub blocks: Vec<Arc<KvBlock>>,
    pub tokens: usize,
    pub state: Option<RecurrentState>,
}

impl Found {
    /// The first `n` positions only (`n` ≤ `tokens`; a plain model's: no
    /// checkpoint to cut back to), a partly kept last block as a private copy, as
    /// [`PrefixCache::lookup`] gives one.
    pub fn cut_to(&mut self, n: usize) {
        if n >= self.tokens {
            return;
        }
        debug_assert!(self.state.is_none(), "a checkpoint cannot be cut back");
        self.blocks.truncate(n.div_ceil(KV_BLOCK_TOKENS));
        if !n.is_multiple_of(KV_BLOCK_TOKENS) {
            if let Some(last) = self.blocks.last_mut() {
                *last = Arc::new(KvBlock::clone(last));
            }
        }
        self.tokens = n;
    }

    /// A sequence of `model` continuing the prefix found.
    pub fn sequence(self, model: &Model) -> Result<SeqState, ModelError> {
        match self.state {
            Some(s) => model.sequence_from_parts(&self.blocks, s),
            None => model.sequence_from_blocks(&self.blocks, self.tokens),
        }
    }
}

impl PrefixCache {
    /// An empty cache keeping at most `bound` bytes of KV blocks (and checkpoints)
    /// alive, for a model that keeps a recurrent state when `hybrid`.
    pub fn new(bound: usize, hybrid: bool) -> PrefixCache {
        PrefixCache {
            inner: Mutex::new(Inner::default()),
            bound,
            hybrid,
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
        let mut found = self.find(prompt, prompt.len().saturating_sub(1), true);
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

    /// How many positions of `tokens` (at most `limit`) a sequence could start from:
    /// [`PrefixCache::lookup`]'s length, without its copies or statistics.
    pub fn cached_len(&self, tokens: &[u32], limit: usize) -> usize {
        self.find(tokens, limit, false).tokens
    }

    /// The longest usable cached prefix of `tokens` of at most `limit` positions:
    /// whole blocks along the chain, then the leading rows of the best child where
    /// the chain stops; for a hybrid model, up to the deepest checkpoint on that
    /// path (a copy of it in `Found::state` when `with_state`).
    fn find(&self, tokens: &[u32], limit: usize, with_state: bool) -> Found {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let tokens = &tokens[..limit.min(tokens.len())];
        let mut blocks = Vec::new();
        // A hybrid model's usable prefix ends at the deepest checkpoint: its blocks
        // and the node holding it.
        let mut usable = (0, None);
        let mut parent = ROOT;
        for chunk in tokens.chunks_exact(KV_BLOCK_TOKENS) {
            let h = chain_hash(parent, chunk);
            match inner.nodes.get_mut(&h) {
                Some(n) if n.parent == parent && *n.tokens == *chunk => {
                    n.last_used = tick;
                    blocks.push(n.block.clone());
                    if n.state.is_some() {
                        usable = (blocks.len(), Some(h));
                    }
                }
                _ => break,
            }
            parent = h;
        }
        let mut n = blocks.len() * KV_BLOCK_TOKENS;
        match inner.best_child(parent, &tokens[n..], tick, self.hybrid) {
            Some((h, m)) => {
                blocks.push(inner.nodes[&h].block.clone());
                n += m;
                usable = (blocks.len(), Some(h));
            }
            None if self.hybrid => {
                blocks.truncate(usable.0);
                n = usable.0 * KV_BLOCK_TOKENS;
            }
            None => {}
        }
        let state = match (self.hybrid && with_state, usable.1) {
            (true, Some(h)) => inner.nodes[&h].state.clone(),
            _ => None,
        };
        debug_assert!(state.as_ref().is_none_or(|s| s.positions() == n));
        Found {
            blocks,
            tokens: n,
            state,
        }
    }

    /// Files the full blocks of a running sequence that holds `tokens` (its
    /// positions, in order) in `blocks`, and its recurrent `state` when it ends on a
    /// block boundary (a hybrid model's checkpoint). Its partly filled last block is
    /// left out: the cache holding it would make the sequence's next write copy it, a
    /// block the pool's reservation does not count. Blocks already cached for the
    /// same tokens are kept (the first computed wins; both hold the same values).
    pub fn insert(&self, tokens: &[u32], blocks: &[Arc<KvBlock>], state: Option<&RecurrentState>) {
        let full = tokens.len() / KV_BLOCK_TOKENS * KV_BLOCK_TOKENS;
        self.file(&tokens[..full], blocks, state.map(Cow::Borrowed));
    }

    /// Files all the blocks of a sequence nobody writes into any more (a finished
    /// reply, a context), the partly filled last one included, with its recurrent
    /// `state` after its last token (a finished sequence's own: moved, since a copy
    /// would pass the pool's bound for a moment).
    pub fn insert_settled(
        &self,
        tokens: &[u32],
        blocks: &[Arc<KvBlock>],
        state: Option<Cow<'_, RecurrentState>>,
    ) {
        self.file(tokens, blocks, state);
    }

    fn file(
        &self,
        tokens: &[u32],
        blocks: &[Arc<KvBlock>],
        state: Option<Cow<'_, RecurrentState>>,
    ) {
        // A checkpoint belongs to the block it ends; one taken elsewhere is no use.
        let mut state = state.filter(|s| self.hybrid && s.positions() == tokens.len());
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let mut parent = ROOT;
        let last = tokens.len().div_ceil(KV_BLOCK_TOKENS).saturating_sub(1);
        for (depth, (chunk, block)) in tokens.chunks(KV_BLOCK_TOKENS).zip(blocks).enumerate() {
            let h = chain_hash(parent, chunk);
            // Copied (when borrowed) only where it is filed.
            let mut checkpoint = || match depth == last {
                true => state.take().map(Cow::into_owned),
                false => None,
            };
            match inner.nodes.get_mut(&h) {
                Some(n) if n.parent == parent && *n.tokens == *chunk => {
                    n.last_used = tick;
                    if n.state.is_none() {
                        n.state = checkpoint();
                    }
                }
                // A collision with another chain: leave the first one filed.
                Some(_) => break,
                None => {
                    inner.file(
                        h,
                        Node {
                            block: block.clone(),
                            state: checkpoint(),
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

    /// [`PrefixCache::enforce`] leaving room for `blocks` more blocks (those running
    /// sequences may still write); whether that much room is left.
    pub fn enforce_beside(&self, model: &Model, blocks: usize) -> bool {
        let target = self
            .bound
            .saturating_sub(blocks.saturating_mul(model.kv_block_bytes()));
        self.evict_to(model, target)
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
        // Still over: the checkpoints of blocks in use (a long prompt being filled
        // files one every `CHECKPOINT_TOKENS`) go, least recently used first.
        let mut held: Vec<(u64, usize, u64)> = inner
            .nodes
            .iter()
            .filter(|(_, n)| n.state.is_some())
            .map(|(&h, n)| (n.last_used, usize::MAX - n.depth, h))
            .collect();
        held.sort_unstable();
        let mut dropped = 0;
        for (_, _, h) in held {
            if model.kv_bytes_live() <= target {
                break;
            }
            if let Some(n) = inner.nodes.get_mut(&h) {
                n.state = None;
                dropped += 1;
            }
        }
        self.counters
            .evicted_checkpoints
            .fetch_add(dropped, Ordering::Relaxed);
        model.kv_bytes_live() <= target
    }

    /// Checkpoints filed (a hybrid model's recurrent states).
    pub fn checkpoints(&self) -> usize {
        self.lock()
            .nodes
            .values()
            .filter(|n| n.state.is_some())
            .count()
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
            "cached_checkpoints": self.checkpoints(),
            "evicted_checkpoints": get(&c.evicted_checkpoints),
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
