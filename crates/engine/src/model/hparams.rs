//! Architecture hyper-parameters, read from GGUF metadata with llama.cpp's defaults.

use super::family::{self, Activation, ExpertWidth, Family, Routing};
use super::rope::{Rope, RopeScaling, RopeStyle};
use super::ModelError;
use crate::gguf::{GgufFile, Value};

/// Everything the forward pass needs to know about a model's shape.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct HParams {
    pub family: &'static Family,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    pub n_vocab: usize,
    pub n_ctx_train: usize,
    pub rms_eps: f32,
    pub rope_style: RopeStyle,
    pub rope_scaling: RopeScaling,
    pub rope: Rope,
    /// The rotation of sliding-window layers (their own base, and scale on Gemma 3).
    pub rope_swa: Rope,
    /// Window of the sliding layers (query i sees keys i - window < j <= i).
    pub sliding_window: Option<usize>,
    /// Per layer: does it use the sliding window?
    pub swa_layers: Vec<bool>,
    /// Per layer: are its queries and keys rotated? (SmolLM3's every fourth is not.)
    pub rope_layers: Vec<bool>,
    /// Llama 4's attention temperature (Mistral 3), when the file sets one.
    pub attn_temperature: Option<AttnTemperature>,
    pub attn_softcap: Option<f32>,
    pub final_softcap: Option<f32>,
    /// Multiplier applied to Q before Q·K.
    pub attn_scale: f32,
    /// Multiplier applied to token embeddings (gemma: sqrt(n_embd)).
    pub embed_scale: Option<f32>,
    /// Multiplier of each block's output before its residual add (Granite).
    pub residual_scale: Option<f32>,
    /// Divides the logits (Granite).
    pub logit_scale: Option<f32>,
    pub activation: Activation,
    /// The feed-forward blocks' experts, when they are a mixture.
    pub experts: Option<ExpertShape>,
    /// The Gated DeltaNet layers' shape, when the family has them.
    pub linear: Option<LinearShape>,
    /// Per layer: is it a linear-attention (recurrent) layer? All false without them.
    pub recurrent_layers: Vec<bool>,
    /// Multi-token-prediction blocks stored after the `n_layer` trunk layers
    /// (`nextn_predict_layers`; `block_count` counts them too).
    pub n_nextn: usize,
}

/// A Gated DeltaNet layer's shape (llama.cpp's `ssm.*` keys as `qwen35` reads them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct LinearShape {
    /// Taps of the causal conv (`ssm.conv_kernel`): it reads the last `conv - 1`
    /// inputs, which the state keeps.
    pub conv: usize,
    /// Each head's key and value width (`ssm.state_size`).
    pub d_state: usize,
    /// Key (and query) heads (`ssm.group_count`).
    pub n_k_heads: usize,
    /// Value heads (`ssm.time_step_rank`); value head h reads key head h % n_k_heads.
    pub n_v_heads: usize,
    /// `ssm.inner_size`: must be `d_state * n_v_heads` (checked against the tensors).
    pub d_inner: usize,
}

impl LinearShape {
    pub(super) fn key_dim(&self) -> usize {
        self.d_state * self.n_k_heads
    }

    pub(super) fn value_dim(&self) -> usize {
        self.d_state * self.n_v_heads
    }

    /// Channels of the conv: queries, keys and values.
    pub(super) fn conv_dim(&self) -> usize {
        2 * self.key_dim() + self.value_dim()
    }

    /// Floats of one layer's conv state: the last `conv - 1` inputs.
    pub(super) fn conv_state_len(&self) -> usize {
        (self.conv - 1) * self.conv_dim()
    }

    /// Floats of one layer's delta-rule state: a `d_state` square per value head.
    pub(super) fn matrix_state_len(&self) -> usize {
        self.n_v_heads * self.d_state * self.d_state
    }
}

/// Queries scaled by position: 1 + `scale` * ln(1 + floor(p / `floor`)) at position p
/// (llama.cpp's `llm_graph_input_attn_temp`, with no offset).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct AttnTemperature {
    pub scale: f32,
    pub floor: usize,
}

impl AttnTemperature {
    /// The multiplier of the queries at `pos`.
    pub(super) fn at(&self, pos: usize) -> f32 {
        let steps = (pos as f32 / self.floor as f32).floor();
        ((steps as f64 + 1.0).ln() * self.scale as f64 + 1.0) as f32
    }
}

