//! Architecture hyper-parameters, read from GGUF metadata with llama.cpp's defaults.

use super::family::{self, Activation, ExpertWidth, Family, Routing};
use super::rope::{Rope, RopeScaling, RopeStyle};
use super::ModelError;
use crate::gguf::GgufFile;
use gemma4::gemma4_keys;
use linear::linear_shape;
pub(super) use linear::LinearShape;

mod gemma4;
mod linear;

/// Everything the forward pass needs to know about a model's shape.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct HParams {
    pub family: &'static Family,
    pub n_layer: usize,
    pub n_embd: usize,
    /// The widest layer's feed-forward width.
    pub n_ff: usize,
    /// Per layer, its feed-forward width (the file's key may be an array: Gemma 4's
    /// wider shared-KV layers).
    pub ff_layers: Vec<usize>,
    pub n_head: usize,
    /// The most KV heads of any layer.
    pub n_head_kv: usize,
    /// Per layer, its KV heads.
    pub kv_heads: Vec<usize>,
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
    /// The short convolutions' taps (`shortconv.l_cache`), when the family has them.
    pub short_conv: Option<usize>,
    /// Per layer: does it keep a recurrent state (a linear-attention or a short-conv
    /// layer) instead of keys and values? All false without them.
    pub recurrent_layers: Vec<bool>,
    /// Multi-token-prediction blocks stored after the `n_layer` trunk layers
    /// (`nextn_predict_layers`; `block_count` counts them too).
    pub n_nextn: usize,
    /// The sliding layers' head size (keys and values alike) where it is not the
    /// global layers' (Gemma 4's `key_length_swa`).
    pub swa_head_dim: Option<usize>,
    /// Per layer: the layer whose keys and values it attends to, itself unless it
    /// shares an earlier one's (Gemma 4's last `shared_kv_layers`).
    pub kv_layer: Vec<usize>,
    /// Width of each layer's slice of the per-layer inputs (Gemma 4); 0: none.
    pub n_embd_per_layer: usize,
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
        let ff_key = key("feed_forward_length");
        let ff_layers = match file.get(&ff_key) {
            None if family.delta_net => vec![0; n_layer],
            _ => per_layer_u32(file, &ff_key, n_layer)?,
        };
        let n_ff = ff_layers.iter().copied().max().unwrap_or(0);
        let n_head = req("attention.head_count")?;
        // One count, or one per layer (Gemma 4's global layers have fewer KV heads).
        let kv_key = key("attention.head_count_kv");
        let kv_heads = match file.get(&kv_key) {
            None => vec![n_head; n_layer],
            // LFM2 marks its convolution layers with 0.
            Some(_) if family.short_conv => per_layer_counts(file, &kv_key, n_layer, 0)?,
            Some(_) => per_layer_u32(file, &kv_key, n_layer)?,
        };
        if let Some(bad) = kv_heads.iter().find(|&&h| h != 0 && n_head % h != 0) {
            return Err(ModelError::Invalid(format!(
                "head_count {n_head} is not a multiple of head_count_kv {bad}"
            )));
        }
        let n_head_kv = kv_heads.iter().copied().max().unwrap_or(n_head);
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
        // Gemma 4's key is an array of flags instead, read by `gemma4_keys`.
        let pattern = match file.opt_u32(&key("attention.sliding_window_pattern")) {
            _ if family.gemma4_keys => pattern,
            r => r?.map_or(pattern, |p| p as usize),
        };
        // llama.cpp: pattern 0 means every layer slides, else layer il slides iff
        // il % pattern < pattern - 1.
        let swa_layers = (0..n_layer)
            .map(|il| sliding_window.is_some() && (pattern == 0 || il % pattern < pattern - 1))
            .collect();
        let g4 = match family.gemma4_keys {
            true => Some(gemma4_keys(
                file,
                arch_name,
                n_layer,
                (head_dim_k, rope_dims),
            )?),
            false => None,
        };
        let swa_layers = match &g4 {
            Some(g) => g.swa_layers.clone(),
            None => swa_layers,
        };
        // llama.cpp requires Gemma 4's window (its sliding flags mean nothing without).
        if g4.is_some() && sliding_window.is_none() {
            let key = key("attention.sliding_window");
            return Err(crate::gguf::GgufError::MissingKey { key }.into());
        }
        let kv_layer: Vec<usize> = g4
            .as_ref()
            .map_or_else(|| (0..n_layer).collect(), |g| g.kv_layer.clone());
        if family.tensors.q_gate && kv_layer.iter().enumerate().any(|(il, &s)| s != il) {
            // A shared-KV layer's `QueryOnly` projection has no gate rows.
            return Err(ModelError::Invalid(
                "gated queries with layers sharing keys and values are not supported".into(),
            ));
        }
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
        let attn_scale = match family.attn_scale {
            Some(s) => s,
            None => scale("attention.scale")?.unwrap_or(1.0 / (head_dim_k as f32).sqrt()),
        };
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
            false => (None, kv_heads.iter().map(|&h| h == 0).collect()),
        };
        let short_conv = match family.short_conv {
            true => Some(short_conv_kernel(file, arch_name, &kv_heads)?),
            false => None,
        };
        Ok(HParams {
            family,
            n_layer,
            n_embd,
            n_ff,
            ff_layers,
            n_head,
            n_head_kv,
            kv_heads,
            head_dim_k,
            head_dim_v,
            n_vocab,
            n_ctx_train,
            rms_eps,
            rope_style: family.rope_style,
            rope: Rope::new(rope_dims, rope_base, rope_freq_scale, &rope_scaling),
            rope_swa: Rope::new(
                g4.as_ref().map_or(rope_dims, |g| g.rope_dims_swa),
                rope_base_swa,
                swa_scale,
                &rope_scaling,
            ),
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
            short_conv,
            recurrent_layers,
            n_nextn,
            swa_head_dim: g4.as_ref().and_then(|g| g.head_dim_swa),
            kv_layer,
            n_embd_per_layer: g4.as_ref().map_or(0, |g| g.n_embd_per_layer),
        })
    }

    /// Layer `il`'s key and value head sizes.
    pub(super) fn head_dims(&self, il: usize) -> (usize, usize) {
        match self.swa_head_dim {
            Some(d) if self.swa_layers[il] => (d, d),
            _ => (self.head_dim_k, self.head_dim_v),
        }
    }

    /// Layer `il`'s widths of all query, key and value heads together.
    pub(super) fn widths(&self, il: usize) -> (usize, usize, usize) {
        let ((hk, hv), kvh) = (self.head_dims(il), self.kv_heads[il]);
        (self.n_head * hk, kvh * hk, kvh * hv)
    }

    /// The widest layer's widths (scratch buffers and KV rows are sized so).
    fn max_widths(&self) -> (usize, usize, usize) {
        (0..self.n_layer)
            .map(|il| self.widths(il))
            .fold((0, 0, 0), |m, w| (m.0.max(w.0), m.1.max(w.1), m.2.max(w.2)))
    }

    /// Width of all query heads together (the widest layer's).
    pub(super) fn q_width(&self) -> usize {
        self.max_widths().0
    }

    /// Width of the query projection: the queries, and with `q_gate` as many gates.
    pub(super) fn q_proj_width(&self) -> usize {
        self.q_width() * if self.family.tensors.q_gate { 2 } else { 1 }
    }

    /// Does layer `il` keep keys and values of its own? Only an attention layer
    /// (not a linear one, which keeps a recurrent state) that shares no earlier
    /// layer's (Gemma 4's last layers).
    pub(super) fn owns_kv(&self, il: usize) -> bool {
        !self.recurrent_layers[il] && self.kv_layer[il] == il
    }

    /// Layers with a KV cache of their own: the layers of a KV block.
    pub(super) fn n_kv_layers(&self) -> usize {
        (0..self.n_layer).filter(|&il| self.owns_kv(il)).count()
    }

    /// Where the keys and values layer `il` attends to sit in a KV block: the index,
    /// among the layers that own them, of its own or of the layer it shares.
    pub(super) fn kv_slot(&self, il: usize) -> usize {
        (0..self.kv_layer[il]).filter(|&j| self.owns_kv(j)).count()
    }

    /// Does a sequence keep a recurrent state beside its KV blocks (a hybrid model)?
    pub(super) fn has_recurrent_state(&self) -> bool {
        self.linear.is_some() || self.short_conv.is_some()
    }

    /// Index among the linear layers of linear layer `il` (its recurrent state's).
    pub(super) fn linear_slot(&self, il: usize) -> usize {
        self.recurrent_layers[..il].iter().filter(|r| **r).count()
    }

    /// Width of all key heads together (the widest layer's).
    pub(super) fn k_width(&self) -> usize {
        self.max_widths().1
    }

    /// Width of all value heads together (the widest layer's).
    pub(super) fn v_width(&self) -> usize {
        self.max_widths().2
    }

    /// Width of the attention's output, all query heads' values (the widest layer's).
    pub(super) fn attn_width(&self) -> usize {
        (0..self.n_layer)
            .map(|il| self.n_head * self.head_dims(il).1)
            .max()
            .unwrap_or(0)
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

/// A key that is one value for every layer or an array of one per layer (llama.cpp's
/// `get_key_or_arr`).
fn per_layer_u32(file: &GgufFile, key: &str, n_layer: usize) -> Result<Vec<usize>, ModelError> {
    per_layer_counts(file, key, n_layer, 1)
}

/// [`per_layer_u32`] where each value may be as low as `least` (0: LFM2's KV heads).
fn per_layer_counts(
    file: &GgufFile,
    key: &str,
    n_layer: usize,
    least: u32,
) -> Result<Vec<usize>, ModelError> {
    let read = |v: u32| match v {
        0 if least == 0 => Ok(0),
        v => dim(key, v),
    };
    if let Ok(v) = file.get_u32(key) {
        return Ok(vec![read(v)?; n_layer]);
    }
    let arr = file.get_array(key)?;
    let values: Vec<usize> = file
        .array_items(arr)
        .map(|v| v.as_i128().and_then(|i| u32::try_from(i).ok()))
        .map(|v| v.ok_or_else(|| ModelError::Invalid(format!("{key} holds a non-integer"))))
        .map(|v| v.and_then(read))
        .collect::<Result<_, _>>()?;
    if values.len() != n_layer {
        return Err(ModelError::Invalid(format!(
            "{key} has {} values for {n_layer} layers",
            values.len()
        )));
    }
    Ok(values)
}

/// LFM2's convolution width, checked: at least 2 taps (one kept position), and some
/// layer that attends; sliding-window attention layers are not read yet.
fn short_conv_kernel(file: &GgufFile, arch: &str, kv_heads: &[usize]) -> Result<usize, ModelError> {
    let key = format!("{arch}.shortconv.l_cache");
    let taps = dim(&key, file.get_u32(&key)?)?;
    if !(2..=64).contains(&taps) {
        return Err(ModelError::Invalid(format!(
            "{key} = {taps}: a short convolution of 2 to 64 taps"
        )));
    }
    if kv_heads.iter().all(|&h| h == 0) {
        return Err(ModelError::Invalid(format!(
            "{arch}.attention.head_count_kv is 0 for every layer: no attention layer"
        )));
    }
    let window = format!("{arch}.attention.sliding_window");
    if file.opt_u32(&window)?.is_some_and(|w| w > 0) {
        return Err(ModelError::Invalid(format!(
            "{window}: LFM2 with sliding-window attention layers is not supported yet"
        )));
    }
    Ok(taps)
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

    /// Gemma 4: sliding layers by the file's flags with heads of their own size and
    /// rotation, the last two layers reading layers 2 and 3's keys and values (no
    /// cache of their own), queries unscaled; GLM-4 rotates half of each head.
    #[test]
    fn gemma4_layer_kinds_and_shared_kv_and_glm4_partial_rope() {
        let read = |name| {
            let path = llamay_testdata::dense_model(name);
            HParams::from_gguf(&GgufFile::open(path).unwrap()).unwrap()
        };
        let hp = read("gemma4-F32");
        assert_eq!(hp.swa_layers, [true, false, true, false, true, false]);
        assert_eq!(
            (hp.kv_layer.clone(), hp.n_kv_layers()),
            (vec![0, 1, 2, 3, 2, 3], 4)
        );
        // A shared layer reads its source layer's KV slot.
        let slots: Vec<usize> = (0..hp.n_layer).map(|il| hp.kv_slot(il)).collect();
        assert_eq!(slots, [0, 1, 2, 3, 2, 3]);
        assert_eq!((hp.head_dims(0), hp.head_dims(1)), ((32, 32), (64, 64)));
        assert_eq!((hp.widths(4), hp.widths(5)), ((128, 64, 64), (256, 64, 64)));
        assert_eq!(
            (hp.kv_heads.clone(), hp.n_head_kv),
            (vec![2, 1, 2, 1, 2, 1], 2)
        );
        assert_eq!((hp.k_width(), hp.v_width(), hp.q_width()), (64, 64, 256));
        assert_eq!((hp.rope_swa.dims, hp.rope.dims), (32, 64));
        assert_eq!((hp.rope_swa.base, hp.rope.base), (10_000.0, 100_000.0));
        assert_eq!((hp.attn_scale, hp.n_embd_per_layer), (1.0, 32));
        assert_eq!(hp.final_softcap, Some(30.0));
        assert_eq!(
            (hp.ff_layers.clone(), hp.n_ff),
            (vec![256, 256, 256, 256, 512, 512], 512)
        );
        let hp = read("glm4-F32");
        assert_eq!((hp.rope.dims, hp.head_dim_k, hp.n_kv_layers()), (16, 32, 2));
    }
}
