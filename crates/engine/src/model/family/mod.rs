//! The architectures the engine runs, one file each: what sets a family apart from
//! the shared layer graph (its tensors, its RoPE and activation, its sliding layers),
//! as data the shared hyper-parameter reader, weight loader and forward pass read.
//! Adding a family is a file here and a row of [`FAMILIES`]; a family that needs a
//! new block (experts, linear attention) adds it to the shared ops and a field here.

mod gemma;
mod glm4;
mod gpt_oss;
mod granite;
mod lfm2;
mod llama;
mod mistral3;
mod phi3;
mod qwen;
mod qwen35;
mod smollm3;

use super::rope::{RopeFactors, RopeStyle};

/// The feed-forward gate activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Activation {
    Silu,
    GeluTanh,
    /// The tanh GELU looked up in llama.cpp's f16 table, as its CPU backend's `geglu`
    /// computes it (Gemma 4: six layers of per-layer inputs and shared keys amplify
    /// the table's rounding past the F32 tolerance otherwise).
    GeluTable,
    /// gpt-oss's clamped SwiGLU (`swiglu_oai`).
    SwigluOai,
}

/// One architecture, as `general.architecture` names it.
#[derive(Debug, PartialEq)]
pub(super) struct Family {
    pub name: &'static str,
    pub rope_style: RopeStyle,
    /// The feed-forward gate's activation.
    pub activation: Activation,
    /// Token embeddings multiplied by sqrt(n_embd) (Gemma).
    pub scale_embeddings: bool,
    pub tensors: Tensors,
    /// Sliding-window layers, when the file gives a window.
    pub sliding: Option<Sliding>,
    /// Reads `attn_logit_softcapping` (Gemma 2); every family reads the final one.
    pub attn_softcap: bool,
    /// Reads Granite's multipliers: `embedding_scale`, `residual_scale`,
    /// `logit_scale` and `attention.scale`.
    pub granite_scales: bool,
    pub rope_factors: RopeFactors,
    /// Every this many layers one attends without RoPE: layer `il` rotates nothing iff
    /// `(il + 1) % n == 0` (llama.cpp's `n_no_rope_layer_step`, which SmolLM3's graph
    /// fixes at 4; no file key sets it). `None`: every layer rotates.
    pub no_rope_every: Option<usize>,
    /// Reads YaRN's `rope.scaling.yarn_beta_fast`, `yarn_beta_slow` and
    /// `yarn_log_multiplier` (Mistral 3); the other families keep llama.cpp's defaults
    /// whatever the file says, as llama.cpp does.
    pub yarn_keys: bool,
    /// Reads Llama 4's attention temperature (`attention.temperature_scale`, Mistral 3):
    /// the queries at position p are multiplied by 1 + scale * ln(1 + floor(p / n)),
    /// n the original context (`rope.scaling.original_context_length`).
    pub attn_temperature: bool,
    /// The RoPE scaling type when the file names none (Ollama's gpt-oss files give a
    /// factor but no type: YaRN). `None`: llama.cpp's default, linear.
    pub rope_scaling: Option<&'static str>,
    /// The query scale the graph fixes whatever the head size (Gemma 4: 1, its Q/K
    /// norms standing in); `None`: 1/sqrt(head size), or Granite's key.
    pub attn_scale: Option<f32>,
    /// Reads Gemma 4's per-layer inputs (`embedding_length_per_layer_input`), the
    /// layers sharing earlier layers' keys and values (`attention.shared_kv_layers`)
    /// and the sliding layers' own head and rotation sizes (`key_length_swa`,
    /// `rope.dimension_count_swa`); see `per_layer`.
    pub gemma4_keys: bool,
    /// How the family routes tokens to experts, when the file has experts
    /// (`expert_count` > 0); `None`: the family has none (the key is ignored).
    pub experts: Option<Routing>,
    /// Gated DeltaNet linear-attention layers between the full-attention ones (the
    /// `ssm.*` keys, `full_attention_interval`), and multi-token-prediction blocks after
    /// the trunk (`nextn_predict_layers`), as llama.cpp's `qwen35` reads them.
    pub delta_net: bool,
    /// Gated short-convolution layers where a layer has no KV heads (LFM2: the
    /// `shortconv.l_cache` key, `head_count_kv` 0 for those layers), as llama.cpp's
    /// `lfm2` reads them; see `short_conv`.
    pub short_conv: bool,
}

