//! Llama (and the many files converted as `llama`: Mistral, SmolLM2, TinyLlama):
//! adjacent-pair RoPE on the converter's permuted Q/K rows, SiLU, Llama 3.1's
//! `rope_freqs` or LongRoPE factors; with experts in the file, Mixtral.

use super::{Activation, ExpertWidth, Family, Gating, Routing, Tensors};
use crate::model::rope::{RopeFactors, RopeStyle};

pub(in crate::model) const LLAMA: Family = Family {
    name: "llama",
    rope_style: RopeStyle::Normal,
    activation: Activation::Silu,
    scale_embeddings: false,
    tensors: Tensors {
        fused_qkv: false,
        fused_gate_up: false,
        v_norm: false,
        qk_norm: false,
        post_norms: false,
        ffn_norm: "ffn_norm",
        attn_output: "attn_output",
        sinks: None,
        q_gate: false,
        output_norm: "output_norm",
    },
    sliding: None,
    attn_softcap: false,
    granite_scales: false,
    rope_scaling: None,
    rope_factors: RopeFactors::FreqsOrLongRope,
    no_rope_every: None,
    yarn_keys: false,
    attn_temperature: false,
    delta_net: false,
    short_conv: false,
    attn_scale: None,
    gemma4_keys: false,
    // Mixtral: a Llama file with `expert_count`.
    experts: Some(Routing {
        gating: Gating::Softmax,
        normalise: true,
        width: ExpertWidth::FeedForward,
    }),
};
