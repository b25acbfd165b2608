//! One layer of the forward step: attention and the feed-forward block, each a few pool
//! jobs whose tasks finish what they computed (norms, heads, activations, the next
//! product's quantized input) before handing it on.

use super::attention::{attend_batch, AttnArgs, AttnJob};
use super::forward::{Buffers, Span};
use super::heads::{HeadPrep, TokenPrep};
use super::linear::{gated_product, matmul_many, Product, Weight};
use super::ops::{add_residual, gate_fn, rms_norm_inplace, rms_scale};
use super::weights::{Attention, Ffn, GateUp, Layer, Qkv};
use super::{Model, ModelError};
use crate::batch::{BatchItem, LogitsWanted};
use crate::quant::Backend;

impl Model {
    pub(super) fn attention_block(
        &self,
        il: usize,
        layer: &Layer,
        tokens: TokenPrep<'_>,
        batch: &mut [BatchItem],
        spans: &[Span],
        b: &mut Buffers,
    ) -> Result<(), ModelError> {
        let hp = &self.hp;
        let attn: &Attention = layer
            .attention()
            .ok_or_else(|| ModelError::Invalid(format!("layer {il} has no attention")))?;
        let (e, total) = (hp.n_embd, b.x.len() / hp.n_embd);
        let (qw, kw, vw) = hp.widths(il);
        let (hk, hv) = hp.head_dims(il);
        let heads = HeadPrep {
            hp,
            layer: attn,
            tokens,
            dims: (hk, hv),
        };
        // Qwen 3.5's query rows hold each head's query then its output gate.
        let gated = hp.family.tensors.q_gate;
        let qpw = if gated { 2 * qw } else { qw };
        let x = &b.x;
        let normed = |start: usize, dst: &mut [f32]| {
            norm_range(x, &layer.attn_norm, hp.rms_eps, e, start, dst)
        };
        let (bq, bk, bv) = (
            &mut b.q[..total * qw],
            &mut b.k[..total * kw],
            &mut b.v[..total * vw],
        );
        b.acts.invalidate();
        match &attn.qkv {
            Qkv::Separate { q, k, v } if gated => {
                for w in [q, k, v] {
                    b.acts.prepare_computed(&self.pool, w, &normed, total)?;
                }
                let keys = |t, c0, k: &mut [f32]| heads.keys(t, c0, k);
                let values = |t, c0, v: &mut [f32]| heads.values(t, c0, v);
                let products = vec![
                    Product::new(q, &mut b.qkv[..total * qpw]),
                    Product::new(k, bk).then(hk, &keys),
                    Product::new(v, bv).then(hv, &values),
                ];
                matmul_many(&self.pool, &self.file, &b.acts, products)?;
                for t in 0..total {
                    let r = &b.qkv[t * qpw..(t + 1) * qpw];
                    let q = &mut bq[t * qw..(t + 1) * qw];
                    let g = &mut b.attn_gate[t * qw..(t + 1) * qw];
                    split_gate(r, q, g, hk);
                    heads.queries(t, 0, q);
                }
            }
            Qkv::Separate { q, k, v } => {
                for w in [q, k, v] {
                    b.acts.prepare_computed(&self.pool, w, &normed, total)?;
                }
                // Heads are finished by the threads that computed them.
                let queries = |t, c0, q: &mut [f32]| heads.queries(t, c0, q);
                let keys = |t, c0, k: &mut [f32]| heads.keys(t, c0, k);
                let values = |t, c0, v: &mut [f32]| heads.values(t, c0, v);
                let products = vec![
                    Product::new(q, bq).then(hk, &queries),
                    Product::new(k, bk).then(hk, &keys),
                    Product::new(v, bv).then(hv, &values),
                ];
                matmul_many(&self.pool, &self.file, &b.acts, products)?;
            }
            Qkv::QueryOnly(q) => {
                b.acts.prepare_computed(&self.pool, q, &normed, total)?;
                let queries = |t, c0, q: &mut [f32]| heads.queries(t, c0, q);
                let products = vec![Product::new(q, bq).then(hk, &queries)];
                matmul_many(&self.pool, &self.file, &b.acts, products)?;
            }
            Qkv::Fused(w) => {
                b.acts.prepare_computed(&self.pool, w, &normed, total)?;
                let row = qpw + kw + vw;
                let out = &mut b.qkv[..total * row];
                let product = Product::new(w, out);
                matmul_many(&self.pool, &self.file, &b.acts, vec![product])?;
                for t in 0..total {
                    let r = &b.qkv[t * row..(t + 1) * row];
                    let q = &mut bq[t * qw..(t + 1) * qw];
                    if gated {
                        let g = &mut b.attn_gate[t * qw..(t + 1) * qw];
                        split_gate(&r[..qpw], q, g, hk);
                    } else {
                        q.copy_from_slice(&r[..qw]);
                    }
                    heads.queries(t, 0, q);
                    let k = &mut bk[t * kw..(t + 1) * kw];
                    k.copy_from_slice(&r[qpw..qpw + kw]);
                    heads.keys(t, 0, k);
                    let v = &mut bv[t * vw..(t + 1) * vw];
                    v.copy_from_slice(&r[qpw + kw..]);
                    heads.values(t, 0, v);
                }
            }
        }
        // A layer sharing an earlier layer's cache reads that layer's keys and values
        // of this step too, kept when it ran (its own rows are overwritten since).
        let kv_il = hp.kv_layer[il];
        let share = usize::from(!hp.swa_layers[il]);
        if kv_il == il && hp.kv_layer[il + 1..].contains(&il) {
            let (k, v) = &mut b.shared_kv[share];
            k.clear();
            k.extend_from_slice(&b.k[..total * kw]);
            v.clear();
            v.extend_from_slice(&b.v[..total * vw]);
        }
        let (keys_now, values_now) = match kv_il == il {
            true => (&b.k[..total * kw], &b.v[..total * vw]),
            false => (&b.shared_kv[share].0[..], &b.shared_kv[share].1[..]),
        };
        if keys_now.len() != total * kw || values_now.len() != total * vw {
            return Err(ModelError::Invalid(format!(
                "layer {il} shares the keys and values of layer {kv_il}, which has other shapes"
            )));
        }
        let window = if hp.swa_layers[il] {
            hp.sliding_window
        } else {
            None
        };
        let ow = hp.n_head * hv;
        // Attention reads each item's cached positions from its blocks in place and
        // the batch's own rows from the step's buffers; the new rows are stored after.
        // Linear-attention layers and shared-KV layers keep no keys and values of
        // their own: the ones this layer reads sit at the slot of the layer owning them.
        let slot = hp.kv_slot(il);
        let histories: Vec<_> = batch
            .iter()
            .zip(spans)
            .filter(|(_, s)| s.n > 0)
            .map(|(item, s)| item.seq.kv.history(slot, s.start_pos))
            .collect();
        let mut jobs = Vec::with_capacity(histories.len());
        let live = batch.iter().zip(spans).filter(|(_, s)| s.n > 0);
        for ((item, s), history) in live.zip(&histories) {
            // Cached positions this item's queries can still see.
            let old_start = match window {
                Some(w) => s.start_pos.saturating_sub(w - 1),
                None => 0,
            };
            let (k_old, v_old) = history.paged();
            let rows = s.row0..s.row0 + s.n;
            jobs.push(AttnJob {
                row0: rows.start,
                args: AttnArgs {
                    q: &b.q[rows.start * qw..rows.end * qw],
                    k_new: &keys_now[rows.start * kw..rows.end * kw],
                    v_new: &values_now[rows.start * vw..rows.end * vw],
                    k_old,
                    v_old,
                    old_start,
                    start: s.start_pos,
                    n: rows.len(),
                    n_head: hp.n_head,
                    n_head_kv: hp.kv_heads[il],
                    head_dim_k: hk,
                    head_dim_v: hv,
                    window,
                    softcap: hp.attn_softcap,
                    f16_probs: tokens.round16[rows.start],
                    sinks: attn.attn_sinks.as_deref(),
                    token_tiles: item.want_logits == LogitsWanted::All,
                    non_causal: tokens.non_causal,
                },
            });
        }
        let wo = &attn.attn_out;
        let group_cols = hp.n_head / hp.kv_heads[il] * hv;
        // The output projection's input is quantized by the tasks too, when each
        // task's columns are whole blocks of it.
        let rows = &mut b.attn[..total * ow];
        let quantized = b.acts.produce(wo, |_, out| {
            // A gated output is gated after attention, before it is quantized.
            if gated || !group_cols.is_multiple_of(wo.act_format().block_elems()) {
                return Ok(false);
            }
            let writer = Backend::active().acts_writer(wo.ggml_type(), total, ow, out)?;
            let then = |j: usize, kvh: usize, t: usize, out: &[f32]| {
                writer.put(jobs[j].row0 + t, kvh * group_cols, out);
            };
            attend_batch(&self.pool, &jobs, rows, Some(&then));
            writer.finish();
            Ok(true)
        })?;
        if !quantized {
            attend_batch(&self.pool, &jobs, &mut b.attn[..total * ow], None);
        }
        drop(jobs);
        drop(histories);
        for (item, s) in batch
            .iter_mut()
            .zip(spans)
            .filter(|(_, s)| s.n > 0 && kv_il == il)
        {
            for t in 0..s.n {
                let r = s.row0 + t;
                item.seq.kv.write(
                    slot,
                    s.start_pos + t,
                    &b.k[r * kw..(r + 1) * kw],
                    &b.v[r * vw..(r + 1) * vw],
                );
            }
        }
        if gated {
            // llama.cpp: the attention output times sigmoid(gate), per element.
            let out = b.attn[..total * ow].iter_mut();
            for (o, &g) in out.zip(&b.attn_gate[..total * qw]) {
                *o *= 1.0 / (1.0 + (-g).exp());
            }
        }
        if !quantized {
            b.acts.invalidate();
            b.acts
                .prepare(&self.pool, wo, &b.attn[..total * ow], total)?;
        }
        self.add_projection(wo, layer.post_attn_norm.as_deref(), b)?;
        if let Some(bias) = &attn.attn_out_bias {
            for x in b.x.chunks_exact_mut(hp.n_embd) {
                x.iter_mut().zip(bias).for_each(|(x, b)| *x += b);
            }
        }
        Ok(())
    }

