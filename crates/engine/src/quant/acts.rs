//! Activation quantization: each activation row is converted once into the partner
//! format of the weight type and then reused against every weight row. The blocks
//! themselves are in [`super::act_blocks`].

use std::mem::MaybeUninit;

use super::act_blocks::{Q8Block, Q8KBlock, Quantizers};
use super::error::QuantError;
use super::kernels::{tile_width, Backend};
use super::layout::{QK, QK_K};
use crate::ggml_type::GgmlType;
use crate::pool::SyncPtr;

/// Which partner format a [`QuantizedActs`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActFormat {
    /// Plain f32 (for F32, F16 and BF16 weights).
    F32,
    /// [`Q8Block`]s (for the formats in blocks of 32).
    Q8,
    /// [`Q8KBlock`]s (for the K-quants and IQ4_XS).
    Q8K,
}

impl ActFormat {
    /// The activation format llamay pairs with weights of type `ty`.
    pub fn for_weights(ty: GgmlType) -> Result<ActFormat, QuantError> {
        use GgmlType::*;
        match ty {
            F32 | F16 | BF16 => Ok(ActFormat::F32),
            Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | IQ4_NL | MXFP4 => Ok(ActFormat::Q8),
            Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | IQ4_XS => Ok(ActFormat::Q8K),
            _ => Err(QuantError::UnsupportedType(ty)),
        }
    }

    /// Elements per unit of this format.
    pub fn block_elems(self) -> usize {
        match self {
            ActFormat::F32 => 1,
            ActFormat::Q8 => QK,
            ActFormat::Q8K => QK_K,
        }
    }
}

/// Activations for `n_tokens` rows of `cols` values, quantized for one weight format.
/// An owned buffer: keep one around and refill it with [`quantize_acts`] so that its
/// storage is reused.
#[derive(Clone, Debug, Default)]
pub struct QuantizedActs {
    pub(crate) format: Option<ActFormat>,
    pub(crate) n_tokens: usize,
    pub(crate) cols: usize,
    pub(crate) f32s: Vec<f32>,
    pub(crate) q8: Vec<Q8Block>,
    pub(crate) q8k: Vec<Q8KBlock>,
    pub(crate) tile_scales: Vec<f32>,
}

impl QuantizedActs {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The format currently held (`None` before the first fill).
    pub fn format(&self) -> Option<ActFormat> {
        self.format
    }

    /// Rows (tokens) held.
    pub fn n_tokens(&self) -> usize {
        self.n_tokens
    }

    /// Values per row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The Q8 blocks (all rows, row after row) when the format is [`ActFormat::Q8`].
    pub fn q8_blocks(&self) -> &[Q8Block] {
        &self.q8
    }

    /// The Q8_K blocks when the format is [`ActFormat::Q8K`].
    pub fn q8k_blocks(&self) -> &[Q8KBlock] {
        &self.q8k
    }

    /// The f32 values when the format is [`ActFormat::F32`].
    pub fn f32_values(&self) -> &[f32] {
        &self.f32s
    }

    /// The `d` and `s` of every block of 32 (a Q8_K super-block counts as 8, each with
    /// its super-block's `d` and `d` times its quants' sum; empty for f32), regrouped by
    /// the tiles matmuls sweep the tokens in (8, then 4, 2, 1): for the tile of `N`
    /// tokens starting at token `t`, block `i` of its tokens has its `d`s at
    /// `2·per_tok·t + 2N·i + k` and its `s`s `N` further (`per_tok` blocks per token).
    /// A kernel then finds a tile's scales for one block in one load, not `N`.
    pub fn tile_scales(&self) -> &[f32] {
        &self.tile_scales
    }
}

/// Writes `(d, s)` entries into a table laid out as [`QuantizedActs::tile_scales`],
/// from any thread: entries are disjoint, one per (token, block of 32).
struct ScaleTable {
    ptr: SyncPtr<f32>,
    len: usize,
    n_tokens: usize,
    /// Blocks of 32 per token.
    per_tok: usize,
}

