//! One forward step on the device, in the CPU engine's order: embedding, per layer
//! attention (norm, Q/K/V, heads, cache, attention, output projection) and the gated
//! feed-forward block, then the wanted rows' output norm and logits.

use std::ops::Range;

use super::super::family::Activation;
use super::super::forward::Span;
use super::super::hparams::HParams;
use super::super::rope::RopeTable;
use super::super::{Model, ModelError};
use super::upload::{DevGateUp, DevMatrix, DevQkv};
use super::{DeviceKv, DeviceModel};
use crate::batch::{BatchItem, ItemLogits, LogitsWanted};
use crate::gpu::{grid, Kernel, Recorder, P};
use crate::kv_cache::KvType;

use P::{F, U};

/// Most bytes of attention scores one step may hold; a step needing more runs item
/// by item, and an item's tokens in halves.
const SCORES_BYTES: u64 = 64 << 20;

/// `heads.wgsl` flags.
const BIAS: u32 = 1;
const NORM: u32 = 2;
const ROPE: u32 = 4;
const ROUND: u32 = 8;

/// `elementwise.wgsl` operations.
const SILU: u32 = 0;
const GELU_TANH: u32 = 1;
const SOFTCAP: u32 = 2;

/// A matmul's input `x` and the scratch `xq` its rounded copy goes to (at least
/// `tokens × cols`), remembering which rounding `xq` holds: matrices that read the
/// same input (q, k and v; gate and up) round it once.
struct Input<'a> {
    x: &'a wgpu::Buffer,
    xq: &'a wgpu::Buffer,
    /// The block size `xq` holds `x` rounded to, if it does.
    rounded: Option<usize>,
}

impl<'a> Input<'a> {
    fn new(x: &'a wgpu::Buffer, xq: &'a wgpu::Buffer) -> Self {
        Input {
            x,
            xq,
            rounded: None,
        }
    }
}

/// Records `y[t, y_off + r - rows.start] (=|+=) W[r]·x[t]` for weight rows `rows`.
fn matmul(
    rec: &mut Recorder,
    m: &DevMatrix,
    rows: Range<usize>,
    input: &mut Input,
    (y, y_stride, y_off): (&wgpu::Buffer, usize, usize),
    (tokens, add): (usize, bool),
) {
    // Quantized weights see their activations rounded as the CPU engine's do.
    let x = match m.act_block {
        Some(block) => {
            if input.rounded != Some(block) {
                let n_blocks = (tokens * m.cols / block) as u64;
                let [gx, gy] = grid(n_blocks);
                let params = [U(n_blocks as u32), U(block as u32)];
                rec.dispatch(Kernel::ActQuant, &[input.x, input.xq], &params, [gx, gy, 1]);
                input.rounded = Some(block);
            }
            input.xq
        }
        None => input.x,
    };
    for (buf, r0, n) in &m.parts {
        let (lo, hi) = (rows.start.max(*r0), rows.end.min(r0 + n));
        if lo >= hi {
            continue;
        }
        let [gx, gy] = grid((hi - lo).div_ceil(8) as u64);
        let params = [
            U((hi - lo) as u32),
            U(m.cols as u32),
            U(tokens as u32),
            U(m.row_bytes as u32),
            U((lo - r0) as u32),
            U(m.cols as u32),
            U(y_stride as u32),
            U((y_off + lo - rows.start) as u32),
            U(add as u32),
        ];
        let groups = [gx, gy, tokens.div_ceil(8) as u32];
        rec.dispatch(Kernel::Matmul(m.ty), &[buf, x, y], &params, groups);
    }
}

/// The step's activations, `t` tokens.
struct Acts {
    x: wgpu::Buffer,
    xn: wgpu::Buffer,
    q: wgpu::Buffer,
    k: wgpu::Buffer,
    v: wgpu::Buffer,
    attn: wgpu::Buffer,
    proj: wgpu::Buffer,
    gate: wgpu::Buffer,
    up: wgpu::Buffer,
    /// Rounded activations of the product being recorded.
    xq: wgpu::Buffer,
    scores: wgpu::Buffer,
}

