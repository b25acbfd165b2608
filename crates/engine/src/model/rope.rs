//! Rotary position embeddings: the angle of every (position, pair), with the scalings
//! llama.cpp reads from a GGUF: linear interpolation (`rope.scaling.factor`), YaRN
//! (`rope.scaling.type = yarn`: interpolated and extrapolated angles blended along the
//! pairs, magnitudes corrected) and per-pair frequency divisors (Llama 3's
//! `rope_freqs`, LongRoPE's `rope_factors_long` / `rope_factors_short`).

use super::linear::opt_vector;
use super::ModelError;
use crate::gguf::GgufFile;

/// How RoPE pairs up the dimensions of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RopeStyle {
    /// Adjacent pairs (2i, 2i+1): llama's GGUF layout, whose Q/K rows the converter permuted.
    Normal,
    /// Halves (i, i + d/2): GPT-NeoX layout.
    Neox,
}

/// The per-pair RoPE frequency divisors a family's graph applies.
#[derive(Debug, PartialEq)]
pub(super) enum RopeFactors {
    None,
    /// Llama 3.1's `rope_freqs` when present, else LongRoPE's factors when the
    /// scaling type says so.
    FreqsOrLongRope,
    /// LongRoPE's long or short factors always (Phi-3).
    LongRope,
    /// Interleaved M-RoPE (`rope.dimension_sections`, Qwen 3.5): text tokens give the
    /// fourth section position 0, so its pairs do not turn; an infinite divisor says so.
    ImropeSections,
    /// `rope_freqs` when present, on the global (non-sliding) layers only: Gemma 4's
    /// proportional RoPE.
    GlobalFreqs,
}

/// `rope.scaling.type`; llama.cpp reads an absent one as `linear`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ScalingType {
    None,
    Linear,
    Yarn,
    LongRope,
}

/// llama.cpp's YaRN defaults (`yarn_beta_fast`, `yarn_beta_slow`): the rotation counts
/// over the original context between which pairs ramp from kept to interpolated.
const YARN_BETA_FAST: f32 = 32.0;
const YARN_BETA_SLOW: f32 = 1.0;

/// The YaRN keys only some families read (llama.cpp's `yarn_beta_fast`,
/// `yarn_beta_slow`, `rope_yarn_log_mul`), as the file gives them or their defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct YarnKeys {
    pub beta_fast: f32,
    pub beta_slow: f32,
    /// `rope.scaling.yarn_log_multiplier` (HF's `mscale_all_dim`; 0: absent): YaRN's
    /// magnitude is then get_mscale(f, 1) / get_mscale(f, log_mul) instead of
    /// get_mscale(f, 1).
    pub log_mul: f32,
}

impl YarnKeys {
    pub(super) const DEFAULT: YarnKeys = YarnKeys {
        beta_fast: YARN_BETA_FAST,
        beta_slow: YARN_BETA_SLOW,
        log_mul: 0.0,
    };
}

/// A file's RoPE scaling, common to all its layers.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct RopeScaling {
    pub kind: ScalingType,
    /// 1 / `rope.scaling.factor` (1 when absent, zero, or the type is `none`).
    pub freq_scale: f32,
    /// `rope.scaling.original_context_length` (default: the training context): YaRN's
    /// ramp is placed on it and LongRoPE picks its long factors beyond it.
    pub n_ctx_orig: usize,
    /// `rope.scaling.attn_factor`: every cos and sin is multiplied by it.
    pub attn_factor: f32,
    pub yarn: YarnKeys,
}

