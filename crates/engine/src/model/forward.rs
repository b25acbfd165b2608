//! One forward step over a batch of sequences.
//!
//! All tokens of all items are stacked into one activation matrix, so every weight
//! matrix is streamed once per step whatever the number of sequences (prompts become
//! matrix-matrix products). Only attention is per sequence, against its own cache.

use super::attention::{attend_batch, AttnArgs, AttnJob};
use super::heads::HeadPrep;
use super::hparams::Activation;
use super::linear::{gated_product, matmul_many, ActsCache, Product, Weight};
use super::ops::{
    gelu_tanh_gate, rms_norm, rms_norm_inplace, rms_scale, silu_gate, softcap, RopeTable,
};
use super::weights::{GateUp, Layer, Qkv};
use super::{BatchSplit, Model, ModelError};
use crate::batch::{BatchItem, ItemLogits, LogitsWanted};
use crate::kv_cache::KvType;
use crate::quant::{Backend, OutView, RowTable};

use std::sync::Mutex;

/// Most tokens one internal step processes (larger requests are chunked).
pub const MAX_STEP_TOKENS: usize = 512;

/// Scratch buffers of one step, sized for its total token count.
#[derive(Default)]
pub(super) struct Buffers {
    x: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    /// The fused QKV output (phi3).
    qkv: Vec<f32>,
    attn: Vec<f32>,
    proj: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    acts: ActsCache,
    /// Per batch item: cached keys and values copied out when they cannot be read in place.
    k_old: Vec<Vec<f32>>,
    v_old: Vec<Vec<f32>>,
    /// The output projection's row pointers (see `OutView::over_rows`).
    logit_rows: RowTable,
}

/// Sequences per thread from which a step runs as one step per thread (see
/// `Model::step_spread`): fewer would leave the threads' matmuls with tiles too
/// narrow to pay for streaming the weights once per thread.
const SPREAD_MIN_SEQS_PER_THREAD: usize = 2;
/// Most tokens of a step run as one step per thread: larger steps (prompts) are
/// matrix products that split well by rows.
const SPREAD_MAX_TOKENS: usize = 64;

/// The largest step whose scratch buffers are kept for the next step: decode batches
/// and short prompts.
const KEPT_STEP_TOKENS: usize = 64;

/// Most returned logits buffers kept for reuse: a batch's worth. Each holds a whole
/// vocabulary (1 MiB for Gemma 3's), so more would be resident memory for nothing.
const SPARE_LOGITS: usize = 16;

/// Buffers left by earlier steps, one per step that ran at the same time, and logits
/// buffers handed back by callers ([`Model::recycle_logits`]). Fresh buffers of this
/// size come from the OS as zeroed pages; reusing them saves a page fault every 4 KB
/// (about 2,000 per step for 8 sequences of a 262,144-token vocabulary).
#[derive(Default)]
pub(super) struct Scratch {
    buffers: Mutex<Vec<Buffers>>,
    spare_logits: Mutex<Vec<Vec<f32>>>,
}

impl Scratch {
    fn take(&self) -> Buffers {
        self.buffers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default()
    }

    /// Keeps `b` for the next step, unless it was sized for a step of more than
    /// [`KEPT_STEP_TOKENS`] tokens (`tokens`): a long prompt's buffers (tens of MB)
    /// would otherwise stay resident through all the decoding that follows. The next
    /// long prompt faults its pages in again, a few ms against hundreds of compute.
    fn give_back(&self, b: Buffers, tokens: usize) {
        if tokens > KEPT_STEP_TOKENS {
            return;
        }
        self.buffers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(b);
    }

    /// A logits vector of `len` values, recycled when one is spare (its values are
    /// stale: the output projection overwrites them all).
    fn logits_buffer(&self, len: usize) -> Vec<f32> {
        if len == 0 {
            return Vec::new();
        }
        let spare = self
            .spare_logits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        let mut v = spare.unwrap_or_default();
        v.resize(len, 0.0);
        v
    }

