//! The keys only Gemma 4 reads: which layers slide (an array of flags), the sliding
//! layers' own head and rotation sizes, the layers that share earlier layers' keys and
//! values, and the width of the per-layer inputs.

use super::dim;
use crate::gguf::{GgufFile, Value};
use crate::model::ModelError;

pub(in crate::model) struct Gemma4Keys {
    pub swa_layers: Vec<bool>,
    /// `None` where the sliding layers' heads are the global ones' size.
    pub head_dim_swa: Option<usize>,
    pub rope_dims_swa: usize,
    pub kv_layer: Vec<usize>,
    pub n_embd_per_layer: usize,
}

pub(in crate::model) fn gemma4_keys(
    file: &GgufFile,
    arch: &str,
    n_layer: usize,
    (head_dim, rope_dims): (usize, usize),
) -> Result<Gemma4Keys, ModelError> {
    let key = |s: &str| format!("{arch}.{s}");
    let opt = |s: &str| -> Result<Option<usize>, ModelError> {
        let k = key(s);
        file.opt_u32(&k)?.map(|v| dim(&k, v)).transpose()
    };
    let pattern_key = key("attention.sliding_window_pattern");
    let flags = file.get_array(&pattern_key)?;
    let swa_layers: Vec<bool> = file
        .array_items(flags)
        .map(|v| match v {
            Value::Bool(b) => Some(b),
            v => v.as_i128().map(|i| i != 0),
        })
        .collect::<Option<_>>()
        .ok_or_else(|| ModelError::Invalid(format!("{pattern_key} is not an array of flags")))?;
    if swa_layers.len() != n_layer {
        return Err(ModelError::Invalid(format!(
            "{pattern_key} has {} flags for {n_layer} layers",
            swa_layers.len()
        )));
    }
    // llama.cpp requires the window (`attention.sliding_window`), read by the caller.
    let head_k = opt("attention.key_length_swa")?;
    let head_v = opt("attention.value_length_swa")?;
    if head_k != head_v {
        return Err(ModelError::Invalid(format!(
            "sliding layers' key and value heads differ ({head_k:?}, {head_v:?})"
        )));
    }
    if let Some(d) = head_k {
        if d % 2 != 0 {
            return Err(ModelError::Invalid(format!("sliding head size {d} is odd")));
        }
    }
    let rope_dims_swa = opt("rope.dimension_count_swa")?.unwrap_or(rope_dims);
    if rope_dims_swa % 2 != 0 || rope_dims_swa > head_k.unwrap_or(head_dim) {
        return Err(ModelError::Invalid(format!(
            "rope.dimension_count_swa {rope_dims_swa} does not fit the sliding heads"
        )));
    }
    let per_layer = file.get_u32(&key("embedding_length_per_layer_input"))?;
    if per_layer > 1 << 16 {
        return Err(ModelError::Invalid(format!(
            "embedding_length_per_layer_input {per_layer} is out of range"
        )));
    }
    let shared = file
        .opt_u32(&key("attention.shared_kv_layers"))?
        .unwrap_or(0) as usize;
    let n_layer_kv = n_layer.saturating_sub(shared);
    // As llama.cpp: a shared sliding layer reads the last layer with a cache but one,
    // a shared global layer the last; they must be of its kind (its head size, its
    // window).
    let kv_layer: Vec<usize> = (0..n_layer)
        .map(|il| match il < n_layer_kv {
            true => il,
            false => n_layer_kv.wrapping_sub(if swa_layers[il] { 2 } else { 1 }),
        })
        .collect();
    if shared > 0 && n_layer_kv < 2 {
        return Err(ModelError::Invalid(format!(
            "{shared} of {n_layer} layers share keys and values: at least 2 must have their own"
        )));
    }
    if let Some(il) = (0..n_layer).find(|&il| swa_layers[kv_layer[il]] != swa_layers[il]) {
        return Err(ModelError::Invalid(format!(
            "layer {il} would share the keys and values of layer {}, which is not of its kind",
            kv_layer[il]
        )));
    }
    Ok(Gemma4Keys {
        swa_layers,
        head_dim_swa: head_k,
        rope_dims_swa,
        kv_layer,
        // Required, as llama.cpp reads it (0: no per-layer inputs).
        n_embd_per_layer: per_layer as usize,
    })
}