impl Model {
    /// A step on the device over validated inputs of at most `MAX_STEP_TOKENS`
    /// tokens, split where its attention scores would not fit.
    pub(in crate::model) fn device_step(
        &self,
        dev: &DeviceModel,
        batch: &mut [BatchItem],
    ) -> Result<Vec<ItemLogits>, ModelError> {
        let scores = |i: &BatchItem| {
            let n = i.tokens.len() as u64;
            n * self.hp.n_head as u64 * (i.seq.n_past as u64 + n) * 4
        };
        let widest = batch.iter().map(scores).max().unwrap_or(0);
        if widest <= SCORES_BYTES.min(dev.gpu.max_binding) {
            return self.device_step_whole(dev, batch);
        }
        if batch.len() > 1 {
            let mut out = Vec::with_capacity(batch.len());
            for item in batch.iter_mut() {
                let mut one = [BatchItem {
                    seq: item.seq,
                    tokens: item.tokens,
                    want_logits: item.want_logits,
                }];
                out.append(&mut self.device_step(dev, &mut one)?);
            }
            return Ok(out);
        }
        let item = &mut batch[0];
        let (a, b) = item.tokens.split_at(item.tokens.len() / 2);
        let first_wants = match item.want_logits {
            LogitsWanted::Last => LogitsWanted::None,
            w => w,
        };
        let mut data = Vec::new();
        for (tokens, want) in [(a, first_wants), (b, item.want_logits)] {
            let mut one = [BatchItem {
                seq: item.seq,
                tokens,
                want_logits: want,
            }];
            data.append(&mut self.device_step(dev, &mut one)?[0].data);
        }
        Ok(vec![ItemLogits {
            n_vocab: self.hp.n_vocab,
            data,
        }])
    }

    fn device_step_whole(
        &self,
        dev: &DeviceModel,
        batch: &mut [BatchItem],
    ) -> Result<Vec<ItemLogits>, ModelError> {
        let _one_at_a_time = dev.steps.lock().unwrap_or_else(|e| e.into_inner());
        let (hp, gpu) = (&self.hp, &dev.gpu);
        let (spans, total) = Span::of_batch(batch);
        if total == 0 {
            return Ok(batch
                .iter()
                .map(|_| ItemLogits {
                    n_vocab: hp.n_vocab,
                    data: Vec::new(),
                })
                .collect());
        }
        let mut rec = Recorder::new(gpu);
        let (e, ff) = (hp.n_embd, hp.n_ff);
        let (qw, kw, vw) = (hp.q_width(), hp.k_width(), hp.v_width());
        let ow = hp.n_head * hp.head_dim_v;
        for (item, s) in batch.iter_mut().zip(&spans) {
            let f16 = item.seq.kv.kv_type() == KvType::F16;
            let kv = item
                .seq
                .device
                .get_or_insert_with(|| DeviceKv::new(kw, vw, f16));
            let room = (s.start_pos, s.start_pos + s.n, item.seq.n_ctx);
            kv.make_room(gpu, &mut rec, hp.n_layer, room);
        }
        let tokens: Vec<u8> = batch
            .iter()
            .flat_map(|i| i.tokens.iter().flat_map(|t| t.to_le_bytes()))
            .collect();
        let tokens = gpu.upload(&tokens, "tokens");
        let positions: Vec<usize> = spans
            .iter()
            .flat_map(|s| s.start_pos..s.start_pos + s.n)
            .collect();
        let factors = self.rope_factors.as_deref();
        let table = |rope| {
            let t = RopeTable::new(positions.iter().copied(), rope, factors);
            let bytes: Vec<u8> = t
                .pairs()
                .iter()
                .flat_map(|(c, s)| [c.to_le_bytes(), s.to_le_bytes()])
                .flatten()
                .collect();
            gpu.upload(&bytes, "rope")
        };
        let (cs, cs_swa) = (table(&hp.rope), table(&hp.rope_swa));
        let span_bytes = batch
            .iter()
            .map(|i| i.tokens.len() * hp.n_head * (i.seq.n_past + i.tokens.len()) * 4)
            .max()
            .unwrap_or(0);
        let fl = |n: usize, what: &str| gpu.buffer((n * 4) as u64, what);
        let a = Acts {
            x: fl(total * e, "x"),
            xn: fl(total * e, "xn"),
            q: fl(total * qw, "q"),
            k: fl(total * kw, "k"),
            v: fl(total * vw, "v"),
            attn: fl(total * ow, "attn"),
            proj: fl(total * e, "proj"),
            gate: fl(total * ff, "gate"),
            up: fl(total * ff, "up"),
            xq: fl(total * e.max(ff).max(ow), "xq"),
            scores: gpu.buffer(span_bytes as u64, "scores"),
        };
        let emb = &dev.token_embd;
        for (buf, r0, n) in &emb.parts {
            let params = [
                U(emb.cols as u32),
                U(emb.row_bytes as u32),
                U(*r0 as u32),
                U(*n as u32),
                F(hp.embed_scale.unwrap_or(1.0)),
            ];
            let groups = [total as u32, 1, 1];
            rec.dispatch(
                Kernel::Embed(emb.ty),
                &[buf, &tokens, &a.x],
                &params,
                groups,
            );
        }
        for il in 0..hp.n_layer {
            let cs = if hp.swa_layers[il] { &cs_swa } else { &cs };
            self.device_attention(dev, &mut rec, il, (batch, &spans), &a, cs);
            self.device_ffn(dev, &mut rec, il, total, &a);
        }
        for (item, s) in batch.iter_mut().zip(&spans) {
            item.seq.n_past += s.n;
        }
        self.device_logits(dev, &mut rec, batch, &spans, &a)
    }