    /// `x += w·acts`, the product normed first when the architecture norms it
    /// (Gemma's post-norms) and scaled when it scales it (Granite); otherwise the
    /// product is added as it is computed.
    pub(super) fn add_projection(
        &self,
        w: &Weight,
        post_norm: Option<&[f32]>,
        b: &mut Buffers,
    ) -> Result<(), ModelError> {
        let scale = self.hp.residual_scale;
        if post_norm.is_none() && scale.is_none() {
            let product = Product::adding(w, &mut b.x);
            return matmul_many(&self.pool, &self.file, &b.acts, vec![product]);
        }
        let out = &mut b.proj;
        let product = Product::new(w, out);
        matmul_many(&self.pool, &self.file, &b.acts, vec![product])?;
        for p in b.proj.chunks_exact_mut(self.hp.n_embd) {
            if let Some(norm) = post_norm {
                rms_norm_inplace(p, norm, self.hp.rms_eps);
            }
        }
        add_residual(&mut b.x, &b.proj, scale);
        Ok(())
    }

    pub(super) fn ffn_block(
        &self,
        il: usize,
        layer: &Layer,
        total: usize,
        b: &mut Buffers,
    ) -> Result<(), ModelError> {
        let (gate_up, down) = match &layer.ffn {
            Ffn::Dense { gate_up, down } => (gate_up, down),
            Ffn::Experts(ex) => {
                let scratch = (&mut b.acts, &mut b.experts);
                return self.expert_block(layer, ex, &mut b.x, scratch);
            }
        };
        let hp = &self.hp;
        let (e, ff) = (hp.n_embd, hp.ff_layers[il]);
        let act = gate_fn(hp.activation);
        let x = &b.x;
        let normed = |start: usize, dst: &mut [f32]| {
            norm_range(x, &layer.ffn_norm, hp.rms_eps, e, start, dst)
        };
        b.acts.invalidate();
        let gated_done = match gate_up {
            GateUp::Separate { gate: wg, up: wu } => {
                b.acts.prepare_computed(&self.pool, wg, &normed, total)?;
                b.acts.prepare_computed(&self.pool, wu, &normed, total)?;
                let (g, u) = (&mut b.gate[..total * ff], &mut b.up[..total * ff]);
                let done = b.acts.produce(down, |acts, out| {
                    let weights = (wg, wu, down);
                    gated_product(&self.pool, &self.file, acts, weights, act, (g, u), out)
                })?;
                if !done {
                    let products = vec![
                        Product::new(wg, &mut b.gate[..total * ff]),
                        Product::new(wu, &mut b.up[..total * ff]),
                    ];
                    matmul_many(&self.pool, &self.file, &b.acts, products)?;
                }
                done
            }
            GateUp::Fused(w) => {
                b.acts.prepare_computed(&self.pool, w, &normed, total)?;
                let both = &mut b.gate[..total * 2 * ff];
                let product = Product::new(w, both);
                matmul_many(&self.pool, &self.file, &b.acts, vec![product])?;
                // Each output row is [gate | up]; split it into the two buffers. In
                // ascending order, row t's gate moves down onto space no later row uses.
                let both = &mut b.gate[..total * 2 * ff];
                for t in 0..total {
                    b.up[t * ff..(t + 1) * ff]
                        .copy_from_slice(&both[(2 * t + 1) * ff..(2 * t + 2) * ff]);
                    both.copy_within(2 * t * ff..(2 * t + 1) * ff, t * ff);
                }
                false
            }
        };
        if !gated_done {
            // The gated activation computed as the down projection's input is quantized:
            // its transcendentals are spread over the pool with the quantization, and
            // each block is quantized while still in L1.
            let (gate, up) = (&b.gate[..total * ff], &b.up[..total * ff]);
            let gated = |start: usize, dst: &mut [f32]| {
                dst.copy_from_slice(&gate[start..start + dst.len()]);
                act(dst, &up[start..start + dst.len()]);
            };
            b.acts.invalidate();
            b.acts.prepare_computed(&self.pool, down, &gated, total)?;
        }
        self.add_projection(down, layer.post_ffn_norm.as_deref(), b)
    }
}

