//! A block's storage: zeroed pages of its own, mapped from the OS.
//!
//! Blocks come and go all the time under a prefix cache (eviction frees them, new
//! prompts allocate them), and a heap allocator may keep freed memory: glibc raises
//! its mmap threshold after the first large free, after which freed blocks stay in
//! its arenas, so resident memory follows the most blocks ever alive rather than
//! those alive now. Mapping each block's pages directly makes a freed block's
//! memory go back to the OS at once, whatever the allocator, so the pool bound is a
//! bound on resident memory too.

use std::fmt;
use std::marker::PhantomData;

use half::f16;
use memmap2::MmapMut;

/// Element types a block may store: plain numbers, every bit pattern valid, zero
/// bits meaning zero.
pub(crate) trait Element: Copy {}
impl Element for f32 {}
impl Element for f16 {}

/// `len` elements of `T` in anonymous pages (zero until written; a page counts in
/// resident memory once touched).
pub(crate) struct Pages<T: Element> {
    map: Option<MmapMut>,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Element> Pages<T> {
    /// Zeroed storage for `len` elements. Panics only where the OS refuses the
    /// mapping, as a heap allocation aborts when memory runs out.
    pub(crate) fn zeroed(len: usize) -> Pages<T> {
        let bytes = len * std::mem::size_of::<T>();
        // A zero-length mapping is an error for the OS; an empty block needs none.
        let map = (bytes > 0).then(|| {
            MmapMut::map_anon(bytes)
                .unwrap_or_else(|e| panic!("cannot map {bytes} bytes for a KV block: {e}"))
        });
        Pages {
            map,
            len,
            _t: PhantomData,
        }
    }
}

impl<T: Element> std::ops::Deref for Pages<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.map {
            // SAFETY: the mapping is page-aligned (enough for any `Element`), holds
            // exactly `len` elements' bytes, and every bit pattern is a valid `T`.
            Some(m) => unsafe { std::slice::from_raw_parts(m.as_ptr().cast::<T>(), self.len) },
            None => &[],
        }
    }
}

impl<T: Element> std::ops::DerefMut for Pages<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.map {
            // SAFETY: as in `deref`; the mapping is owned, so the borrow is unique.
            Some(m) => unsafe {
                std::slice::from_raw_parts_mut(m.as_mut_ptr().cast::<T>(), self.len)
            },
            None => &mut [],
        }
    }
}

impl<T: Element> Clone for Pages<T> {
    fn clone(&self) -> Pages<T> {
        let mut copy = Pages::zeroed(self.len);
        copy.copy_from_slice(self);
        copy
    }
}

impl<T: Element> fmt::Debug for Pages<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pages({} elements)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_start_zeroed_and_copies_are_independent() {
        let mut a = Pages::<f32>::zeroed(10_000);
        assert!(a.iter().all(|&x| x == 0.0));
        a[9_999] = 1.5;
        let mut b = a.clone();
        b[0] = 2.0;
        assert_eq!((a[0], a[9_999]), (0.0, 1.5));
        assert_eq!((b[0], b[9_999]), (2.0, 1.5));
        let h = Pages::<f16>::zeroed(3);
        assert_eq!(&*h, &[f16::ZERO; 3]);
        assert!(Pages::<f32>::zeroed(0).is_empty());
    }
}
