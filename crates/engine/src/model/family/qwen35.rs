//! Qwen 3.5 (llama.cpp's `qwen35`): a hybrid. Most layers are Gated DeltaNet linear
//! attention (a short causal conv, then the gated delta rule over a fixed-size state
//! per head), every `full_attention_interval`-th is full attention whose `attn_q` also
//! yields an output gate, with Q/K norms and interleaved M-RoPE over part of each head
//! (for text every section reads the position but the fourth, which reads 0). The
//! feed-forward input norm is stored as `post_attention_norm`; multi-token-prediction
//! blocks follow the trunk and are loaded, not run.

use super::qwen::QWEN3;
use super::{ExpertWidth, Family, Gating, Routing, Tensors};
use crate::model::rope::RopeFactors;

pub(in crate::model) const QWEN35: Family = Family {
    name: "qwen35",
    tensors: Tensors {
        ffn_norm: "post_attention_norm",
        q_gate: true,
        ..QWEN3.tensors
    },
    rope_factors: RopeFactors::ImropeSections,
    delta_net: true,
    ..QWEN3
};

/// Qwen 3.5 MoE (`qwen35moe`): the same hybrid layers with Qwen 3 MoE's experts (a
/// softmax over all, the chosen renormalised) and a shared expert scaled by
/// sigmoid(`ffn_gate_inp_shexp` · x), as Qwen 2 MoE's.
pub(in crate::model) const QWEN35MOE: Family = Family {
    name: "qwen35moe",
    experts: Some(Routing {
        gating: Gating::Softmax,
        normalise: true,
        width: ExpertWidth::SharedOut,
    }),
    ..QWEN35
};
