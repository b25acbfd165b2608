//! Qwen 2 / 2.5 (Q, K and V biases, read when the file has them) and Qwen 3
//! (per-head Q and K norms): Llama's layer with NeoX RoPE and no frequency factors.

use super::llama::LLAMA;
use super::{Family, Tensors};
use crate::model::rope::{RopeFactors, RopeStyle};

pub(in crate::model) const QWEN2: Family = Family {
    name: "qwen2",
    rope_style: RopeStyle::Neox,
    rope_factors: RopeFactors::None,
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
