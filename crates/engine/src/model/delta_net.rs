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
//! then each head's output RMS-normed and gated by SiLU(z), and projected back. The
//! projections are batched over every token of the step; the rule runs in chunks
//! (`delta_rule`), one pool task per sequence and value head; the state is the
//! sequence's own (`kv_cache::RecurrentState`), so a batch of sequences is each alone.

use std::sync::Mutex;

use super::delta_rule::{self, HeadRun};
use super::forward::{Buffers, Span};
use super::hparams::LinearShape;
use super::layer::norm_range;
use super::linear::{matmul_many, Product};
use super::ops::{causal_conv, rms_norm_inplace, silu};
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
        let kd2 = 2 * shape.key_dim();
        let live: Vec<(&mut BatchItem, &Span)> = batch
            .iter_mut()
            .zip(spans)
            .filter(|(_, s)| s.n > 0)
            .collect();
        // The conv, token after token through each sequence's kept inputs, in place;
        // then the queries and keys L2-normed per head.
        let mut matrices = Vec::with_capacity(live.len());
        for (item, s) in live {
            let state = item
                .seq
                .recurrent
                .as_mut()
                .ok_or(ModelError::ForeignSequence)?;
            let (conv_state, m) = state.layer_mut(slot);
            let rows = &mut b.mixed[s.row0 * cd..(s.row0 + s.n) * cd];
            causal_conv(&net.conv, shape.conv, conv_state, rows, silu);
            for r in rows.chunks_exact_mut(cd) {
                l2_norm_heads(&mut r[..kd2], shape.d_state, hp.rms_eps);
            }
            matrices.push((s, m));
        }
        // Then the delta rule, one pool task per (sequence, value head): each owns its
        // head's state and writes its own output rows.
        let d = shape.d_state;
        let tasks: Vec<(&Span, usize, Mutex<&mut [f32]>)> = matrices
            .into_iter()
            .flat_map(|(s, m)| {
                m.chunks_exact_mut(d * d)
                    .enumerate()
                    .map(move |(h, m)| (s, h, Mutex::new(m)))
            })
            .collect();
        let outs: Vec<Mutex<Vec<f32>>> = tasks.iter().map(|_| Mutex::default()).collect();
        let (mixed, beta, alpha) = (&b.mixed, &b.beta, &b.alpha);
        let run_task = |i: usize| {
            let (s, h, m) = &tasks[i];
            let head = HeadInputs::gather(&shape, net, (mixed, beta, alpha), s, *h);
            let mut out = vec![0f32; s.n * d];
            let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
            delta_rule::run(&mut m, d, &head.run(), &mut out);
            *outs[i].lock().unwrap_or_else(|e| e.into_inner()) = out;
        };
        self.pool.run(tasks.len(), &run_task);
        for ((s, h, _), out) in tasks.iter().zip(outs) {
            let out = out.into_inner().unwrap_or_else(|e| e.into_inner());
            for (t, o) in out.chunks_exact(d).enumerate() {
                let r = s.row0 + t;
                b.lin_out[r * vd + h * d..r * vd + (h + 1) * d].copy_from_slice(o);
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

/// One value head's inputs over one sequence's rows, gathered contiguous.
struct HeadInputs {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    beta: Vec<f32>,
    g: Vec<f32>,
}

impl HeadInputs {
    /// Value head `h` of the rows of span `s`: its key head's query and key (value head
    /// h reads key head `h % n_k_heads`: llama.cpp tiles the key heads), its value,
    /// β = sigmoid(beta) and the log decay g = softplus(alpha + dt_bias)·a.
    fn gather(
        shape: &LinearShape,
        net: &DeltaNet,
        (mixed, beta, alpha): (&[f32], &[f32], &[f32]),
        s: &Span,
        h: usize,
    ) -> HeadInputs {
        let (d, kd, cd) = (shape.d_state, shape.key_dim(), shape.conv_dim());
        let heads = shape.n_v_heads;
        let kh = h % shape.n_k_heads;
        let mut x = HeadInputs {
            q: Vec::with_capacity(s.n * d),
            k: Vec::with_capacity(s.n * d),
            v: Vec::with_capacity(s.n * d),
            beta: Vec::with_capacity(s.n),
            g: Vec::with_capacity(s.n),
        };
        for r in s.row0..s.row0 + s.n {
            let row = &mixed[r * cd..(r + 1) * cd];
            x.q.extend_from_slice(&row[kh * d..(kh + 1) * d]);
            x.k.extend_from_slice(&row[kd + kh * d..kd + (kh + 1) * d]);
            x.v.extend_from_slice(&row[2 * kd + h * d..2 * kd + (h + 1) * d]);
            x.beta.push(sigmoid(beta[r * heads + h]));
            x.g.push(softplus(alpha[r * heads + h] + net.dt_bias[h]) * net.a[h]);
        }
        x
    }

    fn run(&self) -> HeadRun<'_> {
        HeadRun {
            q: &self.q,
            k: &self.k,
            v: &self.v,
            beta: &self.beta,
            g: &self.g,
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

    /// The conv reads the kept inputs oldest first and shifts the new ones in, across
    /// calls (steps) as within one.
    #[test]
    fn conv_reads_its_history_and_shifts() {
        let sh = LinearShape {
            conv: 3,
            d_state: 1,
            n_k_heads: 1,
            n_v_heads: 1,
            d_inner: 1,
        };
        let channels = sh.conv_dim();
        // Channel 0's taps pass the input through; channel 1's give it 2 tokens back.
        let mut taps = vec![0f32; channels * 3];
        taps[2] = 1.0;
        taps[3] = 1.0;
        let mut state = vec![0f32; sh.conv_state_len()];
        let mut rows: Vec<f32> = (1..=3).flat_map(|t| vec![t as f32; channels]).collect();
        causal_conv(&taps, sh.conv, &mut state, &mut rows, silu);
        let mut next = vec![4.0; channels];
        causal_conv(&taps, sh.conv, &mut state, &mut next, silu);
        let got: Vec<(f32, f32)> = rows
            .chunks_exact(channels)
            .chain(next.chunks_exact(channels))
            .map(|r| (r[0], r[1]))
            .collect();
        let s = silu;
        assert_eq!(
            got,
            [
                (s(1.0), s(0.0)),
                (s(2.0), s(0.0)),
                (s(3.0), s(1.0)),
                (s(4.0), s(2.0))
            ]
        );
    }

    /// ggml's softplus, and the L2 norm with its epsilon inside the root.
    #[test]
    fn softplus_and_l2_norm() {
        assert_eq!(softplus(25.0), 25.0);
        assert!((softplus(0.0) - 2f32.ln()).abs() < 1e-7);
        let mut x = [3.0, 4.0, 0.0, 1.0];
        l2_norm_heads(&mut x, 2, 0.0);
        let want = [0.6, 0.8, 0.0, 1.0];
        assert!(
            x.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6),
            "{x:?}"
        );
    }
}