impl ScaleTable {
    /// Sizes `v` for `n_tokens` tokens of `per_tok` blocks of 32.
    fn new(v: &mut Vec<f32>, n_tokens: usize, per_tok: usize) -> ScaleTable {
        v.clear();
        v.resize(2 * n_tokens * per_tok, 0.0);
        ScaleTable {
            ptr: SyncPtr::new(v),
            len: v.len(),
            n_tokens,
            per_tok,
        }
    }

    /// The first token and the width of the tile token `t` is swept in (the plan of
    /// [`tile_width`]: the widest tiles from the start, then narrower ones).
    fn tile_of(&self, t: usize) -> (usize, usize) {
        assert!(t < self.n_tokens);
        let widest = tile_width(usize::MAX);
        let full = self.n_tokens / widest * widest;
        if t < full {
            return (t - t % widest, widest);
        }
        let mut t0 = full;
        loop {
            let n = tile_width(self.n_tokens - t0);
            if t < t0 + n {
                return (t0, n);
            }
            t0 += n;
        }
    }

    /// The entry of Q8 block `g` (counting all tokens' blocks in order).
    fn record_q8(&self, g: usize, b: &Q8Block) {
        self.set(g / self.per_tok, g % self.per_tok, (b.d, b.s));
    }

    /// The 8 entries of Q8_K super-block `g`: per block of 32, the super-block's `d`,
    /// and `d` times the block's two `bsums`.
    fn record_q8k(&self, g: usize, b: &Q8KBlock) {
        let per_sb = self.per_tok / 8;
        let (t, sb) = (g / per_sb, g % per_sb);
        for j in 0..8 {
            let sum = b.bsums[2 * j] as i32 + b.bsums[2 * j + 1] as i32;
            self.set(t, 8 * sb + j, (b.d, b.d * sum as f32));
        }
    }

    /// Sets the entry of token `t`, block `i`.
    fn set(&self, t: usize, i: usize, (d, s): (f32, f32)) {
        let (t0, n) = self.tile_of(t);
        let at = 2 * self.per_tok * t0 + 2 * n * i + (t - t0);
        assert!(i < self.per_tok && at + n < self.len);
        // SAFETY: in bounds (checked), and each (token, block) has its own two cells,
        // written by the one run that quantized that block.
        unsafe {
            *self.ptr.0.add(at) = d;
            *self.ptr.0.add(at + n) = s;
        }
    }
}

/// Quantizes `x` (`n_tokens` rows of `cols` values, row-major) into `out`, in the
/// format that weights of type `weights_ty` pair with. `cols` must be a whole number of
/// that format's blocks (it is when it is a whole number of the weights' blocks).
/// Uses [`Backend::active`]'s quantizers (every backend gives the same bits).
pub fn quantize_acts(
    weights_ty: GgmlType,
    x: &[f32],
    n_tokens: usize,
    cols: usize,
    out: &mut QuantizedActs,
) -> Result<(), QuantError> {
    Backend::active().quantize_acts(weights_ty, x, n_tokens, cols, out, &serial)
}

/// [`quantize_acts`] for the partner format `format` rather than a weight type's (see
/// [`QMatrix::act_format`](super::QMatrix::act_format)).
pub fn quantize_acts_as(
    format: ActFormat,
    x: &[f32],
    n_tokens: usize,
    cols: usize,
    out: &mut QuantizedActs,
) -> Result<(), QuantError> {
    let ty = match format {
        ActFormat::F32 => GgmlType::F32,
        ActFormat::Q8 => GgmlType::Q8_0,
        ActFormat::Q8K => GgmlType::Q4_K,
    };
    quantize_acts(ty, x, n_tokens, cols, out)
}

impl Backend {
    /// [`quantize_acts`] with this backend's quantizers, large inputs spread by `par`
    /// ([`serial`] keeps everything on the calling thread).
    pub fn quantize_acts(
        &self,
        weights_ty: GgmlType,
        x: &[f32],
        n_tokens: usize,
        cols: usize,
        out: &mut QuantizedActs,
        par: ParallelFor,
    ) -> Result<(), QuantError> {
        fill(
            self.table.quantize,
            weights_ty,
            (Input::Values(x), n_tokens, cols),
            out,
            par,
        )
    }

