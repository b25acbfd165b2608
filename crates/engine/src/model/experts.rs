//! The mixture-of-experts feed-forward block. A router picks each token's experts;
//! the step's tokens are grouped by expert, so each chosen expert's weights are read
//! once per step whatever the number of its tokens (a decode step reads only the
//! chosen experts), and all groups' products run in one pool job per stage. Each
//! token's output is its experts' outputs weighted and summed in the order they were
//! chosen, as llama.cpp's `build_moe_ffn` sums them.

use std::sync::Mutex;

use super::family::Gating;
use super::hparams::ExpertShape;
use super::linear::{matmul_many, ActsCache, Product, Weight};
use super::ops::{add_residual, gate_fn, rms_norm, softmax};
use super::weights::{Expert, Experts, Layer};
use super::{Model, ModelError};
use crate::quant::{serial, Backend, QuantizedActs};

/// Most tokens the expert block takes at once: a prompt's are taken in parts, each
/// part reading the experts' weights again, so that its scratch (about 200 KB a token
/// for 8 experts of a 2048-wide model) stays well under the resident memory a model
/// may use beyond its file and cache (peak RSS within file + KV + 64 MiB).
const EXPERT_STEP_TOKENS: usize = 128;

/// Scratch of the expert block, kept with the step's other buffers.
#[derive(Default)]
pub(super) struct ExpertScratch {
    /// The normed input, `total × n_embd`.
    xn: Vec<f32>,
    /// Router logits, `total × n_expert`.
    logits: Vec<f32>,
    /// Per token, its `k` choices in order: (expert, weight).
    chosen: Vec<(u32, f32)>,
    /// Per choice (`t × k + i`): its row in the outputs `y`.
    row_of: Vec<usize>,
    /// The groups' hidden products and outputs, group after group.
    gate: Vec<f32>,
    up: Vec<f32>,
    y: Vec<f32>,
    /// Per group: the input as the gate, the up and the down weights take it.
    acts_gate: Vec<QuantizedActs>,
    acts_up: Vec<QuantizedActs>,
    acts_down: Vec<QuantizedActs>,
    /// The weighted sums, `total × n_embd`.
    sum: Vec<f32>,
}

/// The tokens one expert runs on this step, with the weights of their outputs.
struct Group<'a> {
    mlp: &'a Expert,
    tokens: Vec<usize>,
    weights: Vec<f32>,
    /// Its first row in the step's stacked expert rows.
    row0: usize,
}

/// Fills `out` with the token's `k` experts and their weights, from its router
/// logits (llama.cpp's `build_moe_ffn` for the gating functions the families use).
pub(super) fn route(logits: &[f32], shape: &ExpertShape, out: &mut Vec<(u32, f32)>) {
    let k = shape.n_used;
    let mut scores = logits.to_vec();
    if shape.routing.gating == Gating::Softmax {
        softmax(&mut scores);
    }
    // The k best, best first (ties to the lower index, as a stable sort gives them).
    let mut order: Vec<u32> = (0..scores.len() as u32).collect();
    order.sort_by(|&a, &b| scores[b as usize].total_cmp(&scores[a as usize]));
    let mut weights: Vec<f32> = order[..k].iter().map(|&e| scores[e as usize]).collect();
    if shape.routing.gating == Gating::SoftmaxOfChosen {
        softmax(&mut weights);
    }
    if shape.routing.normalise {
        // llama.cpp clamps the sum at f16's smallest normal.
        let sum = weights.iter().sum::<f32>().max(6.103_515_6e-5);
        weights.iter_mut().for_each(|w| *w /= sum);
    }
    if let Some(s) = shape.weights_scale {
        weights.iter_mut().for_each(|w| *w *= s);
    }
    out.extend(order[..k].iter().copied().zip(weights));
}

impl Model {
    /// `x += experts(ffn_norm(x))` for the step's rows `x`, at most
    /// [`EXPERT_STEP_TOKENS`] at a time, with the step's activations cache and the
    /// block's scratch.
    pub(super) fn expert_block(
        &self,
        layer: &Layer,
        ex: &Experts,
        x: &mut [f32],
        (acts, s): (&mut ActsCache, &mut ExpertScratch),
    ) -> Result<(), ModelError> {
        let e = self.hp.n_embd;
        for rows in x.chunks_mut(EXPERT_STEP_TOKENS * e) {
            self.expert_rows(layer, ex, rows, acts, s)?;
        }
        Ok(())
    }

