//! The matrix product the forward pass calls: quantized weights (a GGUF tensor) times
//! quantized activations, for a range of weight rows so threads can share the work.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::ops::Range;

use super::acts::{ActFormat, QuantizedActs};
use super::dequant::{check_row, dequantize_row};
use super::error::QuantError;
use super::interleave::{
    deinterleave_row, group_row_to_f32, interleaved_row_bytes, whole_groups, GROUP_ROWS,
};
use super::kernels::{tile_width, Backend, DotFn, GroupFn, GroupTiles, Tiles};
use crate::ggml_type::GgmlType;

/// Weight rows handled together, so a tile of activations stays in L1 while a group of
/// weight rows (a few KB) is swept for every tile of tokens.
const ROW_BLOCK: usize = 16;

/// A 2-D weight tensor as stored in GGUF: `rows` (ne1) rows of `cols` (ne0) contiguous
/// elements, each row a whole number of blocks of `ty`.
#[derive(Clone, Copy, Debug)]
pub struct QMatrix<'a> {
    ty: GgmlType,
    data: &'a [u8],
    rows: usize,
    cols: usize,
    row_bytes: usize,
    /// Stored in groups of 8 interleaved rows (see [`super::interleave`]).
    interleaved: bool,
}

impl<'a> QMatrix<'a> {
    /// Checks that `ty` is computable, `cols` is a whole number of its blocks and `data`
    /// holds exactly `rows` such rows.
    pub fn new(ty: GgmlType, data: &'a [u8], rows: usize, cols: usize) -> Result<Self, QuantError> {
        if !ty.is_supported_for_compute() {
            return Err(QuantError::UnsupportedType(ty));
        }
        let block = ty.block_elems() as usize;
        if !cols.is_multiple_of(block) {
            return Err(QuantError::NotBlockAligned { ty, cols, block });
        }
        let row_bytes = (cols / block)
            .checked_mul(ty.block_bytes() as usize)
            .ok_or(QuantError::ShapeOverflow { rows, cols })?;
        Self::with_layout(ty, data, rows, cols, row_bytes, false)
    }

    /// Checks that `data` holds `rows` rows of `row_bytes` and makes the matrix.
    fn with_layout(
        ty: GgmlType,
        data: &'a [u8],
        rows: usize,
        cols: usize,
        row_bytes: usize,
        interleaved: bool,
    ) -> Result<Self, QuantError> {
        let expected = row_bytes
            .checked_mul(rows)
            .ok_or(QuantError::ShapeOverflow { rows, cols })?;
        if data.len() != expected {
            return Err(QuantError::LengthMismatch {
                what: "matrix bytes",
                expected,
                got: data.len(),
            });
        }
        Ok(QMatrix {
            ty,
            data,
            rows,
            cols,
            row_bytes,
            interleaved,
        })
    }

    /// [`QMatrix::new`] for data in the interleaved layout (made by
    /// [`interleave_rows`](super::interleave::interleave_rows)): `ty` must be
    /// interleavable and `rows` a multiple of 8.
    pub fn new_interleaved(
        ty: GgmlType,
        data: &'a [u8],
        rows: usize,
        cols: usize,
    ) -> Result<Self, QuantError> {
        let Some(row_bytes) = interleaved_row_bytes(ty, cols) else {
            return Err(QuantError::UnsupportedType(ty));
        };
        whole_groups(ty, rows)?;
        Self::with_layout(ty, data, rows, cols, row_bytes, true)
    }

    /// The activation format the kernels take for this matrix (the weight type's
    /// partner, in either layout).
    pub fn act_format(&self) -> Result<ActFormat, QuantError> {
        ActFormat::for_weights(self.ty)
    }

    /// Whether the data is in the interleaved layout.
    pub fn is_interleaved(&self) -> bool {
        self.interleaved
    }