    /// [`Backend::quantize_acts`] of values that `source` computes block by block as
    /// they are quantized (a norm, a gated activation): the work is spread with the
    /// quantization, on the same threads, and the values never make a round trip
    /// through a buffer of their own.
    pub fn quantize_computed(
        &self,
        weights_ty: GgmlType,
        source: ActSource,
        n_tokens: usize,
        cols: usize,
        out: &mut QuantizedActs,
        par: ParallelFor,
    ) -> Result<(), QuantError> {
        let (_, total) = checked_shape(weights_ty, n_tokens, cols)?;
        fill(
            self.table.quantize,
            weights_ty,
            (Input::Computed(total, source), n_tokens, cols),
            out,
            par,
        )
    }
}

/// Activations to quantize: values in memory, or computed on the way in.
#[derive(Clone, Copy)]
enum Input<'a> {
    Values(&'a [f32]),
    /// `(total values, source)`, see [`ActSource`].
    Computed(usize, ActSource<'a>),
}

impl Input<'_> {
    fn len(&self) -> usize {
        match self {
            Input::Values(x) => x.len(),
            Input::Computed(n, _) => *n,
        }
    }
}

/// The partner format of `weights_ty` and the number of values of `n_tokens` rows of
/// `cols`, if `cols` is a whole number of that format's blocks.
fn checked_shape(
    weights_ty: GgmlType,
    n_tokens: usize,
    cols: usize,
) -> Result<(ActFormat, usize), QuantError> {
    let format = ActFormat::for_weights(weights_ty)?;
    let block = format.block_elems();
    if !cols.is_multiple_of(block) {
        return Err(QuantError::NotBlockAligned {
            ty: weights_ty,
            cols,
            block,
        });
    }
    let total = n_tokens
        .checked_mul(cols)
        .ok_or(QuantError::ShapeOverflow {
            rows: n_tokens,
            cols,
        })?;
    Ok((format, total))
}

/// Quantizes `x` (`n_tokens` rows of `cols` values) into `out`.
fn fill(
    quantize: &Quantizers,
    weights_ty: GgmlType,
    (x, n_tokens, cols): (Input, usize, usize),
    out: &mut QuantizedActs,
    par: ParallelFor,
) -> Result<(), QuantError> {
    let (format, total) = checked_shape(weights_ty, n_tokens, cols)?;
    if x.len() != total {
        return Err(QuantError::LengthMismatch {
            what: "activations",
            expected: total,
            got: x.len(),
        });
    }
    out.format = Some(format);
    out.n_tokens = n_tokens;
    out.cols = cols;
    match format {
        ActFormat::F32 => {
            out.f32s.clear();
            match x {
                Input::Values(x) => out.f32s.extend_from_slice(x),
                Input::Computed(n, source) => {
                    out.f32s.resize(n, 0.0);
                    source(0, &mut out.f32s);
                }
            }
        }
        ActFormat::Q8 => {
            let table = ScaleTable::new(&mut out.tile_scales, n_tokens, cols / QK);
            let each = |g: usize, b: &Q8Block| table.record_q8(g, b);
            fill_vec(x, QK, &mut out.q8, quantize.q8, par, &each);
        }
        ActFormat::Q8K => {
            let table = ScaleTable::new(&mut out.tile_scales, n_tokens, cols / QK);
            let each = |g: usize, b: &Q8KBlock| table.record_q8k(g, b);
            fill_vec(x, QK_K, &mut out.q8k, quantize.q8k, par, &each);
        }
    }
    Ok(())
}