/// A mixture-of-experts feed-forward block, as the file's keys give it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ExpertShape {
    pub routing: Routing,
    pub n_expert: usize,
    /// Experts each token runs through (k).
    pub n_used: usize,
    /// Each expert's hidden width.
    pub n_ff: usize,
    /// Multiplies the chosen experts' weights (`expert_weights_scale`, when not 0 or 1).
    pub weights_scale: Option<f32>,
}

/// Most floats of one linear layer's delta-rule state (256 MiB; Qwen 3.5's largest
/// is 128 × 128 × 64 = 1 Mi).
const MAX_STATE_FLOATS: u64 = 1 << 26;

/// llama.cpp's `LLAMA_MAX_EXPERTS`.
const MAX_EXPERTS: usize = 512;

/// Upper bound on any single dimension read from metadata, so a hostile file cannot
/// make the engine allocate absurd buffers before tensor shapes are checked.
const MAX_DIM: u32 = 1 << 24;

impl HParams {
    /// Reads the hyper-parameters of `file`, failing with the missing or bad key.
    pub(super) fn from_gguf(file: &GgufFile) -> Result<HParams, ModelError> {
        let arch_name = file.architecture()?;
        let family = family::by_name(arch_name)
            .ok_or_else(|| ModelError::UnsupportedArch(arch_name.to_string()))?;
        let key = |s: &str| format!("{arch_name}.{s}");
        let req = |s: &str| -> Result<usize, ModelError> {
            let k = key(s);
            let v = file.get_u32(&k)?;
            dim(&k, v)
        };
        let opt = |s: &str| -> Result<Option<usize>, ModelError> {
            let k = key(s);
            file.opt_u32(&k)?.map(|v| dim(&k, v)).transpose()
        };
        let n_layer_all = req("block_count")?;
        // Multi-token-prediction blocks come after the trunk (llama.cpp's `n_layer()`
        // is `block_count - nextn_predict_layers`).
        let n_nextn = match family.delta_net {
            true => opt("nextn_predict_layers")?.unwrap_or(0),
            false => 0,
        };
        if n_nextn >= n_layer_all {
            return Err(ModelError::Invalid(format!(
                "nextn_predict_layers {n_nextn} leaves no layer of block_count {n_layer_all}"
            )));
        }
        let n_layer = n_layer_all - n_nextn;
        let n_embd = req("embedding_length")?;
        // llama.cpp reads the dense width as optional; Qwen 3.5 MoE files may have
        // none (their experts' widths have keys of their own). A dense layer then fails
        // on its first feed-forward tensor, by name.
        let n_ff = match (family.delta_net, opt("feed_forward_length")?) {
            (_, Some(n)) => n,
            (true, None) => 0,
            (false, None) => req("feed_forward_length")?,
        };
        let n_head = req("attention.head_count")?;
        let n_head_kv = opt("attention.head_count_kv")?.unwrap_or(n_head);
        if n_head % n_head_kv != 0 {
            return Err(ModelError::Invalid(format!(
                "head_count {n_head} is not a multiple of head_count_kv {n_head_kv}"
            )));
        }
        let head_dim_k = opt("attention.key_length")?.unwrap_or(n_embd / n_head);
        let head_dim_v = opt("attention.value_length")?.unwrap_or(n_embd / n_head);
        if family.tensors.q_gate && head_dim_k != head_dim_v {
            // Each query head's gate multiplies its output: one width for both.
            return Err(ModelError::Invalid(format!(
                "gated queries need key_length {head_dim_k} = value_length {head_dim_v}"
            )));
        }
        if head_dim_k == 0 || head_dim_k % 2 != 0 {
            return Err(ModelError::Invalid(format!(
                "head dimension {head_dim_k} must be even and non-zero"
            )));
        }
        let n_vocab = match opt("vocab_size")? {
            Some(v) => v,
            None => {
                let t = file.require_tensor("token_embd.weight")?;
                t.dims.get(1).copied().unwrap_or(0) as usize
            }
        };
        let n_ctx_train = req("context_length")?;
        let rms_eps = file.get_f32(&key("attention.layer_norm_rms_epsilon"))?;
        let rope_dims = opt("rope.dimension_count")?.unwrap_or(head_dim_k);
        if rope_dims > head_dim_k || rope_dims % 2 != 0 {
            return Err(ModelError::Invalid(format!(
                "rope.dimension_count {rope_dims} does not fit head dimension {head_dim_k}"
            )));
        }
        let rope_base = file.opt_f32(&key("rope.freq_base"))?.unwrap_or(10_000.0);
        let rope_scaling = RopeScaling::from_gguf(
            file,
            arch_name,
            n_ctx_train,
            family.rope_scaling,
            family.yarn_keys,
        )?;
        let rope_freq_scale = rope_scaling.freq_scale;
        // Which layers slide, and their RoPE, follow llama.cpp's per-family defaults;
        // the other families ignore a sliding-window key, as llama.cpp does.
        let (sliding_window, pattern, default_swa_base, swa_scale) = match &family.sliding {
            Some(s) => (
                opt("attention.sliding_window")?,
                s.pattern,
                s.base.unwrap_or(rope_base),
                if s.scaled { rope_freq_scale } else { 1.0 },
            ),
            None => (None, 0, rope_base, rope_freq_scale),
        };
        let pattern = match file.opt_u32(&key("attention.sliding_window_pattern"))? {
            Some(p) => p as usize,
            None => pattern,
        };
        // llama.cpp: pattern 0 means every layer slides, else layer il slides iff
        // il % pattern < pattern - 1.
        let swa_layers = (0..n_layer)
            .map(|il| sliding_window.is_some() && (pattern == 0 || il % pattern < pattern - 1))
            .collect();
        let rope_base_swa = file
            .opt_f32(&key("rope.freq_base_swa"))?
            .unwrap_or(default_swa_base);
        let softcap = |s: &str| -> Result<Option<f32>, ModelError> {
            Ok(file.opt_f32(&key(s))?.filter(|&c| c > 0.0))
        };
        let (attn_softcap, final_softcap) = if family.attn_softcap {
            (
                softcap("attn_logit_softcapping")?,
                softcap("final_logit_softcapping")?,
            )
        } else {
            (None, softcap("final_logit_softcapping")?)
        };
        let scale = |s: &str| -> Result<Option<f32>, ModelError> {
            Ok(match family.granite_scales {
                true => file.opt_f32(&key(s))?.filter(|&v| v != 0.0),
                false => None,
            })
        };
        let embed_scale = match family.scale_embeddings {
            true => Some((n_embd as f32).sqrt()),
            false => scale("embedding_scale")?,
        };
        let attn_scale = scale("attention.scale")?.unwrap_or(1.0 / (head_dim_k as f32).sqrt());
        let rope_layers = (0..n_layer)
            .map(|il| family.no_rope_every.is_none_or(|n| (il + 1) % n != 0))
            .collect();
        let attn_temperature = match family.attn_temperature {
            true => match file.opt_f32(&key("attention.temperature_scale"))? {
                Some(s) if !s.is_finite() => {
                    return Err(ModelError::Invalid(format!(
                        "attention.temperature_scale {s} is not finite"
                    )))
                }
                Some(scale) if scale != 0.0 => Some(AttnTemperature {
                    scale,
                    floor: rope_scaling.n_ctx_orig,
                }),
                _ => None,
            },
            false => None,
        };
        let experts = match family.experts {
            Some(routing) => expert_shape(file, arch_name, routing, n_ff)?,
            None => None,
        };
        let (linear, recurrent_layers) = match family.delta_net {
            true => {
                let (linear, layers) = linear_shape(file, arch_name, n_layer)?;
                (Some(linear), layers)
            }
            false => (None, vec![false; n_layer]),
        };
        Ok(HParams {
            family,
            n_layer,
            n_embd,
            n_ff,
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            n_vocab,
            n_ctx_train,
            rms_eps,
            rope_style: family.rope_style,
            rope: Rope::new(rope_dims, rope_base, rope_freq_scale, &rope_scaling),
            rope_swa: Rope::new(rope_dims, rope_base_swa, swa_scale, &rope_scaling),
            rope_scaling,
            sliding_window,
            swa_layers,
            rope_layers,
            attn_temperature,
            attn_softcap,
            final_softcap,
            attn_scale,
            embed_scale,
            residual_scale: scale("residual_scale")?,
            logit_scale: scale("logit_scale")?,
            activation: family.activation,
            experts,
            linear,
            recurrent_layers,
            n_nextn,
        })
    }

