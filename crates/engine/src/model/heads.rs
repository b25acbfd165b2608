//! Queries, keys and values made ready for attention: biases, per-head norms, RoPE, the
//! query scale, and the rounding an f16 cache implies. It works on any whole heads of
//! one token, so the threads that computed a product's rows can finish them before
//! handing them on, or one thread can take whole rows.

use super::hparams::HParams;
use super::ops::{rms_norm_inplace, rms_scale, round_to_f16};
use super::rope::RopeTable;
use super::weights::Attention;

/// What a step's tokens bring to one layer's heads.
#[derive(Clone, Copy)]
pub(super) struct TokenPrep<'a> {
    /// The rotation of each token's position; `None`: the layer rotates nothing.
    pub rope: Option<&'a RopeTable>,
    /// Per token of the step: its sequence has an f16 cache. An f16 cache rounds keys
    /// and values when they are stored; the batch's own (and, as llama.cpp's K·Q in
    /// f16 does, the queries) are rounded too, so results do not depend on how a
    /// prompt is split into steps.
    pub round16: &'a [bool],
    /// Per token of the step: its queries' attention temperature (Mistral 3).
    pub q_temperature: Option<&'a [f32]>,
    /// The step's rows see each other whatever their order (an image's rows in
    /// Gemma 3, as llama.cpp's mtmd decodes them).
    pub non_causal: bool,
}

/// One layer's preparation of the heads of one step.
pub(super) struct HeadPrep<'a> {
    pub hp: &'a HParams,
    pub layer: &'a Attention,
    pub tokens: TokenPrep<'a>,
    /// The layer's key and value head sizes.
    pub dims: (usize, usize),
}

impl HeadPrep<'_> {
    /// Query columns `c0..c0 + q.len()` (whole heads) of token `t`.
    pub(super) fn queries(&self, t: usize, c0: usize, q: &mut [f32]) {
        let (hp, hk) = (self.hp, self.dims.0);
        if let Some([bq, _, _]) = &self.layer.qkv_bias {
            add(q, &bq[c0..]);
        }
        for head in q.chunks_exact_mut(hk) {
            if let Some(w) = &self.layer.q_norm {
                rms_norm_inplace(head, w, hp.rms_eps);
            }
            self.rotate(head, t);
        }
        // The temperature multiplies the rotated queries themselves (llama.cpp's K·Q
        // then reads them); rounded before the scale, as llama.cpp's f16 K·Q rounds the
        // query and scales the products: the same bits unless the scale is a power of
        // two.
        if let Some(temp) = self.tokens.q_temperature {
            q.iter_mut().for_each(|v| *v *= temp[t]);
        }
        self.round(t, q);
        q.iter_mut().for_each(|v| *v *= hp.attn_scale);
    }

    /// Key columns `c0..c0 + k.len()` (whole heads) of token `t`.
    pub(super) fn keys(&self, t: usize, c0: usize, k: &mut [f32]) {
        let (hp, hk) = (self.hp, self.dims.0);
        if let Some([_, bk, _]) = &self.layer.qkv_bias {
            add(k, &bk[c0..]);
        }
        for head in k.chunks_exact_mut(hk) {
            if let Some(w) = &self.layer.k_norm {
                rms_norm_inplace(head, w, hp.rms_eps);
            }
            self.rotate(head, t);
        }
        self.round(t, k);
    }

    /// Value columns `c0..c0 + v.len()` of token `t`.
    pub(super) fn values(&self, t: usize, c0: usize, v: &mut [f32]) {
        if let Some([_, _, bv]) = &self.layer.qkv_bias {
            add(v, &bv[c0..]);
        }
        if self.hp.family.tensors.v_norm {
            for head in v.chunks_exact_mut(self.dims.1) {
                let s = rms_scale(head, self.hp.rms_eps);
                head.iter_mut().for_each(|x| *x *= s);
            }
        }
        self.round(t, v);
    }

    fn rotate(&self, head: &mut [f32], t: usize) {
        if let Some(rope) = self.tokens.rope {
            rope.apply(head, t, self.hp.rope_style);
        }
    }

    fn round(&self, t: usize, x: &mut [f32]) {
        if self.tokens.round16[t] {
            round_to_f16(x);
        }
    }
}

fn add(x: &mut [f32], bias: &[f32]) {
    x.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
}