/// Fills a [`QuantizedActs`] a region at a time, from several threads at once: for
/// producers that compute different columns of every row (the gated activation, in
/// the tasks that computed its gate and up columns, so those values never leave the
/// thread's cache). Made by [`Backend::acts_writer`]; [`ActsWriter::finish`] checks
/// that every block was written.
///
/// Crate-private: [`ActsWriter::put`] trusts its callers to give concurrent calls
/// disjoint regions, and overlapping ones would race, so only the engine's own code
/// (the gated activation and the attention output) may hold one.
pub(crate) struct ActsWriter<'a> {
    out: *mut QuantizedActs,
    format: ActFormat,
    n_tokens: usize,
    cols: usize,
    q8: SyncPtr<MaybeUninit<Q8Block>>,
    q8k: SyncPtr<MaybeUninit<Q8KBlock>>,
    f32s: SyncPtr<f32>,
    table: ScaleTable,
    quantize: &'static Quantizers,
    /// Values written so far (whole blocks).
    written: std::sync::atomic::AtomicUsize,
    _out: std::marker::PhantomData<&'a mut QuantizedActs>,
}

// SAFETY: `put` writes through the pointers only the cells of its own region, and
// callers give concurrent calls disjoint regions (checked to lie inside the buffers).
unsafe impl Sync for ActsWriter<'_> {}

impl Backend {
    /// A writer that fills `out` with `n_tokens` rows of `cols` values quantized for
    /// weights of type `weights_ty`, with this backend's quantizers.
    pub(crate) fn acts_writer<'a>(
        &self,
        weights_ty: GgmlType,
        n_tokens: usize,
        cols: usize,
        out: &'a mut QuantizedActs,
    ) -> Result<ActsWriter<'a>, QuantError> {
        let (format, total) = checked_shape(weights_ty, n_tokens, cols)?;
        out.format = Some(format);
        out.n_tokens = n_tokens;
        out.cols = cols;
        out.f32s.clear();
        out.q8.clear();
        out.q8k.clear();
        let (n8, n8k, nf) = match format {
            ActFormat::F32 => (0, 0, total),
            ActFormat::Q8 => (total / QK, 0, 0),
            ActFormat::Q8K => (0, total / QK_K, 0),
        };
        out.q8.reserve(n8);
        out.q8k.reserve(n8k);
        out.f32s.resize(nf, 0.0);
        let per_tok = if format == ActFormat::F32 {
            0
        } else {
            cols / QK
        };
        let table = ScaleTable::new(&mut out.tile_scales, n_tokens, per_tok);
        Ok(ActsWriter {
            q8: SyncPtr::new(&mut out.q8.spare_capacity_mut()[..n8]),
            q8k: SyncPtr::new(&mut out.q8k.spare_capacity_mut()[..n8k]),
            f32s: SyncPtr::new(&mut out.f32s),
            out,
            format,
            n_tokens,
            cols,
            table,
            quantize: self.table.quantize,
            written: std::sync::atomic::AtomicUsize::new(0),
            _out: std::marker::PhantomData,
        })
    }
}