    /// The element type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// The raw bytes of all rows (in the interleaved layout if the matrix is).
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Number of rows (ne1): the output width of a matmul.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Elements per row (ne0): the input width of a matmul.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// The raw bytes of row `i` in the GGUF layout (rebuilt if interleaved; not
    /// available for the types interleaved by super-block: the K-quants and IQ4_XS).
    pub fn row(&self, i: usize) -> Result<Cow<'a, [u8]>, QuantError> {
        if i >= self.rows {
            return Err(self.out_of_range(i..i + 1));
        }
        if !self.interleaved {
            return Ok(Cow::Borrowed(
                &self.data[i * self.row_bytes..(i + 1) * self.row_bytes],
            ));
        }
        let g = i / GROUP_ROWS * GROUP_ROWS;
        let group = &self.data[g * self.row_bytes..(g + GROUP_ROWS) * self.row_bytes];
        let mut row = vec![0u8; self.row_bytes];
        deinterleave_row(self.ty, group, i - g, &mut row)?;
        Ok(Cow::Owned(row))
    }

    /// Row `i` as f32 into `dst` (`cols` long): an embedding lookup.
    pub fn row_to_f32(&self, i: usize, dst: &mut [f32]) -> Result<(), QuantError> {
        if !self.interleaved {
            check_row(self.ty, self.row_bytes, dst.len())?;
            return dequantize_row(self.ty, &self.row(i)?, dst);
        }
        if i >= self.rows {
            return Err(self.out_of_range(i..i + 1));
        }
        let g = i / GROUP_ROWS * GROUP_ROWS;
        let group = &self.data[g * self.row_bytes..(g + GROUP_ROWS) * self.row_bytes];
        group_row_to_f32(self.ty, group, i - g, dst)
    }

    fn out_of_range(&self, r: Range<usize>) -> QuantError {
        QuantError::RowOutOfRange {
            start: r.start,
            end: r.end,
            rows: self.rows,
        }
    }
}

/// Where a matmul writes: the weight rows `rows()` of a token-major output
/// (`n_tokens` × `stride` f32, element `(t, r)` at `t * stride + r`).
///
/// Views made by [`OutView::split_at`] cover disjoint rows of the same output, so each
/// can be moved to its own thread, like `split_at_mut` for the columns of a matrix.
pub struct OutView<'a> {
    ptr: *mut f32,
    /// Each token's row, when rows lie in separate buffers ([`OutView::over_rows`]);
    /// null when they lie `stride` apart from `ptr`.
    row_at: *const *mut f32,
    n_tokens: usize,
    stride: usize,
    rows: Range<usize>,
    /// Results are added to the output's values (a residual connection) rather than
    /// replacing them.
    add: bool,
    _out: PhantomData<&'a mut [f32]>,
}

/// Storage for the row addresses of an [`OutView::over_rows`] view, kept between
/// views so that making one allocates nothing.
#[derive(Debug, Default)]
pub struct RowTable(Vec<*mut f32>);

// SAFETY: the addresses are only followed by the view that borrows the table (and the
// rows); between views they are stale and never read.
unsafe impl Send for RowTable {}
unsafe impl Sync for RowTable {}

// SAFETY: a view only writes the (token, row) cells of its own row range, which no other
// view of the same output covers (views are only made by `new` and `split_at`), and
// its lifetime is tied to the `&mut` borrow of the output.
unsafe impl Send for OutView<'_> {}

impl<'a> OutView<'a> {
    /// A view of all `rows` of `out`, which must hold exactly `n_tokens × rows` values.
    pub fn new(out: &'a mut [f32], n_tokens: usize, rows: usize) -> Result<Self, QuantError> {
        let expected = n_tokens
            .checked_mul(rows)
            .ok_or(QuantError::ShapeOverflow {
                rows: n_tokens,
                cols: rows,
            })?;
        if out.len() != expected {
            return Err(QuantError::LengthMismatch {
                what: "output",
                expected,
                got: out.len(),
            });
        }
        Ok(OutView {
            ptr: out.as_mut_ptr(),
            row_at: std::ptr::null(),
            n_tokens,
            stride: rows,
            rows: 0..rows,
            add: false,
            _out: PhantomData,
        })
    }