    fn norm(
        &self,
        rec: &mut Recorder,
        (x, w, out): (&wgpu::Buffer, &wgpu::Buffer, &wgpu::Buffer),
        rows: usize,
        add: bool,
    ) {
        let params = [U(self.hp.n_embd as u32), F(self.hp.rms_eps), U(add as u32)];
        rec.dispatch(Kernel::Norm, &[x, w, out], &params, [rows as u32, 1, 1]);
    }

    /// `x += w·input`, normed first where the architecture post-norms.
    fn device_residual(
        &self,
        rec: &mut Recorder,
        (w, post): (&DevMatrix, Option<&wgpu::Buffer>),
        input: &wgpu::Buffer,
        total: usize,
        a: &Acts,
    ) {
        let e = self.hp.n_embd;
        let mut input = Input::new(input, &a.xq);
        match post {
            None => matmul(rec, w, 0..e, &mut input, (&a.x, e, 0), (total, true)),
            Some(norm) => {
                matmul(rec, w, 0..e, &mut input, (&a.proj, e, 0), (total, false));
                self.norm(rec, (&a.proj, norm, &a.x), total, true);
            }
        }
    }

    fn device_attention(
        &self,
        dev: &DeviceModel,
        rec: &mut Recorder,
        il: usize,
        (batch, spans): (&[BatchItem], &[Span]),
        a: &Acts,
        cs: &wgpu::Buffer,
    ) {
        let hp = &self.hp;
        let l = &dev.layers[il];
        let total: usize = spans.iter().map(|s| s.n).sum();
        let (qw, kw, vw) = (hp.q_width(), hp.k_width(), hp.v_width());
        let (hk, hv) = (hp.head_dim_k, hp.head_dim_v);
        let ow = hp.n_head * hv;
        self.norm(rec, (&a.x, &l.attn_norm, &a.xn), total, false);
        let mut xn = Input::new(&a.xn, &a.xq);
        match &l.qkv {
            DevQkv::Separate { q, k, v } => {
                matmul(rec, q, 0..qw, &mut xn, (&a.q, qw, 0), (total, false));
                matmul(rec, k, 0..kw, &mut xn, (&a.k, kw, 0), (total, false));
                matmul(rec, v, 0..vw, &mut xn, (&a.v, vw, 0), (total, false));
            }
            DevQkv::Fused(w) => {
                matmul(rec, w, 0..qw, &mut xn, (&a.q, qw, 0), (total, false));
                let kr = qw..qw + kw;
                matmul(rec, w, kr, &mut xn, (&a.k, kw, 0), (total, false));
                let vr = qw + kw..qw + kw + vw;
                matmul(rec, w, vr, &mut xn, (&a.v, vw, 0), (total, false));
            }
        }
        let dummy = &dev.dummy;
        let bias = |i: usize| l.qkv_bias.as_ref().map(|b| &b[i]);
        let window = if hp.swa_layers[il] {
            hp.sliding_window.unwrap_or(0)
        } else {
            0
        };
        let neox = (hp.rope_style == super::super::rope::RopeStyle::Neox) as u32;
        let half = (hp.rope.dims / 2) as u32;
        for (item, s) in batch.iter().zip(spans).filter(|(_, s)| s.n > 0) {
            let kv = item.seq.device.as_ref().expect("rooms were made");
            let round = if kv.f16() { ROUND } else { 0 };
            let n = s.n as u32;
            let heads = |rec: &mut Recorder,
                         buf,
                         b: Option<&wgpu::Buffer>,
                         norm: Option<&wgpu::Buffer>,
                         rope: bool,
                         (width, hd, heads, mul): (usize, usize, usize, f32),
                         (t0, rows): (usize, usize)| {
                let flags = b.map_or(0, |_| BIAS)
                    | norm.map_or(0, |_| NORM)
                    | if rope { ROPE } else { 0 }
                    | round;
                let params = [
                    U(width as u32),
                    U(hd as u32),
                    U(flags),
                    F(hp.rms_eps),
                    F(mul),
                    U(half),
                    U(neox),
                    U(t0 as u32),
                ];
                let bufs = [buf, b.unwrap_or(dummy), norm.unwrap_or(dummy), cs];
                let groups = [heads as u32, rows as u32, 1];
                rec.dispatch(Kernel::Heads, &bufs, &params, groups);
            };
            let (qn, kn) = (l.q_norm.as_ref(), l.k_norm.as_ref());
            let rope = hp.rope_layers[il];
            for (t0, rows, mul) in query_runs(hp, s) {
                let shape = (qw, hk, hp.n_head, mul);
                heads(rec, &a.q, bias(0), qn, rope, shape, (t0, rows));
            }
            let all = (s.row0, s.n);
            heads(
                rec,
                &a.k,
                bias(1),
                kn,
                rope,
                (kw, hk, hp.n_head_kv, 1.0),
                all,
            );
            heads(
                rec,
                &a.v,
                bias(2),
                None,
                false,
                (vw, hv, hp.n_head_kv, 1.0),
                all,
            );
            let f16 = kv.f16() as u32;
            for (src, cache, width) in [(&a.k, kv.keys(il), kw), (&a.v, kv.values(il), vw)] {
                let params = [
                    U(width as u32),
                    U(s.row0 as u32),
                    U(s.start_pos as u32),
                    U(n),
                    U(f16),
                ];
                let items = if kv.f16() {
                    s.n * width / 2
                } else {
                    s.n * width
                };
                rec.dispatch_items(Kernel::StoreKv, &[src, cache], &params, items as u64);
            }
            let params = [
                U(hp.n_head as u32),
                U((hp.n_head / hp.n_head_kv) as u32),
                U(hk as u32),
                U(hv as u32),
                U(kw as u32),
                U(vw as u32),
                U(qw as u32),
                U(ow as u32),
                U(s.row0 as u32),
                U(s.start_pos as u32),
                U(window as u32),
                F(hp.attn_softcap.unwrap_or(0.0)),
                U(f16),
                U((s.start_pos + s.n) as u32),
            ];
            let bufs = [&a.q, kv.keys(il), kv.values(il), &a.attn, &a.scores];
            rec.dispatch(Kernel::Attention, &bufs, &params, [hp.n_head as u32, n, 1]);
        }
        let post = l.post_attn_norm.as_ref();
        self.device_residual(rec, (&l.attn_out, post), &a.attn, total, a);
    }