    fn recycle(&self, logits: impl IntoIterator<Item = ItemLogits>) {
        let mut spare = self.spare_logits.lock().unwrap_or_else(|e| e.into_inner());
        for l in logits {
            if spare.len() < SPARE_LOGITS && l.data.capacity() > 0 {
                spare.push(l.data);
            }
        }
    }
}

/// Where one batch item's rows sit in the stacked matrices.
struct Span {
    row0: usize,
    n: usize,
    start_pos: usize,
}

impl Model {
    /// Runs one step: appends each item's tokens to its sequence and returns, per item,
    /// the logits its [`LogitsWanted`] asked for. Inputs are checked first (token ids,
    /// context room, sequence ownership): on such an error no sequence is changed.
    ///
    /// Steps of more than [`MAX_STEP_TOKENS`] tokens are split, item by item, into
    /// chunks of at most that many, bounding the scratch memory of one step.
    pub fn forward(&self, batch: &mut [BatchItem]) -> Result<Vec<ItemLogits>, ModelError> {
        self.validate(batch)?;
        let total: usize = batch.iter().map(|i| i.tokens.len()).sum();
        if total <= MAX_STEP_TOKENS {
            return self.step_spread(batch, total);
        }
        let mut out = Vec::with_capacity(batch.len());
        for item in batch.iter_mut() {
            let mut data = Vec::new();
            let chunks: Vec<&[u32]> = item.tokens.chunks(MAX_STEP_TOKENS).collect();
            for (i, chunk) in chunks.iter().enumerate() {
                let want = match item.want_logits {
                    LogitsWanted::Last if i + 1 < chunks.len() => LogitsWanted::None,
                    w => w,
                };
                let mut r = self.step(&mut [BatchItem {
                    seq: item.seq,
                    tokens: chunk,
                    want_logits: want,
                }])?;
                data.append(&mut r[0].data);
            }
            out.push(ItemLogits {
                n_vocab: self.hp.n_vocab,
                data,
            });
        }
        Ok(out)
    }

    /// Hands logits returned by [`Model::forward`] back for reuse once read: decode
    /// loops that do so skip the page faults of a fresh buffer every step. Optional.
    pub fn recycle_logits(&self, logits: impl IntoIterator<Item = ItemLogits>) {
        self.scratch.recycle(logits);
    }

    fn validate(&self, batch: &[BatchItem]) -> Result<(), ModelError> {
        let hp = &self.hp;
        for item in batch {
            if item.seq.model_id != self.id {
                return Err(ModelError::ForeignSequence);
            }
            if let Some(&token) = item.tokens.iter().find(|&&t| t as usize >= hp.n_vocab) {
                return Err(ModelError::BadToken {
                    token,
                    n_vocab: hp.n_vocab,
                });
            }
            let needed = item.seq.n_past + item.tokens.len();
            if needed > item.seq.n_ctx {
                return Err(ModelError::ContextFull {
                    needed,
                    n_ctx: item.seq.n_ctx,
                });
            }
        }
        Ok(())
    }

    /// One step over validated inputs (`total` tokens). A step of enough sequences
    /// of few tokens may instead run as one step per thread, each over its own
    /// sequences, whichever is measured faster (see `model::split`): every thread
    /// then streams all the weights, but no activation passes between threads and
    /// none waits for another before the end. On the 2-core VM, SmolLM2's 8
    /// sequences gained about 25% when its cores share no cache; Gemma 3's lost 20%.
    fn step_spread(
        &self,
        batch: &mut [BatchItem],
        total: usize,
    ) -> Result<Vec<ItemLogits>, ModelError> {
        let n = self.pool.n_threads();
        let busy = batch.iter().filter(|i| !i.tokens.is_empty()).count();
        if n < 2 || busy < SPREAD_MIN_SEQS_PER_THREAD * n || total > SPREAD_MAX_TOKENS {
            return self.step(batch);
        }
        let how = self.split.choose(busy);
        let start = std::time::Instant::now();
        let out = match how {
            BatchSplit::Sequences => self.step_per_thread(batch, total),
            _ => self.step(batch),
        };
        self.split.record(busy, how, start.elapsed(), total);
        out
    }

