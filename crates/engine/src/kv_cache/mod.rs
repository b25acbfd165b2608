//! Per-sequence key/value cache.
//!
//! Every layer keeps the keys and values of the positions it may still attend to.
//! Global layers keep every position (growing up to the context size); sliding-window
//! layers keep only the last `window` positions in a ring buffer. Storage is f32 by
//! default or f16 to halve the memory (as llama.cpp does by default).

pub(crate) mod rows;

use half::f16;
use half::slice::HalfFloatSliceExt;

use rows::Rows;

/// Element type of the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KvType {
    #[default]
    F32,
    F16,
}

#[derive(Clone, Debug)]
enum Store {
    F32(Vec<f32>),
    F16(Vec<f16>),
}

impl Store {
    fn new(ty: KvType) -> Store {
        match ty {
            KvType::F32 => Store::F32(Vec::new()),
            KvType::F16 => Store::F16(Vec::new()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Store::F32(v) => v.len(),
            Store::F16(v) => v.len(),
        }
    }

    fn clear(&mut self) {
        match self {
            Store::F32(v) => v.clear(),
            Store::F16(v) => v.clear(),
        }
    }

    fn grow_to(&mut self, n: usize) {
        if n > self.len() {
            match self {
                Store::F32(v) => v.resize(n, 0.0),
                Store::F16(v) => v.resize(n, f16::ZERO),
            }
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

/// A store's elements by pointer, for [`KvWriter`].
#[derive(Clone, Copy)]
enum RawStore {
    F32(*mut f32, usize),
    F16(*mut f16, usize),
}

impl RawStore {
    fn of(store: &mut Store) -> RawStore {
        match store {
            Store::F32(v) => RawStore::F32(v.as_mut_ptr(), v.len()),
            Store::F16(v) => RawStore::F16(v.as_mut_ptr(), v.len()),
        }
    }

    /// # Safety
    /// No other thread reads or writes elements `at..at + src.len()` meanwhile, and
    /// the store has not been resized since `of`.
    unsafe fn write(self, at: usize, src: &[f32]) {
        match self {
            RawStore::F32(p, len) => {
                assert!(at + src.len() <= len);
                std::slice::from_raw_parts_mut(p.add(at), src.len()).copy_from_slice(src)
            }
            RawStore::F16(p, len) => {
                assert!(at + src.len() <= len);
                std::slice::from_raw_parts_mut(p.add(at), src.len()).convert_from_f32_slice(src)
            }
        }
    }
}

/// Stores keys and values of a layer's new positions (see [`KvCache::writer`]). It
/// borrows nothing: the cache must not be resized or dropped while it is used, and
/// what it writes must not be read meanwhile (attention reads the cached positions,
/// which it does not touch, and the batch's own rows from the step's buffers).
pub(crate) struct KvWriter {
    k: RawStore,
    v: RawStore,
    window: Option<usize>,
    k_width: usize,
    v_width: usize,
    positions: std::ops::Range<usize>,
}

// SAFETY: writes go through `write`, whose callers keep concurrent writes disjoint.
unsafe impl Send for KvWriter {}
unsafe impl Sync for KvWriter {}

impl KvWriter {
    /// Stores `k` as the key columns from `k_col`, and `v` as the value columns from
    /// `v_col`, of position `pos`.
    ///
    /// # Safety
    /// The cache is still as [`KvCache::writer`] left it, and concurrent calls write
    /// different positions or columns.
    pub(crate) unsafe fn write(
        &self,
        pos: usize,
        (k_col, k): (usize, &[f32]),
        (v_col, v): (usize, &[f32]),
    ) {
        assert!(self.positions.contains(&pos));
        assert!(k_col + k.len() <= self.k_width && v_col + v.len() <= self.v_width);
        let slot = match self.window {
            Some(w) => pos % w,
            None => pos,
        };
        self.k.write(slot * self.k_width + k_col, k);
        self.v.write(slot * self.v_width + v_col, v);
    }
}

/// One layer's keys and values.
#[derive(Clone, Debug)]
struct LayerKv {
    /// Ring size for sliding layers; `None` keeps every position.
    window: Option<usize>,
    k_width: usize,
    v_width: usize,
    k: Store,
    v: Store,
}

impl LayerKv {
    fn slot(&self, pos: usize) -> usize {
        match self.window {
            Some(w) => pos % w,
            None => pos,
        }
    }
}

/// The cache of one sequence: all layers, and how many positions are filled.
#[derive(Clone, Debug)]
pub(crate) struct KvCache {
    layers: Vec<LayerKv>,
    ty: KvType,
}

impl KvCache {
    /// An empty cache. `windows[il]` is the sliding window of layer `il`, if any.
    pub(crate) fn new(
        ty: KvType,
        windows: &[Option<usize>],
        k_width: usize,
        v_width: usize,
    ) -> KvCache {
        let layers = windows
            .iter()
            .map(|&window| LayerKv {
                window,
                k_width,
                v_width,
                k: Store::new(ty),
                v: Store::new(ty),
            })
            .collect();
        KvCache { layers, ty }
    }

    pub(crate) fn kv_type(&self) -> KvType {
        self.ty
    }

    /// Drops every stored position (keeps the allocations).
    pub(crate) fn clear(&mut self) {
        for l in &mut self.layers {
            l.k.clear();
            l.v.clear();
        }
    }

    /// Stores the key and value of `pos` in layer `il`.
    pub(crate) fn write(&mut self, il: usize, pos: usize, k: &[f32], v: &[f32]) {
        let l = &mut self.layers[il];
        let slot = l.slot(pos);
        let (kw, vw) = (l.k_width, l.v_width);
        l.k.grow_to((slot + 1) * kw);
        l.v.grow_to((slot + 1) * vw);
        l.k.write(slot * kw, &k[..kw]);
        l.v.write(slot * vw, &v[..vw]);
    }

    /// Makes room for positions `range` of layer `il` and returns a writer that stores
    /// their keys and values a column range at a time, from several threads (the
    /// attention tasks, each its own KV head). A sliding layer's range must fit in the
    /// window (its slots must be distinct).
    pub(crate) fn writer(&mut self, il: usize, range: std::ops::Range<usize>) -> KvWriter {
        let l = &mut self.layers[il];
        assert!(l.window.is_none_or(|w| range.len() <= w));
        let end_slot = range.clone().map(|p| l.slot(p) + 1).max().unwrap_or(0);
        let (kw, vw) = (l.k_width, l.v_width);
        l.k.grow_to(end_slot * kw);
        l.v.grow_to(end_slot * vw);
        KvWriter {
            k: RawStore::of(&mut l.k),
            v: RawStore::of(&mut l.v),
            window: l.window,
            k_width: kw,
            v_width: vw,
            positions: range,
        }
    }

    /// Keys and values of positions `range` of layer `il`, read in place, f32 or f16 as
    /// stored: row after row from `range.start`'s, with `None`; or, where a sliding
    /// layer's ring has wrapped around, the whole ring, with `Some((row of range.start,
    /// rows in the ring))` (see `AttnArgs::old_ring`). Nothing is copied.
    pub(crate) fn history(
        &self,
        il: usize,
        range: std::ops::Range<usize>,
    ) -> (Rows<'_>, Rows<'_>, Option<(usize, usize)>) {
        let l = &self.layers[il];
        let (kw, vw) = (l.k_width, l.v_width);
        let first = l.slot(range.start);
        let wraps = !range.is_empty() && l.slot(range.end - 1) != first + range.len() - 1;
        let (rows, ring) = match l.window {
            // A ring only wraps once every one of its slots has been written.
            Some(w) if wraps => (0..w, Some((first, w))),
            _ => (first..first + range.len(), None),
        };
        let (ks, vs) = (
            rows.start * kw..rows.end * kw,
            rows.start * vw..rows.end * vw,
        );
        match (&l.k, &l.v) {
            (Store::F32(kd), Store::F32(vd)) => (Rows::F32(&kd[ks]), Rows::F32(&vd[vs]), ring),
            (Store::F16(kd), Store::F16(vd)) => (Rows::F16(&kd[ks]), Rows::F16(&vd[vs]), ring),
            _ => unreachable!("keys and values are stored alike"),
        }
    }

    /// Copies the keys and values of positions `range` of layer `il` into `k` and `v`
    /// (row after row, as f32): the tests' reference for `history`. The positions must
    /// still be held.
    #[cfg(test)]
    pub(crate) fn gather(
        &self,
        il: usize,
        range: std::ops::Range<usize>,
        k: &mut Vec<f32>,
        v: &mut Vec<f32>,
    ) {
        let l = &self.layers[il];
        let (kw, vw) = (l.k_width, l.v_width);
        k.resize(range.len() * kw, 0.0);
        v.resize(range.len() * vw, 0.0);
        for (i, pos) in range.enumerate() {
            let slot = l.slot(pos);
            l.k.read(slot * kw, &mut k[i * kw..(i + 1) * kw]);
            l.v.read(slot * vw, &mut v[i * vw..(i + 1) * vw]);
        }
    }

    /// Whether every layer still holds what a sequence cut back from `n_past` to `n`
    /// positions needs: a ring keeps only the last `window` positions written.
    fn can_rewind(&self, n_past: usize, n: usize) -> bool {
        self.layers.iter().all(|l| match l.window {
            None => true,
            Some(w) => n.saturating_sub(w - 1) >= n_past.saturating_sub(w),
        })
    }

    /// Bytes holding stored keys and values.
    pub(crate) fn bytes(&self) -> usize {
        let el = match self.ty {
            KvType::F32 => 4,
            KvType::F16 => 2,
        };
        self.layers
            .iter()
            .map(|l| (l.k.len() + l.v.len()) * el)
            .sum()
    }
}

/// One sequence's state: its KV cache and how many positions it holds. Create it
/// with [`crate::model::Model::new_sequence`]; it belongs to that model.
#[derive(Clone, Debug)]
pub struct SeqState {
    pub(crate) kv: KvCache,
    pub(crate) n_past: usize,
    pub(crate) n_ctx: usize,
    /// Identifies the model the cache was built for.
    pub(crate) model_id: usize,
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
        self.kv.clear();
        self.n_past = 0;
    }

    /// Keeps only the first `n` positions (to reuse a shared prompt prefix). Returns
    /// false, changing nothing, when `n` is beyond the held positions or when a
    /// sliding-window layer has already overwritten positions the shorter sequence
    /// would need (then [`SeqState::clear`] and re-feed instead).
    pub fn truncate(&mut self, n: usize) -> bool {
        if n > self.n_past || !self.kv.can_rewind(self.n_past, n) {
            return false;
        }
        self.n_past = n;
        true
    }

    /// Bytes held by the KV cache.
    pub fn kv_bytes(&self) -> usize {
        self.kv.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_layers_keep_only_the_window() {
        let mut c = KvCache::new(KvType::F32, &[Some(3), None], 2, 1);
        for pos in 0..10 {
            let p = pos as f32;
            c.write(0, pos, &[p, -p], &[p * 10.0]);
            c.write(1, pos, &[p, -p], &[p * 10.0]);
        }
        let (mut k, mut v) = (Vec::new(), Vec::new());
        c.gather(0, 7..10, &mut k, &mut v);
        assert_eq!(k, [7.0, -7.0, 8.0, -8.0, 9.0, -9.0]);
        assert_eq!(v, [70.0, 80.0, 90.0]);
        c.gather(1, 0..10, &mut k, &mut v);
        assert_eq!(v, (0..10).map(|p| p as f32 * 10.0).collect::<Vec<_>>());
        // The ring holds 3 positions of 2 + 1 floats; the global layer holds 10.
        assert_eq!(c.bytes(), (3 * 3 + 10 * 3) * 4);
    }

    /// In-place views and gathered copies give the same rows, wrapped ring or not.
    #[test]
    fn history_reads_what_gather_copies() {
        for ty in [KvType::F32, KvType::F16] {
            let mut c = KvCache::new(ty, &[Some(4), None], 2, 1);
            for pos in 0..10 {
                let p = pos as f32;
                c.write(0, pos, &[p, -p], &[p * 10.0]);
                c.write(1, pos, &[p, -p], &[p * 10.0]);
            }
            for (il, range) in [(0, 6..10), (0, 8..10), (0, 9..9), (1, 0..10), (1, 3..7)] {
                let (mut k, mut v) = (Vec::new(), Vec::new());
                c.gather(il, range.clone(), &mut k, &mut v);
                let (hk, hv, ring) = c.history(il, range.clone());
                // Row `i` of the range, through the ring where it wraps.
                let row = |i: usize| ring.map_or(i, |(first, rows)| (first + i) % rows);
                let rows_of = |r: Rows, width: usize| -> Vec<f32> {
                    (0..range.len())
                        .flat_map(|i| {
                            (0..width).map(move |c| r.slice(row(i) * width + c, 1).get(0))
                        })
                        .collect()
                };
                assert_eq!(
                    (rows_of(hk, 2), rows_of(hv, 1)),
                    (k.clone(), v.clone()),
                    "{ty:?} layer {il} {range:?}"
                );
                // 6..10 in a ring of 4 wraps (slots 2, 3, 0, 1); the others do not.
                assert_eq!(
                    ring.is_some(),
                    (il, range.clone()) == (0, 6..10),
                    "{range:?}"
                );
            }
        }
    }

    #[test]
    fn f16_storage_rounds_to_half_precision() {
        let mut c = KvCache::new(KvType::F16, &[None], 1, 1);
        c.write(0, 0, &[1.0 / 3.0], &[2.0]);
        let (mut k, mut v) = (Vec::new(), Vec::new());
        c.gather(0, 0..1, &mut k, &mut v);
        assert_eq!(k[0], f16::from_f32(1.0 / 3.0).to_f32());
        assert_eq!(v[0], 2.0);
    }
}
