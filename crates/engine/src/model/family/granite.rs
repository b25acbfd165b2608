//! IBM Granite 3 (dense) and Granite MoE: Llama's layer with four multipliers from the
//! file: the embeddings scaled, each block's output scaled before its residual add, the
//! attention's own query scale, and the logits divided. Granite MoE routes by a softmax
//! over its experts, renormalised; an ungated shared expert when the file has one.

use super::llama::LLAMA;
use super::{ExpertWidth, Family, Gating, Routing};

pub(in crate::model) const GRANITE: Family = Family {
    name: "granite",
    granite_scales: true,
    experts: None,
    ..LLAMA
};

pub(in crate::model) const GRANITEMOE: Family = Family {
    name: "granitemoe",
    experts: Some(Routing {
        gating: Gating::Softmax,
        normalise: true,
        width: ExpertWidth::FeedForward,
    }),
    ..GRANITE
};
