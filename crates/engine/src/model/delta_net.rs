//! The Gated DeltaNet layer (Qwen 3.5's linear attention), as llama.cpp's `qwen35`
//! graph computes it: the normed input projected to the conv's channels (queries,
//! keys, values), z, beta and alpha; a causal conv of `conv` taps over each channel
//! (the last `conv - 1` inputs come from the sequence's state), SiLU; queries and keys
//! L2-normed per head; per value head the gated delta rule on a `d × d` state S:
//!
//! ```text
//! S ← exp(g)·S;  S ← S + β (v − S k) kᵀ;  o = S q / √d
//! g = softplus(alpha + dt_bias) · a  (a = −exp(A_log)),  β = sigmoid(beta)
//! ```
//!
//! then each head's output RMS-normed and gated by SiLU(z), and projected back. A
//! prompt runs token by token through the recurrence (the projections are batched);
//! the state is the sequence's own (`kv_cache::RecurrentState`), so a batch of
//! sequences is each one alone.

use super::forward::{Buffers, Span};
use super::hparams::LinearShape;
use super::layer::norm_range;
use super::linear::{matmul_many, Product};
use super::ops::{rms_norm_inplace, silu};
use super::weights::{DeltaNet, Layer};
use super::{Model, ModelError};
use crate::batch::BatchItem;

impl Model {
    /// Layer `il`, a linear-attention layer: `x += out(norm(delta_rule(conv(qkv·x))))`.
    pub(super) fn delta_net_block(
        &self,
        il: usize,
        layer: &Layer,
        net: &DeltaNet,
        batch: &mut [BatchItem],
        spans: &[Span],
        b: &mut Buffers,
    ) -> Result<(), ModelError> {
        let hp = &self.hp;
        let shape = hp.linear.ok_or_else(|| {
            ModelError::Invalid(format!("layer {il} is linear in a model without ssm keys"))
        })?;
        let (e, total) = (hp.n_embd, b.x.len() / hp.n_embd);
        let (cd, vd, heads) = (shape.conv_dim(), shape.value_dim(), shape.n_v_heads);
        let x = &b.x;
        let normed = |start: usize, dst: &mut [f32]| {
            norm_range(x, &layer.attn_norm, hp.rms_eps, e, start, dst)
        };
        b.acts.invalidate();
        for w in [&net.qkv, &net.gate, &net.beta, &net.alpha] {
            b.acts.prepare_computed(&self.pool, w, &normed, total)?;
        }
        b.mixed.resize(total * cd, 0.0);
        b.z.resize(total * vd, 0.0);
        b.beta.resize(total * heads, 0.0);
        b.alpha.resize(total * heads, 0.0);
        b.lin_out.resize(total * vd, 0.0);
        let products = vec![
            Product::new(&net.qkv, &mut b.mixed),
            Product::new(&net.gate, &mut b.z),
            Product::new(&net.beta, &mut b.beta),
            Product::new(&net.alpha, &mut b.alpha),
        ];
        matmul_many(&self.pool, &self.file, &b.acts, products)?;
        let slot = hp.linear_slot(il);
        let mut conv_out = vec![0f32; cd];
        for (item, s) in batch.iter_mut().zip(spans).filter(|(_, s)| s.n > 0) {
            let state = item
                .seq
                .recurrent
                .as_mut()
                .ok_or(ModelError::ForeignSequence)?;
            let (conv_state, matrices) = state.layer_mut(slot);
            for r in s.row0..s.row0 + s.n {
                let token = TokenIn {
                    mixed: &b.mixed[r * cd..(r + 1) * cd],
                    beta: &b.beta[r * heads..(r + 1) * heads],
                    alpha: &b.alpha[r * heads..(r + 1) * heads],
                };
                conv_step(&shape, &net.conv, conv_state, token.mixed, &mut conv_out);
                l2_norm_heads(
                    &mut conv_out[..2 * shape.key_dim()],
                    shape.d_state,
                    hp.rms_eps,
                );
                let out = &mut b.lin_out[r * vd..(r + 1) * vd];
                let decay = (&net.dt_bias[..], &net.a[..]);
                delta_rule_step(&shape, decay, matrices, &conv_out, &token, out);
            }
        }
        // Each head's output normed and gated by SiLU(z).
        let d = shape.d_state;
        for (o, z) in b.lin_out.chunks_exact_mut(d).zip(b.z.chunks_exact(d)) {
            rms_norm_inplace(o, &net.norm, hp.rms_eps);
            o.iter_mut().zip(z).for_each(|(o, &z)| *o *= silu(z));
        }
        b.acts.invalidate();
        b.acts.prepare(&self.pool, &net.out, &b.lin_out, total)?;
        self.add_projection(&net.out, layer.post_attn_norm.as_deref(), b)
    }
}

/// One token's projections into a linear layer.
struct TokenIn<'a> {
    /// The conv's input: queries, keys, values.
    mixed: &'a [f32],
    /// Per value head, before the sigmoid and the softplus.
    beta: &'a [f32],
    alpha: &'a [f32],
}

