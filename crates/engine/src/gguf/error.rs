use std::fmt;

/// Why a GGUF file could not be read. Every variant says where (a byte offset, a key
/// or a tensor name), because the file is untrusted input and a user needs to know
/// whether it is truncated, corrupt or simply newer than llamay.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("not a GGUF file (magic {found:?}, expected \"GGUF\")")]
    BadMagic { found: [u8; 4] },
    #[error("GGUF version {0} is not supported (llamay reads versions 2 and 3)")]
    UnsupportedVersion(u32),
    #[error("big-endian GGUF files are not supported")]
    BigEndian,
    #[error("file truncated: needed {needed} bytes at offset {offset} while reading {what}, but the file has {len}")]
    Truncated {
        what: What,
        offset: u64,
        needed: u64,
        len: u64,
    },
    #[error("{what} count {count} is impossible for a file of {len} bytes")]
    AbsurdCount { what: What, count: u64, len: u64 },
    #[error("metadata key at offset {offset} is not valid UTF-8")]
    KeyNotUtf8 { offset: u64 },
    #[error("metadata key {key:?} appears twice")]
    DuplicateKey { key: String },
    #[error("metadata key {key:?} has unknown value type {type_id}")]
    UnknownValueType { key: String, type_id: u32 },
    #[error("metadata key {key:?}: arrays nested deeper than {max} levels")]
    NestingTooDeep { key: String, max: usize },
    #[error("tensor {name:?} appears twice")]
    DuplicateTensor { name: String },
    #[error("tensor {name:?} has unknown type id {type_id}")]
    UnknownTensorType { name: String, type_id: u32 },
    #[error("tensor {name:?} has {n_dims} dimensions (at most 4 are allowed)")]
    TooManyDims { name: String, n_dims: u32 },
    #[error("tensor {name:?} has an invalid shape {dims:?}: {why}")]
    BadShape {
        name: String,
        dims: Vec<u64>,
        why: &'static str,
    },
    #[error(
        "tensor {name:?}: data offset {offset} is not a multiple of the alignment {alignment}"
    )]
    MisalignedTensor {
        name: String,
        offset: u64,
        alignment: u64,
    },
    #[error("tensor {name:?}: data [{start}, {end}) lies outside the file's data section of {len} bytes")]
    TensorOutOfBounds {
        name: String,
        start: u64,
        end: u64,
        len: u64,
    },
    #[error("tensors {a:?} and {b:?} overlap in the data section")]
    OverlappingTensors { a: String, b: String },
    #[error("general.alignment is {0}; it must be a power of two between 1 and 2^20")]
    BadAlignment(u64),
    #[error("metadata key {key:?} is missing")]
    MissingKey { key: String },
    #[error("metadata key {key:?} has type {found}, expected {expected}")]
    WrongType {
        key: String,
        found: &'static str,
        expected: &'static str,
    },
    #[error("tensor {name:?} is missing")]
    MissingTensor { name: String },
}

/// The part of the file being read when it ran out, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    Header,
    Key,
    Value,
    ArrayElement,
    TensorInfo,
    TensorName,
}

impl fmt::Display for What {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            What::Header => "the header",
            What::Key => "a metadata key",
            What::Value => "a metadata value",
            What::ArrayElement => "an array element",
            What::TensorInfo => "the tensor table or its data section",
            What::TensorName => "a tensor name",
        })
    }
}
