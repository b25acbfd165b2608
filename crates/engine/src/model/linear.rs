//! Weight matrices and the threaded matrix product over them.

use std::sync::Mutex;

use super::ModelError;
use crate::ggml_type::GgmlType;
use crate::gguf::{GgufFile, TensorInfo};
use crate::pool::ThreadPool;
use crate::quant::{self, ActFormat, OutView, QMatrix, QuantizedActs};

/// A 2-D weight kept in its GGUF encoding inside the file mapping.
#[derive(Clone, Debug)]
pub(crate) struct Weight {
    info: TensorInfo,
    /// Output width (ne1).
    pub rows: usize,
    /// Input width (ne0).
    pub cols: usize,
}

impl Weight {
    /// Loads `name`, checking that it is `[cols, rows]` and computable.
    pub fn load(
        file: &GgufFile,
        name: &str,
        cols: usize,
        rows: usize,
    ) -> Result<Weight, ModelError> {
        let info = file.require_tensor(name)?;
        Self::from_info(file, info, cols, rows)
    }

    fn from_info(
        file: &GgufFile,
        info: &TensorInfo,
        cols: usize,
        rows: usize,
    ) -> Result<Weight, ModelError> {
        let want = [cols as u64, rows as u64];
        if info.dims != want {
            return Err(ModelError::Invalid(format!(
                "tensor {:?} has shape {:?}, expected {:?}",
                info.name, info.dims, want
            )));
        }
        if !info.ggml_type.is_supported_for_compute() {
            return Err(ModelError::UnsupportedType {
                tensor: info.name.clone(),
                ty: info.ggml_type,
            });
        }
        let w = Weight {
            info: info.clone(),
            rows,
            cols,
        };
        // Validates block alignment and byte size once, so later calls cannot fail.
        w.matrix(file)?;
        Ok(w)
    }

    pub fn ty(&self) -> GgmlType {
        self.info.ggml_type
    }

    pub fn matrix<'a>(&self, file: &'a GgufFile) -> Result<QMatrix<'a>, ModelError> {
        Ok(QMatrix::new(
            self.info.ggml_type,
            file.tensor_data(&self.info),
            self.rows,
            self.cols,
        )?)
    }

    /// Row `i` as f32 (an embedding lookup).
    pub fn row_f32(&self, file: &GgufFile, i: usize, dst: &mut [f32]) -> Result<(), ModelError> {
        Ok(self.matrix(file)?.row_to_f32(i, dst)?)
    }
}

/// A 1-D tensor (norm weight, bias) converted to f32 at load time.
pub(crate) fn load_vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
    let info = file.require_tensor(name)?;
    if info.dims != [len as u64] {
        return Err(ModelError::Invalid(format!(
            "tensor {name:?} has shape {:?}, expected [{len}]",
            info.dims
        )));
    }
    let mut out = vec![0.0; len];
    quant::dequantize_row(info.ggml_type, file.tensor_data(info), &mut out)?;
    Ok(out)
}

/// [`load_vector`] for a tensor that may be absent.
pub(crate) fn opt_vector(
    file: &GgufFile,
    name: &str,
    len: usize,
) -> Result<Option<Vec<f32>>, ModelError> {
    match file.tensor(name) {
        None => Ok(None),
        Some(_) => load_vector(file, name, len).map(Some),
    }
}

/// Activations quantized for each weight format, refilled lazily: weights that read
/// the same input (Q, K, V; gate and up) share one quantization per format.
#[derive(Default)]
pub(crate) struct ActsCache {
    slots: [(bool, QuantizedActs); 3],
}

impl ActsCache {
    /// Forgets the held activations (the input changed).
    pub fn invalidate(&mut self) {
        self.slots.iter_mut().for_each(|s| s.0 = false);
    }

    /// The activations `x` (`n` rows) in the format `w` needs.
    pub fn get(&mut self, w: &Weight, x: &[f32], n: usize) -> Result<&QuantizedActs, ModelError> {
        let idx = match ActFormat::for_weights(w.ty())? {
            ActFormat::F32 => 0,
            ActFormat::Q8 => 1,
            ActFormat::Q8K => 2,
        };
        let slot = &mut self.slots[idx];
        if !slot.0 {
            quant::quantize_acts(w.ty(), x, n, w.cols, &mut slot.1)?;
            slot.0 = true;
        }
        Ok(&slot.1)
    }
}

/// `out[t, r] = Σ_c w[r, c] · x[t, c]` with the rows of `w` split over the pool.
/// `out` holds `n_tokens × w.rows` values.
pub(crate) fn matmul(
    pool: &ThreadPool,
    file: &GgufFile,
    w: &Weight,
    acts: &QuantizedActs,
    out: &mut [f32],
) -> Result<(), ModelError> {
    let m = w.matrix(file)?;
    let view = OutView::new(out, acts.n_tokens(), w.rows)?;
    // Several parts per thread even out kernels that finish at different speeds.
    let parts = (pool.n_threads() * 4).min(w.rows.div_ceil(16)).max(1);
    if parts == 1 || pool.n_threads() == 1 {
        let mut view = view;
        return Ok(quant::matmul_view(&m, acts, &mut view)?);
    }
    let views: Vec<Mutex<OutView>> = view.split(parts).into_iter().map(Mutex::new).collect();
    let error = Mutex::new(None);
    pool.run(parts, &|i| {
        let mut v = views[i].lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = quant::matmul_view(&m, acts, &mut v) {
            *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
    });
    match error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
