//! Paged key/value storage.
//!
//! A sequence's keys and values live in fixed-size blocks ([`KvBlock`], the keys and
//! values of [`KV_BLOCK_TOKENS`] consecutive positions for every layer), held by
//! reference count: sequences that share a prefix hold the same blocks, and a write
//! into a block another holder still sees copies that block first (`Arc::make_mut`).
//! Attention reads the blocks in place, one slice per block (`rows::Paged`), so
//! sharing costs nothing at read time. A block's storage is pages of its own
//! ([`pages`]), returned to the OS when the block goes.
//!
//! Every layer keeps every position, sliding-window ones included: a sliding layer
//! only *reads* its last `window` positions, but a block shared with a shorter
//! sequence (a prefix another request continues) must still hold what that sequence
//! needs. Storage is f32 by default or f16 to halve the memory (as llama.cpp does by
//! default). Who keeps blocks alive beyond a sequence (a prefix cache, named contexts)
//! is the runtime's business; the engine only counts the bytes alive per model. A
//! model that runs on a GPU keeps a sequence's keys and values on the device instead
//! ([`device`]: buffers grown by doubling, copied on write after a fork).

#[cfg(feature = "gpu")]
mod device;
mod pages;
mod recurrent;
pub(crate) mod rows;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use half::f16;
use half::slice::HalfFloatSliceExt;

#[cfg(feature = "gpu")]
pub(crate) use device::DeviceKv;
use pages::Pages;
pub(crate) use recurrent::RecurrentLayout;
pub use recurrent::RecurrentState;
use rows::Paged;

/// Positions per [`KvBlock`]: the granularity of prefix sharing.
pub const KV_BLOCK_TOKENS: usize = 32;

/// Element type of the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KvType {
    #[default]
    F32,
    F16,
}

impl KvType {
    /// Bytes per element.
    pub fn element_bytes(self) -> usize {
        match self {
            KvType::F32 => 4,
            KvType::F16 => 2,
        }
    }

    /// The name used in flags and snapshot headers.
    pub fn name(self) -> &'static str {
        match self {
            KvType::F32 => "f32",
            KvType::F16 => "f16",
        }
    }
}

#[derive(Clone, Debug)]
enum Store {
    F32(Pages<f32>),
    F16(Pages<f16>),
}

impl Store {
    fn zeroed(ty: KvType, n: usize) -> Store {
        match ty {
            KvType::F32 => Store::F32(Pages::zeroed(n)),
            KvType::F16 => Store::F16(Pages::zeroed(n)),
        }
    }

    fn write(&mut self, at: usize, src: &[f32]) {
        match self {
            Store::F32(v) => v[at..at + src.len()].copy_from_slice(src),
            // `half`'s slice conversions use F16C where the CPU has it.
            Store::F16(v) => v[at..at + src.len()].convert_from_f32_slice(src),
        }
    }

    #[cfg(test)]
    fn read(&self, at: usize, dst: &mut [f32]) {
        match self {
            Store::F32(v) => dst.copy_from_slice(&v[at..at + dst.len()]),
            Store::F16(v) => v[at..at + dst.len()].convert_to_f32_slice(dst),
        }
    }
}

/// The shape of a model's blocks: which model, how many layers, how wide a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) model_id: usize,
    pub(crate) n_layer: usize,
    pub(crate) k_width: usize,
    pub(crate) v_width: usize,
    pub(crate) ty: KvType,
}

impl Layout {
    /// Elements of one layer's part of a block (keys, then values).
    fn layer_elems(&self) -> usize {
        KV_BLOCK_TOKENS * (self.k_width + self.v_width)
    }

    fn elems(&self) -> usize {
        self.n_layer * self.layer_elems()
    }

    fn bytes(&self) -> usize {
        self.elems() * self.ty.element_bytes()
    }
}

/// The keys and values of [`KV_BLOCK_TOKENS`] consecutive positions, every layer,
/// of one model. Shared between sequences as `Arc<KvBlock>`; created by the engine
/// only (a sequence growing, [`crate::Model::block_from_bytes`]).
#[derive(Debug)]
pub struct KvBlock {
    store: Store,
    layout: Layout,
    /// The model's count of bytes held by live blocks.
    live: Arc<AtomicUsize>,
}

