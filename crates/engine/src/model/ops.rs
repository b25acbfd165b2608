//! Element-wise and per-row operations of the transformer blocks.

use super::family::Activation;

/// `1 / sqrt(mean(x²) + eps)`, the sum taken in f64 so long rows lose nothing, in
/// eight interleaved lanes: one running f64 sum cannot be reordered, so it would be
/// a chain of dependent additions (a row of 576 cost more than quantizing it).
pub(crate) fn rms_scale(x: &[f32], eps: f32) -> f32 {
    let mut lanes = [0f64; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l += (v as f64) * (v as f64);
        }
    }
    let tail: f64 = chunks
        .remainder()
        .iter()
        .map(|&v| (v as f64) * (v as f64))
        .sum();
    let ss = lanes.iter().sum::<f64>() + tail;
    (1.0 / ((ss / x.len() as f64) + eps as f64).sqrt()) as f32
}

/// `out = x / rms(x) · w`.
pub(super) fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let scale = rms_scale(x, eps);
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = v * scale * g;
    }
}

/// [`rms_norm`] in place.
pub(crate) fn rms_norm_inplace(x: &mut [f32], w: &[f32], eps: f32) {
    let scale = rms_scale(x, eps);
    for (v, &g) in x.iter_mut().zip(w) {
        *v *= scale * g;
    }
}

/// In-place softmax. Inlined so that callers compiled for wider vectors (attention)
/// get the exponentials 8 at a time.
#[inline(always)]
pub(crate) fn softmax(x: &mut [f32]) {
    let max = lanes8(x, f32::NEG_INFINITY, f32::max);
    x.iter_mut().for_each(|v| *v = exp_fast(*v - max));
    let inv = 1.0 / lanes8(x, 0.0, |a, b| a + b);
    x.iter_mut().for_each(|v| *v *= inv);
}

/// [`softmax`] with one more logit, `sink`, in the denominator and no value of its
/// own (gpt-oss's attention sinks): the probabilities sum to less than one.
#[inline(always)]
pub(super) fn softmax_with_sink(x: &mut [f32], sink: Option<f32>) {
    let Some(sink) = sink else {
        return softmax(x);
    };
    let max = lanes8(x, f32::NEG_INFINITY, f32::max).max(sink);
    x.iter_mut().for_each(|v| *v = exp_fast(*v - max));
    let inv = 1.0 / (lanes8(x, 0.0, |a, b| a + b) + exp_fast(sink - max));
    x.iter_mut().for_each(|v| *v *= inv);
}

/// Folds `x` with `f` in 8 interleaved lanes (which vectorizes; a single running
/// value does not), then folds the lanes.
#[inline(always)]
fn lanes8(x: &[f32], init: f32, f: impl Fn(f32, f32) -> f32 + Copy) -> f32 {
    let mut lanes = [init; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l = f(*l, v);
        }
    }
    let tail = chunks.remainder().iter().fold(init, |a, &v| f(a, v));
    lanes.iter().fold(tail, |a, &v| f(a, v))
}

/// Rounds every value to the nearest f16 (ties to even), as storing it in an f16 cache
/// would: 8 at a time with F16C where the CPU has it (the same rounding, so the same
/// bits), one by one through `half` otherwise.
pub(super) fn round_to_f16(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx") && std::is_x86_feature_detected!("f16c") {
        // SAFETY: both features were just detected.
        return unsafe { round_to_f16_f16c(x) };
    }
    x.iter_mut()
        .for_each(|v| *v = half::f16::from_f32(*v).to_f32());
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn round_to_f16_f16c(x: &mut [f32]) {
    use std::arch::x86_64::*;
    let mut chunks = x.chunks_exact_mut(8);
    for c in &mut chunks {
        let v = _mm256_loadu_ps(c.as_ptr());
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
        _mm256_storeu_ps(c.as_mut_ptr(), _mm256_cvtph_ps(h));
    }
    for v in chunks.into_remainder() {
        *v = half::f16::from_f32(*v).to_f32();
    }
}

/// `cap * tanh(x / cap)`.
pub(super) fn softcap(x: &mut [f32], cap: f32) {
    let inv = 1.0 / cap;
    x.iter_mut().for_each(|v| *v = cap * (*v * inv).tanh());
}

/// e^x to within about 2 ulp for x in [-87, 88], 0 below and +inf above, in plain
/// arithmetic so that loops over slices vectorize; libm's `expf` is one call per
/// element. Cephes' expf: e^x =
/// 2^n · e^r with n = round(x·log2 e), r = x − n·ln 2 (ln 2 in two parts), and e^r
/// from its degree-7 polynomial.
#[inline(always)]
pub(crate) fn exp_fast(x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0; // 1.5·2^23: adding it rounds to an integer.
    let (x_in, x) = (x, x.clamp(-87.0, 88.0));
    let shifted = x * std::f32::consts::LOG2_E + ROUND;
    let n = shifted - ROUND;
    // n as an integer, read from the low mantissa bits of `shifted` (1.5·2^23 + n):
    // integer lanes that vectorize, where `n as i32` (a saturating cast) is done one
    // lane at a time.
    let n_int = shifted.to_bits() as i32 - ROUND.to_bits() as i32;
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_352e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let e_r = p * r * r + r + 1.0;
    let e = e_r * f32::from_bits(((n_int + 127) as u32) << 23);
    if x_in < -87.0 {
        0.0
    } else if x_in > 88.0 {
        f32::INFINITY
    } else {
        e
    }
}

