//! One forward step over a batch of sequences.
//!
//! All tokens of all items are stacked into one activation matrix, so every weight
//! matrix is streamed once per step whatever the number of sequences (prompts become
//! matrix-matrix products). Only attention is per sequence, against its own cache.
//! The layers themselves are in `layer`; a step of many short sequences may also run
//! as one step per thread (`split`).

use super::experts::ExpertScratch;
use super::heads::TokenPrep;
use super::linear::{matmul_many, ActsCache, Product};
use super::ops::{rms_norm, softcap};
use super::per_layer::PerLayerScratch;
use super::rope::{RopeFactors, RopeTable};
use super::weights::{Ffn, GateUp, Mixer, Qkv};
use super::{Model, ModelError};
use crate::batch::{BatchItem, ItemLogits, LogitsWanted};
use crate::kv_cache::KvType;
use crate::quant::{OutView, RowTable};

use std::sync::Mutex;

/// Most tokens one internal step processes (larger requests are chunked).
pub const MAX_STEP_TOKENS: usize = 512;

/// Scratch buffers of one step, sized for its total token count.
#[derive(Default)]
pub(super) struct Buffers {
    pub x: Vec<f32>,
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    /// The fused QKV output (phi3), or the gated query rows (Qwen 3.5).
    pub qkv: Vec<f32>,
    /// The attention output gates, one per query value (Qwen 3.5).
    pub attn_gate: Vec<f32>,
    /// A linear-attention layer's conv input, z, beta, alpha and output (`delta_net`),
    /// sized by the layer itself.
    pub mixed: Vec<f32>,
    pub z: Vec<f32>,
    pub beta: Vec<f32>,
    pub alpha: Vec<f32>,
    pub lin_out: Vec<f32>,
    pub attn: Vec<f32>,
    pub proj: Vec<f32>,
    pub gate: Vec<f32>,
    pub up: Vec<f32>,
    pub acts: ActsCache,
    pub experts: ExpertScratch,
    /// Gemma 4's per-layer inputs of the step's tokens.
    pub per_layer: PerLayerScratch,
    /// The step's keys and values of the last sliding [0] and global [1] layer with a
    /// cache of its own, which the layers sharing theirs read (Gemma 4).
    pub shared_kv: [(Vec<f32>, Vec<f32>); 2],
    /// The output projection's row pointers (see `OutView::over_rows`).
    logit_rows: RowTable,
}

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

/// A step after its layers: its buffers, holding the final hidden states in `x`.
pub(super) struct Hidden {
    b: Buffers,
    spans: Vec<Span>,
    total: usize,
}

/// What a step's rows start from: the items' tokens looked up (the usual step), or
/// rows given in the model's embedding space (an image's), which may also see each
/// other whatever their order (see [`Model::forward_embeddings`]).
#[derive(Clone, Copy)]
pub(super) struct StepInput<'a> {
    pub rows: Option<&'a [f32]>,
    pub non_causal: bool,
}

impl StepInput<'_> {
    pub(super) const TOKENS: Self = StepInput {
        rows: None,
        non_causal: false,
    };
}

/// Where one batch item's rows sit in the stacked matrices.
pub(super) struct Span {
    pub row0: usize,
    pub n: usize,
    pub start_pos: usize,
}

impl Span {
    /// Each item's span, stacked in batch order, and the step's total rows.
    pub(super) fn of_batch(batch: &[BatchItem]) -> (Vec<Span>, usize) {
        let mut total = 0usize;
        let spans = batch
            .iter()
            .map(|item| {
                let s = Span {
                    row0: total,
                    n: item.tokens.len(),
                    start_pos: item.seq.n_past,
                };
                total += s.n;
                s
            })
            .collect();
        (spans, total)
    }

    /// The rows whose logits `want` asks for.
    pub(super) fn wanted_rows(&self, want: LogitsWanted) -> std::ops::Range<usize> {
        match want {
            LogitsWanted::None => 0..0,
            LogitsWanted::Last => {
                (self.row0 + self.n).saturating_sub(1).max(self.row0)..self.row0 + self.n
            }
            LogitsWanted::All => self.row0..self.row0 + self.n,
        }
    }
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
            #[cfg(feature = "gpu")]
            if let Some(dev) = &self.device {
                return self.device_step(dev, batch);
            }
            return self.step_split(batch, total);
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