impl KvBlock {
    pub(crate) fn new(layout: Layout, live: &Arc<AtomicUsize>) -> KvBlock {
        live.fetch_add(layout.bytes(), Ordering::Relaxed);
        KvBlock {
            store: Store::zeroed(layout.ty, layout.elems()),
            layout,
            live: live.clone(),
        }
    }

    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }

    /// Bytes of keys and values this block holds.
    pub fn bytes(&self) -> usize {
        self.layout.bytes()
    }

    /// The block's contents as little-endian bytes (f32 or f16 as stored), for
    /// snapshots; [`crate::Model::block_from_bytes`] reads them back.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match &self.store {
            Store::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Store::F16(v) => v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
        }
    }

    /// A block of `layout` from [`KvBlock::to_le_bytes`]'s output.
    pub(crate) fn from_le_bytes(
        layout: Layout,
        live: &Arc<AtomicUsize>,
        bytes: &[u8],
    ) -> Option<KvBlock> {
        if bytes.len() != layout.bytes() {
            return None;
        }
        let mut b = KvBlock::new(layout, live);
        match &mut b.store {
            Store::F32(v) => {
                for (x, c) in v.iter_mut().zip(bytes.chunks_exact(4)) {
                    *x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
            Store::F16(v) => {
                for (x, c) in v.iter_mut().zip(bytes.chunks_exact(2)) {
                    *x = f16::from_bits(u16::from_le_bytes([c[0], c[1]]));
                }
            }
        }
        Some(b)
    }

    /// Start of layer `il`'s keys; its values follow `KV_BLOCK_TOKENS` key rows later.
    fn layer_base(&self, il: usize) -> usize {
        il * self.layout.layer_elems()
    }

    /// Layer `il`'s first `rows` key rows and value rows, as stored.
    fn rows(&self, il: usize, rows: usize) -> (Paged1<'_>, Paged1<'_>) {
        let (kw, vw) = (self.layout.k_width, self.layout.v_width);
        let k0 = self.layer_base(il);
        let v0 = k0 + KV_BLOCK_TOKENS * kw;
        match &self.store {
            Store::F32(d) => (
                Paged1::F32(&d[k0..k0 + rows * kw]),
                Paged1::F32(&d[v0..v0 + rows * vw]),
            ),
            Store::F16(d) => (
                Paged1::F16(&d[k0..k0 + rows * kw]),
                Paged1::F16(&d[v0..v0 + rows * vw]),
            ),
        }
    }
}

impl Clone for KvBlock {
    /// A private copy (copy-on-write of a shared block): counted like any block.
    fn clone(&self) -> KvBlock {
        self.live.fetch_add(self.bytes(), Ordering::Relaxed);
        KvBlock {
            store: self.store.clone(),
            layout: self.layout,
            live: self.live.clone(),
        }
    }
}

impl Drop for KvBlock {
    fn drop(&mut self) {
        self.live.fetch_sub(self.bytes(), Ordering::Relaxed);
    }
}

/// One block's rows of one layer.
enum Paged1<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
}

/// One layer's cached keys and values as attention reads them: a slice per block.
pub(crate) enum History<'a> {
    F32(Vec<&'a [f32]>, Vec<&'a [f32]>),
    F16(Vec<&'a [f16]>, Vec<&'a [f16]>),
}

impl History<'_> {
    pub(crate) fn paged(&self) -> (Paged<'_>, Paged<'_>) {
        match self {
            History::F32(k, v) => (Paged::F32(k), Paged::F32(v)),
            History::F16(k, v) => (Paged::F16(k), Paged::F16(v)),
        }
    }
}

/// The blocks of one sequence, in position order.
#[derive(Clone, Debug)]
pub(crate) struct KvCache {
    blocks: Vec<Arc<KvBlock>>,
    layout: Layout,
    live: Arc<AtomicUsize>,
}

impl KvCache {
    pub(crate) fn new(layout: Layout, live: Arc<AtomicUsize>) -> KvCache {
        KvCache {
            blocks: Vec::new(),
            layout,
            live,
        }
    }

    pub(crate) fn kv_type(&self) -> KvType {
        self.layout.ty
    }

    pub(crate) fn blocks(&self) -> &[Arc<KvBlock>] {
        &self.blocks
    }

    pub(crate) fn set_blocks(&mut self, blocks: Vec<Arc<KvBlock>>) {
        self.blocks = blocks;
    }