    /// [`Model::step`] as one step per thread, over contiguous groups of the batch.
    fn step_per_thread(
        &self,
        batch: &mut [BatchItem],
        total: usize,
    ) -> Result<Vec<ItemLogits>, ModelError> {
        let n = self.pool.n_threads();
        // Contiguous groups of about equal token counts, so results keep their order.
        let mut groups = Vec::with_capacity(n);
        let mut rest = batch;
        let mut done = 0;
        for g in 1..n {
            let target = total * g / n;
            let mut cut = 0;
            let mut sum = done;
            while cut < rest.len() && sum + rest[cut].tokens.len() <= target {
                sum += rest[cut].tokens.len();
                cut += 1;
            }
            let (group, tail) = rest.split_at_mut(cut);
            groups.push(Mutex::new((group, None)));
            rest = tail;
            done = sum;
        }
        groups.push(Mutex::new((rest, None)));
        self.pool.run(groups.len(), &|g| {
            let mut group = groups[g].lock().unwrap_or_else(|e| e.into_inner());
            let (items, result) = &mut *group;
            *result = Some(self.step(items));
        });
        let mut out = Vec::new();
        for group in groups {
            let (_, result) = group.into_inner().unwrap_or_else(|e| e.into_inner());
            out.extend(result.expect("every group ran")?);
        }
        Ok(out)
    }

    /// One step over validated inputs.
    fn step(&self, batch: &mut [BatchItem]) -> Result<Vec<ItemLogits>, ModelError> {
        let hp = &self.hp;
        let mut spans = Vec::with_capacity(batch.len());
        let mut total = 0usize;
        for item in batch.iter() {
            spans.push(Span {
                row0: total,
                n: item.tokens.len(),
                start_pos: item.seq.n_past,
            });
            total += item.tokens.len();
        }
        if total == 0 {
            return Ok(batch
                .iter()
                .map(|_| ItemLogits {
                    n_vocab: hp.n_vocab,
                    data: Vec::new(),
                })
                .collect());
        }

        let mut b = self.buffers(total);
        self.embed(batch, &mut b.x)?;
        let positions: Vec<usize> = spans
            .iter()
            .flat_map(|s| s.start_pos..s.start_pos + s.n)
            .collect();
        let rope = RopeTable::new(
            positions.iter().copied(),
            hp.rope_dims,
            hp.rope_base,
            hp.rope_freq_scale,
        );
        let rope_swa = RopeTable::new(
            positions.iter().copied(),
            hp.rope_dims,
            hp.rope_base_swa,
            hp.rope_freq_scale_swa,
        );
        for (il, layer) in self.weights.layers.iter().enumerate() {
            let swa = hp.swa_layers[il];
            let rope = if swa { &rope_swa } else { &rope };
            self.attention_block(il, layer, rope, batch, &spans, &mut b)?;
            self.ffn_block(layer, total, &mut b)?;
        }
        for (item, span) in batch.iter_mut().zip(&spans) {
            item.seq.n_past += span.n;
        }
        let out = self.logits(batch, &spans, &mut b);
        self.scratch.give_back(b, total);
        out
    }

