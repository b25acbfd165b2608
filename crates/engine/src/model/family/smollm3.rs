//! SmolLM3: Llama's layer without frequency factors, except that every fourth layer
//! (3, 7, …) attends without RoPE, as llama.cpp's graph runs it.

use super::llama::LLAMA;
use super::Family;
use crate::model::rope::RopeFactors;

pub(in crate::model) const SMOLLM3: Family = Family {
    name: "smollm3",
    rope_factors: RopeFactors::None,
    no_rope_every: Some(4),
    experts: None,
    ..LLAMA
};
