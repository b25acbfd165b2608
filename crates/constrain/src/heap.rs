//! Heap bytes a compiled constraint keeps alive, estimated for the byte budget of
//! [`ConstraintCache`](crate::ConstraintCache).
//!
//! Counted: every `Vec` by its capacity and every boxed slice by its length, times the
//! element size; every hash map by its buckets (capacity × 8/7, one control byte per
//! bucket besides the entry); each `Arc`'d table once per constraint, however many
//! places of it share the table. Not counted: allocator overhead, and the vocabulary
//! with its caches, which every constraint of a model shares.

use rustc_hash::FxHashSet;
use std::collections::HashMap;
use std::mem::size_of;

/// Bytes of a vector's buffer.
#[allow(clippy::ptr_arg)] // the capacity is the point
pub(crate) fn vec<T>(v: &Vec<T>) -> usize {
    v.capacity() * size_of::<T>()
}

/// Bytes of a boxed slice.
pub(crate) fn slice<T>(s: &[T]) -> usize {
    std::mem::size_of_val(s)
}

/// Bytes of a hash map's table (the entries' own heap is the caller's to add).
pub(crate) fn map<K, V, S>(m: &HashMap<K, V, S>) -> usize {
    m.capacity() * 8 / 7 * (size_of::<(K, V)>() + 1)
}

/// Shared tables already counted for one constraint, by address.
#[derive(Default)]
pub(crate) struct Seen(FxHashSet<usize>);

impl Seen {
    /// True the first time the table at `ptr` is met.
    pub(crate) fn first<T>(&mut self, ptr: *const T) -> bool {
        self.0.insert(ptr as usize)
    }
}
