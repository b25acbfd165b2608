//! Phi-3: fused QKV and gate-up matrices, NeoX RoPE with LongRoPE factors, SiLU.

use super::{Activation, Family, Tensors};
use crate::model::rope::{RopeFactors, RopeStyle};

pub(in crate::model) const PHI3: Family = Family {
    name: "phi3",
    rope_style: RopeStyle::Neox,
    activation: Activation::Silu,
    scale_embeddings: false,
    tensors: Tensors {
        fused_qkv: true,
        fused_gate_up: true,
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
    rope_factors: RopeFactors::LongRope,
    no_rope_every: None,
    yarn_keys: false,
    attn_temperature: false,
    delta_net: false,
    short_conv: false,
    attn_scale: None,
    gemma4_keys: false,
    experts: None,
};