    /// Width of all query heads together.
    pub(super) fn q_width(&self) -> usize {
        self.n_head * self.head_dim_k
    }

    /// Width of the query projection: the queries, and with `q_gate` as many gates.
    pub(super) fn q_proj_width(&self) -> usize {
        self.q_width() * if self.family.tensors.q_gate { 2 } else { 1 }
    }

    /// Layers that keep keys and values (the full-attention ones).
    pub(super) fn n_kv_layers(&self) -> usize {
        self.recurrent_layers.iter().filter(|r| !**r).count()
    }

    /// Where layer `il`'s keys and values sit in a KV block: its index among the
    /// layers that keep them (linear layers keep a recurrent state instead).
    pub(super) fn kv_slot(&self, il: usize) -> usize {
        self.recurrent_layers[..il].iter().filter(|r| !**r).count()
    }

    /// Index among the linear layers of linear layer `il` (its recurrent state's).
    pub(super) fn linear_slot(&self, il: usize) -> usize {
        self.recurrent_layers[..il].iter().filter(|r| **r).count()
    }

    /// Width of all key heads together.
    pub(super) fn k_width(&self) -> usize {
        self.n_head_kv * self.head_dim_k
    }

    /// Width of all value heads together.
    pub(super) fn v_width(&self) -> usize {
        self.n_head_kv * self.head_dim_v
    }
}