impl ActsWriter<'_> {
    /// Writes `values`, columns `col0..col0 + values.len()` of row `t`, both ends on
    /// block boundaries. Regions of concurrent calls must not overlap, and each
    /// region must be written once.
    pub(crate) fn put(&self, t: usize, col0: usize, values: &[f32]) {
        let block = self.format.block_elems();
        let len = values.len();
        assert!(
            t < self.n_tokens
                && col0.is_multiple_of(block)
                && len.is_multiple_of(block)
                && col0 + len <= self.cols,
            "region inside the activations, on block boundaries"
        );
        let first = (t * self.cols + col0) / block;
        let n = len / block;
        // SAFETY (all arms): the region lies inside the buffer (checked above), and
        // callers give concurrent calls disjoint regions.
        match self.format {
            ActFormat::F32 => unsafe { self.f32s.slice(first, len) }.copy_from_slice(values),
            ActFormat::Q8 => {
                let slots = unsafe { self.q8.slice(first, n) };
                (self.quantize.q8)(values, slots);
                for (k, b) in slots.iter().enumerate() {
                    // SAFETY: the quantizer wrote every slot.
                    self.table
                        .record_q8(first + k, unsafe { b.assume_init_ref() });
                }
            }
            ActFormat::Q8K => {
                let slots = unsafe { self.q8k.slice(first, n) };
                (self.quantize.q8k)(values, slots);
                for (k, b) in slots.iter().enumerate() {
                    // SAFETY: as above.
                    self.table
                        .record_q8k(first + k, unsafe { b.assume_init_ref() });
                }
            }
        }
        self.written
            .fetch_add(len, std::sync::atomic::Ordering::Relaxed);
    }

    /// Marks the activations complete. Panics unless every value was written once
    /// (regions are whole blocks, so a count of values is a count of blocks).
    pub(crate) fn finish(self) {
        let written = self.written.load(std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the writer holds the only borrow of `out`.
        let out = unsafe { &mut *self.out };
        let total = out.n_tokens * out.cols;
        assert_eq!(written, total, "every activation written once");
        match self.format {
            ActFormat::F32 => {}
            // SAFETY: every slot was written (the counts cover all of them, and regions
            // do not overlap).
            ActFormat::Q8 => unsafe { out.q8.set_len(total / QK) },
            ActFormat::Q8K => unsafe { out.q8k.set_len(total / QK_K) },
        }
    }
}

/// Runs `f(i)` for every `i < n`, in any order, possibly on several threads at once
/// (a thread pool's `run`).
pub type ParallelFor<'a> = &'a dyn Fn(usize, &(dyn Fn(usize) + Sync));

/// Computes activations on demand: `source(start, dst)` writes values
/// `start..start + dst.len()` of the activations (rows laid end to end) into `dst`.
/// Calls may come from several threads at once, for disjoint ranges, in any order; a
/// range may begin or end inside a row.
pub type ActSource<'a> = &'a (dyn Fn(usize, &mut [f32]) + Sync);

/// A [`ParallelFor`] that runs every task on the calling thread, in order.
pub fn serial(n: usize, f: &(dyn Fn(usize) + Sync)) {
    (0..n).for_each(f)
}

/// Blocks fewer than this are quantized on the calling thread: handing them to others
/// would cost more than it saves (a decode step of one sequence has 18 to 48).
const PARALLEL_MIN_BLOCKS: usize = 64;
/// Most runs one quantization is cut into.
const MAX_RUNS: usize = 8;
/// Values an [`ActSource`] is asked for at a time (a whole number of every format's
/// blocks).
const COMPUTED_CHUNK: usize = 1024;

