//! Reading GGUF files (versions 2 and 3).
//!
//! A GGUF file is untrusted input: it may be truncated, corrupt or hostile. Opening
//! one validates the whole header, metadata and tensor table up front (every length
//! and count against the bytes actually present, every tensor inside the data section
//! and apart from the others), so that afterwards the engine can read tensor data
//! without further checks. Nothing is allocated in proportion to a count before the
//! file is known to hold that many items.

mod cursor;
mod error;
mod file;
mod value;

pub use error::{GgufError, What};
pub use file::{GgufFile, TensorInfo};
pub use value::{ArrayIter, ArrayValue, StrIter, Value, ValueType};
