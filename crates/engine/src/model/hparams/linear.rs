//! The keys only the Gated DeltaNet families (Qwen 3.5) read: the linear layers'
//! shape and which layers are linear.

use super::dim;
use crate::gguf::{GgufFile, Value};
use crate::model::ModelError;

/// Most floats of one linear layer's delta-rule state (256 MiB; Qwen 3.5's largest
/// is 128 × 128 × 64 = 1 Mi).
const MAX_STATE_FLOATS: u64 = 1 << 26;

/// A Gated DeltaNet layer's shape (llama.cpp's `ssm.*` keys as `qwen35` reads them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(in crate::model) struct LinearShape {
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
    pub(in crate::model) fn key_dim(&self) -> usize {
        self.d_state * self.n_k_heads
    }

    pub(in crate::model) fn value_dim(&self) -> usize {
        self.d_state * self.n_v_heads
    }

    /// Channels of the conv: queries, keys and values.
    pub(in crate::model) fn conv_dim(&self) -> usize {
        2 * self.key_dim() + self.value_dim()
    }

    /// Floats of one layer's conv state: the last `conv - 1` inputs.
    pub(in crate::model) fn conv_state_len(&self) -> usize {
        (self.conv - 1) * self.conv_dim()
    }

    /// Floats of one layer's delta-rule state: a `d_state` square per value head.
    pub(in crate::model) fn matrix_state_len(&self) -> usize {
        self.n_v_heads * self.d_state * self.d_state
    }
}

/// The Gated DeltaNet shape and which layers are linear: `attention.recurrent_layers`
/// when the file lists them, else every layer but each `full_attention_interval`-th
/// (default 4), as llama.cpp decides.
pub(super) fn linear_shape(
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