    /// [`Model::expert_block`] for the tokens of rows `x`.
    fn expert_rows(
        &self,
        layer: &Layer,
        ex: &Experts,
        x: &mut [f32],
        acts: &mut ActsCache,
        s: &mut ExpertScratch,
    ) -> Result<(), ModelError> {
        let hp = &self.hp;
        let shape = hp.experts.as_ref().expect("an expert layer has a shape");
        let (e, n_exp, k) = (hp.n_embd, shape.n_expert, shape.n_used);
        let total = x.len() / e;
        s.xn.resize(total * e, 0.0);
        for (x, xn) in x.chunks_exact(e).zip(s.xn.chunks_exact_mut(e)) {
            rms_norm(x, &layer.ffn_norm, hp.rms_eps, xn);
        }
        acts.invalidate();
        acts.prepare(&self.pool, &ex.router, &s.xn, total)?;
        s.logits.resize(total * n_exp, 0.0);
        let product = Product::new(&ex.router, &mut s.logits);
        matmul_many(&self.pool, &self.file, acts, vec![product])?;
        s.chosen.clear();
        for l in s.logits.chunks_exact_mut(n_exp) {
            if let Some(bias) = &ex.router_bias {
                l.iter_mut().zip(bias).for_each(|(l, b)| *l += b);
            }
            route(l, shape, &mut s.chosen);
        }
        let groups = group(ex, &s.chosen, &s.xn, total, k, &mut s.row_of);
        self.run_groups(&groups, s)?;
        // Each token's sum in its choice order, then the shared expert, then the
        // residual, as llama.cpp adds them.
        s.sum.clear();
        s.sum.resize(total * e, 0.0);
        for (t, sum) in s.sum.chunks_exact_mut(e).enumerate() {
            for i in 0..k {
                let c = t * k + i;
                let w = s.chosen[c].1;
                let y = &s.y[s.row_of[c] * e..(s.row_of[c] + 1) * e];
                sum.iter_mut().zip(y).for_each(|(o, v)| *o += w * v);
            }
        }
        if let Some(shared) = groups.last().filter(|_| ex.shared.is_some()) {
            for (r, (&t, &w)) in shared.tokens.iter().zip(&shared.weights).enumerate() {
                let y = &s.y[(shared.row0 + r) * e..(shared.row0 + r + 1) * e];
                let sum = &mut s.sum[t * e..(t + 1) * e];
                sum.iter_mut().zip(y).for_each(|(o, v)| *o += w * v);
            }
        }
        add_residual(x, &s.sum, hp.residual_scale);
        Ok(())
    }

