//! Key and value rows as attention reads them: f32 (the batch's own, or an f32 cache)
//! or f16 (an f16 cache read in place, converted lane by lane as it is loaded, so the
//! cache is streamed at half the bytes and never copied).

use half::f16;

use super::KV_BLOCK_TOKENS;

/// A layer's cached rows, one slice per KV block: position `j` is row
/// `j % KV_BLOCK_TOKENS` of slice `j / KV_BLOCK_TOKENS` (see `KvCache::history`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Paged<'a> {
    F32(&'a [&'a [f32]]),
    F16(&'a [&'a [f16]]),
}

impl<'a> Paged<'a> {
    /// Position `j`'s row of `width` values (all KV heads).
    #[inline(always)]
    pub(crate) fn row(self, j: usize, width: usize) -> Row<'a> {
        let (b, r) = (j / KV_BLOCK_TOKENS, j % KV_BLOCK_TOKENS);
        match self {
            Paged::F32(v) => Row::F32(&v[b][r * width..(r + 1) * width]),
            Paged::F16(v) => Row::F16(&v[b][r * width..(r + 1) * width]),
        }
    }

    /// Whether positions `..end` have rows of `width` values.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) fn holds(self, end: usize, width: usize) -> bool {
        fn holds_of<E>(v: &[&[E]], end: usize, width: usize) -> bool {
            (0..end.div_ceil(KV_BLOCK_TOKENS)).all(|b| {
                let rows = (end - b * KV_BLOCK_TOKENS).min(KV_BLOCK_TOKENS);
                v.get(b).is_some_and(|s| s.len() >= rows * width)
            })
        }
        match self {
            Paged::F32(v) => holds_of(v, end, width),
            Paged::F16(v) => holds_of(v, end, width),
        }
    }
}

/// A pointer to position `j`'s row (`width` values) in per-block slices.
///
/// # Safety
/// Position `j` is held (see [`Paged::holds`]).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
pub(crate) unsafe fn paged_row<E>(blocks: &[&[E]], j: usize, width: usize) -> *const E {
    blocks
        .get_unchecked(j / KV_BLOCK_TOKENS)
        .as_ptr()
        .add((j % KV_BLOCK_TOKENS) * width)
}

/// `len` values of one row.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Row<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
}

impl<'a> Row<'a> {
    /// Values `start..start + len`.
    #[inline(always)]
    pub(crate) fn slice(self, start: usize, len: usize) -> Row<'a> {
        match self {
            Row::F32(v) => Row::F32(&v[start..start + len]),
            Row::F16(v) => Row::F16(&v[start..start + len]),
        }
    }

    /// Value `i` as f32.
    #[inline(always)]
    pub(crate) fn get(self, i: usize) -> f32 {
        match self {
            Row::F32(v) => v[i],
            Row::F16(v) => v[i].to_f32(),
        }
    }
}

/// An element type attention rows come in (used by the x86-64 attention kernels).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) trait Elem: Copy {
    fn to_f32(self) -> f32;

    /// Eight elements at `p` as f32 lanes. Requires AVX2 and F16C.
    ///
    /// # Safety
    /// `p..p + 8` must be readable and the CPU must have AVX2 and F16C.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
}

impl Elem for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> std::arch::x86_64::__m256 {
        std::arch::x86_64::_mm256_loadu_ps(p)
    }
}

impl Elem for f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
    }
}