impl RopeScaling {
    /// The file's scaling; `yarn_keys`: the family reads YaRN's betas and log
    /// multiplier from it (else llama.cpp's defaults hold).
    pub(super) fn from_gguf(
        file: &GgufFile,
        arch: &str,
        n_ctx_train: usize,
        default_type: Option<&str>,
        yarn_keys: bool,
    ) -> Result<RopeScaling, ModelError> {
        let key = |s: &str| format!("{arch}.{s}");
        let named = file.opt_str(&key("rope.scaling.type"))?;
        let kind = match named.or(default_type).unwrap_or("linear") {
            "none" => ScalingType::None,
            "linear" => ScalingType::Linear,
            "yarn" => ScalingType::Yarn,
            "longrope" => ScalingType::LongRope,
            other => {
                return Err(ModelError::Invalid(format!(
                    "rope.scaling.type {other:?} is not one of none, linear, yarn, longrope"
                )))
            }
        };
        let factor = match file.opt_f32(&key("rope.scaling.factor"))? {
            Some(f) => f,
            None => file.opt_f32(&key("rope.scale_linear"))?.unwrap_or(0.0),
        };
        if !factor.is_finite() || factor < 0.0 {
            return Err(ModelError::Invalid(format!(
                "rope.scaling.factor {factor} must be a non-negative number"
            )));
        }
        let freq_scale = if kind == ScalingType::None || factor == 0.0 {
            1.0
        } else {
            1.0 / factor
        };
        let n_ctx_orig = match file.opt_u32(&key("rope.scaling.original_context_length"))? {
            Some(n) if n > 0 => n as usize,
            _ => n_ctx_train,
        };
        let attn_factor = file
            .opt_f32(&key("rope.scaling.attn_factor"))?
            .unwrap_or(1.0);
        if !attn_factor.is_finite() {
            return Err(ModelError::Invalid(format!(
                "rope.scaling.attn_factor {attn_factor} is not finite"
            )));
        }
        let mut yarn = YarnKeys::DEFAULT;
        if yarn_keys {
            // The betas are rotation counts (positive); the multiplier any finite number.
            let read = |k: &str, default: f32, positive: bool| -> Result<f32, ModelError> {
                let v = file.opt_f32(&key(k))?.unwrap_or(default);
                if !v.is_finite() || (positive && v <= 0.0) {
                    return Err(ModelError::Invalid(format!("{k} {v} is out of range")));
                }
                Ok(v)
            };
            yarn = YarnKeys {
                beta_fast: read("rope.scaling.yarn_beta_fast", YARN_BETA_FAST, true)?,
                beta_slow: read("rope.scaling.yarn_beta_slow", YARN_BETA_SLOW, true)?,
                log_mul: read("rope.scaling.yarn_log_multiplier", 0.0, false)?,
            };
        }
        Ok(RopeScaling {
            kind,
            freq_scale,
            n_ctx_orig,
            attn_factor,
            yarn,
        })
    }

    /// No scaling: what a file without scaling keys reads as.
    #[cfg(test)]
    pub(super) fn none(n_ctx_orig: usize) -> RopeScaling {
        RopeScaling {
            kind: ScalingType::Linear,
            freq_scale: 1.0,
            n_ctx_orig,
            attn_factor: 1.0,
            yarn: YarnKeys::DEFAULT,
        }
    }
}

/// How one set of layers rotates: everything but the positions and the factors.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Rope {
    /// Dimensions of each head that are rotated (the first ones).
    pub dims: usize,
    pub base: f32,
    /// Position multiplier (1 / scaling factor).
    pub freq_scale: f32,
    /// How far YaRN blends extrapolated angles in (0: not at all).
    ext_factor: f32,
    /// The pair indices between which YaRN's blend ramps down.
    corr_dims: [f32; 2],
    /// Multiplier of every cos and sin.
    mscale: f32,
}

