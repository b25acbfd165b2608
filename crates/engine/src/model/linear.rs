//! Weight matrices and the threaded matrix product over them.

use std::sync::Mutex;

use super::arena::{Arena, PackedBytes};
use super::ModelError;
use crate::ggml_type::GgmlType;
use crate::gguf::{GgufFile, TensorInfo};
use crate::pool::ThreadPool;
use crate::quant::interleave::{interleave_rows, interleaved_row_bytes, GROUP_ROWS};
use crate::quant::{
    self, ActFormat, ActSource, Backend, OutView, ParallelFor, QMatrix, QuantError, QuantizedActs,
};

/// A 2-D weight kept in its GGUF encoding inside the file mapping, or, for formats the
/// active kernels run faster interleaved, copied once into that layout (the file's
/// pages are then released, so resident memory holds the weights once).
#[derive(Clone, Debug)]
pub(crate) struct Weight {
    info: TensorInfo,
    /// Output width (ne1).
    pub rows: usize,
    /// Input width (ne0).
    pub cols: usize,
    packed: Option<PackedBytes>,
    /// The activation format the kernels take for this weight (in its layout).
    act: ActFormat,
}

impl Weight {
    /// Loads `name`, checking that it is `[cols, rows]` and computable; an
    /// interleaved copy goes into `arena`.
    pub(crate) fn load(
        file: &GgufFile,
        arena: &Arena,
        name: &str,
        cols: usize,
        rows: usize,
    ) -> Result<Weight, ModelError> {
        Weight::load_into(file, Some(arena), name, cols, rows)
    }

    /// [`Weight::load`] for a weight only ever read row by row ([`Weight::row_f32`]:
    /// an embedding table with an output matrix of its own): rows are read in the
    /// file's layout, so an interleaved copy would be resident memory for nothing
    /// (90 MB for Qwen 2.5 0.5B's).
    pub(super) fn load_rows(
        file: &GgufFile,
        name: &str,
        cols: usize,
        rows: usize,
    ) -> Result<Weight, ModelError> {
        Weight::load_into(file, None, name, cols, rows)
    }

    fn load_into(
        file: &GgufFile,
        arena: Option<&Arena>,
        name: &str,
        cols: usize,
        rows: usize,
    ) -> Result<Weight, ModelError> {
        let info = file.require_tensor(name)?;
        check_dims(info, &[cols, rows])?;
        Weight::from_info(file, arena, info.clone(), cols, rows)
    }

    /// The `n` experts of a 3-D tensor of shape `[cols, rows, n]`, each a weight of
    /// its own over its slab of the tensor (expert `e`'s rows follow expert `e - 1`'s).
    pub(super) fn load_experts(
        file: &GgufFile,
        arena: &Arena,
        name: &str,
        (cols, rows, n): (usize, usize, usize),
    ) -> Result<Vec<Weight>, ModelError> {
        let info = file.require_tensor(name)?;
        check_dims(info, &[cols, rows, n])?;
        if !info.size.is_multiple_of(n as u64) {
            return Err(ModelError::Invalid(format!(
                "tensor {name:?}: {} bytes do not split into {n} experts",
                info.size
            )));
        }
        let slab = info.size / n as u64;
        // A decode step reads only its chosen experts' bytes, and a prompt touches every
        // expert: a layout larger than the file's (the K-quants' groups) would cost
        // decode speed and resident memory beyond the file's size.
        let arena = Some(arena).filter(|_| !interleaving_grows(info.ggml_type, cols));
        (0..n)
            .map(|e| {
                let part = TensorInfo {
                    name: format!("{name}[expert {e}]"),
                    dims: vec![cols as u64, rows as u64],
                    offset: info.offset + e as u64 * slab,
                    size: slab,
                    ..info.clone()
                };
                Weight::from_info(file, arena, part, cols, rows)
            })
            .collect()
    }

