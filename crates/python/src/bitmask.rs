//! Rows of a caller's int32 bitmask (numpy array or CPU torch tensor), written in place.
//! Layout: shape `(batch, words)` or `(words,)`, C-contiguous, bit `i % 32` of word
//! `i / 32` = token `i` allowed; `words >= ceil(vocab / 32)` (a wider row, for a model
//! whose logits are padded past the tokenizer, gets zeros there).

use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// One row's memory: an address and a length in words.
#[derive(Clone, Copy)]
pub struct Row {
    ptr: usize,
    words: usize,
}

impl Row {
    /// The row as a mutable slice.
    ///
    /// # Safety
    /// The buffer the row was taken from must stay alive and unresized while the slice
    /// is used, and no two live slices may be the same row.
    pub unsafe fn slice<'a>(self) -> &'a mut [u32] {
        std::slice::from_raw_parts_mut(self.ptr as *mut u32, self.words)
    }
}

/// The rows of a bitmask buffer.
pub struct Buffer {
    ptr: usize,
    rows: usize,
    words: usize,
}

impl Buffer {
    /// Reads a numpy array or a torch tensor's layout, refusing anything but a
    /// contiguous, writable int32 (or uint32) buffer on the CPU.
    pub fn of(obj: &Bound<'_, PyAny>, min_words: usize) -> PyResult<Buffer> {
        let (ptr, shape) = if let Ok(data_ptr) = obj.getattr("data_ptr") {
            let dtype: String = obj.getattr("dtype")?.str()?.extract()?;
            let dtype = dtype.as_str();
            if dtype != "torch.int32" && dtype != "torch.uint32" {
                return Err(PyTypeError::new_err(format!(
                    "the bitmask must be torch.int32, not {dtype}"
                )));
            }
            let device = obj.getattr("device")?.getattr("type")?;
            if device.str()?.extract::<String>()? != "cpu" {
                return Err(PyValueError::new_err(
                    "the bitmask must be on the CPU: fill it there, then move it \
                     (apply_token_bitmask_inplace moves it to the logits' device)",
                ));
            }
            if !obj.call_method0("is_contiguous")?.extract::<bool>()? {
                return Err(PyValueError::new_err("the bitmask must be contiguous"));
            }
            let shape: Vec<usize> = obj.getattr("shape")?.extract()?;
            (data_ptr.call0()?.extract::<usize>()?, shape)
        } else if let Ok(ai) = obj.getattr("__array_interface__") {
            let ai = ai.cast_into::<PyDict>()?;
            let get = |k: &str| {
                ai.get_item(k)?
                    .ok_or_else(|| PyTypeError::new_err(format!("__array_interface__ lacks {k}")))
            };
            let typestr: String = get("typestr")?.extract()?;
            if typestr != "<i4" && typestr != "<u4" {
                return Err(PyTypeError::new_err(format!(
                    "the bitmask must be int32, not {typestr}"
                )));
            }
            if let Some(strides) = ai.get_item("strides")? {
                if !strides.is_none() {
                    return Err(PyValueError::new_err("the bitmask must be C-contiguous"));
                }
            }
            let (ptr, readonly): (usize, bool) = get("data")?.extract()?;
            if readonly {
                return Err(PyValueError::new_err("the bitmask is read-only"));
            }
            (ptr, get("shape")?.extract()?)
        } else {
            return Err(PyTypeError::new_err(
                "the bitmask must be a numpy array or a torch tensor",
            ));
        };
        let (rows, words) = match shape.as_slice() {
            [w] => (1, *w),
            [r, w] => (*r, *w),
            _ => {
                return Err(PyValueError::new_err(format!(
                    "the bitmask must have shape (batch, words), not {shape:?}"
                )))
            }
        };
        if words < min_words {
            return Err(PyValueError::new_err(format!(
                "the bitmask has {words} words a row; the vocabulary needs {min_words} \
                 (ceil(vocab_size / 32))"
            )));
        }
        Ok(Buffer { ptr, rows, words })
    }

    /// Row `index` (negative counts from the end, as in Python).
    pub fn row(&self, index: isize) -> PyResult<Row> {
        let i = if index < 0 {
            index + self.rows as isize
        } else {
            index
        };
        if i < 0 || i as usize >= self.rows {
            return Err(PyIndexError::new_err(format!(
                "row {index} is outside the bitmask's {} rows",
                self.rows
            )));
        }
        Ok(Row {
            ptr: self.ptr + i as usize * self.words * 4,
            words: self.words,
        })
    }
}

impl Buffer {
    /// Words in each row.
    pub fn words_per_row(&self) -> usize {
        self.words
    }
}
