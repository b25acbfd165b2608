//! Gemma 1, 2 and 3: embeddings scaled by sqrt(n_embd), tanh-GELU, NeoX RoPE, the
//! output tied to the token embeddings (their files have no `output.weight`). Gemma 2 adds norms after attention and the
//! feed-forward block, alternating sliding-window layers and capped attention logits;
//! Gemma 3 has Q/K norms instead of the cap and its sliding layers their own RoPE base
//! (10,000) without the file's scaling.

use super::llama::LLAMA;
use super::{Activation, Family, Sliding, Tensors};
use crate::model::rope::{RopeFactors, RopeStyle};

pub(in crate::model) const GEMMA: Family = Family {
    name: "gemma",
    rope_style: RopeStyle::Neox,
    activation: Activation::GeluTanh,
    scale_embeddings: true,
    rope_factors: RopeFactors::None,
    experts: None,
    ..LLAMA
};

pub(in crate::model) const GEMMA2: Family = Family {
    name: "gemma2",
    tensors: Tensors {
        post_norms: true,
        ..GEMMA.tensors
    },
    sliding: Some(Sliding {
        pattern: 2,
        base: None,
        scaled: true,
    }),
    attn_softcap: true,
    ..GEMMA
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

/// Gemma 4: Gemma 3 with norms on the values too and queries unscaled (the Q/K norms
/// stand in), sliding layers by the file's per-layer pattern with their own head and
/// rotation sizes, proportional RoPE (`rope_freqs`) on the global layers, layers
/// sharing earlier ones' keys and values, and per-layer inputs (see `per_layer`).
pub(in crate::model) const GEMMA4: Family = Family {
    name: "gemma4",
    tensors: Tensors {
        v_norm: true,
        ..GEMMA3.tensors
    },
    rope_factors: RopeFactors::GlobalFreqs,
    activation: Activation::GeluTable,
    attn_scale: Some(1.0),
    gemma4_keys: true,
    ..GEMMA3
};