    /// A weight over the tensor (or expert slab) `info`, of shape `[cols, rows]`.
    fn from_info(
        file: &GgufFile,
        arena: Option<&Arena>,
        info: TensorInfo,
        cols: usize,
        rows: usize,
    ) -> Result<Weight, ModelError> {
        if !info.ggml_type.is_supported_for_compute() {
            return Err(ModelError::UnsupportedType {
                tensor: info.name.clone(),
                ty: info.ggml_type,
            });
        }
        let mut w = Weight {
            info,
            rows,
            cols,
            packed: None,
            act: ActFormat::F32,
        };
        // Validates block alignment and byte size once, so later calls cannot fail.
        let row_bytes = w.matrix(file)?.row_bytes();
        if let (Some(arena), Some(len)) = (arena, interleaved_len(&w.info)) {
            let info = &w.info;
            let packed = arena.alloc(len, |dst| {
                interleave_tensor(file, info, cols, row_bytes, dst)
            })?;
            w.packed = Some(packed);
        }
        w.act = w.matrix(file)?.act_format()?;
        Ok(w)
    }

    /// The tensor as the file holds it (the GPU backend uploads its bytes).
    #[cfg(feature = "gpu")]
    pub(super) fn info(&self) -> &TensorInfo {
        &self.info
    }

    /// The activation format the kernels take for this weight.
    pub(super) fn act_format(&self) -> ActFormat {
        self.act
    }

    /// The weight's GGUF type.
    pub(super) fn ggml_type(&self) -> crate::ggml_type::GgmlType {
        self.info.ggml_type
    }

    pub(crate) fn matrix<'a>(&'a self, file: &'a GgufFile) -> Result<QMatrix<'a>, ModelError> {
        let ty = self.info.ggml_type;
        Ok(match &self.packed {
            Some(p) => QMatrix::new_interleaved(ty, p, self.rows, self.cols)?,
            None => QMatrix::new(ty, file.tensor_data(&self.info), self.rows, self.cols)?,
        })
    }

    /// Row `i` as f32 (an embedding lookup).
    pub(super) fn row_f32(
        &self,
        file: &GgufFile,
        i: usize,
        dst: &mut [f32],
    ) -> Result<(), ModelError> {
        Ok(self.matrix(file)?.row_to_f32(i, dst)?)
    }
}

/// Checks that tensor `info` has the shape `want` (GGUF order: row length first).
fn check_dims(info: &TensorInfo, want: &[usize]) -> Result<(), ModelError> {
    if !info
        .dims
        .iter()
        .map(|&d| d as usize)
        .eq(want.iter().copied())
    {
        return Err(ModelError::Invalid(format!(
            "tensor {:?} has shape {:?}, expected {want:?}",
            info.name, info.dims
        )));
    }
    Ok(())
}

/// Whether weights may be interleaved at load (`LLAMAY_INTERLEAVE=0` keeps the GGUF
/// layout, to compare the two).
fn interleave_enabled() -> bool {
    std::env::var("LLAMAY_INTERLEAVE").map_or(true, |v| v != "0")
}

/// The bytes of a 2-D tensor's interleaved copy, if it is to be made.
pub(crate) fn interleaved_len(info: &TensorInfo) -> Option<usize> {
    let [cols, rows] = info.dims[..] else {
        return None;
    };
    interleaved_matrix_len(info.ggml_type, cols, rows)
}

/// The arena bytes a tensor's interleaved copies take: one copy of a 2-D tensor, one
/// per expert of a 3-D one.
pub(crate) fn arena_footprint(info: &TensorInfo) -> usize {
    let (cols, rows, n) = match info.dims[..] {
        [cols, rows] => (cols, rows, 1),
        [cols, rows, n] => (cols, rows, n),
        _ => return 0,
    };
    if n > 1 && interleaving_grows(info.ggml_type, cols as usize) {
        return 0; // experts that stay in the file's layout (see `Weight::load_experts`)
    }
    interleaved_matrix_len(info.ggml_type, cols, rows)
        .map_or(0, |len| Arena::footprint(len).saturating_mul(n as usize))
}

