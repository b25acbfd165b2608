//! Rows of a caller's int32 bitmask (numpy array or CPU torch tensor), written in place.
//! Layout: shape `(batch, words)` or `(words,)`, C-contiguous, bit `i % 32` of word
//! `i / 32` = token `i` allowed; `words >= ceil(vocab / 32)` (a wider row, for a model
//! whose logits are padded past the tokenizer, gets zeros there).

use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use pyo3::{intern, Py};

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

/// `torch.int32` and `torch.uint32`, looked up once (torch is imported already when a
/// tensor is passed).
fn torch_dtypes(py: Python<'_>) -> PyResult<(&Bound<'_, PyAny>, &Bound<'_, PyAny>)> {
    static DTYPES: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();
    let (int32, uint32) = DTYPES.get_or_try_init(py, || -> PyResult<_> {
        // Something with `data_ptr` but no torch to compare with is not a tensor.
        let torch = py.import("torch").map_err(|_| {
            PyTypeError::new_err("the bitmask must be a numpy array or a torch tensor")
        })?;
        Ok((
            torch.getattr("int32")?.unbind(),
            torch.getattr("uint32")?.unbind(),
        ))
    })?;
    Ok((int32.bind(py), uint32.bind(py)))
}

impl Buffer {
    /// Reads a numpy array or a torch tensor's layout, refusing anything but a
    /// contiguous, writable int32 (or uint32) buffer on the CPU.
    pub fn of(obj: &Bound<'_, PyAny>, min_words: usize) -> PyResult<Buffer> {
        let py = obj.py();
        // Attribute names interned, dtypes compared by identity, `is_cpu` read rather
        // than the device's name: this runs once per fill, mostly with the interpreter's
        // and torch's code out of cache after the caller's own Python (each string made
        // and each object formatted there cost a fill microseconds).
        let (ptr, shape) = if let Ok(data_ptr) = obj.getattr(intern!(py, "data_ptr")) {
            let dtype = obj.getattr(intern!(py, "dtype"))?;
            let (int32, uint32) = torch_dtypes(py)?;
            if !dtype.is(int32) && !dtype.is(uint32) {
                return Err(PyTypeError::new_err(format!(
                    "the bitmask must be torch.int32, not {}",
                    dtype.str()?
                )));
            }
            if !obj.getattr(intern!(py, "is_cpu"))?.extract::<bool>()? {
                return Err(PyValueError::new_err(
                    "the bitmask must be on the CPU: fill it there, then move it \
                     (apply_token_bitmask_inplace moves it to the logits' device)",
                ));
            }
            if !obj
                .call_method0(intern!(py, "is_contiguous"))?
                .extract::<bool>()?
            {
                return Err(PyValueError::new_err("the bitmask must be contiguous"));
            }
            let shape: Vec<usize> = obj.getattr(intern!(py, "shape"))?.extract()?;
            (data_ptr.call0()?.extract::<usize>()?, shape)
        } else if let Ok(ai) = obj.getattr(intern!(py, "__array_interface__")) {
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