/// Replaces `v` with the blocks of `x` (`len` values each) by `quantize`, in runs that
/// `par` may spread over threads.
fn fill_vec<B: Send + Sync>(
    x: Input,
    len: usize,
    v: &mut Vec<B>,
    quantize: fn(&[f32], &mut [MaybeUninit<B>]),
    par: ParallelFor,
    each: &(dyn Fn(usize, &B) + Sync),
) {
    let n = x.len() / len;
    v.clear();
    v.reserve(n);
    let slots = &mut v.spare_capacity_mut()[..n];
    let runs = if n < PARALLEL_MIN_BLOCKS {
        1
    } else {
        (n / (PARALLEL_MIN_BLOCKS / 2)).clamp(2, MAX_RUNS)
    };
    let per = n.div_ceil(runs);
    let dst = SyncPtr::new(slots);
    let run = |r: usize| {
        let start = (r * per).min(n);
        let end = ((r + 1) * per).min(n);
        // SAFETY: runs cover disjoint slots of `slots`.
        let out = unsafe { dst.slice(start, end - start) };
        match x {
            Input::Values(x) => quantize(&x[start * len..end * len], out),
            Input::Computed(_, source) => {
                // Computed a few KB at a time, so they are quantized from L1.
                let mut buf = [0f32; COMPUTED_CHUNK];
                let per = COMPUTED_CHUNK / len;
                for (k, slots) in out.chunks_mut(per).enumerate() {
                    let at = (start + k * per) * len;
                    let vals = &mut buf[..slots.len() * len];
                    source(at, vals);
                    quantize(vals, slots);
                }
            }
        }
        for (k, b) in out.iter().enumerate() {
            // SAFETY: `quantize` wrote every slot of `out`.
            each(start + k, unsafe { b.assume_init_ref() });
        }
    };
    if runs == 1 {
        run(0);
    } else {
        par(runs, &run);
    }
    // SAFETY: every one of the first `n` slots was written above (a panicking task
    // would have unwound through `par` before this point).
    unsafe { v.set_len(n) };
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Every value and block field of `acts`, and its scale table, as bits.
    fn bits(acts: &QuantizedActs) -> Vec<u32> {
        let mut v: Vec<u32> = acts.f32s.iter().map(|x| x.to_bits()).collect();
        for b in &acts.q8 {
            v.extend([b.d.to_bits(), b.s.to_bits(), b.isum as u32]);
            v.extend(b.qs.iter().map(|&q| q as u8 as u32));
        }
        for b in &acts.q8k {
            v.push(b.d.to_bits());
            v.extend(b.qs.iter().map(|&q| q as u8 as u32));
            v.extend(b.bsums.iter().map(|&s| s as u16 as u32));
        }
        v.extend(acts.tile_scales.iter().map(|x| x.to_bits()));
        v
    }

    /// Mostly ordinary values, some rounding ties, any bit pattern (NaN, infinities,
    /// subnormals) and zeros.
    fn value() -> impl Strategy<Value = f32> {
        prop_oneof![
            6 => -1000.0f32..1000.0,
            2 => (-64i32..64).prop_map(|k| k as f32 + 0.5),
            1 => any::<u32>().prop_map(f32::from_bits),
            1 => Just(0.0f32),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Written a block-wide column of every row at a time, one thread per column and
        /// the last columns first (as the gated activation is), activations get the
        /// blocks and scale table that quantizing them whole gives, on every backend.
        #[test]
        fn a_writer_gives_the_bits_of_quantizing_whole(x in prop::collection::vec(value(), 512)) {
            // 2 rows of 256, and the values 8 times over as 16 rows.
            let big: Vec<f32> = x.iter().cycle().take(8 * x.len()).copied().collect();
            let cols = 256;
            for (ty, rows) in [GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q4_K]
                .into_iter()
                .flat_map(|ty| [(ty, 2), (ty, 16)])
            {
                let x = if rows == 2 { &x[..] } else { &big[..] };
                let mut want = QuantizedActs::new();
                Backend::portable()
                    .quantize_acts(ty, x, rows, cols, &mut want, &serial)
                    .unwrap();
                let block = if ty == GgmlType::Q4_K { QK_K } else { QK };
                for backend in Backend::available() {
                    let mut written = QuantizedActs::new();
                    let writer = backend.acts_writer(ty, rows, cols, &mut written).unwrap();
                    std::thread::scope(|s| {
                        for c0 in (0..cols).step_by(block).rev() {
                            let writer = &writer;
                            s.spawn(move || {
                                for t in 0..rows {
                                    writer.put(t, c0, &x[t * cols + c0..][..block]);
                                }
                            });
                        }
                    });
                    writer.finish();
                    prop_assert_eq!(bits(&written), bits(&want), "{:?} on {}", backend, ty);
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "every activation written once")]
    fn a_writer_with_a_region_left_unwritten_refuses_to_finish() {
        let mut acts = QuantizedActs::new();
        let writer = Backend::active()
            .acts_writer(GgmlType::Q8_0, 2, 64, &mut acts)
            .unwrap();
        writer.put(0, 0, &[1.0; 64]);
        writer.put(1, 32, &[1.0; 32]);
        writer.finish();
    }

    #[test]
    #[should_panic(expected = "block boundaries")]
    fn a_writer_refuses_a_region_off_block_boundaries() {
        let mut acts = QuantizedActs::new();
        let writer = Backend::active()
            .acts_writer(GgmlType::Q8_0, 1, 64, &mut acts)
            .unwrap();
        writer.put(0, 16, &[1.0; 32]);
    }
}