/// Whether rows of `cols` values of type `ty` take more bytes interleaved than in the
/// file.
fn interleaving_grows(ty: GgmlType, cols: usize) -> bool {
    let file_row = ty.bytes_for(cols as u64).unwrap_or(u64::MAX);
    interleaved_row_bytes(ty, cols).is_some_and(|b| b as u64 > file_row)
}

fn interleaved_matrix_len(ty: GgmlType, cols: u64, rows: u64) -> Option<usize> {
    let (cols, rows) = (usize::try_from(cols).ok()?, usize::try_from(rows).ok()?);
    if !(interleave_enabled()
        && Backend::active().interleaves(ty)
        && rows.is_multiple_of(GROUP_ROWS))
    {
        return None;
    }
    interleaved_row_bytes(ty, cols)?.checked_mul(rows)
}

/// Tensor `info` (rows of `cols` elements, `src_row` bytes each) copied into `dst` in
/// the interleaved layout a few MB at a time, releasing the file pages already copied
/// so the copy never doubles resident memory.
fn interleave_tensor(
    file: &GgufFile,
    info: &TensorInfo,
    cols: usize,
    src_row: usize,
    dst: &mut [u8],
) -> Result<(), ModelError> {
    const CHUNK_BYTES: usize = 4 << 20;
    let ty = info.ggml_type;
    let dst_row = interleaved_row_bytes(ty, cols).ok_or(ModelError::UnsupportedType {
        tensor: info.name.clone(),
        ty,
    })?;
    let src = file.tensor_data(info);
    let groups = (CHUNK_BYTES / (GROUP_ROWS * src_row)).max(1);
    let (src_chunk, dst_chunk) = (groups * GROUP_ROWS * src_row, groups * GROUP_ROWS * dst_row);
    if dst.len() != src.len() / src_row * dst_row {
        return Err(ModelError::Invalid(format!(
            "tensor {:?}: interleaved size mismatch",
            info.name
        )));
    }
    for (k, (s, d)) in src
        .chunks(src_chunk)
        .zip(dst.chunks_mut(dst_chunk))
        .enumerate()
    {
        interleave_rows(ty, s, cols, d)?;
        file.release_tensor_pages(info, k * src_chunk..k * src_chunk + s.len());
    }
    Ok(())
}

/// A 1-D tensor (norm weight, bias) converted to f32 at load time.
pub(crate) fn load_vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
    load_table(file, name, &[len])
}

/// A small tensor of shape `dims` (per-expert biases) converted to f32 at load time,
/// its values in file order.
pub(crate) fn load_table(
    file: &GgufFile,
    name: &str,
    dims: &[usize],
) -> Result<Vec<f32>, ModelError> {
    let info = file.require_tensor(name)?;
    check_dims(info, dims)?;
    let mut out = vec![0.0; dims.iter().product()];
    quant::dequantize_row(info.ggml_type, file.tensor_data(info), &mut out)?;
    Ok(out)
}

/// [`load_table`] for a tensor that may be absent.
pub(crate) fn opt_table(
    file: &GgufFile,
    name: &str,
    dims: &[usize],
) -> Result<Option<Vec<f32>>, ModelError> {
    match file.tensor(name) {
        None => Ok(None),
        Some(_) => load_table(file, name, dims).map(Some),
    }
}

/// [`load_vector`] for a tensor that may be absent.
pub(crate) fn opt_vector(
    file: &GgufFile,
    name: &str,
    len: usize,
) -> Result<Option<Vec<f32>>, ModelError> {
    opt_table(file, name, &[len])
}

/// Activations quantized for each weight format, refilled lazily: weights that read
/// the same input (Q, K, V; gate and up) share one quantization per format.
#[derive(Default)]
pub(crate) struct ActsCache {
    slots: [(bool, QuantizedActs); 3],
    /// Storage for [`ActsCache::produce`] to fill while the slots are read.
    spare: QuantizedActs,
}