    /// Keeps the blocks holding positions `..n`.
    pub(crate) fn keep(&mut self, n: usize) {
        self.blocks.truncate(n.div_ceil(KV_BLOCK_TOKENS));
    }

    /// Makes positions `from..to` writable: new blocks for positions past the last
    /// block, and a private copy of a block others still hold (the shared last block
    /// of a forked sequence, written from its middle).
    pub(crate) fn reserve(&mut self, from: usize, to: usize) {
        if from >= to {
            return;
        }
        let (first, end) = (from / KV_BLOCK_TOKENS, to.div_ceil(KV_BLOCK_TOKENS));
        for b in first..end {
            if b < self.blocks.len() {
                Arc::make_mut(&mut self.blocks[b]);
            } else {
                self.blocks
                    .push(Arc::new(KvBlock::new(self.layout, &self.live)));
            }
        }
    }

    /// Stores the key and value of `pos` in layer `il` (reserved first). A layer's
    /// rows may be narrower than the layout's (Gemma 4's sliding layers have smaller
    /// heads): they are stored at their own stride, as `history` is read with it.
    pub(crate) fn write(&mut self, il: usize, pos: usize, k: &[f32], v: &[f32]) {
        let (kw, vw) = (k.len(), v.len());
        assert!(kw <= self.layout.k_width && vw <= self.layout.v_width);
        let block = Arc::get_mut(&mut self.blocks[pos / KV_BLOCK_TOKENS])
            .expect("a written block is reserved (private) first");
        let row = pos % KV_BLOCK_TOKENS;
        let k0 = block.layer_base(il);
        // Values start after a whole block of the layout's key rows, as `rows` reads.
        let v0 = k0 + KV_BLOCK_TOKENS * self.layout.k_width;
        block.store.write(k0 + row * kw, &k[..kw]);
        block.store.write(v0 + row * vw, &v[..vw]);
    }

    /// Layer `il`'s keys and values of positions `..end`, read in place: one slice per
    /// block (the last one cut at `end`), so that position `j` is row `j % B` of
    /// slice `j / B`. Nothing is copied.
    pub(crate) fn history(&self, il: usize, end: usize) -> History<'_> {
        let n_blocks = end.div_ceil(KV_BLOCK_TOKENS);
        assert!(n_blocks <= self.blocks.len(), "positions ..{end} are held");
        let rows_of = |b: usize| (end - b * KV_BLOCK_TOKENS).min(KV_BLOCK_TOKENS);
        match self.layout.ty {
            KvType::F32 => {
                let (mut ks, mut vs) = (Vec::with_capacity(n_blocks), Vec::new());
                vs.reserve(n_blocks);
                for b in 0..n_blocks {
                    if let (Paged1::F32(k), Paged1::F32(v)) = self.blocks[b].rows(il, rows_of(b)) {
                        ks.push(k);
                        vs.push(v);
                    }
                }
                History::F32(ks, vs)
            }
            KvType::F16 => {
                let (mut ks, mut vs) = (Vec::with_capacity(n_blocks), Vec::new());
                vs.reserve(n_blocks);
                for b in 0..n_blocks {
                    if let (Paged1::F16(k), Paged1::F16(v)) = self.blocks[b].rows(il, rows_of(b)) {
                        ks.push(k);
                        vs.push(v);
                    }
                }
                History::F16(ks, vs)
            }
        }
    }

    /// Copies the keys and values of positions `range` of layer `il` into `k` and `v`
    /// (row after row, as f32): the tests' reference for `history`.
    #[cfg(test)]
    pub(crate) fn gather(
        &self,
        il: usize,
        range: std::ops::Range<usize>,
        k: &mut Vec<f32>,
        v: &mut Vec<f32>,
    ) {
        let (kw, vw) = (self.layout.k_width, self.layout.v_width);
        k.resize(range.len() * kw, 0.0);
        v.resize(range.len() * vw, 0.0);
        for (i, pos) in range.enumerate() {
            let block = &self.blocks[pos / KV_BLOCK_TOKENS];
            let row = pos % KV_BLOCK_TOKENS;
            let k0 = block.layer_base(il);
            let v0 = k0 + KV_BLOCK_TOKENS * kw;
            block
                .store
                .read(k0 + row * kw, &mut k[i * kw..(i + 1) * kw]);
            block
                .store
                .read(v0 + row * vw, &mut v[i * vw..(i + 1) * vw]);
        }
    }

    /// Bytes of the blocks this sequence holds (shared ones counted in full).
    pub(crate) fn bytes(&self) -> usize {
        self.blocks.len() * self.layout.bytes()
    }
}