    /// Scratch buffers for a step of `t` tokens: the ones a previous step left, grown
    /// if needed, so steady decoding allocates nothing here.
    fn buffers(&self, t: usize) -> Buffers {
        let hp = &self.hp;
        let fused = matches!(
            self.weights.layers.first().map(|l| &l.qkv),
            Some(Qkv::Fused(_))
        );
        let mut b = self.scratch.take();
        b.acts.invalidate();
        b.x.resize(t * hp.n_embd, 0.0);
        b.q.resize(t * hp.q_width(), 0.0);
        b.k.resize(t * hp.k_width(), 0.0);
        b.v.resize(t * hp.v_width(), 0.0);
        let qkv = if fused {
            t * (hp.q_width() + hp.k_width() + hp.v_width())
        } else {
            0
        };
        b.qkv.resize(qkv, 0.0);
        b.attn.resize(t * hp.n_head * hp.head_dim_v, 0.0);
        b.proj.resize(t * hp.n_embd, 0.0);
        b.gate.resize(t * hp.n_ff * 2, 0.0);
        b.up.resize(t * hp.n_ff, 0.0);
        b
    }

    fn embed(&self, batch: &[BatchItem], x: &mut [f32]) -> Result<(), ModelError> {
        let e = self.hp.n_embd;
        let tokens = batch.iter().flat_map(|i| i.tokens.iter());
        for (row, &tok) in x.chunks_exact_mut(e).zip(tokens) {
            self.weights
                .token_embd
                .row_f32(&self.file, tok as usize, row)?;
            if let Some(s) = self.hp.embed_scale {
                row.iter_mut().for_each(|v| *v *= s);
            }
        }
        Ok(())
    }

