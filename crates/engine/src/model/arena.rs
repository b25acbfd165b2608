//! Memory for the weights rewritten at load (the interleaved copies): one anonymous
//! mapping, sized up front, that the kernel is asked to back with 2 MiB pages. Every
//! decode step streams all the weights; with 4 KiB pages that is a TLB miss, and a
//! page boundary the hardware prefetchers stop at, every 4 KiB.

use std::cell::Cell;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use memmap2::{Advice, MmapMut, MmapOptions};

const HUGE_PAGE: usize = 2 << 20;
/// Every allocation starts on a cache line.
const ALIGN: usize = 64;

/// A bump allocator over one mapping. Single-threaded: it lives for one load.
pub(crate) struct Arena {
    map: Option<Arc<MmapMut>>,
    /// The first 2 MiB boundary of the mapping: allocations start there.
    base: *mut u8,
    cap: usize,
    used: Cell<usize>,
}

/// Bytes a weight was rewritten into: a piece of an arena or, past its end, a heap
/// buffer. Cheap to clone.
#[derive(Clone)]
pub(crate) enum PackedBytes {
    Arena {
        /// Keeps the mapping alive.
        _map: Arc<MmapMut>,
        ptr: *const u8,
        len: usize,
    },
    Heap(Arc<Vec<u8>>),
}

// SAFETY: the arena bytes are written once, before the value exists, and only read
// afterwards; the mapping outlives every value through `_map`.
unsafe impl Send for PackedBytes {}
unsafe impl Sync for PackedBytes {}

impl Deref for PackedBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            // SAFETY: `ptr..ptr + len` lies in the mapping `_map` keeps alive, was
            // handed out once and is never written again.
            PackedBytes::Arena { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(*ptr, *len)
            },
            PackedBytes::Heap(v) => v,
        }
    }
}

impl fmt::Debug for PackedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = match self {
            PackedBytes::Arena { .. } => "arena",
            PackedBytes::Heap(_) => "heap",
        };
        write!(f, "PackedBytes({place}, {} bytes)", self.len())
    }
}

impl Arena {
    /// An arena for `bytes` bytes of allocations (each counted at its
    /// [`Arena::footprint`]). Pages are touched only as they are filled, so an
    /// overestimate costs address space, not memory. If the mapping cannot be made,
    /// every allocation goes to the heap.
    pub(crate) fn with_capacity(bytes: usize) -> Arena {
        let empty = Arena {
            map: None,
            base: std::ptr::null_mut(),
            cap: 0,
            used: Cell::new(0),
        };
        if bytes == 0 {
            return empty;
        }
        let Ok(mut map) = MmapOptions::new().len(bytes + HUGE_PAGE).map_anon() else {
            return empty;
        };
        // Only a hint: without 2 MiB pages the arena works the same, a little slower.
        let _ = map.advise(Advice::HugePage);
        let addr = map.as_mut_ptr() as usize;
        let skip = addr.next_multiple_of(HUGE_PAGE) - addr;
        Arena {
            // SAFETY: `skip < HUGE_PAGE`, so the pointer stays inside the mapping.
            base: unsafe { map.as_mut_ptr().add(skip) },
            map: Some(Arc::new(map)),
            cap: bytes,
            used: Cell::new(0),
        }
    }

    /// What an allocation of `len` bytes takes from the arena.
    pub(crate) fn footprint(len: usize) -> usize {
        len.next_multiple_of(ALIGN)
    }

    /// `len` zeroed bytes, handed to `fill` to be written, then frozen.
    pub(super) fn alloc<E>(
        &self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<PackedBytes, E> {
        let start = self.used.get();
        match &self.map {
            Some(map) if start + Self::footprint(len) <= self.cap => {
                self.used.set(start + Self::footprint(len));
                // SAFETY: `start..start + len` is inside the mapping (`cap` plus the
                // skipped head fit in it) and is handed out only this once; the mapping
                // is fresh anonymous memory, so the bytes are zero.
                let dst = unsafe { std::slice::from_raw_parts_mut(self.base.add(start), len) };
                fill(dst)?;
                Ok(PackedBytes::Arena {
                    _map: Arc::clone(map),
                    ptr: dst.as_ptr(),
                    len,
                })
            }
            _ => {
                let mut v = vec![0u8; len];
                fill(&mut v)?;
                Ok(PackedBytes::Heap(Arc::new(v)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_disjoint_zeroed_and_spill_to_the_heap() {
        let arena = Arena::with_capacity(Arena::footprint(100) + Arena::footprint(3));
        let fill = |v: u8| {
            move |b: &mut [u8]| -> Result<(), ()> {
                assert!(b.iter().all(|&x| x == 0));
                b.fill(v);
                Ok(())
            }
        };
        let a = arena.alloc(100, fill(1)).unwrap();
        let b = arena.alloc(3, fill(2)).unwrap();
        let c = arena.alloc(10, fill(3)).unwrap();
        assert!(matches!(a, PackedBytes::Arena { .. }));
        assert!(matches!(b, PackedBytes::Arena { .. }));
        assert!(matches!(c, PackedBytes::Heap(_)));
        assert_eq!(a.as_ptr() as usize % ALIGN, 0);
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        assert!(a.iter().all(|&x| x == 1) && a.len() == 100);
        assert!(b.iter().all(|&x| x == 2) && b.len() == 3);
        assert!(c.iter().all(|&x| x == 3) && c.len() == 10);
        drop(arena);
        // The mapping lives as long as the bytes do.
        assert_eq!(a[99], 1);
    }

    #[test]
    fn a_failed_fill_is_returned() {
        let arena = Arena::with_capacity(64);
        assert_eq!(arena.alloc(8, |_| Err("no")).unwrap_err(), "no");
    }
}