    /// A view of `rows` outputs per token whose tokens' rows lie in separate buffers
    /// (one per token, each exactly `rows` long): results go straight where their
    /// consumers want them. `table` (kept for reuse) holds the rows' addresses.
    pub fn over_rows(
        rows_of: &'a mut [&'a mut [f32]],
        rows: usize,
        table: &'a mut RowTable,
    ) -> Result<Self, QuantError> {
        let row_at = &mut table.0;
        if let Some(bad) = rows_of.iter().find(|r| r.len() != rows) {
            return Err(QuantError::LengthMismatch {
                what: "output row",
                expected: rows,
                got: bad.len(),
            });
        }
        row_at.clear();
        row_at.extend(rows_of.iter_mut().map(|r| r.as_mut_ptr()));
        Ok(OutView {
            ptr: std::ptr::null_mut(),
            row_at: row_at.as_ptr(),
            n_tokens: rows_of.len(),
            stride: rows,
            rows: 0..rows,
            add: false,
            _out: PhantomData,
        })
    }

    /// Where cell (token `t`, row `r`) lies; `t < n_tokens`, `r < stride`.
    #[inline(always)]
    fn cell(&self, t: usize, r: usize) -> *mut f32 {
        // SAFETY: callers check the bounds; either layout keeps the cell inside the
        // borrowed output.
        unsafe {
            if self.row_at.is_null() {
                self.ptr.add(t * self.stride + r)
            } else {
                (*self.row_at.add(t)).add(r)
            }
        }
    }

    /// [`OutView::new`] for a product added to what `out` holds: `out += w·x`.
    pub fn adding_to(out: &'a mut [f32], n_tokens: usize, rows: usize) -> Result<Self, QuantError> {
        Ok(OutView {
            add: true,
            ..OutView::new(out, n_tokens, rows)?
        })
    }

    /// The tokens this view covers.
    pub fn n_tokens(&self) -> usize {
        self.n_tokens
    }

    /// The weight rows this view covers.
    pub fn rows(&self) -> Range<usize> {
        self.rows.clone()
    }

    /// Splits into the rows before `row` and the rows from `row` on.
    pub fn split_at(self, row: usize) -> Result<(OutView<'a>, OutView<'a>), QuantError> {
        if row < self.rows.start || row > self.rows.end {
            return Err(QuantError::RowOutOfRange {
                start: row,
                end: row,
                rows: self.stride,
            });
        }
        let part = |rows| OutView { rows, ..self };
        Ok((part(self.rows.start..row), part(row..self.rows.end)))
    }

    /// Splits into `n` (at least 1) views of nearly equal row counts, in row order.
    pub fn split(self, n: usize) -> Vec<OutView<'a>> {
        self.split_aligned(n, 1)
    }

    /// [`OutView::split`] with every split point a multiple of `align` rows (for
    /// interleaved weights: whole groups of 8); some views may then be empty.
    pub fn split_aligned(self, n: usize, align: usize) -> Vec<OutView<'a>> {
        let n = n.max(1);
        self.split_at_shares(n, align, |k| (k, n))
    }

    /// [`OutView::split_aligned`] into `n` views whose sizes fall off linearly, the
    /// first about `n` times the last (view `k` takes `n - k` shares).
    pub fn split_tapered(self, n: usize, align: usize) -> Vec<OutView<'a>> {
        let n = n.max(1);
        self.split_at_shares(n, align, |k| (k * n - k * (k - 1) / 2, n * (n + 1) / 2))
    }

    /// `n` views, split `k` (of `1..n`) at the fraction `shares(k)` (a numerator and a
    /// denominator) of the rows, rounded down to a multiple of `align`.
    fn split_at_shares(
        self,
        n: usize,
        align: usize,
        shares: impl Fn(usize) -> (usize, usize),
    ) -> Vec<OutView<'a>> {
        let align = align.max(1);
        let (start, len) = (self.rows.start, self.rows.len());
        let mut parts = Vec::with_capacity(n);
        let mut rest = self;
        for k in 1..n {
            let (num, den) = shares(k);
            let at = (start + len * num / den) / align * align;
            let at = at.clamp(rest.rows.start, rest.rows.end);
            let (part, tail) = rest.split_at(at).expect("split points lie inside the view");
            parts.push(part);
            rest = tail;
        }
        parts.push(rest);
        parts
    }

    /// The cells of token `t` in this view's rows (side by side in the output).
    pub fn token_mut(&mut self, t: usize) -> &mut [f32] {
        assert!(t < self.n_tokens);
        // SAFETY: the cells lie inside the borrowed output, in this view's rows, which
        // no other view holds; `&mut self` keeps them from being written meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.cell(t, self.rows.start), self.rows.len()) }
    }

    /// Rows `r0..r0 + 8` of token `t`, which lie side by side in the output.
    #[inline(always)]
    fn set8(&mut self, t: usize, r0: usize, v: &[f32; 8]) {
        assert!(t < self.n_tokens && self.rows.start <= r0 && r0 + 8 <= self.rows.end);
        // SAFETY: as in `set`, for each of the 8 cells.
        let dst = unsafe { std::slice::from_raw_parts_mut(self.cell(t, r0), 8) };
        if self.add {
            dst.iter_mut().zip(v).for_each(|(o, v)| *o += v);
        } else {
            dst.copy_from_slice(v);
        }
    }

    #[inline(always)]
    fn set(&mut self, t: usize, r: usize, v: f32) {
        assert!(t < self.n_tokens && self.rows.contains(&r));
        // SAFETY: t < n_tokens and r < stride, so the cell lies inside the borrowed
        // output; r is in this view's rows, which no other view holds.
        let cell = unsafe { &mut *self.cell(t, r) };
        if self.add {
            *cell += v;
        } else {
            *cell = v;
        }
    }
}