    fn attention_block(
        &self,
        il: usize,
        layer: &Layer,
        rope: &RopeTable,
        batch: &mut [BatchItem],
        spans: &[Span],
        b: &mut Buffers,
    ) -> Result<(), ModelError> {
        let hp = &self.hp;
        let (e, total) = (hp.n_embd, b.x.len() / hp.n_embd);
        let (qw, kw, vw) = (hp.q_width(), hp.k_width(), hp.v_width());
        let (hk, hv) = (hp.head_dim_k, hp.head_dim_v);
        let round16: Vec<bool> = batch
            .iter()
            .zip(spans)
            .flat_map(|(item, s)| std::iter::repeat_n(item.seq.kv.kv_type() == KvType::F16, s.n))
            .collect();
        let heads = HeadPrep {
            hp,
            layer,
            rope,
            round16: &round16,
        };
        let x = &b.x;
        let normed = |start: usize, dst: &mut [f32]| {
            norm_range(x, &layer.attn_norm, hp.rms_eps, e, start, dst)
        };
        b.acts.invalidate();
        match &layer.qkv {
            Qkv::Separate { q, k, v } => {
                for w in [q, k, v] {
                    b.acts.prepare_computed(&self.pool, w, &normed, total)?;
                }
                // Heads are finished by the threads that computed them.
                let queries = |t, c0, q: &mut [f32]| heads.queries(t, c0, q);
                let keys = |t, c0, k: &mut [f32]| heads.keys(t, c0, k);
                let values = |t, c0, v: &mut [f32]| heads.values(t, c0, v);
                let products = vec![
                    Product::new(q, &mut b.q).then(hk, &queries),
                    Product::new(k, &mut b.k).then(hk, &keys),
                    Product::new(v, &mut b.v).then(hv, &values),
                ];
                matmul_many(&self.pool, &self.file, &b.acts, products)?;
            }
            Qkv::Fused(w) => {
                b.acts.prepare_computed(&self.pool, w, &normed, total)?;
                let out = &mut b.qkv;
                let product = Product::new(w, out);
                matmul_many(&self.pool, &self.file, &b.acts, vec![product])?;
                let row = qw + kw + vw;
                for t in 0..total {
                    let r = &b.qkv[t * row..(t + 1) * row];
                    let q = &mut b.q[t * qw..(t + 1) * qw];
                    q.copy_from_slice(&r[..qw]);
                    heads.queries(t, 0, q);
                    let k = &mut b.k[t * kw..(t + 1) * kw];
                    k.copy_from_slice(&r[qw..qw + kw]);
                    heads.keys(t, 0, k);
                    let v = &mut b.v[t * vw..(t + 1) * vw];
                    v.copy_from_slice(&r[qw + kw..]);
                    heads.values(t, 0, v);
                }
            }
        }
        let window = if hp.swa_layers[il] {
            hp.sliding_window
        } else {
            None
        };
        let ow = hp.n_head * hv;
        if b.k_old.len() < batch.len() {
            b.k_old.resize_with(batch.len(), Vec::new);
            b.v_old.resize_with(batch.len(), Vec::new);
        }
        // Each attention task stores its KV head's new keys and values, unless a
        // sliding layer's ring would reuse slots the step still reads.
        let mut writers = Vec::with_capacity(batch.len());
        let mut jobs = Vec::with_capacity(batch.len());
        for (((item, s), k_buf), v_buf) in batch
            .iter_mut()
            .zip(spans)
            .zip(b.k_old.iter_mut())
            .zip(b.v_old.iter_mut())
        {
            if s.n == 0 {
                continue;
            }
            let positions = s.start_pos..s.start_pos + s.n;
            let in_task = window.is_none() || s.n == 1;
            writers.push(in_task.then(|| item.seq.kv.writer(il, positions)));
            // Cached positions this item's queries can still see.
            let old_start = match window {
                Some(w) => s.start_pos.saturating_sub(w - 1),
                None => 0,
            };
            let (k_old, v_old) = item
                .seq
                .kv
                .history(il, old_start..s.start_pos, k_buf, v_buf);
            let rows = s.row0..s.row0 + s.n;
            jobs.push(AttnJob {
                row0: rows.start,
                args: AttnArgs {
                    q: &b.q[rows.start * qw..rows.end * qw],
                    k_new: &b.k[rows.start * kw..rows.end * kw],
                    v_new: &b.v[rows.start * vw..rows.end * vw],
                    k_old,
                    v_old,
                    old_start,
                    start: s.start_pos,
                    n: rows.len(),
                    n_head: hp.n_head,
                    n_head_kv: hp.n_head_kv,
                    head_dim_k: hk,
                    head_dim_v: hv,
                    window,
                    softcap: hp.attn_softcap,
                    f16_probs: round16[rows.start],
                },
            });
        }
        let wo = &layer.attn_out;
        let group_cols = hp.n_head / hp.n_head_kv * hv;
        let store = |j: usize, kvh: usize, t: usize| {
            if let Some(w) = &writers[j] {
                let job = &jobs[j];
                let (k, v) = (job.args.k_new, job.args.v_new);
                let k = (kvh * hk, &k[t * kw + kvh * hk..][..hk]);
                let v = (kvh * hv, &v[t * vw + kvh * hv..][..hv]);
                // SAFETY: the cache is as `writer` left it (nothing resizes it during
                // the step), and each task writes its own KV head of its own tokens.
                unsafe { w.write(job.args.start + t, k, v) };
            }
        };
        // The output projection's input is quantized by the tasks too, when each
        // task's columns are whole blocks of it.
        let attn = &mut b.attn[..total * ow];
        let quantized = b.acts.produce(wo, |_, out| {
            if !group_cols.is_multiple_of(wo.act_format().block_elems()) {
                return Ok(false);
            }
            let writer = Backend::active().acts_writer(wo.ggml_type(), total, ow, out)?;
            let then = |j: usize, kvh: usize, t: usize, out: &[f32]| {
                store(j, kvh, t);
                writer.put(jobs[j].row0 + t, kvh * group_cols, out);
            };
            attend_batch(&self.pool, &jobs, attn, Some(&then));
            writer.finish();
            Ok(true)
        })?;
        if !quantized {
            let then = |j: usize, kvh: usize, t: usize, _: &[f32]| store(j, kvh, t);
            attend_batch(&self.pool, &jobs, &mut b.attn[..total * ow], Some(&then));
        }
        drop(jobs);
        let written_in_tasks = batch
            .iter_mut()
            .zip(spans)
            .filter(|(_, s)| s.n > 0)
            .zip(&writers);
        for ((item, s), w) in written_in_tasks {
            if w.is_some() {
                continue;
            }
            for t in 0..s.n {
                let r = s.row0 + t;
                item.seq.kv.write(
                    il,
                    s.start_pos + t,
                    &b.k[r * kw..(r + 1) * kw],
                    &b.v[r * vw..(r + 1) * vw],
                );
            }
        }
        if !quantized {
            b.acts.invalidate();
            b.acts.prepare(&self.pool, wo, &b.attn, total)?;
        }
        self.add_projection(wo, layer.post_attn_norm.as_deref(), b)
    }

