//! The quantized activation blocks the kernels read, and the reference quantizer that
//! makes them (the faster quantizers give the same bits).
//!
//! Q8 blocks are ggml's Q8_0 and Q8_1 in one (quantized as ggml's reference quantizer
//! does), with the step and the block sum kept as f32 where ggml rounds them to f16:
//! measured against llama.cpp's logits, the rounding brought them no closer.

use std::mem::MaybeUninit;

use super::layout::{QK, QK_K};

/// A block of 32 activations quantized to i8: `x ≈ d * qs`, with `s = d * Σqs`. It is
/// the partner of Q4_0/Q5_0/Q8_0 weights (as ggml's Q8_0) and of Q4_1/Q5_1 weights,
/// whose minimum pairs with `s` (as ggml's Q8_1).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Q8Block {
    pub d: f32,
    pub s: f32,
    pub qs: [i8; QK],
    /// `Σqs`: kernels that shift signed weights to unsigned take the shift back with
    /// it, in integers, so their sums stay exact.
    pub isum: i32,
}

/// A super-block of 256 activations quantized to i8 (`x ≈ d * qs`) with the sums of
/// each 16 quants, the partner of the K-quants (ggml's Q8_K).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Q8KBlock {
    pub d: f32,
    pub qs: [i8; QK_K],
    pub bsums: [i16; 16],
}

/// Activation quantizers, one per partner format: a block of values in, a block out.
pub(crate) struct Quantizers {
    /// Each writes the blocks of the activations (whole blocks, as many as the slots)
    /// into the slots. Runs of blocks, not one block per call: the blocks are then
    /// built in place, not returned and copied (which cost as much as quantizing them),
    /// and runs can go to different threads.
    pub q8: fn(&[f32], &mut [MaybeUninit<Q8Block>]),
    pub q8k: fn(&[f32], &mut [MaybeUninit<Q8KBlock>]),
}

/// The reference quantizers, in plain Rust.
pub(crate) static PORTABLE_QUANTIZERS: Quantizers = Quantizers {
    q8: |x, out| fill_blocks(x, QK, out, quantize_q8),
    q8k: |x, out| fill_blocks(x, QK_K, out, quantize_q8k),
};

/// The blocks of `x` (`len` values each) by `one`, into `out`'s slots.
#[inline(always)]
fn fill_blocks<B>(x: &[f32], len: usize, out: &mut [MaybeUninit<B>], one: impl Fn(&[f32]) -> B) {
    assert_eq!(x.len(), out.len() * len);
    for (slot, c) in out.iter_mut().zip(x.chunks_exact(len)) {
        slot.write(one(c));
    }
}

/// Quantizes a block symmetrically: the largest magnitude maps to ±`levels`, each value
/// to the nearest integer step, handed to `put` with its index. Returns the step `d`
/// and the sum of the quants.
#[inline]
fn quantize_symmetric(x: &[f32], levels: i32, mut put: impl FnMut(usize, i32)) -> (f32, i32) {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let (d, id) = step(amax, levels);
    let mut sum = 0i32;
    for (i, v) in x.iter().enumerate() {
        let q = round_clamped(v * id, levels);
        put(i, q);
        sum += q;
    }
    (d, sum)
}

/// The step of a block whose largest magnitude is `amax`, and its reciprocal (0 for a
/// block of zeros), which values are multiplied by to become quants.
#[inline]
pub(crate) fn step(amax: f32, levels: i32) -> (f32, f32) {
    let d = amax / levels as f32;
    (d, if d != 0.0 { 1.0 / d } else { 0.0 })
}

/// Rounds to the nearest integer, ties to even, by the 1.5·2^23 trick (exact for
/// |v| < 2^22; here |v| <= 127), which vectorizes where `f32::round` would be a libm
/// call on baseline x86-64. ggml's `roundf` differs only on exact .5 ties. A NaN input
/// becomes 0.
#[inline]
fn round_clamped(v: f32, levels: i32) -> i32 {
    const MAGIC: f32 = 12_582_912.0;
    (((v + MAGIC) - MAGIC) as i32).clamp(-levels, levels)
}

fn quantize_q8(x: &[f32]) -> Q8Block {
    let mut qs = [0i8; QK];
    let (d, sum) = quantize_symmetric(x, i8::MAX as i32, |i, q| qs[i] = q as i8);
    Q8Block {
        d,
        s: d * sum as f32,
        qs,
        isum: sum,
    }
}

fn quantize_q8k(x: &[f32]) -> Q8KBlock {
    let mut qs = [0i8; QK_K];
    let (d, _) = quantize_symmetric(x, i8::MAX as i32, |i, q| qs[i] = q as i8);
    let mut bsums = [0i16; 16];
    for (s, g) in bsums.iter_mut().zip(qs.chunks_exact(16)) {
        *s = g.iter().map(|&q| q as i16).sum();
    }
    Q8KBlock { d, qs, bsums }
}