/// How a token's experts are chosen and weighted (llama.cpp's `build_moe_ffn` as each
/// family's graph calls it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Routing {
    pub gating: Gating,
    /// The chosen experts' weights divided by their sum.
    pub normalise: bool,
    /// Where the experts' width comes from when `expert_feed_forward_length` is absent.
    pub width: ExpertWidth,
}

/// The router's weighting of the experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Gating {
    /// A softmax over all experts; the top k by probability.
    Softmax,
    /// The top k by raw logit, then a softmax over those k (gpt-oss).
    SoftmaxOfChosen,
}

/// The expert width llama.cpp falls back to without `expert_feed_forward_length`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ExpertWidth {
    /// `feed_forward_length` itself (Mixtral, Granite MoE).
    FeedForward,
    /// `feed_forward_length / expert_used_count` (Qwen MoE).
    SharedOut,
}

/// How a family's layer tensors are laid out.
#[derive(Debug, PartialEq)]
pub(super) struct Tensors {
    /// One `attn_qkv` matrix (Phi-3). A family without it still reads one where the
    /// file has `attn_qkv` (llama.cpp's `create_tensor_qkv`: GLM-4 may come either way).
    pub fused_qkv: bool,
    /// One `ffn_up` holding gate then up rows (Phi-3, GLM-4).
    pub fused_gate_up: bool,
    /// Values RMS-normed per head without a weight (Gemma 4).
    pub v_norm: bool,
    /// Per-head RMS norms of Q and K (`attn_q_norm`, `attn_k_norm`).
    pub qk_norm: bool,
    /// Norms of the attention and feed-forward outputs before each residual add
    /// (`post_attention_norm`, `post_ffw_norm`).
    pub post_norms: bool,
    /// The feed-forward block's input norm (gpt-oss calls it `post_attention_norm`).
    pub ffn_norm: &'static str,
    /// The attention output projection (Ollama's gpt-oss files say `attn_out`).
    pub attn_output: &'static str,
    /// The tensor of a learned logit per head in every attention softmax (gpt-oss).
    pub sinks: Option<&'static str>,
    /// `attn_q` holds each head's query then as many rows of an output gate: the
    /// attention output is multiplied by sigmoid(gate) before `attn_output` (Qwen 3.5).
    pub q_gate: bool,
    /// The final norm before the output projection (LFM2's converter names it
    /// `token_embd_norm`).
    pub output_norm: &'static str,
}

/// llama.cpp's per-family defaults for sliding-window layers.
#[derive(Debug, PartialEq)]
pub(super) struct Sliding {
    /// Layer `il` slides iff `il % pattern < pattern - 1` (0: every layer), unless
    /// the file sets `attention.sliding_window_pattern`.
    pub pattern: usize,
    /// The sliding layers' RoPE base when the file gives no `rope.freq_base_swa`
    /// (`None`: the global base) and whether they keep the file's frequency scale.
    pub base: Option<f32>,
    pub scaled: bool,
}

/// Every family the engine runs.
pub(super) const FAMILIES: &[&Family] = &[
    &llama::LLAMA,
    &qwen::QWEN2,
    &qwen::QWEN3,
    &gemma::GEMMA2,
    &gemma::GEMMA3,
    &phi3::PHI3,
    &qwen::QWEN2MOE,
    &qwen::QWEN3MOE,
    &gpt_oss::GPT_OSS,
    &gpt_oss::GPT_OSS_OLLAMA,
    &granite::GRANITE,
    &granite::GRANITEMOE,
    &gemma::GEMMA,
    &smollm3::SMOLLM3,
    &mistral3::MISTRAL3,
    &glm4::GLM4,
    &gemma::GEMMA4,
    &qwen35::QWEN35,
    &qwen35::QWEN35MOE,
    &lfm2::LFM2,
];

/// Every family's name, in the table's order.
pub(super) fn names() -> Vec<&'static str> {
    FAMILIES.iter().map(|f| f.name).collect()
}

/// The family `general.architecture` names.
pub(super) fn by_name(name: &str) -> Option<&'static Family> {
    FAMILIES.iter().copied().find(|f| f.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for f in FAMILIES {
            assert_eq!(by_name(f.name), Some(*f));
            assert_eq!(FAMILIES.iter().filter(|g| g.name == f.name).count(), 1);
        }
        assert_eq!(by_name("gpt2"), None);
    }
}
