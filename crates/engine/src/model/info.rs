//! A human-readable summary of a model (`llamay show`).

use super::hparams::HParams;
use super::ModelError;
use crate::gguf::GgufFile;
use crate::info::file_type_name;

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
            file_type: file.opt_u64("general.file_type")?.map(file_type_name),
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
