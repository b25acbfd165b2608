//! The matrix product the forward pass calls: quantized weights (a GGUF tensor) times
//! quantized activations, for a range of weight rows so threads can share the work.

use std::marker::PhantomData;
use std::ops::Range;

use super::acts::{ActFormat, QuantizedActs};
use super::dequant::{check_row, dequantize_row};
use super::error::QuantError;
use super::kernels::{tile_width, Backend, DotFn, Tiles};
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
        let overflow = QuantError::ShapeOverflow { rows, cols };
        let row_bytes = (cols / block)
            .checked_mul(ty.block_bytes() as usize)
            .ok_or(overflow.clone())?;
        let expected = row_bytes.checked_mul(rows).ok_or(overflow)?;
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
        })
    }

    /// The element type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// The raw bytes of all rows.
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

    /// The raw bytes of row `i`.
    pub fn row(&self, i: usize) -> Result<&'a [u8], QuantError> {
        if i >= self.rows {
            return Err(self.out_of_range(i..i + 1));
        }
        Ok(&self.data[i * self.row_bytes..(i + 1) * self.row_bytes])
    }

    /// Row `i` as f32 into `dst` (`cols` long): an embedding lookup.
    pub fn row_to_f32(&self, i: usize, dst: &mut [f32]) -> Result<(), QuantError> {
        check_row(self.ty, self.row_bytes, dst.len())?;
        dequantize_row(self.ty, self.row(i)?, dst)
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
    n_tokens: usize,
    stride: usize,
    rows: Range<usize>,
    _out: PhantomData<&'a mut [f32]>,
}

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
            n_tokens,
            stride: rows,
            rows: 0..rows,
            _out: PhantomData,
        })
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
        let n = n.max(1);
        let (start, len) = (self.rows.start, self.rows.len());
        let mut parts = Vec::with_capacity(n);
        let mut rest = self;
        for k in 1..n {
            let (part, tail) = rest
                .split_at(start + len * k / n)
                .expect("split points lie inside the view");
            parts.push(part);
            rest = tail;
        }
        parts.push(rest);
        parts
    }

    #[inline(always)]
    fn set(&mut self, t: usize, r: usize, v: f32) {
        assert!(t < self.n_tokens && self.rows.contains(&r));
        // SAFETY: t < n_tokens and r < stride, so the cell lies inside the borrowed
        // output; r is in this view's rows, which no other view holds.
        unsafe { *self.ptr.add(t * self.stride + r) = v }
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
        let format = ActFormat::for_weights(w.ty)?;
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
        match w.ty {
            F32 => drive(&k.f32, w, &acts.f32s, &[], per_tok, out),
            F16 => drive(&k.f16, w, &acts.f32s, &[], per_tok, out),
            BF16 => drive(&k.bf16, w, &acts.f32s, &[], per_tok, out),
            Q4_0 => drive(&k.q4_0, w, &acts.q8, s, per_tok, out),
            Q4_1 => drive(&k.q4_1, w, &acts.q16, s, per_tok, out),
            Q5_0 => drive(&k.q5_0, w, &acts.q8, s, per_tok, out),
            Q5_1 => drive(&k.q5_1, w, &acts.q16, s, per_tok, out),
            Q8_0 => drive(&k.q8_0, w, &acts.q8, s, per_tok, out),
            Q4_K => drive(&k.q4_k, w, &acts.q8k, &[], per_tok, out),
            Q5_K => drive(&k.q5_k, w, &acts.q8k, &[], per_tok, out),
            Q6_K => drive(&k.q6_k, w, &acts.q8k, &[], per_tok, out),
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

/// The activations of one matmul and where the next tile of tokens starts.
#[derive(Clone, Copy)]
struct Tile<'a, A> {
    acts: &'a [A],
    scales: &'a [f32],
    per_tok: usize,
    t: usize,
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
    let Tile {
        acts,
        scales,
        per_tok,
        t,
    } = tile;
    let a: [&[A]; N] = std::array::from_fn(|i| &acts[(t + i) * per_tok..(t + i + 1) * per_tok]);
    let scales = if scales.is_empty() {
        scales
    } else {
        &scales[2 * per_tok * t..2 * per_tok * (t + N)]
    };
    for r in rows {
        let v = kernel(&w.data[r * w.row_bytes..(r + 1) * w.row_bytes], a, scales);
        for (i, v) in v.into_iter().enumerate() {
            out.set(t + i, r, v);
        }
    }
    N
}
