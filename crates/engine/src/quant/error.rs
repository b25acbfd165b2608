//! Errors of the quant module: every one comes from a caller-supplied shape or buffer.

use crate::ggml_type::GgmlType;

/// Why a quantized operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantError {
    /// The kernels cannot compute with this tensor type.
    #[error("tensor type {0} is not supported by the kernels")]
    UnsupportedType(GgmlType),
    /// A row length is not a whole number of the type's blocks.
    #[error("{cols} columns is not a multiple of the {ty} block size {block}")]
    NotBlockAligned {
        ty: GgmlType,
        cols: usize,
        block: usize,
    },
    /// A buffer has the wrong length for the shape it was given with.
    #[error("{what}: expected {expected} elements/bytes, got {got}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// The shape's byte or element count overflows `usize`.
    #[error("shape {rows}x{cols} overflows")]
    ShapeOverflow { rows: usize, cols: usize },
    /// A row index or range lies outside the matrix.
    #[error("rows {start}..{end} out of range for a matrix of {rows} rows")]
    RowOutOfRange {
        start: usize,
        end: usize,
        rows: usize,
    },
    /// The activations were quantized for another weight type or width.
    #[error("activations ({acts}) do not fit weights ({weights})")]
    ActsMismatch { acts: String, weights: String },
}