pub(crate) fn silu(x: f32) -> f32 {
    x / (1.0 + exp_fast(-x))
}

/// GELU, tanh approximation (the one Gemma uses).
///
/// `0.5·x·(1 + tanh(u))` = `x · (1 - 1/(e^{2u} + 1))`: one `exp` instead of a `tanh`
/// (which costs an `expm1` and more); saturates correctly for large |u|.
pub(super) fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let u = SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x * x);
    x * (1.0 - 1.0 / (exp_fast(2.0 * u) + 1.0))
}

/// GELU as llama.cpp's CPU backend computes it: the tanh form, looked up by the input
/// rounded to f16, the result rounded to f16 too (inputs beyond ±10 saturate). Matching
/// it keeps a random-weight model's large activations within llama.cpp's scores.
pub(crate) fn gelu_ggml(x: f32) -> f32 {
    if x <= -10.0 {
        return 0.0;
    }
    if x >= 10.0 {
        return x;
    }
    gelu_ggml_table()[half::f16::from_f32(x).to_bits() as usize]
}

/// [`gelu_ggml`]'s table: the value for each f16 input (by its bits), rounded to f16.
pub(crate) fn gelu_ggml_table() -> &'static [f32] {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| {
                let f = half::f16::from_bits(bits).to_f32();
                let g = 0.5 * f * (1.0 + (0.797_884_6 * f * (1.0 + 0.044715 * f * f)).tanh());
                half::f16::from_f32(g).to_f32()
            })
            .collect()
    })
}

/// GELU's quick form `x·σ(1.702·x)` as llama.cpp's CPU backend computes it: looked up
/// by the input rounded to f16, the result rounded to f16 (no saturation bounds, unlike
/// [`gelu_ggml`]). CLIP encoders without `use_gelu` run it.
pub(crate) fn gelu_quick_ggml(x: f32) -> f32 {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| {
                let f = half::f16::from_bits(bits).to_f32();
                half::f16::from_f32(f * (1.0 / (1.0 + (-1.702 * f).exp()))).to_f32()
            })
            .collect()
    });
    table[half::f16::from_f32(x).to_bits() as usize]
}

/// `x = (x - mean) / sqrt(var + eps) · w + b` over one row (sums in f64, as llama.cpp's
/// `ggml_norm` takes them).
pub(crate) fn layer_norm(x: &mut [f32], w: &[f32], b: &[f32], eps: f32) {
    let len = x.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / len;
    let var = x
        .iter()
        .map(|&v| {
            let d = v as f64 - mean;
            d * d
        })
        .sum::<f64>()
        / len;
    let scale = (1.0 / (var + eps as f64).sqrt()) as f32;
    let mean = mean as f32;
    for ((v, &w), &b) in x.iter_mut().zip(w).zip(b) {
        *v = (*v - mean) * scale * w + b;
    }
}

/// `gate[i] = act(gate[i]) · up[i]`: the gated feed-forward activation over a slice,
/// compiled a second time for AVX2 (8 lanes instead of SSE2's 4) where the CPU has
/// it. No FMA contraction either way, so both give the same bits.
macro_rules! gated {
    ($name:ident, $act:ident) => {
        pub(super) fn $name(gate: &mut [f32], up: &[f32]) {
            #[inline(always)]
            fn body(gate: &mut [f32], up: &[f32]) {
                for (g, &u) in gate.iter_mut().zip(up) {
                    *g = $act(*g) * u;
                }
            }
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                #[target_feature(enable = "avx2")]
                unsafe fn wide(gate: &mut [f32], up: &[f32]) {
                    body(gate, up)
                }
                // SAFETY: AVX2 was just detected.
                return unsafe { wide(gate, up) };
            }
            body(gate, up)
        }
    };
}
gated!(silu_gate, silu);

/// `x += scale·y` (`scale` 1 when `None`).
pub(super) fn add_residual(x: &mut [f32], y: &[f32], scale: Option<f32>) {
    match scale {
        Some(s) => x.iter_mut().zip(y).for_each(|(x, y)| *x += s * y),
        None => x.iter_mut().zip(y).for_each(|(x, y)| *x += y),
    }
}

/// The gated activation `act` names, over a slice (`gate[i] = act(gate[i], up[i])`).
pub(super) fn gate_fn(act: Activation) -> fn(&mut [f32], &[f32]) {
    match act {
        Activation::Silu => silu_gate,
        Activation::GeluTanh => gelu_tanh_gate,
        Activation::GeluTable => gelu_table_gate,
        Activation::SwigluOai => swiglu_oai_gate,
    }
}