/// One sequence's state: its KV blocks and how many positions it holds. Create it
/// with [`crate::Model::new_sequence`] (or [`crate::Model::sequence_from_blocks`]);
/// it belongs to that model.
#[derive(Clone, Debug)]
pub struct SeqState {
    pub(crate) kv: KvCache,
    pub(crate) n_past: usize,
    pub(crate) n_ctx: usize,
    /// Identifies the model the cache was built for.
    pub(crate) model_id: usize,
    /// The linear-attention layers' state, for a hybrid model (Qwen 3.5).
    pub(crate) recurrent: Option<RecurrentState>,
    /// The cache on the GPU, for a model that runs there (`kv` then stays empty).
    #[cfg(feature = "gpu")]
    pub(crate) device: Option<DeviceKv>,
}

impl SeqState {
    /// Positions already evaluated (the next token goes at this position).
    pub fn len(&self) -> usize {
        self.n_past
    }

    pub fn is_empty(&self) -> bool {
        self.n_past == 0
    }

    /// The most positions this sequence may hold.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Forgets every position, to start a new prompt.
    pub fn clear(&mut self) {
        self.kv.keep(0);
        self.n_past = 0;
        if let Some(r) = &mut self.recurrent {
            r.reset();
        }
    }

    /// Keeps only the first `n` positions (to reuse a shared prompt prefix). Returns
    /// false, changing nothing, when `n` is beyond the held positions, or when the
    /// sequence has a recurrent state (a hybrid model) and `n` is neither 0 nor all of
    /// them: that state cannot be cut back, only replaced by a checkpoint taken at `n`
    /// ([`SeqState::restore_recurrent`]).
    pub fn truncate(&mut self, n: usize) -> bool {
        if n > self.n_past {
            return false;
        }
        if let Some(r) = &mut self.recurrent {
            match n {
                0 => r.reset(),
                n if n == self.n_past => {}
                _ => return false,
            }
        }
        self.kv.keep(n);
        self.n_past = n;
        true
    }

    /// The recurrent state of a hybrid model's sequence (`None` for other models). A
    /// clone of it is a checkpoint at [`RecurrentState::positions`].
    pub fn recurrent(&self) -> Option<&RecurrentState> {
        self.recurrent.as_ref()
    }

    /// Goes back to a checkpoint taken from this sequence (or one sharing its first
    /// `state.positions()` tokens): keeps that many positions of KV and continues from
    /// `state`. Returns false, changing nothing, when the state is not of this model's
    /// shape, the sequence has none, or it holds fewer positions than the checkpoint.
    pub fn restore_recurrent(&mut self, state: RecurrentState) -> bool {
        let n = state.positions();
        match &self.recurrent {
            Some(r) if r.layout() == state.layout() && n <= self.n_past => {}
            _ => return false,
        }
        self.kv.keep(n);
        self.n_past = n;
        self.recurrent = Some(state);
        true
    }

    /// The blocks holding this sequence's positions, in order (the last one may be
    /// partly filled): what a prefix cache or a fork shares.
    pub fn blocks(&self) -> &[Arc<KvBlock>] {
        self.kv.blocks()
    }

    /// The sequence's blocks and recurrent state, taken apart (a finished sequence
    /// whose state a prefix cache keeps as a checkpoint: moved, not copied).
    pub fn into_parts(self) -> (Vec<Arc<KvBlock>>, Option<RecurrentState>) {
        (self.kv.blocks, self.recurrent)
    }

    /// A new sequence holding this one's positions, sharing every block (no copy):
    /// a write into the shared last block copies that block first. A recurrent state
    /// is copied (it is fixed-size and rewritten every step).
    pub fn fork(&self) -> SeqState {
        self.clone()
    }

