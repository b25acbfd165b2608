//! Element-wise and per-row operations of the transformer blocks.

use super::hparams::RopeStyle;

/// `1 / sqrt(mean(x²) + eps)`, the sum taken in f64 so long rows lose nothing.
fn rms_scale(x: &[f32], eps: f32) -> f32 {
    let ss: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
    (1.0 / ((ss / x.len() as f64) + eps as f64).sqrt()) as f32
}

/// `out = x / rms(x) · w`.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let scale = rms_scale(x, eps);
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = v * scale * g;
    }
}

/// [`rms_norm`] in place.
pub fn rms_norm_inplace(x: &mut [f32], w: &[f32], eps: f32) {
    let scale = rms_scale(x, eps);
    for (v, &g) in x.iter_mut().zip(w) {
        *v *= scale * g;
    }
}

/// Cosines and sines of the RoPE angles for a run of positions.
pub struct RopeTable {
    half: usize,
    /// `[pos_index][i]` interleaved as (cos, sin).
    cs: Vec<(f32, f32)>,
}

impl RopeTable {
    /// Angles `pos * scale * base^(-2i/dims)` for `i < dims/2` and each position.
    pub fn new(positions: impl Iterator<Item = usize>, dims: usize, base: f32, scale: f32) -> Self {
        let half = dims / 2;
        let inv: Vec<f64> = (0..half)
            .map(|i| (base as f64).powf(-2.0 * i as f64 / dims as f64))
            .collect();
        let mut cs = Vec::new();
        for p in positions {
            let p = p as f64 * scale as f64;
            cs.extend(inv.iter().map(|&f| {
                let (s, c) = (p * f).sin_cos();
                (c as f32, s as f32)
            }));
        }
        RopeTable { half, cs }
    }

    /// Rotates one head (`x.len()` >= dims) for the `idx`-th position of the table.
    pub fn apply(&self, x: &mut [f32], idx: usize, style: RopeStyle) {
        let cs = &self.cs[idx * self.half..(idx + 1) * self.half];
        match style {
            RopeStyle::Normal => {
                for (pair, &(c, s)) in x.chunks_exact_mut(2).zip(cs) {
                    let (a, b) = (pair[0], pair[1]);
                    pair[0] = a * c - b * s;
                    pair[1] = a * s + b * c;
                }
            }
            RopeStyle::Neox => {
                let (lo, hi) = x[..2 * self.half].split_at_mut(self.half);
                for ((a, b), &(c, s)) in lo.iter_mut().zip(hi.iter_mut()).zip(cs) {
                    let (x0, x1) = (*a, *b);
                    *a = x0 * c - x1 * s;
                    *b = x0 * s + x1 * c;
                }
            }
        }
    }
}

/// In-place softmax.
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut sum = 0.0f32;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let inv = 1.0 / sum;
    x.iter_mut().for_each(|v| *v *= inv);
}

/// `cap * tanh(x / cap)`.
pub fn softcap(x: &mut [f32], cap: f32) {
    let inv = 1.0 / cap;
    x.iter_mut().for_each(|v| *v = cap * (*v * inv).tanh());
}

pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// GELU, tanh approximation (the one Gemma uses).
///
/// `0.5·x·(1 + tanh(u))` = `x · (1 - 1/(e^{2u} + 1))`: one `exp` instead of a `tanh`
/// (which costs an `expm1` and more); saturates correctly for large |u|.
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let u = SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x * x);
    x * (1.0 - 1.0 / ((2.0 * u).exp() + 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rope_styles_rotate_different_pairs() {
        let t = RopeTable::new([1usize].into_iter(), 4, 10000.0, 1.0);
        let mut a = [1.0, 0.0, 0.0, 0.0];
        t.apply(&mut a, 0, RopeStyle::Normal);
        // Pair (0,1) rotated by 1 radian.
        assert!((a[0] - 1f32.cos()).abs() < 1e-6 && (a[1] - 1f32.sin()).abs() < 1e-6);
        let mut b = [1.0, 0.0, 0.0, 0.0];
        t.apply(&mut b, 0, RopeStyle::Neox);
        // Pair (0,2) rotated by 1 radian.
        assert!((b[0] - 1f32.cos()).abs() < 1e-6 && (b[2] - 1f32.sin()).abs() < 1e-6);
        assert_eq!(b[1], 0.0);
    }

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
