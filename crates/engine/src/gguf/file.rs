//! Opening a GGUF file: header, metadata, tensor table, and the checks that make the
//! rest of the engine able to trust what it reads.

use std::collections::HashMap;
use std::path::Path;

use super::cursor::Cursor;
use super::error::{GgufError, What};
use super::value::{read_value, ArrayIter, ArrayValue, StrIter, Value, ValueType};
use crate::ggml_type::GgmlType;

const MAGIC: [u8; 4] = *b"GGUF";
/// GGML allows at most four dimensions.
const MAX_DIMS: u32 = 4;
const DEFAULT_ALIGNMENT: u64 = 32;
/// Smallest possible encodings, used to reject counts the file could not hold.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;

/// Where the bytes live: mapped from disk (the normal case, so weights are paged in
/// lazily and shared between processes) or owned (tests, fuzzing, tiny files).
enum Backing {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mapped(m) => m,
            Backing::Owned(v) => v,
        }
    }
}

/// One entry of the tensor table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions in GGUF order: `dims[0]` (ne0) is the contiguous one.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset from the start of the data section.
    pub offset: u64,
    /// Size of the data in bytes.
    pub size: u64,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// An open GGUF file. Cheap to query; tensor data is borrowed from the mapping.
pub struct GgufFile {
    backing: Backing,
    version: u32,
    metadata: Vec<(String, Value)>,
    index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    data_offset: u64,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.version)
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl GgufFile {
    /// Opens and validates a file, mapping it into memory.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let io = |source| GgufError::Io {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len < 64 {
            // Too small to be worth mapping (and zero-length maps fail on some systems).
            return Self::from_bytes(std::fs::read(path).map_err(io)?);
        }
        // SAFETY: the mapping is read-only. Another process truncating the file while
        // we hold it would fault, as it would for every mmap-based reader; llamay's own
        // store never rewrites a blob in place.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        Self::parse(Backing::Mapped(map))
    }

    /// Validates a file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        Self::parse(Backing::Owned(bytes))
    }

    fn parse(backing: Backing) -> Result<GgufFile, GgufError> {
        let data = backing.bytes();
        let total = data.len() as u64;
        let mut cur = Cursor::new(data, 0);
        let magic = cur.array::<4>(What::Header)?;
        if magic != MAGIC {
            return Err(GgufError::BadMagic { found: magic });
        }
        let version = cur.u32(What::Header)?;
        if version.swap_bytes() == 2 || version.swap_bytes() == 3 {
            return Err(GgufError::BigEndian);
        }
        if version != 2 && version != 3 {
            return Err(GgufError::UnsupportedVersion(version));
        }
        let n_tensors = cur.u64(What::Header)?;
        let n_kv = cur.u64(What::Header)?;
        check_count(
            What::TensorInfo,
            n_tensors,
            MIN_TENSOR_INFO_BYTES,
            &cur,
            total,
        )?;
        check_count(What::Key, n_kv, MIN_KV_BYTES, &cur, total)?;

        let mut metadata = Vec::with_capacity(n_kv as usize);
        let mut index = HashMap::with_capacity(n_kv as usize);
        for _ in 0..n_kv {
            let key_at = cur.pos() as u64;
            let key = std::str::from_utf8(cur.string(What::Key)?)
                .map_err(|_| GgufError::KeyNotUtf8 { offset: key_at })?
                .to_string();
            let type_id = cur.u32(What::Value)?;
            let ty = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
                key: key.clone(),
                type_id,
            })?;
            let value = read_value(&mut cur, ty, &key, 0)?;
            if index.insert(key.clone(), metadata.len()).is_some() {
                return Err(GgufError::DuplicateKey { key });
            }
            metadata.push((key, value));
        }

        let alignment = match index.get("general.alignment").map(|&i| &metadata[i].1) {
            None => DEFAULT_ALIGNMENT,
            Some(v) => match v.as_i128() {
                Some(a) if a > 0 && a <= 1 << 20 && (a as u64).is_power_of_two() => a as u64,
                Some(a) => {
                    return Err(GgufError::BadAlignment(a.clamp(0, u64::MAX as i128) as u64))
                }
                None => {
                    return Err(GgufError::WrongType {
                        key: "general.alignment".into(),
                        found: v.value_type().name(),
                        expected: "an unsigned integer",
                    })
                }
            },
        };

        let mut tensors = Vec::with_capacity(n_tensors as usize);
        let mut tensor_index = HashMap::with_capacity(n_tensors as usize);
        for _ in 0..n_tensors {
            let name_at = cur.pos() as u64;
            let name = String::from_utf8(cur.string(What::TensorName)?.to_vec())
                .map_err(|_| GgufError::KeyNotUtf8 { offset: name_at })?;
            let info = read_tensor_info(&mut cur, name, alignment)?;
            if tensor_index
                .insert(info.name.clone(), tensors.len())
                .is_some()
            {
                return Err(GgufError::DuplicateTensor { name: info.name });
            }
            tensors.push(info);
        }

        let data_offset = align_up(cur.pos() as u64, alignment);
        if !tensors.is_empty() && data_offset > total {
            // Even zero-sized tensors claim a place in a data section that must exist.
            return Err(GgufError::Truncated {
                what: What::TensorInfo,
                offset: cur.pos() as u64,
                needed: data_offset - cur.pos() as u64,
                len: total,
            });
        }
        let data_len = total.saturating_sub(data_offset);
        check_tensor_placement(&tensors, data_len)?;

        Ok(GgufFile {
            backing,
            version,
            metadata,
            index,
            tensors,
            tensor_index,
            alignment,
            data_offset,
        })
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Byte offset of the data section in the file.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Every metadata entry, in file order.
    pub fn metadata(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.metadata.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.metadata[i].1)
    }

    fn require(&self, key: &str) -> Result<&Value, GgufError> {
        self.get(key)
            .ok_or_else(|| GgufError::MissingKey { key: key.into() })
    }

    /// A string value; `None` when absent, an error when present with another type or
    /// not UTF-8.
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => {
                std::str::from_utf8(s)
                    .map(Some)
                    .map_err(|_| GgufError::WrongType {
                        key: key.into(),
                        found: "string (not UTF-8)",
                        expected: "string",
                    })
            }
            Some(v) => Err(wrong_type(key, v, "string")),
        }
    }

    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        self.opt_str(key)?
            .ok_or_else(|| GgufError::MissingKey { key: key.into() })
    }

    /// An unsigned integer of any width; `None` when absent.
    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_i128() {
                Some(i) if (0..=u64::MAX as i128).contains(&i) => Ok(Some(i as u64)),
                _ => Err(wrong_type(key, v, "unsigned integer")),
            },
        }
    }

    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        self.opt_u64(key)?
            .ok_or_else(|| GgufError::MissingKey { key: key.into() })
    }

    /// An unsigned integer that fits in u32; `None` when absent.
    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>, GgufError> {
        match self.opt_u64(key)? {
            None => Ok(None),
            Some(v) => u32::try_from(v)
                .map(Some)
                .map_err(|_| wrong_type(key, self.require(key).expect("present"), "u32")),
        }
    }

    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        self.opt_u32(key)?
            .ok_or_else(|| GgufError::MissingKey { key: key.into() })
    }

    /// A float (f32, f64, or an integer); `None` when absent.
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(|f| Some(f as f32))
                .ok_or_else(|| wrong_type(key, v, "float")),
        }
    }

    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        self.opt_f32(key)?
            .ok_or_else(|| GgufError::MissingKey { key: key.into() })
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(wrong_type(key, v, "bool")),
        }
    }

    /// An array value; `None` when absent.
    pub fn opt_array(&self, key: &str) -> Result<Option<&ArrayValue>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(wrong_type(key, v, "array")),
        }
    }

    pub fn get_array(&self, key: &str) -> Result<&ArrayValue, GgufError> {
        self.opt_array(key)?
            .ok_or_else(|| GgufError::MissingKey { key: key.into() })
    }

    /// The elements of an array, decoded one by one.
    pub fn array_items(&self, arr: &ArrayValue) -> ArrayIter<'_> {
        ArrayIter::new(self.backing.bytes(), arr)
    }

    /// The elements of a string array as raw bytes, without copying.
    pub fn array_strings(&self, key: &str) -> Result<StrIter<'_>, GgufError> {
        let arr = self.get_array(key)?;
        if arr.elem_type != ValueType::String {
            return Err(array_type(key, arr, "array of strings"));
        }
        Ok(StrIter::new(self.backing.bytes(), arr))
    }

    /// A numeric array converted to f32 (scores, for example).
    pub fn array_f32(&self, key: &str) -> Result<Vec<f32>, GgufError> {
        let arr = self.get_array(key)?;
        self.array_items(arr)
            .map(|v| v.as_f64().map(|f| f as f32))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| array_type(key, arr, "array of numbers"))
    }

    /// An integer array converted to i64 (token types, for example).
    pub fn array_i64(&self, key: &str) -> Result<Vec<i64>, GgufError> {
        let arr = self.get_array(key)?;
        self.array_items(arr)
            .map(|v| v.as_i128().and_then(|i| i64::try_from(i).ok()))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| array_type(key, arr, "array of integers"))
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&str, GgufError> {
        self.get_str("general.architecture")
    }

    /// The key `<architecture>.<suffix>`, e.g. `llama.block_count`.
    pub fn arch_key(&self, suffix: &str) -> Result<String, GgufError> {
        Ok(format!("{}.{}", self.architecture()?, suffix))
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    pub fn require_tensor(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        self.tensor(name)
            .ok_or_else(|| GgufError::MissingTensor { name: name.into() })
    }

    /// A tensor's bytes (bounds were checked when the file was opened).
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let start = (self.data_offset + t.offset) as usize;
        &self.backing.bytes()[start..start + t.size as usize]
    }

    /// Tells the kernel this process no longer needs the pages wholly inside
    /// `bytes[range]` of tensor `t`'s data (a copy was made): they leave this process's
    /// resident memory and would be read again from the file if touched. Only a hint:
    /// owned files and failures are ignored.
    pub fn release_tensor_pages(&self, t: &TensorInfo, range: std::ops::Range<usize>) {
        if let Backing::Mapped(m) = &self.backing {
            const PAGE: usize = 4096;
            let base = (self.data_offset + t.offset) as usize;
            let start = (base + range.start).next_multiple_of(PAGE);
            let end = (base + range.end.min(t.size as usize)) / PAGE * PAGE;
            if start < end {
                // SAFETY: the mapping is read-only and private to this process's view of
                // a file; dropping its pages only makes later reads fault them back in
                // from the file, with the same contents.
                let _ = unsafe {
                    m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
                };
            }
        }
    }

    /// Total size of the file in bytes.
    pub fn file_size(&self) -> u64 {
        self.backing.bytes().len() as u64
    }
}