/// The experts the file's keys describe (`None` when `expert_count` is absent or 0).
fn expert_shape(
    file: &GgufFile,
    arch: &str,
    routing: Routing,
    n_ff: usize,
) -> Result<Option<ExpertShape>, ModelError> {
    let key = |s: &str| format!("{arch}.{s}");
    let n_expert = file.opt_u32(&key("expert_count"))?.unwrap_or(0) as usize;
    if n_expert == 0 {
        return Ok(None);
    }
    let n_used = file.opt_u32(&key("expert_used_count"))?.unwrap_or(0) as usize;
    if n_expert > MAX_EXPERTS || n_used == 0 || n_used > n_expert {
        return Err(ModelError::Invalid(format!(
            "{n_expert} experts with {n_used} used per token: expected 1 <= used <= experts <= {MAX_EXPERTS}"
        )));
    }
    let n_ff = match file.opt_u32(&key("expert_feed_forward_length"))? {
        Some(v) => dim(&key("expert_feed_forward_length"), v)?,
        None => match routing.width {
            ExpertWidth::FeedForward => n_ff,
            ExpertWidth::SharedOut => n_ff / n_used,
        },
    };
    let weights_scale = file
        .opt_f32(&key("expert_weights_scale"))?
        .filter(|&s| s != 0.0 && s != 1.0);
    Ok(Some(ExpertShape {
        routing,
        n_expert,
        n_used,
        n_ff,
        weights_scale,
    }))
}