fn slot_of(w: &Weight) -> Result<usize, ModelError> {
    Ok(match w.act {
        ActFormat::F32 => 0,
        ActFormat::Q8 => 1,
        ActFormat::Q8K => 2,
    })
}

impl ActsCache {
    /// Forgets the held activations (the input changed).
    pub(crate) fn invalidate(&mut self) {
        self.slots.iter_mut().for_each(|s| s.0 = false);
    }

    /// Makes the activations `x` (`n` rows) available in the format `w` needs; large
    /// inputs are quantized on all of `pool`'s threads (the others would only wait).
    pub(crate) fn prepare(
        &mut self,
        pool: &ThreadPool,
        w: &Weight,
        x: &[f32],
        n: usize,
    ) -> Result<(), ModelError> {
        self.fill_slot(pool, w, |b, ty, out, par| {
            b.quantize_acts(ty, x, n, w.cols, out, par)
        })
    }

    /// [`ActsCache::prepare`] for activations that `source` computes as they are
    /// quantized (`n` rows of `w.cols`), see [`Backend::quantize_computed`].
    pub(super) fn prepare_computed(
        &mut self,
        pool: &ThreadPool,
        w: &Weight,
        source: ActSource,
        n: usize,
    ) -> Result<(), ModelError> {
        self.fill_slot(pool, w, |b, ty, out, par| {
            b.quantize_computed(ty, source, n, w.cols, out, par)
        })
    }

    /// Fills `w`'s slot with `quantize` (given the backend, `w`'s type, the slot and the
    /// pool as a parallel loop) unless it holds this input already.
    fn fill_slot(
        &mut self,
        pool: &ThreadPool,
        w: &Weight,
        quantize: impl FnOnce(
            &Backend,
            GgmlType,
            &mut QuantizedActs,
            ParallelFor,
        ) -> Result<(), QuantError>,
    ) -> Result<(), ModelError> {
        let slot = &mut self.slots[slot_of(w)?];
        if !slot.0 {
            let par = |n_tasks: usize, f: &(dyn Fn(usize) + Sync)| pool.run(n_tasks, f);
            quantize(&Backend::active(), w.info.ggml_type, &mut slot.1, &par)?;
            slot.0 = true;
        }
        Ok(())
    }

    /// Activations for `w` that `fill` writes into spare storage while reading the
    /// activations held now (`fill` returns whether it wrote them). Afterwards they are
    /// the only ones held.
    pub(super) fn produce(
        &mut self,
        w: &Weight,
        fill: impl FnOnce(&Self, &mut QuantizedActs) -> Result<bool, ModelError>,
    ) -> Result<bool, ModelError> {
        let mut spare = std::mem::take(&mut self.spare);
        let done = fill(self, &mut spare);
        if let Ok(true) = done {
            self.invalidate();
            let slot = &mut self.slots[slot_of(w)?];
            std::mem::swap(&mut slot.1, &mut spare);
            slot.0 = true;
        }
        self.spare = spare;
        done
    }

    /// The activations prepared for `w`.
    pub(super) fn get(&self, w: &Weight) -> Result<&QuantizedActs, ModelError> {
        let slot = &self.slots[slot_of(w)?];
        assert!(slot.0, "activations prepared before use");
        Ok(&slot.1)
    }
}

/// Work on the output of one part of a product, in the thread that computed it:
/// `f(t, r0, values)` gets token `t`'s values of rows `r0..r0 + values.len()`, for every
/// token, once the part is done.
pub(crate) type PartEpilogue<'a> = &'a (dyn Fn(usize, usize, &mut [f32]) + Sync);

/// One product of a [`matmul_many`] call: weights, their input, and the output
/// (`n_tokens × w.rows` values), overwritten or, with `add`, added to.
pub(crate) struct Product<'a> {
    w: &'a Weight,
    /// Its own input; `None`: the [`ActsCache`]'s for `w`.
    acts: Option<&'a QuantizedActs>,
    out: Out<'a>,
    add: bool,
    /// Part boundaries fall on multiples of this many rows (for the epilogue).
    align: usize,
    then: Option<PartEpilogue<'a>>,
}

