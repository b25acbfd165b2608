//! LFM2's gated short convolution, as llama.cpp's `lfm2` graph computes it: the normed
//! input projected to B, C and x (`n_embd` each); B·x convolved causally over the last
//! `l_cache` positions per channel (the sequence's recurrent state keeps the last
//! `l_cache - 1` products, so a batch of sequences is each alone); C times that, and
//! the output projection. No activation anywhere in the block.

use super::forward::{Buffers, Span};
use super::layer::norm_range;
use super::linear::{matmul_many, Product};
use super::ops::causal_conv;
use super::weights::{Layer, ShortConv};
use super::{Model, ModelError};
use crate::batch::BatchItem;

impl Model {
    /// Layer `il`, a short-conv layer: `x += out(C · conv(B · x'))`, `B, C, x' = in(norm(x))`.
    pub(super) fn short_conv_block(
        &self,
        il: usize,
        layer: &Layer,
        conv: &ShortConv,
        batch: &mut [BatchItem],
        spans: &[Span],
        b: &mut Buffers,
    ) -> Result<(), ModelError> {
        let hp = &self.hp;
        let taps = hp.short_conv.ok_or_else(|| {
            ModelError::Invalid(format!("layer {il} is a short conv in a model without one"))
        })?;
        let (e, total) = (hp.n_embd, b.x.len() / hp.n_embd);
        let x = &b.x;
        let normed = |start: usize, dst: &mut [f32]| {
            norm_range(x, &layer.attn_norm, hp.rms_eps, e, start, dst)
        };
        b.acts.invalidate();
        b.acts
            .prepare_computed(&self.pool, &conv.in_proj, &normed, total)?;
        b.mixed.resize(total * 3 * e, 0.0);
        let products = vec![Product::new(&conv.in_proj, &mut b.mixed)];
        matmul_many(&self.pool, &self.file, &b.acts, products)?;
        b.lin_out.resize(total * e, 0.0);
        for (bcx, bx) in b
            .mixed
            .chunks_exact(3 * e)
            .zip(b.lin_out.chunks_exact_mut(e))
        {
            let (gate_b, x_in) = (&bcx[..e], &bcx[2 * e..]);
            for ((o, &g), &v) in bx.iter_mut().zip(gate_b).zip(x_in) {
                *o = g * v;
            }
        }
        let slot = hp.linear_slot(il);
        for (item, s) in batch.iter_mut().zip(spans).filter(|(_, s)| s.n > 0) {
            let state = item
                .seq
                .recurrent
                .as_mut()
                .ok_or(ModelError::ForeignSequence)?;
            let (kept, _) = state.layer_mut(slot);
            let rows = &mut b.lin_out[s.row0 * e..(s.row0 + s.n) * e];
            causal_conv(&conv.conv, taps, kept, rows, |v| v);
        }
        for (bcx, y) in b
            .mixed
            .chunks_exact(3 * e)
            .zip(b.lin_out.chunks_exact_mut(e))
        {
            y.iter_mut().zip(&bcx[e..2 * e]).for_each(|(y, &c)| *y *= c);
        }
        b.acts.invalidate();
        b.acts
            .prepare(&self.pool, &conv.out_proj, &b.lin_out, total)?;
        self.add_projection(&conv.out_proj, layer.post_attn_norm.as_deref(), b)
    }
}