    /// Bytes held by the KV blocks (blocks shared with other sequences counted in
    /// full) and the recurrent state.
    pub fn kv_bytes(&self) -> usize {
        let recurrent = self.recurrent.as_ref().map_or(0, |r| r.bytes());
        #[cfg(feature = "gpu")]
        if let Some(d) = &self.device {
            return self.kv.bytes() + d.bytes() + recurrent;
        }
        self.kv.bytes() + recurrent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(ty: KvType, n_layer: usize, kw: usize, vw: usize) -> KvCache {
        let layout = Layout {
            model_id: 0,
            n_layer,
            k_width: kw,
            v_width: vw,
            ty,
        };
        KvCache::new(layout, Arc::new(AtomicUsize::new(0)))
    }

    fn fill(c: &mut KvCache, range: std::ops::Range<usize>) {
        c.reserve(range.start, range.end);
        for pos in range {
            let p = pos as f32;
            for il in 0..c.layout.n_layer {
                c.write(il, pos, &[p, -p], &[p * 10.0 + il as f32]);
            }
        }
    }

    /// In-place views and gathered copies give the same rows.
    #[test]
    fn history_reads_what_gather_copies() {
        for ty in [KvType::F32, KvType::F16] {
            let mut c = cache(ty, 2, 2, 1);
            let n = 3 * KV_BLOCK_TOKENS + 5;
            fill(&mut c, 0..n);
            for il in 0..2 {
                for end in [0, 1, KV_BLOCK_TOKENS, KV_BLOCK_TOKENS + 1, n] {
                    let (mut k, mut v) = (Vec::new(), Vec::new());
                    c.gather(il, 0..end, &mut k, &mut v);
                    let h = c.history(il, end);
                    let (hk, hv) = h.paged();
                    let read = |p: Paged, w: usize| -> Vec<f32> {
                        (0..end)
                            .flat_map(|j| (0..w).map(move |i| p.row(j, w).get(i)))
                            .collect()
                    };
                    assert_eq!((read(hk, 2), read(hv, 1)), (k, v), "{ty:?} {il} ..{end}");
                }
            }
        }
    }

    /// A fork shares every block; writing past the shared part copies only the
    /// shared last block, and the parent still reads its own values.
    #[test]
    fn forks_share_blocks_and_copy_the_last_on_write() {
        let mut a = cache(KvType::F32, 1, 2, 1);
        let n = 2 * KV_BLOCK_TOKENS + 3;
        fill(&mut a, 0..n);
        let live = a.live.clone();
        let before = live.load(Ordering::Relaxed);
        let mut b = a.clone();
        assert_eq!(
            live.load(Ordering::Relaxed),
            before,
            "a fork copies nothing"
        );
        b.reserve(n, n + 1);
        b.write(0, n, &[-1.0, -1.0], &[-1.0]);
        // The two full blocks are still shared; the partial one was copied.
        assert!(Arc::ptr_eq(&a.blocks[0], &b.blocks[0]));
        assert!(Arc::ptr_eq(&a.blocks[1], &b.blocks[1]));
        assert!(!Arc::ptr_eq(&a.blocks[2], &b.blocks[2]));
        assert_eq!(live.load(Ordering::Relaxed), before + a.layout.bytes());
        let (mut k, mut v) = (Vec::new(), Vec::new());
        b.gather(0, n - 1..n + 1, &mut k, &mut v);
        assert_eq!(v, [(n - 1) as f32 * 10.0, -1.0]);
        drop(b);
        assert_eq!(live.load(Ordering::Relaxed), before);
    }

    #[test]
    fn blocks_round_trip_through_bytes() {
        for ty in [KvType::F32, KvType::F16] {
            let mut c = cache(ty, 2, 2, 1);
            fill(&mut c, 0..7);
            let b = &c.blocks[0];
            let bytes = b.to_le_bytes();
            assert_eq!(bytes.len(), b.bytes());
            let back = KvBlock::from_le_bytes(c.layout, &c.live, &bytes).unwrap();
            assert_eq!(back.to_le_bytes(), bytes);
            assert!(KvBlock::from_le_bytes(c.layout, &c.live, &bytes[1..]).is_none());
        }
    }

    #[test]
    fn f16_storage_rounds_to_half_precision() {
        let mut c = cache(KvType::F16, 1, 1, 1);
        c.reserve(0, 1);
        c.write(0, 0, &[1.0 / 3.0], &[2.0]);
        let (mut k, mut v) = (Vec::new(), Vec::new());
        c.gather(0, 0..1, &mut k, &mut v);
        assert_eq!(k[0], f16::from_f32(1.0 / 3.0).to_f32());
        assert_eq!(v[0], 2.0);
    }
}
