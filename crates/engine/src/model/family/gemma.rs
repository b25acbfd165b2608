//! Gemma 2 and 3: embeddings scaled by sqrt(n_embd), tanh-GELU, norms after
//! attention and the feed-forward block, alternating sliding-window layers. Gemma 2
//! caps attention logits; Gemma 3 has Q/K norms and its sliding layers their own
//! RoPE base (10,000) without the file's scaling.

use super::{Activation, Family, Sliding, Tensors};
use crate::model::rope::{RopeFactors, RopeStyle};

pub(in crate::model) const GEMMA2: Family = Family {
    name: "gemma2",
    rope_style: RopeStyle::Neox,
    activation: Activation::GeluTanh,
    scale_embeddings: true,
    tensors: Tensors {
        fused: false,
        qk_norm: false,
        post_norms: true,
        ffn_norm: "ffn_norm",
        attn_output: "attn_output",
        sinks: None,
    },
    sliding: Some(Sliding {
        pattern: 2,
        base: None,
        scaled: true,
    }),
    attn_softcap: true,
    granite_scales: false,
    rope_scaling: None,
    rope_factors: RopeFactors::None,
    experts: None,
};

pub(in crate::model) const GEMMA3: Family = Family {
    name: "gemma3",
    tensors: Tensors {
        qk_norm: true,
        ..GEMMA2.tensors
    },
    sliding: Some(Sliding {
        pattern: 6,
        base: Some(10_000.0),
        scaled: false,
    }),
    attn_softcap: false,
    ..GEMMA2
};