/// Values `start..start + dst.len()` of the RMS-normed rows of `x` (rows of `width`)
/// into `dst`, exactly as [`rms_norm`](super::ops::rms_norm) gives them; a row cut by the range is still
/// normed by its whole length.
pub(super) fn norm_range(
    x: &[f32],
    w: &[f32],
    eps: f32,
    width: usize,
    start: usize,
    dst: &mut [f32],
) {
    let mut at = start;
    let mut dst = dst;
    while !dst.is_empty() {
        let (row, col) = (at / width, at % width);
        let len = (width - col).min(dst.len());
        let (head, rest) = dst.split_at_mut(len);
        let src = &x[row * width..(row + 1) * width];
        let scale = rms_scale(src, eps);
        for ((o, &v), &g) in head.iter_mut().zip(&src[col..]).zip(&w[col..]) {
            *o = v * scale * g;
        }
        at += len;
        dst = rest;
    }
}

/// Splits a gated query row (each head's query, then its gate, `hk` each) into the
/// queries and the gates.
fn split_gate(row: &[f32], q: &mut [f32], gate: &mut [f32], hk: usize) {
    let heads = row.chunks_exact(2 * hk);
    for ((r, q), g) in heads
        .zip(q.chunks_exact_mut(hk))
        .zip(gate.chunks_exact_mut(hk))
    {
        q.copy_from_slice(&r[..hk]);
        g.copy_from_slice(&r[hk..]);
    }
}