    fn device_ffn(&self, dev: &DeviceModel, rec: &mut Recorder, il: usize, total: usize, a: &Acts) {
        let hp = &self.hp;
        let l = &dev.layers[il];
        let ff = hp.n_ff;
        self.norm(rec, (&a.x, &l.ffn_norm, &a.xn), total, false);
        // Gate and up: two matrices, or two row ranges of one.
        let (gate, up, up_rows) = match &l.gate_up {
            DevGateUp::Separate { gate, up } => (gate, up, 0..ff),
            DevGateUp::Fused(w) => (w, w, ff..2 * ff),
        };
        let mut xn = Input::new(&a.xn, &a.xq);
        matmul(rec, gate, 0..ff, &mut xn, (&a.gate, ff, 0), (total, false));
        matmul(rec, up, up_rows, &mut xn, (&a.up, ff, 0), (total, false));
        let op = match hp.activation {
            Activation::Silu => SILU,
            Activation::GeluTanh | Activation::GeluTable => GELU_TANH,
            // Only experts use it, and expert layers are refused at upload.
            Activation::SwigluOai => unreachable!("no dense layer has gpt-oss's activation"),
        };
        let n = (total * ff) as u64;
        let params = [U(n as u32), U(op), F(0.0)];
        rec.dispatch_items(Kernel::Elementwise, &[&a.gate, &a.up], &params, n);
        let post = l.post_ffn_norm.as_ref();
        self.device_residual(rec, (&l.down, post), &a.gate, total, a);
    }

