//! Qwen 2 / 2.5 (Q, K and V biases, read when the file has them) and Qwen 3
//! (per-head Q and K norms): Llama's layer with NeoX RoPE and no frequency factors.
//! Their mixture-of-experts versions route every token through a softmax over the
//! experts; Qwen 2 MoE keeps the chosen probabilities as they are (they sum to less
//! than one) and adds a gated shared expert, Qwen 3 MoE renormalises them.

use super::llama::LLAMA;
use super::{ExpertWidth, Family, Gating, Routing, Tensors};
use crate::model::rope::{RopeFactors, RopeStyle};

pub(in crate::model) const QWEN2: Family = Family {
    name: "qwen2",
    rope_style: RopeStyle::Neox,
    rope_factors: RopeFactors::None,
    experts: None,
    ..LLAMA
};

pub(in crate::model) const QWEN3: Family = Family {
    name: "qwen3",
    tensors: Tensors {
        qk_norm: true,
        ..QWEN2.tensors
    },
    ..QWEN2
};

pub(in crate::model) const QWEN2MOE: Family = Family {
    name: "qwen2moe",
    experts: Some(Routing {
        gating: Gating::Softmax,
        normalise: false,
        width: ExpertWidth::SharedOut,
    }),
    ..QWEN2
};

pub(in crate::model) const QWEN3MOE: Family = Family {
    name: "qwen3moe",
    experts: Some(Routing {
        gating: Gating::Softmax,
        normalise: true,
        width: ExpertWidth::SharedOut,
    }),
    ..QWEN3
};