    /// Every group's gate and up products, activation and down product, into `s.y`
    /// (the groups' rows stacked): one pool job per stage for all of them.
    fn run_groups(&self, groups: &[Group], s: &mut ExpertScratch) -> Result<(), ModelError> {
        let e = self.hp.n_embd;
        let rows: usize = groups.iter().map(|g| g.tokens.len()).sum();
        // Each group's hidden values (tokens × its width), stacked.
        let hidden: Vec<usize> = groups
            .iter()
            .map(|g| g.tokens.len() * g.mlp.gate.rows)
            .collect();
        for acts in [&mut s.acts_gate, &mut s.acts_up, &mut s.acts_down] {
            acts.resize_with(acts.len().max(groups.len()), QuantizedActs::default);
        }
        // The inputs, gathered from the normed rows as they are quantized for the gate
        // weights and, where their format differs (a mixed-type file), for the up ones.
        let xn = &s.xn;
        let gathered = |g: &Group, w: &Weight, acts: &mut QuantizedActs| {
            let source = |at: usize, dst: &mut [f32]| gather(xn, e, &g.tokens, at, dst);
            let (ty, n) = (w.ggml_type(), g.tokens.len());
            Backend::active().quantize_computed(ty, &source, n, e, acts, &serial)?;
            Ok(())
        };
        let own_up = |g: &Group| g.mlp.up.act_format() != g.mlp.gate.act_format();
        quantize_each(self, groups, &mut s.acts_gate, |_, g, acts| {
            gathered(g, &g.mlp.gate, acts)
        })?;
        quantize_each(self, groups, &mut s.acts_up, |_, g, acts| match own_up(g) {
            true => gathered(g, &g.mlp.up, acts),
            false => Ok(()),
        })?;
        s.gate.resize(hidden.iter().sum(), 0.0);
        s.up.resize(hidden.iter().sum(), 0.0);
        let gates = pieces(&mut s.gate, &hidden);
        let ups = pieces(&mut s.up, &hidden);
        let mut products = Vec::with_capacity(2 * groups.len());
        for (j, ((g, gate), up)) in groups.iter().zip(gates).zip(ups).enumerate() {
            let up_acts = if own_up(g) {
                &s.acts_up[j]
            } else {
                &s.acts_gate[j]
            };
            products.push(Product::with_acts(&g.mlp.gate, &s.acts_gate[j], gate));
            products.push(Product::with_acts(&g.mlp.up, up_acts, up));
        }
        // Every product brings its own input.
        let unused = ActsCache::default();
        matmul_many(&self.pool, &self.file, &unused, products)?;
        // The activation, quantized as the down weights' input.
        let gated: Vec<_> = pieces(&mut s.gate, &hidden)
            .into_iter()
            .map(Mutex::new)
            .collect();
        let starts: Vec<usize> = hidden
            .iter()
            .scan(0, |at, n| Some(std::mem::replace(at, *at + n)))
            .collect();
        let up = &s.up;
        let act = gate_fn(self.hp.activation);
        quantize_each(self, groups, &mut s.acts_down, |j, g, acts| {
            let mut h = gated[j].lock().unwrap_or_else(|e| e.into_inner());
            let mut up = &up[starts[j]..starts[j] + hidden[j]];
            let mut with_bias = Vec::new();
            if let Some([bg, bu, _]) = &g.mlp.bias {
                add_rows(&mut h, bg);
                with_bias.extend_from_slice(up);
                add_rows(&mut with_bias, bu);
                up = &with_bias;
            }
            act(&mut h, up);
            quantize(&g.mlp.down, &h, g.tokens.len(), acts)
        })?;
        s.y.resize(rows * e, 0.0);
        let lengths: Vec<usize> = groups.iter().map(|g| g.tokens.len() * e).collect();
        let products = groups
            .iter()
            .zip(pieces(&mut s.y, &lengths))
            .enumerate()
            .map(|(j, (g, y))| Product::with_acts(&g.mlp.down, &s.acts_down[j], y))
            .collect();
        matmul_many(&self.pool, &self.file, &unused, products)?;
        for (g, y) in groups.iter().zip(pieces(&mut s.y, &lengths)) {
            if let Some([_, _, bd]) = &g.mlp.bias {
                add_rows(y, bd);
            }
        }
        Ok(())
    }
}

/// Runs `f` on every group with that group's activations slot, spread over the pool
/// when the groups are many (a decode step's few are quicker on one thread).
fn quantize_each(
    model: &Model,
    groups: &[Group],
    slots: &mut [QuantizedActs],
    f: impl Fn(usize, &Group, &mut QuantizedActs) -> Result<(), ModelError> + Sync,
) -> Result<(), ModelError> {
    let slots: Vec<Mutex<&mut QuantizedActs>> = slots.iter_mut().map(Mutex::new).collect();
    let error = Mutex::new(None);
    let task = |j: usize| {
        let mut slot = slots[j].lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = f(j, &groups[j], &mut slot) {
            *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
    };
    let rows: usize = groups.iter().map(|g| g.tokens.len()).sum();
    if rows > 16 {
        model.pool.run(groups.len(), &task);
    } else {
        (0..groups.len()).for_each(task);
    }
    match error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// `x` (`n` rows) quantized as `w`'s input.
fn quantize(w: &Weight, x: &[f32], n: usize, out: &mut QuantizedActs) -> Result<(), ModelError> {
    Backend::active().quantize_acts(w.ggml_type(), x, n, w.cols, out, &serial)?;
    Ok(())
}

/// Values `at..at + dst.len()` of the rows `tokens` of `x` (rows of `width`) stacked.
fn gather(x: &[f32], width: usize, tokens: &[usize], at: usize, dst: &mut [f32]) {
    let mut at = at;
    let mut dst = dst;
    while !dst.is_empty() {
        let (r, col) = (at / width, at % width);
        let n = (width - col).min(dst.len());
        let row = &x[tokens[r] * width..(tokens[r] + 1) * width];
        let (head, rest) = dst.split_at_mut(n);
        head.copy_from_slice(&row[col..col + n]);
        at += n;
        dst = rest;
    }
}

/// `bias` added to every row of `rows` (rows of `bias.len()`).
fn add_rows(rows: &mut [f32], bias: &[f32]) {
    for r in rows.chunks_exact_mut(bias.len()) {
        r.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
    }
}

/// `v` cut into consecutive pieces of `lengths`.
fn pieces<'a>(mut v: &'a mut [f32], lengths: &[usize]) -> Vec<&'a mut [f32]> {
    let mut out = Vec::with_capacity(lengths.len());
    for &n in lengths {
        let (head, rest) = std::mem::take(&mut v).split_at_mut(n);
        out.push(head);
        v = rest;
    }
    out
}