    /// The wanted rows' logits, read back; `rec` holds the step so far.
    fn device_logits(
        &self,
        dev: &DeviceModel,
        rec: &mut Recorder,
        batch: &[BatchItem],
        spans: &[Span],
        a: &Acts,
    ) -> Result<Vec<ItemLogits>, ModelError> {
        let hp = &self.hp;
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let gpu = &dev.gpu;
        let wanted: Vec<Range<usize>> = batch
            .iter()
            .zip(spans)
            .map(|(item, s)| s.wanted_rows(item.want_logits))
            .collect();
        let rows: Vec<usize> = wanted.iter().flat_map(|r| r.clone()).collect();
        // Rows per output pass: its logits must fit one binding.
        let per_pass = (gpu.max_binding as usize / (v * 4)).clamp(1, 256);
        let mut all = Vec::with_capacity(rows.len() * v);
        let out = dev.output();
        for chunk in rows.chunks(per_pass) {
            let r = chunk.len();
            let xg = gpu.buffer((r * e * 4) as u64, "last rows");
            for (j, &row) in chunk.iter().enumerate() {
                let (from, to, bytes) = ((row * e * 4) as u64, (j * e * 4) as u64, (e * 4) as u64);
                rec.copy(&a.x, from, &xg, to, bytes);
            }
            let xn = gpu.buffer((r * e * 4) as u64, "normed rows");
            self.norm(rec, (&xg, &dev.output_norm, &xn), r, false);
            let logits = gpu.buffer((r * v * 4) as u64, "logits");
            matmul(
                rec,
                out,
                0..v,
                &mut Input::new(&xn, &a.xq),
                (&logits, v, 0),
                (r, false),
            );
            if let Some(cap) = hp.final_softcap {
                let n = (r * v) as u64;
                let params = [U(n as u32), U(SOFTCAP), F(cap)];
                rec.dispatch_items(Kernel::Elementwise, &[&logits, &dev.dummy], &params, n);
            }
            rec.submit();
            all.extend(gpu.read_f32(&logits, 0, r * v)?);
        }
        if rows.is_empty() {
            rec.submit();
            gpu.wait()?;
        }
        gpu.check()?;
        let mut at = 0;
        Ok(wanted
            .iter()
            .map(|w| {
                let n = w.len() * v;
                let data = all[at..at + n].to_vec();
                at += n;
                ItemLogits { n_vocab: v, data }
            })
            .collect())
    }
}

/// The rows of `s` in runs that share one query multiplier: the query scale times the
/// attention temperature of their positions (Mistral 3; one run without it). The kernel
/// multiplies before its f16 rounding, where the CPU engine rounds the tempered query
/// and then scales it: the same bits when the multiplier is a power of two.
fn query_runs(hp: &HParams, s: &Span) -> Vec<(usize, usize, f32)> {
    let mut runs: Vec<(usize, usize, f32)> = Vec::new();
    for k in 0..s.n {
        let temp = hp.attn_temperature.map_or(1.0, |t| t.at(s.start_pos + k));
        let mul = temp * hp.attn_scale;
        match runs.last_mut() {
            Some((_, rows, m)) if *m == mul => *rows += 1,
            _ => runs.push((s.row0 + k, 1, mul)),
        }
    }
    runs
}