impl Backend {
    /// `out[t, r] = Σ_c w[r, c] · x[t, c]` for the rows of `out`'s view, with this
    /// backend's kernels. Allocates nothing.
    pub fn matmul_view(
        &self,
        w: &QMatrix,
        acts: &QuantizedActs,
        out: &mut OutView,
    ) -> Result<(), QuantError> {
        let format = w.act_format()?;
        if acts.format != Some(format) || acts.cols != w.cols {
            return Err(QuantError::ActsMismatch {
                acts: format!("{:?} x {}", acts.format, acts.cols),
                weights: format!("{} x {}", w.ty, w.cols),
            });
        }
        if out.n_tokens != acts.n_tokens || out.stride != w.rows {
            return Err(QuantError::LengthMismatch {
                what: "output view (tokens x rows)",
                expected: acts.n_tokens * w.rows,
                got: out.n_tokens * out.stride,
            });
        }
        let per_tok = w.cols / format.block_elems();
        let k = self.table;
        let s = &acts.tile_scales[..];
        use GgmlType::*;
        if w.interleaved {
            let g = k.groups.ok_or(QuantError::UnsupportedType(w.ty))?;
            let rows = out.rows();
            if !rows.start.is_multiple_of(GROUP_ROWS) || !rows.end.is_multiple_of(GROUP_ROWS) {
                return Err(w.out_of_range(rows));
            }
            match w.ty {
                Q4_0 => drive_groups(&g.q4_0, w, &acts.q8, s, per_tok, out),
                Q4_1 => drive_groups(&g.q4_1, w, &acts.q8, s, per_tok, out),
                Q5_0 => drive_groups(&g.q5_0, w, &acts.q8, s, per_tok, out),
                Q5_1 => drive_groups(&g.q5_1, w, &acts.q8, s, per_tok, out),
                Q8_0 => drive_groups(&g.q8_0, w, &acts.q8, s, per_tok, out),
                Q4_K => drive_groups(&g.q4_k, w, &acts.q8k, s, per_tok, out),
                Q6_K => drive_groups(&g.q6_k, w, &acts.q8k, s, per_tok, out),
                IQ4_NL => drive_groups(&g.iq4_nl, w, &acts.q8, s, per_tok, out),
                IQ4_XS => drive_groups(&g.iq4_xs, w, &acts.q8k, s, per_tok, out),
                MXFP4 => drive_groups(&g.mxfp4, w, &acts.q8, s, per_tok, out),
                Q2_K => drive_groups(&g.q2_k, w, &acts.q8k, s, per_tok, out),
                Q3_K => drive_groups(&g.q3_k, w, &acts.q8k, s, per_tok, out),
                ty => return Err(QuantError::UnsupportedType(ty)),
            }
            return Ok(());
        }
        match w.ty {
            F32 => drive(&k.f32, w, &acts.f32s, &[], per_tok, out),
            F16 => drive(&k.f16, w, &acts.f32s, &[], per_tok, out),
            BF16 => drive(&k.bf16, w, &acts.f32s, &[], per_tok, out),
            Q4_0 => drive(&k.q4_0, w, &acts.q8, s, per_tok, out),
            Q4_1 => drive(&k.q4_1, w, &acts.q8, s, per_tok, out),
            Q5_0 => drive(&k.q5_0, w, &acts.q8, s, per_tok, out),
            Q5_1 => drive(&k.q5_1, w, &acts.q8, s, per_tok, out),
            Q8_0 => drive(&k.q8_0, w, &acts.q8, s, per_tok, out),
            Q4_K => drive(&k.q4_k, w, &acts.q8k, &[], per_tok, out),
            Q5_K => drive(&k.q5_k, w, &acts.q8k, &[], per_tok, out),
            Q6_K => drive(&k.q6_k, w, &acts.q8k, &[], per_tok, out),
            IQ4_NL => drive(&k.iq4_nl, w, &acts.q8, s, per_tok, out),
            IQ4_XS => drive(&k.iq4_xs, w, &acts.q8k, &[], per_tok, out),
            Q3_K => drive(&k.q3_k, w, &acts.q8k, &[], per_tok, out),
            Q2_K => drive(&k.q2_k, w, &acts.q8k, &[], per_tok, out),
            MXFP4 => drive(&k.mxfp4, w, &acts.q8, s, per_tok, out),
            ty => return Err(QuantError::UnsupportedType(ty)),
        }
        Ok(())
    }

