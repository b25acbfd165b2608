//! GLM-4 (0414): Llama's layer with norms after attention and the feed-forward block
//! (`post_attention_norm`, `post_ffw_norm`, as Gemma 2's), Q/K/V biases, gate and up
//! fused in one `ffn_up`, and RoPE on adjacent pairs of the first
//! `rope.dimension_count` values of each head only (half of them in GLM-4's files).

use super::llama::LLAMA;
use super::{Family, Tensors};
use crate::model::rope::RopeFactors;

pub(in crate::model) const GLM4: Family = Family {
    name: "glm4",
    tensors: Tensors {
        fused_gate_up: true,
        post_norms: true,
        ..LLAMA.tensors
    },
    rope_factors: RopeFactors::None,
    experts: None,
    ..LLAMA
};