/// The step's groups: each expert chosen by some token, in expert order, then the
/// shared expert (every token). Fills `row_of` with each choice's stacked row.
fn group<'a>(
    ex: &'a Experts,
    chosen: &[(u32, f32)],
    xn: &[f32],
    total: usize,
    k: usize,
    row_of: &mut Vec<usize>,
) -> Vec<Group<'a>> {
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); ex.experts.len()];
    for (c, &(expert, _)) in chosen.iter().enumerate() {
        members[expert as usize].push(c);
    }
    row_of.clear();
    row_of.resize(chosen.len(), 0);
    let mut groups = Vec::new();
    let mut row0 = 0;
    for (expert, choices) in members.into_iter().enumerate() {
        if choices.is_empty() {
            continue;
        }
        for (r, &c) in choices.iter().enumerate() {
            row_of[c] = row0 + r;
        }
        let n = choices.len();
        groups.push(Group {
            mlp: &ex.experts[expert],
            tokens: choices.iter().map(|&c| c / k).collect(),
            weights: choices.iter().map(|&c| chosen[c].1).collect(),
            row0,
        });
        row0 += n;
    }
    if let Some(shared) = &ex.shared {
        let e = xn.len() / total.max(1);
        let weights = (0..total)
            .map(|t| match &shared.gate {
                Some(g) => {
                    let z: f32 = g
                        .iter()
                        .zip(&xn[t * e..(t + 1) * e])
                        .map(|(a, b)| a * b)
                        .sum();
                    1.0 / (1.0 + (-z).exp())
                }
                None => 1.0,
            })
            .collect();
        groups.push(Group {
            mlp: &shared.mlp,
            tokens: (0..total).collect(),
            weights,
            row0,
        });
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::family::{ExpertWidth, Routing};

    fn shape(gating: Gating, normalise: bool, scale: Option<f32>) -> ExpertShape {
        ExpertShape {
            routing: Routing {
                gating,
                normalise,
                width: ExpertWidth::FeedForward,
            },
            n_expert: 4,
            n_used: 2,
            n_ff: 8,
            weights_scale: scale,
        }
    }

    #[test]
    fn routers_weigh_the_chosen_experts_as_each_family_does() {
        let logits = [0.5f32, 2.0, -1.0, 1.0];
        let p: Vec<f64> = {
            let z: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
            logits.iter().map(|&l| (l as f64).exp() / z).collect()
        };
        let close = |got: &[(u32, f32)], want: &[(u32, f64)]| {
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(want) {
                assert_eq!(g.0, w.0);
                assert!((g.1 as f64 - w.1).abs() < 1e-6, "{got:?} vs {want:?}");
            }
        };
        let mut out = Vec::new();
        // Qwen 2 MoE: the raw probabilities of the best two.
        route(&logits, &shape(Gating::Softmax, false, None), &mut out);
        close(&out, &[(1, p[1]), (3, p[3])]);
        // Qwen 3 MoE, Mixtral: renormalised, so a softmax of the two logits.
        out.clear();
        route(&logits, &shape(Gating::Softmax, true, Some(2.0)), &mut out);
        let s = p[1] + p[3];
        close(&out, &[(1, 2.0 * p[1] / s), (3, 2.0 * p[3] / s)]);
        // gpt-oss: the best two logits, then a softmax over them.
        out.clear();
        route(
            &logits,
            &shape(Gating::SoftmaxOfChosen, false, None),
            &mut out,
        );
        let z = 2f64.exp() + 1f64.exp();
        close(&out, &[(1, 2f64.exp() / z), (3, 1f64.exp() / z)]);
    }
}