    /// [`Backend::matmul_view`] on rows `row_range` of a whole token-major output
    /// (`n_tokens × w.rows()` values); other cells are left untouched.
    pub fn matmul_rows(
        &self,
        w: &QMatrix,
        acts: &QuantizedActs,
        out: &mut [f32],
        row_range: Range<usize>,
    ) -> Result<(), QuantError> {
        if row_range.start > row_range.end || row_range.end > w.rows {
            return Err(w.out_of_range(row_range));
        }
        let view = OutView::new(out, acts.n_tokens, w.rows)?;
        let (_, tail) = view.split_at(row_range.start)?;
        let (mut mid, _) = tail.split_at(row_range.end)?;
        self.matmul_view(w, acts, &mut mid)
    }
}

/// [`Backend::matmul_view`] with [`Backend::active`].
pub fn matmul_view(w: &QMatrix, acts: &QuantizedActs, out: &mut OutView) -> Result<(), QuantError> {
    Backend::active().matmul_view(w, acts, out)
}

/// [`Backend::matmul_rows`] with [`Backend::active`].
pub fn matmul_rows(
    w: &QMatrix,
    acts: &QuantizedActs,
    out: &mut [f32],
    row_range: Range<usize>,
) -> Result<(), QuantError> {
    Backend::active().matmul_rows(w, acts, out, row_range)
}

/// Runs one weight type's kernels over the view: row groups outside; inside, the
/// tokens in tiles of 8, then 4, 2 and 1, so the widest kernels cover most of them.
/// `scales` is the activations' tile scale table, or empty.
fn drive<A>(
    k: &Tiles<A>,
    w: &QMatrix,
    acts: &[A],
    scales: &[f32],
    per_tok: usize,
    out: &mut OutView,
) {
    let n_tokens = out.n_tokens;
    let rows = out.rows();
    let mut r0 = rows.start;
    while r0 < rows.end {
        let r1 = (r0 + ROW_BLOCK).min(rows.end);
        let mut t = 0;
        while t < n_tokens {
            let tile = Tile {
                acts,
                scales,
                per_tok,
                scale_per_tok: w.cols / 32,
                t,
            };
            t += match tile_width(n_tokens - t) {
                8 => sweep(k.eight, w, tile, r0..r1, out),
                4 => sweep(k.four, w, tile, r0..r1, out),
                2 => sweep(k.two, w, tile, r0..r1, out),
                _ => sweep(k.one, w, tile, r0..r1, out),
            };
        }
        r0 = r1;
    }
}

