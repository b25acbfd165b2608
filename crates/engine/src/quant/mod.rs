//! Quantized tensor kernels: dequantization, activation quantization, dot products and
//! the matrix product the forward pass calls.
//!
//! Weights stay in their GGUF block format. Activations are quantized once per row into
//! the partner format of each weight type (Q8 blocks of 32 for the legacy quants, as
//! ggml's Q8_0 and Q8_1; Q8_K blocks of 256 for the K-quants; plain f32 for float
//! weights) so that the inner loops are integer dot products. Every kernel has a portable scalar version (the
//! reference) and, on x86-64, an AVX2+FMA version chosen once at run time; see [`Backend`].
//!
//! Supported weight types: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
//! Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4.

mod act_blocks;
mod acts;
mod dequant;
mod error;
pub(crate) mod interleave;
mod kernels;
mod layout;
mod matrix;

pub use act_blocks::{Q8Block, Q8KBlock};
pub use acts::{
    quantize_acts, quantize_acts_as, serial, ActFormat, ActSource, ParallelFor, QuantizedActs,
};
pub use dequant::dequantize_row;
pub use error::QuantError;
pub use kernels::{Backend, KernelSet};
pub use matrix::{matmul_rows, matmul_view, OutView, QMatrix, RowTable};
