//! What a GGUF model is, in the terms a user asks about (`llamay show`, the server's
//! model listings): of a file, or of a loaded [`Model`](crate::Model).

use std::collections::BTreeMap;

use crate::gguf::{GgufError, GgufFile};

/// A model's facts. [`ModelFacts::from_gguf`] reads them from a file's metadata and
/// tensor table only (no weights), figures the file leaves out being `None`; a loaded
/// model's ([`Model::facts`](crate::Model::facts)) have every shape figure, as the
/// engine resolved it (llama.cpp's defaults filled in).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelFacts {
    pub architecture: String,
    pub name: Option<String>,
    pub parameters: u64,
    pub file_type: Option<String>,
    pub file_size: u64,
    pub gguf_version: u32,
    pub context_length: Option<u64>,
    pub embedding_length: Option<u64>,
    pub block_count: Option<u64>,
    pub head_count: Option<u64>,
    pub head_count_kv: Option<u64>,
    /// Experts per feed-forward block, for a mixture of experts.
    pub expert_count: Option<u64>,
    /// Experts each token runs through.
    pub expert_used_count: Option<u64>,
    pub vocab_size: u64,
    /// `tokenizer.ggml.model`, e.g. `gpt2` (byte-level BPE) or `llama` (SentencePiece).
    pub tokenizer_model: Option<String>,
    /// `tokenizer.ggml.pre`, the BPE pre-tokenizer.
    pub tokenizer_pre: Option<String>,
    pub has_chat_template: bool,
    /// Tensor count per tensor type name.
    pub tensor_types: BTreeMap<String, usize>,
    pub tensor_count: usize,
}

impl ModelFacts {
    /// The facts of `f`, from its header alone.
    pub fn from_gguf(f: &GgufFile) -> Result<ModelFacts, GgufError> {
        let arch = f.architecture()?.to_string();
        let arch_u64 = |suffix: &str| f.opt_u64(&format!("{arch}.{suffix}"));
        // A count that may be one per layer (Gemma 4's KV heads): the largest.
        let per_layer_max = |suffix: &str| {
            let key = format!("{arch}.{suffix}");
            match f.get(&key) {
                Some(crate::gguf::Value::Array(a)) => Ok(f
                    .array_items(a)
                    .filter_map(|v| v.as_i128())
                    .max()
                    .map(|m| m.max(0) as u64)),
                _ => f.opt_u64(&key),
            }
        };
        let mut tensor_types = BTreeMap::new();
        for t in f.tensors() {
            *tensor_types
                .entry(t.ggml_type.name().to_string())
                .or_insert(0) += 1;
        }
        let vocab_size = match f.opt_array("tokenizer.ggml.tokens")? {
            Some(a) => a.len,
            None => arch_u64("vocab_size")?.unwrap_or(0),
        };
        Ok(ModelFacts {
            name: f.opt_str("general.name")?.map(str::to_string),
            parameters: f.tensors().iter().map(|t| t.n_elements()).sum(),
            file_type: f.opt_u64("general.file_type")?.map(file_type_name),
            file_size: f.file_size(),
            gguf_version: f.version(),
            context_length: arch_u64("context_length")?,
            embedding_length: arch_u64("embedding_length")?,
            block_count: arch_u64("block_count")?,
            head_count: per_layer_max("attention.head_count")?,
            head_count_kv: per_layer_max("attention.head_count_kv")?,
            expert_count: arch_u64("expert_count")?.filter(|&n| n > 0),
            expert_used_count: arch_u64("expert_used_count")?.filter(|&n| n > 0),
            vocab_size,
            tokenizer_model: f.opt_str("tokenizer.ggml.model")?.map(str::to_string),
            tokenizer_pre: f.opt_str("tokenizer.ggml.pre")?.map(str::to_string),
            has_chat_template: f.opt_str("tokenizer.chat_template")?.is_some(),
            tensor_count: f.tensors().len(),
            tensor_types,
            architecture: arch,
        })
    }
}

/// llama.cpp's names for `general.file_type` (its `llama_ftype` numbering).
fn file_type_name(id: u64) -> String {
    let name = match id {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        _ => return format!("unknown ({id})"),
    };
    name.to_string()
}