fn wrong_type(key: &str, v: &Value, expected: &'static str) -> GgufError {
    GgufError::WrongType {
        key: key.into(),
        found: v.value_type().name(),
        expected,
    }
}

fn array_type(key: &str, arr: &ArrayValue, expected: &'static str) -> GgufError {
    GgufError::WrongType {
        key: key.into(),
        found: match arr.elem_type {
            ValueType::String => "array of strings",
            ValueType::Array => "array of arrays",
            _ => "array of numbers",
        },
        expected,
    }
}

fn check_count(
    what: What,
    count: u64,
    min_each: u64,
    cur: &Cursor<'_>,
    total: u64,
) -> Result<(), GgufError> {
    if count
        .checked_mul(min_each)
        .is_none_or(|n| n > cur.remaining())
    {
        return Err(GgufError::AbsurdCount {
            what,
            count,
            len: total,
        });
    }
    Ok(())
}

fn read_tensor_info(
    cur: &mut Cursor<'_>,
    name: String,
    alignment: u64,
) -> Result<TensorInfo, GgufError> {
    let n_dims = cur.u32(What::TensorInfo)?;
    if n_dims > MAX_DIMS {
        return Err(GgufError::TooManyDims { name, n_dims });
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        dims.push(cur.u64(What::TensorInfo)?);
    }
    let type_id = cur.u32(What::TensorInfo)?;
    let offset = cur.u64(What::TensorInfo)?;
    let bad_shape = |dims: Vec<u64>, why| GgufError::BadShape {
        name: name.clone(),
        dims,
        why,
    };
    let Some(ggml_type) = GgmlType::from_id(type_id) else {
        return Err(GgufError::UnknownTensorType { name, type_id });
    };
    let Some(n) = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)) else {
        return Err(bad_shape(dims, "the element count overflows"));
    };
    if dims
        .first()
        .is_some_and(|&ne0| ne0 % ggml_type.block_elems() != 0)
    {
        return Err(bad_shape(
            dims,
            "the first dimension is not a whole number of blocks",
        ));
    }
    let Some(size) = ggml_type.bytes_for(n) else {
        return Err(bad_shape(dims, "the byte size overflows"));
    };
    if !offset.is_multiple_of(alignment) {
        return Err(GgufError::MisalignedTensor {
            name,
            offset,
            alignment,
        });
    }
    Ok(TensorInfo {
        name,
        dims,
        ggml_type,
        offset,
        size,
    })
}

fn check_tensor_placement(tensors: &[TensorInfo], data_len: u64) -> Result<(), GgufError> {
    for t in tensors {
        let end = t.offset.checked_add(t.size);
        if end.is_none_or(|e| e > data_len) {
            return Err(GgufError::TensorOutOfBounds {
                name: t.name.clone(),
                start: t.offset,
                end: end.unwrap_or(u64::MAX),
                len: data_len,
            });
        }
    }
    let mut by_offset: Vec<&TensorInfo> = tensors.iter().filter(|t| t.size > 0).collect();
    by_offset.sort_by_key(|t| t.offset);
    for pair in by_offset.windows(2) {
        if pair[0].offset + pair[0].size > pair[1].offset {
            return Err(GgufError::OverlappingTensors {
                a: pair[0].name.clone(),
                b: pair[1].name.clone(),
            });
        }
    }
    Ok(())
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a).saturating_mul(a)
}
