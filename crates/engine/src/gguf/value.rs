//! Metadata values. Scalars are decoded when the file is opened; arrays are only
//! validated then and decoded on demand, because a vocabulary array can hold 262,144
//! strings that most callers never need as owned values.

use super::cursor::Cursor;
use super::error::{GgufError, What};

/// How deep arrays may nest. GGUF allows nesting; real files use one level. The limit
/// keeps validation's recursion bounded on hostile input.
const MAX_ARRAY_DEPTH: usize = 8;

/// A metadata value type, as numbered by GGUF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The encoded size of a scalar of this type (`None` for strings and arrays).
    pub fn scalar_size(self) -> Option<u64> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// The least number of bytes one value of this type can take, used to reject
    /// element counts that the rest of the file could not possibly hold.
    fn min_size(self) -> u64 {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            t => t.scalar_size().unwrap_or(1),
        }
    }

    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    /// Raw bytes: GGUF says UTF-8, but a file is untrusted, so it is checked on use.
    String(Vec<u8>),
    Array(ArrayValue),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// The value as an integer, whatever its integer width (files disagree on widths).
    pub fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            _ => return None,
        })
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => self.as_i128().map(|v| v as f64),
        }
    }
}

/// An array whose elements stay in the file until asked for. `start..end` is the
/// byte range of the elements, already validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayValue {
    pub elem_type: ValueType,
    pub len: u64,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// Reads one value of type `ty` (whose type tag has already been read).
pub(crate) fn read_value(
    cur: &mut Cursor<'_>,
    ty: ValueType,
    key: &str,
    depth: usize,
) -> Result<Value, GgufError> {
    let w = What::Value;
    Ok(match ty {
        ValueType::U8 => Value::U8(cur.array::<1>(w)?[0]),
        ValueType::I8 => Value::I8(cur.array::<1>(w)?[0] as i8),
        ValueType::U16 => Value::U16(u16::from_le_bytes(cur.array(w)?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(cur.array(w)?)),
        ValueType::U32 => Value::U32(u32::from_le_bytes(cur.array(w)?)),
        ValueType::I32 => Value::I32(i32::from_le_bytes(cur.array(w)?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(cur.array(w)?)),
        ValueType::Bool => Value::Bool(cur.array::<1>(w)?[0] != 0),
        ValueType::String => Value::String(cur.string(w)?.to_vec()),
        ValueType::U64 => Value::U64(u64::from_le_bytes(cur.array(w)?)),
        ValueType::I64 => Value::I64(i64::from_le_bytes(cur.array(w)?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(cur.array(w)?)),
        ValueType::Array => Value::Array(read_array(cur, key, depth + 1)?),
    })
}

/// Validates an array (type tag, count, then elements) and returns where it lies.
fn read_array(cur: &mut Cursor<'_>, key: &str, depth: usize) -> Result<ArrayValue, GgufError> {
    if depth > MAX_ARRAY_DEPTH {
        return Err(GgufError::NestingTooDeep {
            key: key.to_string(),
            max: MAX_ARRAY_DEPTH,
        });
    }
    let type_id = cur.u32(What::Value)?;
    let elem_type = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
        key: key.to_string(),
        type_id,
    })?;
    let len = cur.u64(What::Value)?;
    if len
        .checked_mul(elem_type.min_size())
        .is_none_or(|n| n > cur.remaining())
    {
        return Err(GgufError::AbsurdCount {
            what: What::ArrayElement,
            count: len,
            len: cur.pos() as u64 + cur.remaining(),
        });
    }
    let start = cur.pos();
    match elem_type.scalar_size() {
        Some(sz) => {
            cur.bytes(len * sz, What::ArrayElement)?;
        }
        None => {
            for _ in 0..len {
                if elem_type == ValueType::String {
                    cur.string(What::ArrayElement)?;
                } else {
                    read_array(cur, key, depth + 1)?;
                }
            }
        }
    }
    Ok(ArrayValue {
        elem_type,
        len,
        start,
        end: cur.pos(),
    })
}

/// Iterates the elements of a validated array.
pub struct ArrayIter<'a> {
    cur: Cursor<'a>,
    elem_type: ValueType,
    left: u64,
}

impl<'a> ArrayIter<'a> {
    pub(crate) fn new(data: &'a [u8], arr: &ArrayValue) -> Self {
        ArrayIter {
            cur: Cursor::new(&data[..arr.end], arr.start),
            elem_type: arr.elem_type,
            left: arr.len,
        }
    }
}

impl Iterator for ArrayIter<'_> {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The array was validated when the file was opened, so this cannot fail;
        // should it, the iteration simply ends.
        read_value(&mut self.cur, self.elem_type, "", 0).ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

/// Iterates the elements of a validated string array as borrowed bytes.
pub struct StrIter<'a> {
    cur: Cursor<'a>,
    left: u64,
}

impl<'a> StrIter<'a> {
    pub(crate) fn new(data: &'a [u8], arr: &ArrayValue) -> Self {
        StrIter {
            cur: Cursor::new(&data[..arr.end], arr.start),
            left: arr.len,
        }
    }
}

impl<'a> Iterator for StrIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        self.cur.string(What::ArrayElement).ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}
