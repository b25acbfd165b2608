//! LFM2 (llama.cpp's `lfm2`): a hybrid of gated short-convolution layers and
//! grouped-query attention layers; a layer is a convolution iff its `head_count_kv`
//! is 0. A conv layer projects the normed input to B, C and x, convolves B·x over the
//! last `shortconv.l_cache` positions (the sequence keeps the last `l_cache - 1`
//! products) and projects C·conv back; attention layers have Q/K norms and NeoX RoPE.
//! SwiGLU everywhere; the final norm is stored as `token_embd_norm`, the output tied
//! to the embeddings.

use super::qwen::QWEN3;
use super::{Family, Tensors};

pub(in crate::model) const LFM2: Family = Family {
    name: "lfm2",
    tensors: Tensors {
        output_norm: "token_embd_norm",
        ..QWEN3.tensors
    },
    short_conv: true,
    ..QWEN3
};