    pub(super) fn validate(&self, batch: &[BatchItem]) -> Result<(), ModelError> {
        let hp = &self.hp;
        for item in batch {
            if item.seq.model_id != self.id {
                return Err(ModelError::ForeignSequence);
            }
            // A hybrid model's sequence carries a recurrent state at its length.
            let recurrent = item.seq.recurrent.as_ref();
            if hp.has_recurrent_state()
                && recurrent.is_none_or(|r| r.positions() != item.seq.n_past)
            {
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

    /// One step over validated inputs.
    pub(super) fn step(&self, batch: &mut [BatchItem]) -> Result<Vec<ItemLogits>, ModelError> {
        #[cfg(feature = "gpu")]
        if let Some(dev) = &self.device {
            return self.device_step(dev, batch);
        }
        let mut hidden = self.step_layers(batch, StepInput::TOKENS)?;
        let out = self.logits(&mut [(&*batch, hidden.as_mut())]);
        self.give_back(hidden);
        out
    }

    /// A step's embedding and layers (the sequences advance), leaving the final hidden
    /// states in its buffers; `None` when no item has tokens.
    pub(super) fn step_layers(
        &self,
        batch: &mut [BatchItem],
        input: StepInput,
    ) -> Result<Option<Hidden>, ModelError> {
        let hp = &self.hp;
        let (spans, total) = Span::of_batch(batch);
        if total == 0 {
            return Ok(None);
        }
        for (item, s) in batch.iter_mut().zip(&spans) {
            item.seq.kv.reserve(s.start_pos, s.start_pos + s.n);
        }
        let mut b = self.buffers(total);
        match input.rows {
            // Rows given in the model's embedding space are used as they are: llama.cpp
            // scales only looked-up tokens (Gemma's √n_embd: `ubatch.token ? … : 1`).
            Some(rows) => b.x.copy_from_slice(rows),
            None => self.embed(batch, &mut b.x)?,
        }
        let tokens = batch.iter().flat_map(|i| i.tokens.iter().copied());
        self.per_layer_inputs(tokens, &b.x, &mut b.acts, &mut b.per_layer)?;
        let positions: Vec<usize> = spans
            .iter()
            .flat_map(|s| s.start_pos..s.start_pos + s.n)
            .collect();
        let factors = self.rope_factors.as_deref();
        let rope = RopeTable::new(positions.iter().copied(), &hp.rope, factors);
        // Gemma 4's proportional RoPE is its global layers' only.
        let factors_swa = match hp.family.rope_factors {
            RopeFactors::GlobalFreqs => None,
            _ => factors,
        };
        let rope_swa = RopeTable::new(positions.iter().copied(), &hp.rope_swa, factors_swa);
        // Per token: its sequence has an f16 cache (see `HeadPrep::round16`).
        let round16: Vec<bool> = batch
            .iter()
            .zip(&spans)
            .flat_map(|(item, s)| std::iter::repeat_n(item.seq.kv.kv_type() == KvType::F16, s.n))
            .collect();
        let q_temperature: Option<Vec<f32>> = hp
            .attn_temperature
            .map(|t| positions.iter().map(|&p| t.at(p)).collect());
        for (il, layer) in self.weights.layers.iter().enumerate() {
            let rope = match (hp.rope_layers[il], hp.swa_layers[il]) {
                (false, _) => None,
                (true, true) => Some(&rope_swa),
                (true, false) => Some(&rope),
            };
            let tokens = TokenPrep {
                rope,
                round16: &round16,
                q_temperature: q_temperature.as_deref(),
                non_causal: input.non_causal,
            };
            match &layer.mixer {
                Mixer::Attention(_) => {
                    self.attention_block(il, layer, tokens, batch, &spans, &mut b)?
                }
                Mixer::DeltaNet(net) => {
                    self.delta_net_block(il, layer, net, batch, &spans, &mut b)?
                }
                Mixer::ShortConv(conv) => {
                    self.short_conv_block(il, layer, conv, batch, &spans, &mut b)?
                }
            }
            self.ffn_block(il, layer, total, &mut b)?;
            if let Some(input) = &layer.per_layer {
                self.per_layer_block(il, input, &mut b.x, &mut b.acts, &mut b.per_layer)?;
            }
            if let Some(s) = layer.out_scale {
                b.x.iter_mut().for_each(|v| *v *= s);
            }
        }
        for (item, span) in batch.iter_mut().zip(&spans) {
            item.seq.n_past += span.n;
            if let Some(r) = &mut item.seq.recurrent {
                r.set_positions(item.seq.n_past);
            }
        }
        Ok(Some(Hidden { b, spans, total }))
    }

    /// The final hidden states (after the output norm) of `tokens` run as a sequence of
    /// their own: `tokens.len() × n_embd` values, what llama.cpp pools when a decoder
    /// serves embeddings (with its causal attention, as there).
    pub fn hidden_states(&self, tokens: &[u32]) -> Result<Vec<f32>, ModelError> {
        let (e, hp) = (self.hp.n_embd, &self.hp);
        let mut seq = self.new_sequence_with(KvType::F32, tokens.len().max(1));
        let mut out = vec![0f32; tokens.len() * e];
        let mut row0 = 0;
        for chunk in tokens.chunks(MAX_STEP_TOKENS) {
            let mut batch = [BatchItem {
                seq: &mut seq,
                tokens: chunk,
                want_logits: LogitsWanted::None,
            }];
            self.validate(&batch)?;
            let hidden = self.step_layers(&mut batch, StepInput::TOKENS)?;
            if let Some(h) = &hidden {
                for r in 0..h.total {
                    let dst = &mut out[(row0 + r) * e..(row0 + r + 1) * e];
                    rms_norm(
                        &h.b.x[r * e..(r + 1) * e],
                        &self.weights.output_norm,
                        hp.rms_eps,
                        dst,
                    );
                }
            }
            self.give_back(hidden);
            row0 += chunk.len();
        }
        Ok(out)
    }

    /// Returns a step's buffers for the next step.
    pub(super) fn give_back(&self, hidden: Option<Hidden>) {
        if let Some(h) = hidden {
            self.scratch.give_back(h.b, h.total);
        }
    }

    /// Scratch buffers for a step of `t` tokens: the ones a previous step left, grown
    /// if needed, so steady decoding allocates nothing here.
    fn buffers(&self, t: usize) -> Buffers {
        let hp = &self.hp;
        let fused = (self.weights.layers.iter())
            .filter_map(|l| l.attention())
            .any(|a| matches!(a.qkv, Qkv::Fused(_)));
        let gated = hp.family.tensors.q_gate;
        // Only a fused gate/up weight writes both halves into `gate`; resizing touches
        // every page, so a separate one's buffer is sized for the gate alone.
        let fused_gate_up = matches!(
            self.weights.layers.first().map(|l| &l.ffn),
            Some(Ffn::Dense {
                gate_up: GateUp::Fused(_),
                ..
            })
        );
        let mut b = self.scratch.take();
        b.acts.invalidate();
        b.x.resize(t * hp.n_embd, 0.0);
        b.q.resize(t * hp.q_width(), 0.0);
        b.k.resize(t * hp.k_width(), 0.0);
        b.v.resize(t * hp.v_width(), 0.0);
        let qkv = if fused {
            t * (hp.q_proj_width() + hp.k_width() + hp.v_width())
        } else if gated {
            t * hp.q_proj_width()
        } else {
            0
        };
        b.qkv.resize(qkv, 0.0);
        b.attn_gate
            .resize(if gated { t * hp.q_width() } else { 0 }, 0.0);
        b.attn.resize(t * hp.attn_width(), 0.0);
        b.proj.resize(t * hp.n_embd, 0.0);
        // Expert layers have scratch of their own (`experts::ExpertScratch`): the dense
        // buffers would only be resident memory.
        let ff = if hp.experts.is_some() { 0 } else { hp.n_ff };
        b.gate
            .resize(t * ff * if fused_gate_up { 2 } else { 1 }, 0.0);
        b.up.resize(t * ff, 0.0);
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

    /// The logits each item asked for, from the final hidden states its step left:
    /// `groups` are steps' items (in batch order) with their hidden states, projected
    /// together, so the output layer is streamed once for all of them.
    pub(super) fn logits(
        &self,
        groups: &mut [(&[BatchItem], Option<&mut Hidden>)],
    ) -> Result<Vec<ItemLogits>, ModelError> {
        let hp = &self.hp;
        let (e, v) = (hp.n_embd, hp.n_vocab);
        // The wanted rows, normed, in batch order.
        let mut xl = Vec::new();
        let mut n_rows = Vec::new();
        for (items, hidden) in groups.iter() {
            for (k, item) in items.iter().enumerate() {
                let rows = match hidden {
                    Some(h) => h.spans[k].wanted_rows(item.want_logits),
                    None => 0..0,
                };
                n_rows.push(rows.len());
                for r in rows {
                    let h = hidden.as_ref().expect("rows come from a step's states");
                    let at = xl.len();
                    xl.resize(at + e, 0.0);
                    let src = &h.b.x[r * e..(r + 1) * e];
                    rms_norm(src, &self.weights.output_norm, hp.rms_eps, &mut xl[at..]);
                }
            }
        }
        let total: usize = n_rows.iter().sum();
        // Each item's logits are computed straight into the buffer handed back to
        // the caller (a recycled one, already the right size when decoding): no copy.
        let mut data: Vec<Vec<f32>> = n_rows
            .iter()
            .map(|&n| self.scratch.logits_buffer(n * v))
            .collect();
        if total > 0 {
            let b = &mut groups
                .iter_mut()
                .find_map(|(_, h)| h.as_deref_mut())
                .expect("rows come from a step's states")
                .b;
            let mut rows_of: Vec<&mut [f32]> = data
                .iter_mut()
                .flat_map(|d| d.chunks_exact_mut(v))
                .collect();
            let w = self.weights.output();
            b.acts.invalidate();
            b.acts.prepare(&self.pool, w, &xl, total)?;
            let view = OutView::over_rows(&mut rows_of, v, &mut b.logit_rows)?;
            let product = Product::to_view(w, view);
            matmul_many(&self.pool, &self.file, &b.acts, vec![product])?;
        }
        Ok(data
            .into_iter()
            .map(|mut d| {
                if let Some(cap) = hp.final_softcap {
                    softcap(&mut d, cap);
                }
                if let Some(s) = hp.logit_scale {
                    d.iter_mut().for_each(|v| *v /= s);
                }
                ItemLogits {
                    n_vocab: v,
                    data: d,
                }
            })
            .collect())
    }
}