impl Rope {
    /// The rotation of layers with RoPE base `base` and position multiplier
    /// `freq_scale` (sliding layers may have their own) under the file's `scaling`.
    pub(super) fn new(dims: usize, base: f32, freq_scale: f32, scaling: &RopeScaling) -> Rope {
        let ext_factor = if scaling.kind == ScalingType::Yarn {
            1.0
        } else {
            0.0
        };
        let mut mscale = scaling.attn_factor;
        if ext_factor != 0.0 {
            // llama.cpp's attention factor for YaRN is get_mscale(f, 1) / (1 + 0.1 ln f)
            // with f the file's factor (get_mscale(f, 1) / get_mscale(f, log_mul) when
            // the family reads a log multiplier), and its rotation multiplies by
            // 1 + 0.1 ln(1 / freq_scale) of the layer: on a layer with the file's
            // scale, the log terms cancel unless f < 1.
            let f = 1.0 / scaling.freq_scale;
            let get_mscale = |m: f32| {
                if f <= 1.0 {
                    1.0
                } else {
                    0.1 * m * f.ln() + 1.0
                }
            };
            let log_mul = scaling.yarn.log_mul;
            let magnitude = if log_mul == 0.0 {
                get_mscale(1.0)
            } else {
                get_mscale(1.0) / get_mscale(log_mul)
            };
            mscale *= magnitude / (1.0 + 0.1 * f.ln());
            mscale *= 1.0 + 0.1 * (1.0 / freq_scale).ln();
        }
        // Pair index at which a frequency completes `rotations` turns over the original
        // context (YaRN's correction dimension).
        let corr_dim = |rotations: f32| {
            dims as f32
                * (scaling.n_ctx_orig as f32 / (rotations * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * base.ln())
        };
        let corr_dims = [
            corr_dim(scaling.yarn.beta_fast).floor().max(0.0),
            corr_dim(scaling.yarn.beta_slow)
                .ceil()
                .min(dims as f32 - 1.0),
        ];
        Rope {
            dims,
            base,
            freq_scale,
            ext_factor,
            corr_dims,
            mscale,
        }
    }

    /// The angle of pair `i` per position (the divisor `factor` from the factors
    /// tensor): YaRN blends the interpolated and extrapolated frequencies, so the angle
    /// stays linear in the position.
    fn rate(&self, i: usize, factor: f32) -> f64 {
        let extrap = (self.base as f64).powf(-2.0 * i as f64 / self.dims as f64) / factor as f64;
        let interp = self.freq_scale as f64 * extrap;
        if self.ext_factor == 0.0 {
            return interp;
        }
        let [low, high] = self.corr_dims;
        let y = (i as f32 - low) / (high - low).max(0.001);
        let ramp = ((1.0 - y.clamp(0.0, 1.0)) * self.ext_factor) as f64;
        interp * (1.0 - ramp) + extrap * ramp
    }

    #[cfg(test)]
    fn theta(&self, pos: f64, i: usize, factor: f32) -> f64 {
        pos * self.rate(i, factor)
    }
}

/// The per-pair frequency divisors llama.cpp applies for a family's `kind`: Llama's
/// `rope_freqs` (Llama 3.1's scaling, baked in by the converter), else LongRoPE's long
/// factors when a sequence may hold more than the original context (`n_ctx`), its
/// short ones otherwise.
pub(super) fn freq_factors(
    file: &GgufFile,
    kind: &RopeFactors,
    rope: &Rope,
    scaling: &RopeScaling,
    n_ctx: usize,
) -> Result<Option<Vec<f32>>, ModelError> {
    let long_or_short = if n_ctx > scaling.n_ctx_orig {
        "rope_factors_long.weight"
    } else {
        "rope_factors_short.weight"
    };
    let name = match kind {
        RopeFactors::ImropeSections => return imrope_still_pairs(file, rope.dims / 2),
        RopeFactors::FreqsOrLongRope | RopeFactors::GlobalFreqs
            if file.tensor("rope_freqs.weight").is_some() =>
        {
            "rope_freqs.weight"
        }
        RopeFactors::FreqsOrLongRope if scaling.kind == ScalingType::LongRope => long_or_short,
        RopeFactors::LongRope => long_or_short,
        RopeFactors::FreqsOrLongRope | RopeFactors::GlobalFreqs | RopeFactors::None => {
            return Ok(None)
        }
    };
    let factors = opt_vector(file, name, rope.dims / 2)?;
    if let Some(bad) = factors
        .iter()
        .flatten()
        .find(|f| !f.is_finite() || **f <= 0.0)
    {
        return Err(ModelError::Invalid(format!(
            "tensor {name:?} holds {bad}: frequency factors must be positive"
        )));
    }
    Ok(factors)
}

/// The divisors of interleaved M-RoPE for text: 1 for a pair whose section reads the
/// token's position, infinity (no turn) for one of the fourth section, which llama.cpp
/// feeds position 0 (`ggml_mrope_cache_init`'s interleaving; sections count pairs and
/// repeat every `sum` pairs). `None` when every pair turns (the released models).
fn imrope_still_pairs(file: &GgufFile, half: usize) -> Result<Option<Vec<f32>>, ModelError> {
    let key = file.arch_key("rope.dimension_sections")?;
    let s = match file.opt_array(&key)? {
        Some(_) => file.array_i64(&key)?,
        None => return Ok(None),
    };
    // Clamped so that no sum overflows; only pairs below `half` are ever read.
    let sec = |i: usize| s.get(i).copied().unwrap_or(0).clamp(0, 1 << 20) as usize;
    let sum: usize = (0..4).map(sec).sum();
    if sum == 0 {
        return Err(ModelError::Invalid(format!(
            "{key} {s:?}: the sections cover no pair"
        )));
    }
    let factors: Vec<f32> = (0..half)
        .map(|i| {
            let sector = i % sum;
            let turns = (sector.is_multiple_of(3) && sector < 3 * sec(0))
                || (sector % 3 == 1 && sector < 3 * sec(1))
                || (sector % 3 == 2 && sector < 3 * sec(2));
            if turns {
                1.0
            } else {
                f32::INFINITY
            }
        })
        .collect();
    Ok(factors.iter().any(|f| f.is_infinite()).then_some(factors))
}

/// Cosines and sines of the RoPE angles for a run of positions.
pub(super) struct RopeTable {
    half: usize,
    /// `[pos_index][i]` interleaved as (cos, sin).
    cs: Vec<(f32, f32)>,
}

impl RopeTable {
    /// The table of `rope` at each of `positions`, each pair's frequency divided by its
    /// entry of `factors` when there are any.
    pub(super) fn new(
        positions: impl Iterator<Item = usize>,
        rope: &Rope,
        factors: Option<&[f32]>,
    ) -> Self {
        let half = rope.dims / 2;
        let factor = |i: usize| factors.and_then(|f| f.get(i)).copied().unwrap_or(1.0);
        let rates: Vec<f64> = (0..half).map(|i| rope.rate(i, factor(i))).collect();
        let m = rope.mscale;
        let mut cs = Vec::new();
        for p in positions {
            cs.extend(rates.iter().map(|&r| {
                let (s, c) = (p as f64 * r).sin_cos();
                (c as f32 * m, s as f32 * m)
            }));
        }
        RopeTable { half, cs }
    }