    /// `x += w·acts`, the product normed first when the architecture norms it
    /// (Gemma's post-norms); otherwise the product is added as it is computed.
    fn add_projection(
        &self,
        w: &Weight,
        post_norm: Option<&[f32]>,
        b: &mut Buffers,
    ) -> Result<(), ModelError> {
        let Some(norm) = post_norm else {
            let product = Product::adding(w, &mut b.x);
            return matmul_many(&self.pool, &self.file, &b.acts, vec![product]);
        };
        let out = &mut b.proj;
        let product = Product::new(w, out);
        matmul_many(&self.pool, &self.file, &b.acts, vec![product])?;
        for (x, p) in
            b.x.chunks_exact_mut(self.hp.n_embd)
                .zip(b.proj.chunks_exact_mut(self.hp.n_embd))
        {
            rms_norm_inplace(p, norm, self.hp.rms_eps);
            x.iter_mut().zip(&*p).for_each(|(x, p)| *x += p);
        }
        Ok(())
    }

    fn ffn_block(&self, layer: &Layer, total: usize, b: &mut Buffers) -> Result<(), ModelError> {
        let hp = &self.hp;
        let (e, ff) = (hp.n_embd, hp.n_ff);
        let act = match hp.activation {
            Activation::Silu => silu_gate,
            Activation::GeluTanh => gelu_tanh_gate,
        };
        let x = &b.x;
        let normed = |start: usize, dst: &mut [f32]| {
            norm_range(x, &layer.ffn_norm, hp.rms_eps, e, start, dst)
        };
        b.acts.invalidate();
        let gated_done = match &layer.gate_up {
            GateUp::Separate { gate: wg, up: wu } => {
                b.acts.prepare_computed(&self.pool, wg, &normed, total)?;
                b.acts.prepare_computed(&self.pool, wu, &normed, total)?;
                let (g, u) = (&mut b.gate[..total * ff], &mut b.up[..total * ff]);
                let done = b.acts.produce(&layer.down, |acts, out| {
                    let weights = (wg, wu, &layer.down);
                    gated_product(&self.pool, &self.file, acts, weights, act, (g, u), out)
                })?;
                if !done {
                    let products = vec![
                        Product::new(wg, &mut b.gate[..total * ff]),
                        Product::new(wu, &mut b.up[..total * ff]),
                    ];
                    matmul_many(&self.pool, &self.file, &b.acts, products)?;
                }
                done
            }
            GateUp::Fused(w) => {
                b.acts.prepare_computed(&self.pool, w, &normed, total)?;
                let both = &mut b.gate[..total * 2 * ff];
                let product = Product::new(w, both);
                matmul_many(&self.pool, &self.file, &b.acts, vec![product])?;
                // Each output row is [gate | up]; split it into the two buffers. In
                // ascending order, row t's gate moves down onto space no later row uses.
                let both = &mut b.gate[..total * 2 * ff];
                for t in 0..total {
                    b.up[t * ff..(t + 1) * ff]
                        .copy_from_slice(&both[(2 * t + 1) * ff..(2 * t + 2) * ff]);
                    both.copy_within(2 * t * ff..(2 * t + 1) * ff, t * ff);
                }
                false
            }
        };
        if !gated_done {
            // The gated activation computed as the down projection's input is quantized:
            // its transcendentals are spread over the pool with the quantization, and
            // each block is quantized while still in L1.
            let (gate, up) = (&b.gate[..total * ff], &b.up[..total * ff]);
            let gated = |start: usize, dst: &mut [f32]| {
                dst.copy_from_slice(&gate[start..start + dst.len()]);
                act(dst, &up[start..start + dst.len()]);
            };
            b.acts.invalidate();
            b.acts
                .prepare_computed(&self.pool, &layer.down, &gated, total)?;
        }
        self.add_projection(&layer.down, layer.post_ffn_norm.as_deref(), b)
    }

