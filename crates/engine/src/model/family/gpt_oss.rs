//! gpt-oss (llama.cpp's `openai-moe`): experts in every layer, weighted by a softmax
//! over the chosen experts' logits and run through a clamped SwiGLU, with biases on the
//! router, the experts and the attention; a learned sink logit per head in every
//! attention softmax; even layers slide over a window, odd ones see everything, both
//! under the file's YaRN. The feed-forward norm is stored as `post_attention_norm`.
//! Ollama's library files name the architecture `gptoss`, three tensors otherwise and
//! leave out the scaling type (YaRN) and the expert width (the dense width).

use super::{Activation, ExpertWidth, Family, Gating, Routing, Sliding, Tensors};
use crate::model::rope::{RopeFactors, RopeStyle};

pub(in crate::model) const GPT_OSS: Family = Family {
    name: "gpt-oss",
    rope_style: RopeStyle::Neox,
    activation: Activation::SwigluOai,
    scale_embeddings: false,
    tensors: Tensors {
        fused_qkv: false,
        fused_gate_up: false,
        v_norm: false,
        qk_norm: false,
        post_norms: false,
        ffn_norm: "post_attention_norm",
        attn_output: "attn_output",
        sinks: Some("attn_sinks.weight"),
        q_gate: false,
        output_norm: "output_norm",
    },
    sliding: Some(Sliding {
        pattern: 2,
        base: None,
        scaled: true,
    }),
    attn_softcap: false,
    granite_scales: false,
    rope_scaling: None,
    rope_factors: RopeFactors::None,
    no_rope_every: None,
    yarn_keys: false,
    attn_temperature: false,
    delta_net: false,
    short_conv: false,
    attn_scale: None,
    gemma4_keys: false,
    experts: Some(Routing {
        gating: Gating::SoftmaxOfChosen,
        normalise: false,
        width: ExpertWidth::FeedForward,
    }),
};

/// gpt-oss as Ollama's library stores it.
pub(in crate::model) const GPT_OSS_OLLAMA: Family = Family {
    name: "gptoss",
    tensors: Tensors {
        ffn_norm: "ffn_norm",
        attn_output: "attn_out",
        sinks: Some("attn_sinks"),
        ..GPT_OSS.tensors
    },
    rope_scaling: Some("yarn"),
    ..GPT_OSS
};