/// Where a product's results go.
enum Out<'a> {
    /// `n_tokens × w.rows` values, token after token.
    Slice(&'a mut [f32]),
    View(OutView<'a>),
}

impl<'a> Product<'a> {
    /// `out = w·x`.
    pub(crate) fn new(w: &'a Weight, out: &'a mut [f32]) -> Self {
        Product::into_view(w, Out::Slice(out))
    }

    /// `w·x` into an output view of any layout (see [`OutView::over_rows`]).
    pub(super) fn to_view(w: &'a Weight, out: OutView<'a>) -> Self {
        Product::into_view(w, Out::View(out))
    }

    fn into_view(w: &'a Weight, out: Out<'a>) -> Self {
        Product {
            w,
            acts: None,
            out,
            add: false,
            align: 1,
            then: None,
        }
    }

    /// `out = w·acts`, from an input of its own rather than the shared one.
    pub(super) fn with_acts(w: &'a Weight, acts: &'a QuantizedActs, out: &'a mut [f32]) -> Self {
        Product {
            acts: Some(acts),
            ..Product::new(w, out)
        }
    }

    /// `out += w·x`.
    pub(crate) fn adding(w: &'a Weight, out: &'a mut [f32]) -> Self {
        Product {
            add: true,
            ..Product::new(w, out)
        }
    }

    /// Runs `then` on every part's output, parts being whole multiples of `align`
    /// rows (a head, say).
    pub(crate) fn then(self, align: usize, then: PartEpilogue<'a>) -> Self {
        Product {
            align,
            then: Some(then),
            ..self
        }
    }
}

fn lcm(a: usize, b: usize) -> usize {
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    a / gcd(a, b) * b
}

/// Parts each thread's share of a matmul job is cut into. More parts even out threads
/// that run at different speeds (a server's own threads take turns on the same cores);
/// fewer keep the weight streams long. On 2 cores, 2 parts gained 4-10% at one token in
/// `llamay bench` but lost under `llamay serve`, and 16 lost 5-10% at eight tokens.
const PARTS_PER_THREAD: usize = 4;

/// Runs several products of the same input in one pool job, rows split over threads:
/// one synchronisation instead of one per matrix (decode steps are short).
pub(crate) fn matmul_many(
    pool: &ThreadPool,
    file: &GgufFile,
    acts: &ActsCache,
    products: Vec<Product>,
) -> Result<(), ModelError> {
    let total_rows: usize = products.iter().map(|p| p.w.rows).sum();
    let target = (pool.n_threads() * PARTS_PER_THREAD).max(1);
    let mut parts = Vec::new();
    for p in products {
        let m = p.w.matrix(file)?;
        let a = match p.acts {
            Some(a) => a,
            None => acts.get(p.w)?,
        };
        let view = match p.out {
            Out::Slice(out) if p.add => OutView::adding_to(out, a.n_tokens(), p.w.rows)?,
            Out::Slice(out) => OutView::new(out, a.n_tokens(), p.w.rows)?,
            Out::View(view) if view.rows() == (0..p.w.rows) && view.n_tokens() == a.n_tokens() => {
                view
            }
            Out::View(_) => {
                return Err(ModelError::Invalid(
                    "an output view of another shape than its product".into(),
                ))
            }
        };
        let n = (target * p.w.rows)
            .div_ceil(total_rows)
            .min(p.w.rows.div_ceil(16))
            .max(1);
        let align = lcm(
            if m.is_interleaved() { GROUP_ROWS } else { 1 },
            p.align.max(1),
        );
        if !p.w.rows.is_multiple_of(align) {
            return Err(ModelError::Invalid(format!(
                "{} rows do not split into parts of {align}",
                p.w.rows
            )));
        }
        let n = n.min(p.w.rows / align);
        parts.extend(
            view.split_tapered(n, align)
                .into_iter()
                .filter(|v| !v.rows().is_empty())
                .map(|v| (v.rows().len(), (m, a, p.then, Mutex::new(v)))),
        );
    }
    // Largest first: the threads take parts in order, so the last ones, which decide
    // how long the first thread to run out waits for the other, are the smallest.
    parts.sort_by_key(|(rows, _)| std::cmp::Reverse(*rows));
    let error = Mutex::new(None);
    pool.run(parts.len(), &|i| {
        let (_, (m, a, then, v)) = &parts[i];
        let mut v = v.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = quant::matmul_view(m, a, &mut v) {
            *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            return;
        }
        if let Some(then) = then {
            let r0 = v.rows().start;
            for t in 0..a.n_tokens() {
                then(t, r0, v.token_mut(t));
            }
        }
    });
    match error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// The gate and up products of the same input, their gated activation `act`, and its
/// quantization as the input of `down`, in one pool job. Each task computes the same
/// rows of gate and up for every token, applies `act` to them and quantizes those
/// columns: the values never leave the thread that computed them (on a machine whose
/// cores share no cache, handing them over cost more than computing them), and the
/// step has one synchronisation fewer. `g` and `u` receive the products (`act` runs
/// in place in `g`). Returns `Ok(false)`, having done nothing, when the shapes do not
/// allow it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gated_product(
    pool: &ThreadPool,
    file: &GgufFile,
    acts: &ActsCache,
    (gate, up, down): (&Weight, &Weight, &Weight),
    act: fn(&mut [f32], &[f32]),
    (g, u): (&mut [f32], &mut [f32]),
    out: &mut QuantizedActs,
) -> Result<bool, ModelError> {
    let rows = gate.rows;
    // Task boundaries fall on interleaved groups and on the quantized blocks of `down`.
    // Q8_K's blocks of 256 would leave too few tasks to balance (Gemma 3 270M has 8
    // per row: 8% slower measured); those take the separate steps.
    let align = down.act.block_elems().max(GROUP_ROWS);
    if down.act == ActFormat::Q8K
        || up.rows != rows
        || down.cols != rows
        || !rows.is_multiple_of(align)
    {
        return Ok(false);
    }
    let (a_g, a_u) = (acts.get(gate)?, acts.get(up)?);
    let n = a_g.n_tokens();
    let (m_g, m_u) = (gate.matrix(file)?, up.matrix(file)?);
    let writer = Backend::active().acts_writer(down.info.ggml_type, n, rows, out)?;
    let n_parts = (pool.n_threads() * PARTS_PER_THREAD)
        .min(rows / align)
        .max(1);
    let parts: Vec<_> = OutView::new(g, n, rows)?
        .split_tapered(n_parts, align)
        .into_iter()
        .zip(OutView::new(u, n, rows)?.split_tapered(n_parts, align))
        .filter(|(vg, _)| !vg.rows().is_empty())
        .map(Mutex::new)
        .collect();
    let error = Mutex::new(None);
    pool.run(parts.len(), &|i| {
        let mut part = parts[i].lock().unwrap_or_else(|e| e.into_inner());
        let (vg, vu) = &mut *part;
        let done =
            quant::matmul_view(&m_g, a_g, vg).and_then(|()| quant::matmul_view(&m_u, a_u, vu));
        if let Err(e) = done {
            *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            return;
        }
        let col0 = vg.rows().start;
        for t in 0..n {
            let gated = vg.token_mut(t);
            act(gated, vu.token_mut(t));
            writer.put(t, col0, gated);
        }
    });
    if let Some(e) = error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e.into());
    }
    writer.finish();
    Ok(true)
}

/// A LayerNorm's scale and shift (the text and vision encoders').
pub(crate) struct Norm {
    pub w: Vec<f32>,
    pub b: Vec<f32>,
}

/// A projection and its bias (an absent bias is zeros), as the encoders load them.
pub(crate) struct Affine {
    pub w: Weight,
    pub b: Vec<f32>,
}
