//! A sequence's recurrent state: what a linear-attention (Gated DeltaNet) layer keeps
//! instead of keys and values. Its size is fixed whatever the sequence's length: per
//! linear layer the conv's last `conv - 1` inputs and one square matrix per value head.
//! It lives in the [`SeqState`](super::SeqState) beside the KV blocks and advances with
//! every step; unlike the blocks it cannot be cut back to an earlier position, only
//! replaced by a copy taken there (a checkpoint: [`RecurrentState`] is `Clone`, and
//! [`RecurrentState::to_le_bytes`] / `Model::recurrent_from_bytes` round-trip it).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The shape of a model's recurrent states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecurrentLayout {
    pub(crate) model_id: usize,
    /// Linear layers.
    pub(crate) n_layers: usize,
    /// Floats of one layer's conv state: `conv - 1` values per channel, channel after
    /// channel (llama.cpp's `[conv - 1, channels]`).
    pub(crate) conv_len: usize,
    /// Floats of one layer's delta-rule state: per value head a square whose row j
    /// (value j) runs over the keys (llama.cpp's `[d, d, heads]`).
    pub(crate) matrix_len: usize,
}

impl RecurrentLayout {
    fn layer_len(&self) -> usize {
        self.conv_len + self.matrix_len
    }

    fn elems(&self) -> usize {
        self.n_layers * self.layer_len()
    }

    /// Bytes of one state.
    pub(crate) fn bytes(&self) -> usize {
        self.elems() * 4
    }
}

/// The recurrent state of one sequence of a hybrid model (Qwen 3.5) after its first
/// [`positions`](RecurrentState::positions) tokens. A copy is a checkpoint: a
/// sequence restored from it (`SeqState::restore_recurrent`) continues from there.
#[derive(Debug)]
pub struct RecurrentState {
    layout: RecurrentLayout,
    data: Vec<f32>,
    positions: usize,
    /// The model's count of bytes held by live KV blocks and recurrent states.
    live: Arc<AtomicUsize>,
}

impl RecurrentState {
    /// The state before any token: zeros.
    pub(crate) fn new(layout: RecurrentLayout, live: &Arc<AtomicUsize>) -> RecurrentState {
        live.fetch_add(layout.bytes(), Ordering::Relaxed);
        RecurrentState {
            layout,
            data: vec![0.0; layout.elems()],
            positions: 0,
            live: live.clone(),
        }
    }

    pub(crate) fn layout(&self) -> RecurrentLayout {
        self.layout
    }

    /// Tokens folded into the state.
    pub fn positions(&self) -> usize {
        self.positions
    }

    pub(crate) fn set_positions(&mut self, n: usize) {
        self.positions = n;
    }

    /// Bytes of the state (the same for every position).
    pub fn bytes(&self) -> usize {
        self.layout.bytes()
    }

    /// Back to the state before any token.
    pub(crate) fn reset(&mut self) {
        self.data.fill(0.0);
        self.positions = 0;
    }

    /// Linear layer `l`'s conv state and delta-rule state.
    pub(crate) fn layer_mut(&mut self, l: usize) -> (&mut [f32], &mut [f32]) {
        let len = self.layout.layer_len();
        let all = &mut self.data[l * len..(l + 1) * len];
        all.split_at_mut(self.layout.conv_len)
    }

    /// The state's floats as little-endian bytes, layer after layer (conv state, then
    /// the matrices), for snapshots; `Model::recurrent_from_bytes` reads them back.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.data.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// A state of `layout` after `positions` tokens from [`to_le_bytes`]'s output;
    /// `None` when the length is not that layout's.
    ///
    /// [`to_le_bytes`]: RecurrentState::to_le_bytes
    pub(crate) fn from_le_bytes(
        layout: RecurrentLayout,
        live: &Arc<AtomicUsize>,
        positions: usize,
        bytes: &[u8],
    ) -> Option<RecurrentState> {
        if bytes.len() != layout.bytes() {
            return None;
        }
        let mut s = RecurrentState::new(layout, live);
        for (x, c) in s.data.iter_mut().zip(bytes.chunks_exact(4)) {
            *x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        s.positions = positions;
        Some(s)
    }
}

impl Clone for RecurrentState {
    /// A copy (a fork, a checkpoint): counted like any state.
    fn clone(&self) -> RecurrentState {
        self.live.fetch_add(self.bytes(), Ordering::Relaxed);
        RecurrentState {
            layout: self.layout,
            data: self.data.clone(),
            positions: self.positions,
            live: self.live.clone(),
        }
    }
}

impl Drop for RecurrentState {
    fn drop(&mut self) {
        self.live.fetch_sub(self.bytes(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> RecurrentLayout {
        RecurrentLayout {
            model_id: 1,
            n_layers: 2,
            conv_len: 3,
            matrix_len: 4,
        }
    }

    #[test]
    fn states_round_trip_through_bytes_and_are_counted() {
        let live = Arc::new(AtomicUsize::new(0));
        let mut s = RecurrentState::new(layout(), &live);
        assert_eq!(live.load(Ordering::Relaxed), 2 * 7 * 4);
        let (conv, m) = s.layer_mut(1);
        conv[2] = 1.5;
        m[3] = -2.0;
        s.set_positions(9);
        let bytes = s.to_le_bytes();
        let back = RecurrentState::from_le_bytes(layout(), &live, 9, &bytes).unwrap();
        assert_eq!((back.to_le_bytes(), back.positions()), (bytes.clone(), 9));
        assert!(RecurrentState::from_le_bytes(layout(), &live, 9, &bytes[1..]).is_none());
        let fork = back.clone();
        assert_eq!(live.load(Ordering::Relaxed), 3 * 2 * 7 * 4);
        drop((s, back, fork));
        assert_eq!(live.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn reset_zeroes_the_state() {
        let live = Arc::new(AtomicUsize::new(0));
        let mut s = RecurrentState::new(layout(), &live);
        s.layer_mut(0).1[0] = 3.0;
        s.set_positions(4);
        s.reset();
        assert_eq!(s.positions(), 0);
        assert!(s.to_le_bytes().iter().all(|&b| b == 0));
    }
}
