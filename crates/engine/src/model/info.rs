//! A human-readable summary of a model (`llamay show`).

use super::hparams::HParams;
use super::ModelError;
use crate::gguf::GgufFile;

/// What `llamay show` prints about a model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInfo {
    /// `general.architecture`.
    pub arch: String,
    /// `general.name`, if present.
    pub name: Option<String>,
    /// Total number of tensor elements.
    pub parameter_count: u64,
    /// llama.cpp's file-type name (e.g. `Q4_K_M`), from `general.file_type`.
    pub file_type: Option<String>,
    pub context_length: usize,
    pub embedding_length: usize,
    pub block_count: usize,
    pub head_count: usize,
    pub head_count_kv: usize,
    pub vocab_size: usize,
    pub file_size: u64,
}

impl ModelInfo {
    pub(crate) fn new(file: &GgufFile, hp: &HParams) -> Result<ModelInfo, ModelError> {
        Ok(ModelInfo {
            arch: hp.arch.name().to_string(),
            name: file.opt_str("general.name")?.map(str::to_string),
            parameter_count: file.tensors().iter().map(|t| t.n_elements()).sum(),
            file_type: file.opt_u32("general.file_type")?.map(|f| {
                file_type_name(f).map_or_else(|| format!("unknown ({f})"), str::to_string)
            }),
            context_length: hp.n_ctx_train,
            embedding_length: hp.n_embd,
            block_count: hp.n_layer,
            head_count: hp.n_head,
            head_count_kv: hp.n_head_kv,
            vocab_size: hp.n_vocab,
            file_size: file.file_size(),
        })
    }
}

/// llama.cpp's names for `general.file_type` (`enum llama_ftype`).
pub fn file_type_name(ftype: u32) -> Option<&'static str> {
    Some(match ftype {
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
        _ => return None,
    })
}