/// gpt-oss's clamped SwiGLU (llama.cpp's `swiglu_oai`, its `alpha` and `limit`):
/// `gate[i] = g·σ(1.702·g)·(u + 1)` with `g` capped above at 7 and `u` clamped to ±7.
pub(super) fn swiglu_oai_gate(gate: &mut [f32], up: &[f32]) {
    const ALPHA: f32 = 1.702;
    const LIMIT: f32 = 7.0;
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = g.min(LIMIT);
        let y = u.clamp(-LIMIT, LIMIT);
        *g = x / (1.0 + exp_fast(-ALPHA * x)) * (y + 1.0);
    }
}
gated!(gelu_tanh_gate, gelu_tanh);
gated!(gelu_table_gate, gelu_ggml);

/// A causal depthwise convolution of `k` taps over one sequence's rows (`taps.len() / k`
/// channels each), in place, `then` applied to each output: channel c's output at a
/// token is its last `k - 1` inputs (kept in `state`, channel after channel, oldest
/// first, carried over from the previous step) and this one's, times its taps; the
/// state ends holding the last inputs. Summed in f32 in tap order, as ggml's
/// `ssm_conv` does (Qwen 3.5's conv before its delta rule, LFM2's short conv).
pub(super) fn causal_conv(
    taps: &[f32],
    k: usize,
    state: &mut [f32],
    rows: &mut [f32],
    then: impl Fn(f32) -> f32,
) {
    let channels = taps.len() / k;
    let kept = k - 1;
    let n = rows.len() / channels;
    for c in 0..channels {
        let w = &taps[c * k..(c + 1) * k];
        let hist = &mut state[c * kept..(c + 1) * kept];
        for t in 0..n {
            let x = &mut rows[t * channels + c];
            let mut sum = 0f32;
            for (h, tap) in hist.iter().zip(w) {
                sum += h * tap;
            }
            sum += *x * w[kept];
            if kept > 0 {
                hist.copy_within(1.., 0);
                hist[kept - 1] = *x;
            }
            *x = then(sum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_matches_the_tanh_formula() {
        for i in -200..=200 {
            let x = i as f32 * 0.05;
            let u = 0.797_884_6f64 * x as f64 * (1.0 + 0.044715 * (x as f64).powi(2));
            let want = 0.5 * x as f64 * (1.0 + u.tanh());
            assert!((gelu_tanh(x) as f64 - want).abs() < 1e-6, "x {x}");
        }
        assert_eq!(gelu_tanh(-100.0), 0.0);
        assert_eq!(gelu_tanh(100.0), 100.0);
    }

    #[test]
    fn fast_exp_is_within_a_few_ulp_of_libm() {
        let mut worst = 0f64;
        for i in -86_990..=87_990 {
            let x = i as f32 * 1e-3;
            let want = (x as f64).exp();
            let rel = ((exp_fast(x) as f64 - want) / want).abs();
            worst = worst.max(rel);
        }
        assert!(
            worst < 3.0 * f32::EPSILON as f64,
            "worst relative error {worst:e}"
        );
        assert_eq!(exp_fast(-1000.0), 0.0);
        assert_eq!(exp_fast(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_fast(1000.0), f32::INFINITY);
        assert!(exp_fast(f32::NAN).is_nan());
    }

    #[test]
    fn f16_rounding_matches_half_bit_for_bit() {
        let mut specials = vec![
            0.0f32, -0.0, 1.0, 65504.0, 65520.0, 1e-8, -1e-8, 6.1e-5, 1e9,
        ];
        specials.extend(
            (0..5000).map(|i| f32::from_bits(0x3300_0000u32.wrapping_add(i * 0x0004_1a3b))),
        );
        let mut got = specials.clone();
        round_to_f16(&mut got);
        for (g, v) in got.iter().zip(&specials) {
            assert_eq!(
                g.to_bits(),
                half::f16::from_f32(*v).to_f32().to_bits(),
                "{v:e}"
            );
        }
    }

    #[test]
    fn gated_slices_match_the_scalar_activations() {
        let g: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.037).collect();
        let up: Vec<f32> = (0..1000).map(|i| 1.0 + (i % 7) as f32 * 0.25).collect();
        let (mut a, mut b) = (g.clone(), g.clone());
        silu_gate(&mut a, &up);
        gelu_tanh_gate(&mut b, &up);
        for i in 0..g.len() {
            assert_eq!(a[i], silu(g[i]) * up[i]);
            assert_eq!(b[i], gelu_tanh(g[i]) * up[i]);
        }
    }

    #[test]
    fn softmax_sums_to_one_and_softcap_bounds() {
        let mut x = [1.0, 2.0, 3.0];
        softmax(&mut x);
        assert!((x.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(x[2] > x[1] && x[1] > x[0]);
        let mut y = [100.0, -100.0, 0.5];
        softcap(&mut y, 2.0);
        assert!(y[0] <= 2.0 && y[1] >= -2.0 && (y[2] - 2.0 * 0.25f32.tanh()).abs() < 1e-6);
    }
}