    /// Rotates one head (`x.len()` >= dims) for the `idx`-th position of the table.
    /// Every position's (cos, sin) pairs, position after position (the GPU backend
    /// uploads them).
    #[cfg(feature = "gpu")]
    pub(super) fn pairs(&self) -> &[(f32, f32)] {
        &self.cs
    }

    pub(super) fn apply(&self, x: &mut [f32], idx: usize, style: RopeStyle) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(dims: usize) -> Rope {
        Rope::new(dims, 10000.0, 1.0, &RopeScaling::none(4096))
    }

    #[test]
    fn rope_styles_rotate_different_pairs() {
        let t = RopeTable::new([1usize].into_iter(), &plain(4), None);
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

    /// YaRN keeps the fastest pairs (many turns over the original context) as they
    /// are, interpolates the slowest by the factor, and scales magnitudes by
    /// 1 + 0.1 ln(factor).
    #[test]
    fn yarn_keeps_fast_pairs_and_interpolates_slow_ones() {
        let scaling = RopeScaling {
            kind: ScalingType::Yarn,
            freq_scale: 0.25,
            n_ctx_orig: 4096,
            attn_factor: 1.0,
            yarn: YarnKeys::DEFAULT,
        };
        let r = Rope::new(128, 10000.0, 0.25, &scaling);
        let lin = plain(128);
        assert!(
            r.corr_dims[0] > 0.0 && r.corr_dims[1] < 63.0,
            "{:?}",
            r.corr_dims
        );
        assert_eq!(r.theta(100.0, 0, 1.0), lin.theta(100.0, 0, 1.0));
        let slow = 63;
        let want = 0.25 * lin.theta(100.0, slow, 1.0);
        assert!((r.theta(100.0, slow, 1.0) - want).abs() < 1e-12);
        assert!((r.mscale - (1.0 + 0.1 * 4f32.ln())).abs() < 1e-6);
        // Linear scaling interpolates every pair and leaves magnitudes alone.
        let linear = RopeScaling {
            kind: ScalingType::Linear,
            ..scaling
        };
        let l = Rope::new(128, 10000.0, 0.25, &linear);
        assert_eq!(l.mscale, 1.0);
        assert!((l.theta(100.0, 0, 1.0) - 25.0).abs() < 1e-9);
    }

    #[test]
    fn factors_divide_each_pairs_frequency() {
        let r = plain(4);
        let t = RopeTable::new([3usize].into_iter(), &r, Some(&[2.0, 4.0]));
        let want = (3.0f64 / 2.0).cos() as f32;
        assert!((t.cs[0].0 - want).abs() < 1e-6);
        let want = (3.0 * 0.01f64 / 4.0).sin() as f32;
        assert!((t.cs[1].1 - want).abs() < 1e-6);
    }
}