/// The Gated DeltaNet shape and which layers are linear: `attention.recurrent_layers`
/// when the file lists them, else every layer but each `full_attention_interval`-th
/// (default 4), as llama.cpp decides.
fn linear_shape(
    file: &GgufFile,
    arch: &str,
    n_layer: usize,
) -> Result<(LinearShape, Vec<bool>), ModelError> {
    let key = |s: &str| format!("{arch}.{s}");
    let req = |s: &str| -> Result<usize, ModelError> {
        let k = key(s);
        dim(&k, file.get_u32(&k)?)
    };
    let shape = LinearShape {
        conv: req("ssm.conv_kernel")?,
        d_state: req("ssm.state_size")?,
        n_k_heads: req("ssm.group_count")?,
        n_v_heads: req("ssm.time_step_rank")?,
        d_inner: req("ssm.inner_size")?,
    };
    // A sequence's state holds a d × d matrix per value head per layer: a hostile
    // file must not make each new sequence ask for terabytes.
    let per_layer = (shape.d_state as u128).pow(2) * shape.n_v_heads as u128;
    if per_layer > MAX_STATE_FLOATS as u128 {
        return Err(ModelError::Invalid(format!(
            "ssm.state_size {} with {} value heads makes a recurrent state of {per_layer} floats a layer (at most {MAX_STATE_FLOATS})",
            shape.d_state, shape.n_v_heads
        )));
    }
    if !shape.n_v_heads.is_multiple_of(shape.n_k_heads) {
        return Err(ModelError::Invalid(format!(
            "ssm.time_step_rank {} (value heads) is not a multiple of ssm.group_count {} (key heads)",
            shape.n_v_heads, shape.n_k_heads
        )));
    }
    let listed = key("attention.recurrent_layers");
    let layers = match file.opt_array(&listed)? {
        Some(arr) => {
            // The converter writes booleans; integers are read as llama.cpp would.
            let flags = file
                .array_items(arr)
                .map(|v| match v {
                    Value::Bool(b) => Some(b),
                    v => v.as_i128().map(|i| i != 0),
                })
                .collect::<Option<Vec<bool>>>()
                .ok_or_else(|| {
                    ModelError::Invalid(format!("{listed} is not an array of booleans"))
                })?;
            if flags.len() < n_layer {
                return Err(ModelError::Invalid(format!(
                    "{listed} lists {} layers of {n_layer}",
                    flags.len()
                )));
            }
            flags[..n_layer].to_vec()
        }
        None => {
            let every = file.opt_u32(&key("full_attention_interval"))?.unwrap_or(4) as usize;
            if every == 0 {
                return Err(ModelError::Invalid(format!(
                    "{} is 0",
                    key("full_attention_interval")
                )));
            }
            (0..n_layer).map(|il| (il + 1) % every != 0).collect()
        }
    };
    Ok((shape, layers))
}

fn dim(key: &str, v: u32) -> Result<usize, ModelError> {
    if v == 0 || v > MAX_DIM {
        return Err(ModelError::Invalid(format!(
            "metadata {key} = {v} is out of range"
        )));
    }
    Ok(v as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rope::YarnKeys;

    /// Gemma 3's defaults: every layer of the tiny model slides (a pattern of 6, four
    /// layers), with the sliding layers' own RoPE base.
    #[test]
    fn gemma3_sliding_layers_and_their_rope_base() {
        let path = llamay_testdata::ref_path("tiny/tiny-gemma3-Q4_K.gguf");
        let hp = HParams::from_gguf(&GgufFile::open(path).unwrap()).unwrap();
        assert_eq!(hp.family.name, "gemma3");
        assert_eq!(hp.swa_layers, vec![true; 4]);
        assert_eq!(
            (hp.sliding_window, hp.rope_swa.base, hp.rope.base),
            (Some(16), 10_000.0, 1e6)
        );
    }

    /// SmolLM3 rotates every layer but each fourth; Mistral 3 reads YaRN's own keys and
    /// the attention temperature, whose floor is the original context.
    #[test]
    fn smollm3_rope_less_layers_and_mistral3_keys() {
        let read = |name| {
            let path = llamay_testdata::dense_model(name);
            HParams::from_gguf(&GgufFile::open(path).unwrap()).unwrap()
        };
        let hp = read("smollm3-F32");
        assert_eq!(hp.rope_layers, [true, true, true, false, true]);
        assert_eq!(hp.attn_temperature, None);
        let hp = read("mistral3-F32");
        assert_eq!(hp.rope_layers, [true, true]);
        let yarn = hp.rope_scaling.yarn;
        assert_eq!(
            (yarn.beta_fast, yarn.beta_slow, yarn.log_mul),
            (0.25, 0.03125, 0.5)
        );
        let t = hp.attn_temperature.expect("a temperature");
        assert_eq!((t.scale, t.floor), (0.5, 16));
        assert_eq!((t.at(0), t.at(15)), (1.0, 1.0));
        assert!((t.at(16) - (1.0 + 0.5 * 2f32.ln())).abs() < 1e-6);
        assert!((t.at(47) - (1.0 + 0.5 * 3f32.ln())).abs() < 1e-6);
        // Gemma 1: the defaults of a family that reads neither.
        let hp = read("gemma-F32");
        assert_eq!(hp.rope_scaling.yarn, YarnKeys::DEFAULT);
        assert_eq!(hp.embed_scale, Some(128f32.sqrt()));
    }
}