    fn logits(
        &self,
        batch: &[BatchItem],
        spans: &[Span],
        b: &mut Buffers,
    ) -> Result<Vec<ItemLogits>, ModelError> {
        let hp = &self.hp;
        let e = hp.n_embd;
        let rows: Vec<usize> = batch
            .iter()
            .zip(spans)
            .flat_map(|(item, s)| match item.want_logits {
                LogitsWanted::None => 0..0,
                LogitsWanted::Last => (s.row0 + s.n).saturating_sub(1).max(s.row0)..s.row0 + s.n,
                LogitsWanted::All => s.row0..s.row0 + s.n,
            })
            .collect();
        let mut out = Vec::with_capacity(batch.len());
        if rows.is_empty() {
            out.resize_with(batch.len(), || ItemLogits {
                n_vocab: hp.n_vocab,
                data: Vec::new(),
            });
            return Ok(out);
        }
        let mut xl = vec![0.0; rows.len() * e];
        for (dst, &r) in xl.chunks_exact_mut(e).zip(&rows) {
            rms_norm(
                &b.x[r * e..(r + 1) * e],
                &self.weights.output_norm,
                hp.rms_eps,
                dst,
            );
        }
        // Each item's logits are computed straight into the buffer handed back to
        // the caller (a recycled one, already the right size when decoding): no copy.
        let v = hp.n_vocab;
        let mut data: Vec<Vec<f32>> = batch
            .iter()
            .zip(spans)
            .map(|(item, s)| {
                let n = match item.want_logits {
                    LogitsWanted::None => 0,
                    LogitsWanted::Last => s.n.min(1),
                    LogitsWanted::All => s.n,
                };
                self.scratch.logits_buffer(n * v)
            })
            .collect();
        let mut rows_of: Vec<&mut [f32]> = data
            .iter_mut()
            .flat_map(|d| d.chunks_exact_mut(v))
            .collect();
        let w = self.weights.output();
        b.acts.invalidate();
        b.acts.prepare(&self.pool, w, &xl, rows.len())?;
        let view = OutView::over_rows(&mut rows_of, v, &mut b.logit_rows)?;
        matmul_many(
            &self.pool,
            &self.file,
            &b.acts,
            vec![Product::to_view(w, view)],
        )?;
        for d in &mut data {
            if let Some(cap) = hp.final_softcap {
                softcap(d, cap);
            }
            out.push(ItemLogits {
                n_vocab: v,
                data: std::mem::take(d),
            });
        }
        Ok(out)
    }
}

/// Values `start..start + dst.len()` of the RMS-normed rows of `x` (rows of `width`)
/// into `dst`, exactly as [`rms_norm`] gives them; a row cut by the range is still
/// normed by its whole length.
fn norm_range(x: &[f32], w: &[f32], eps: f32, width: usize, start: usize, dst: &mut [f32]) {
    let mut at = start;
    let mut dst = dst;
    while !dst.is_empty() {
        let (row, col) = (at / width, at % width);
        let len = (width - col).min(dst.len());
        let (head, rest) = dst.split_at_mut(len);
        let src = &x[row * width..(row + 1) * width];
        let scale = rms_scale(src, eps);
        for ((o, &v), &g) in head.iter_mut().zip(&src[col..]).zip(&w[col..]) {
            *o = v * scale * g;
        }
        at += len;
        dst = rest;
    }
}