/// The causal conv of one token, SiLU applied: channel c's output is its last
/// `conv - 1` inputs (kept in `state`, oldest first) and this one's, times its taps;
/// the state then shifts in this input. Summed in f32 in tap order, as ggml's
/// `ssm_conv` does.
fn conv_step(shape: &LinearShape, taps: &[f32], state: &mut [f32], x: &[f32], out: &mut [f32]) {
    let k = shape.conv;
    let kept = k - 1;
    for (c, (o, &xc)) in out.iter_mut().zip(x).enumerate() {
        let w = &taps[c * k..(c + 1) * k];
        let hist = &mut state[c * kept..(c + 1) * kept];
        let mut sum = 0f32;
        for (h, t) in hist.iter().zip(w) {
            sum += h * t;
        }
        sum += xc * w[kept];
        *o = silu(sum);
        if kept > 0 {
            hist.copy_within(1.., 0);
            hist[kept - 1] = xc;
        }
    }
}

/// Each head of `x` (heads of `d`) divided by its L2 norm, as llama.cpp's
/// `build_gdn_l2_norm` does: `rms_norm(x, eps / d) / √d`, i.e. `x / √(Σx² + eps)`.
fn l2_norm_heads(x: &mut [f32], d: usize, eps: f32) {
    let root = (d as f32).sqrt();
    for head in x.chunks_exact_mut(d) {
        let ss: f64 = head.iter().map(|&v| v as f64 * v as f64).sum();
        let scale = 1.0 / ((ss / d as f64) as f32 + eps / d as f32).sqrt() / root;
        head.iter_mut().for_each(|v| *v *= scale);
    }
}

/// One token of the gated delta rule over every value head's state (`matrices`: per
/// head a `d × d` square, row j = value j over the keys), writing the heads' outputs.
/// Value head h reads key head `h % n_k_heads` (llama.cpp tiles the key heads).
/// `(dt_bias, a)` set each head's decay.
fn delta_rule_step(
    shape: &LinearShape,
    (dt_bias, a): (&[f32], &[f32]),
    matrices: &mut [f32],
    qkv: &[f32],
    token: &TokenIn<'_>,
    out: &mut [f32],
) {
    let d = shape.d_state;
    let kd = shape.key_dim();
    let scale = 1.0 / (d as f32).sqrt();
    for h in 0..shape.n_v_heads {
        let kh = h % shape.n_k_heads;
        let q = &qkv[kh * d..(kh + 1) * d];
        let k = &qkv[kd + kh * d..kd + (kh + 1) * d];
        let v = &qkv[2 * kd + h * d..2 * kd + (h + 1) * d];
        let beta = sigmoid(token.beta[h]);
        let g = softplus(token.alpha[h] + dt_bias[h]) * a[h];
        let decay = g.exp();
        let s = &mut matrices[h * d * d..(h + 1) * d * d];
        s.iter_mut().for_each(|x| *x *= decay);
        let o = &mut out[h * d..(h + 1) * d];
        for (j, row) in s.chunks_exact_mut(d).enumerate() {
            let delta = (v[j] - dot(row, k)) * beta;
            row.iter_mut().zip(k).for_each(|(r, &ki)| *r += delta * ki);
            o[j] = dot(row, q) * scale;
        }
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// ggml's softplus: `ln(1 + eˣ)`, x itself above 20.
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(conv: usize) -> LinearShape {
        LinearShape {
            conv,
            d_state: 2,
            n_k_heads: 1,
            n_v_heads: 1,
            d_inner: 2,
        }
    }

    /// The conv reads the kept inputs oldest first and shifts the new one in.
    #[test]
    fn conv_reads_its_history_and_shifts() {
        let sh = shape(3);
        let channels = sh.conv_dim();
        // Taps (0, 0, 1) pass the input through, (1, 0, 0) give the input 2 tokens back.
        let mut taps = vec![0f32; channels * 3];
        taps[2] = 1.0;
        taps[3] = 1.0;
        let mut state = vec![0f32; sh.conv_state_len()];
        let mut out = vec![0f32; channels];
        let mut seen = Vec::new();
        for t in 1..=4 {
            let x = vec![t as f32; channels];
            conv_step(&sh, &taps, &mut state, &x, &mut out);
            seen.push((out[0], out[1]));
        }
        let s = |x: f32| silu(x);
        assert_eq!(
            seen,
            [
                (s(1.0), s(0.0)),
                (s(2.0), s(0.0)),
                (s(3.0), s(1.0)),
                (s(4.0), s(2.0))
            ]
        );
    }

    /// With β ≈ 1, no decay and a unit key, the state stores v against k: the output
    /// for a query equal to that key is v / √d; a decay of e^-1 then scales it.
    #[test]
    fn delta_rule_writes_v_at_k() {
        let sh = shape(2);
        let d = 2;
        let mut s = vec![0f32; d * d];
        let qkv = [1.0, 0.0, 1.0, 0.0, 3.0, -2.0];
        let token = TokenIn {
            mixed: &[],
            beta: &[60.0],
            alpha: &[0.0],
        };
        let mut out = vec![0f32; d];
        delta_rule_step(&sh, (&[0.0], &[0.0]), &mut s, &qkv, &token, &mut out);
        let r = 1.0 / 2f32.sqrt();
        assert!(
            (out[0] - 3.0 * r).abs() < 1e-5 && (out[1] + 2.0 * r).abs() < 1e-5,
            "{out:?}"
        );
        // softplus(alpha + bias) = 1 with a = -1: the old state decays by 1/e, and the
        // same v at the same k is written back in full.
        let bias = (std::f32::consts::E - 1.0).ln();
        let zero_v = [1.0, 0.0, 1.0, 0.0, 0.0, 0.0];
        delta_rule_step(&sh, (&[bias], &[-1.0]), &mut s, &zero_v, &token, &mut out);
        assert!(out.iter().all(|o| o.abs() < 1e-5), "{out:?}");
    }
}