/// Tokens swept against one group of interleaved rows before moving to the next group:
/// their activations (at most a few hundred KB) stay in L2 while the groups stream by.
const GROUP_TOKEN_CHUNK: usize = 64;

/// [`drive`] for interleaved weights: groups of 8 rows (the view starts and ends on a
/// group boundary), and the tokens in tiles inside chunks of [`GROUP_TOKEN_CHUNK`].
fn drive_groups<A>(
    k: &GroupTiles<A>,
    w: &QMatrix,
    acts: &[A],
    scales: &[f32],
    per_tok: usize,
    out: &mut OutView,
) {
    let n_tokens = out.n_tokens;
    let rows = out.rows();
    let group_bytes = GROUP_ROWS * w.row_bytes;
    let mut chunk = 0;
    while chunk < n_tokens {
        let chunk_end = (chunk + GROUP_TOKEN_CHUNK).min(n_tokens);
        for r0 in rows.clone().step_by(GROUP_ROWS) {
            let group = &w.data[r0 * w.row_bytes..][..group_bytes];
            let mut t = chunk;
            while t < chunk_end {
                let tile = Tile {
                    acts,
                    scales,
                    per_tok,
                    scale_per_tok: w.cols / 32,
                    t,
                };
                // Tiles follow the plan of the whole token range (the scale table's),
                // so a chunk boundary must fall on a tile boundary: 64 is a multiple of 8.
                t += match tile_width(n_tokens - t) {
                    8 => sweep_group(k.eight, group, tile, r0, out),
                    4 => sweep_group(k.four, group, tile, r0, out),
                    2 => sweep_group(k.two, group, tile, r0, out),
                    _ => sweep_group(k.one, group, tile, r0, out),
                };
            }
        }
        chunk = chunk_end;
    }
}

/// Tokens `t..t + N` against the group of rows `r0..r0 + 8`; returns `N`.
#[inline(always)]
fn sweep_group<A, const N: usize>(
    kernel: GroupFn<A, N>,
    group: &[u8],
    tile: Tile<A>,
    r0: usize,
    out: &mut OutView,
) -> usize {
    let (a, scales) = tile.operands::<N>();
    let v = kernel(group, a, scales);
    for (i, rows) in v.iter().enumerate() {
        out.set8(tile.t + i, r0, rows);
    }
    N
}

/// The activations of one matmul and where the next tile of tokens starts.
#[derive(Clone, Copy)]
struct Tile<'a, A> {
    acts: &'a [A],
    scales: &'a [f32],
    /// Activation blocks per token.
    per_tok: usize,
    /// Scale-table blocks (of 32) per token.
    scale_per_tok: usize,
    t: usize,
}

impl<'a, A> Tile<'a, A> {
    /// The activation rows of tokens `t..t + N` and their slice of the scale table.
    #[inline(always)]
    fn operands<const N: usize>(&self) -> ([&'a [A]; N], &'a [f32]) {
        let (acts, per_tok, t) = (self.acts, self.per_tok, self.t);
        let a = std::array::from_fn(|i| &acts[(t + i) * per_tok..(t + i + 1) * per_tok]);
        let spt = self.scale_per_tok;
        let scales = if self.scales.is_empty() {
            self.scales
        } else {
            &self.scales[2 * spt * t..2 * spt * (t + N)]
        };
        (a, scales)
    }
}

/// Tokens `t..t + N` against weight rows `rows`; returns `N`.
#[inline(always)]
fn sweep<A, const N: usize>(
    kernel: DotFn<A, N>,
    w: &QMatrix,
    tile: Tile<A>,
    rows: Range<usize>,
    out: &mut OutView,
) -> usize {
    let (a, scales) = tile.operands::<N>();
    let t = tile.t;
    for r in rows {
        let v = kernel(&w.data[r * w.row_bytes..(r + 1) * w.row_bytes], a, scales);
        for (i, v) in v.into_iter().enumerate() {
            out.set(t + i, r, v);
        }
    }
    N
}
