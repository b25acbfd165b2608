//! One round of measurements on a loaded model: prompt processing, single-sequence
//! decode and batched decode, each timed by wall clock around the forward steps (and
//! the greedy pick of the next token, which llama.cpp's wall figure also includes).

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use llamay_engine::Model;
use llamay_engine::SeqState;
use llamay_engine::{BatchItem, LogitsWanted};

/// Prompt length before a decode, as bench.py's `--n-short`.
pub const N_SHORT: usize = 16;

/// Greedy ids kept from the single-sequence decode (bench.py prints the same count).
pub const FIRST_IDS: usize = 8;

/// What one round measures.
#[derive(Clone, Debug)]
pub struct Workload {
    pub n_prompt: usize,
    pub n_gen: usize,
    pub batches: Vec<usize>,
}

impl Workload {
    /// Token ids one round consumes: the long prompt, or one short prompt per
    /// sequence of the largest batch.
    pub fn tokens_needed(&self) -> usize {
        let widest = self.batches.iter().copied().max().unwrap_or(1);
        self.n_prompt.max(N_SHORT * widest)
    }

    /// Positions the longest sequence reaches.
    pub fn ctx_needed(&self) -> usize {
        self.n_prompt.max(N_SHORT + self.n_gen)
    }
}

/// The figures of one round.
#[derive(Clone, Debug)]
pub struct Round {
    pub pp_tps: f64,
    pub tg_tps: f64,
    /// The first greedy ids of the single-sequence decode.
    pub first_gen_ids: Vec<u32>,
    /// Aggregate tok/s per batch size, in the workload's order.
    pub batched_tps: Vec<f64>,
    /// The most KV cache bytes held at once during the round.
    pub kv_peak: usize,
}

/// Runs every measurement of `w` once. `tokens` holds at least `w.tokens_needed()` ids.
pub fn round(model: &Model, tokens: &[u32], w: &Workload) -> Result<Round> {
    ensure!(
        tokens.len() >= w.tokens_needed(),
        "too few benchmark tokens"
    );
    let (pp_time, pp_kv) = prompt(model, &tokens[..w.n_prompt])?;
    let single = decode_together(model, &[&tokens[..N_SHORT]], w.n_gen)?;
    let mut kv_peak = pp_kv.max(single.kv_bytes);
    let mut batched_tps = Vec::with_capacity(w.batches.len());
    for &b in &w.batches {
        let prompts: Vec<&[u32]> = tokens.chunks(N_SHORT).take(b).collect();
        let d = decode_together(model, &prompts, w.n_gen)?;
        kv_peak = kv_peak.max(d.kv_bytes);
        batched_tps.push(per_second(b * w.n_gen, d.elapsed));
    }
    Ok(Round {
        pp_tps: per_second(w.n_prompt, pp_time),
        tg_tps: per_second(w.n_gen, single.elapsed),
        first_gen_ids: single.first_ids,
        batched_tps,
        kv_peak,
    })
}

/// An untimed 8-token prompt and 8 decode steps, as bench.py warms up: faults the
/// weights in and lets the thread pool and allocator settle.
pub fn warm_up(model: &Model, tokens: &[u32]) -> Result<()> {
    decode_together(model, &[&tokens[..tokens.len().min(8)]], 8).map(|_| ())
}

fn per_second(n: usize, t: Duration) -> f64 {
    n as f64 / t.as_secs_f64().max(1e-9)
}

/// One forward of the whole prompt from an empty cache: its time and the cache size.
fn prompt(model: &Model, prompt: &[u32]) -> Result<(Duration, usize)> {
    let mut seq = model.new_sequence();
    let t = Instant::now();
    model.forward(&mut [BatchItem {
        seq: &mut seq,
        tokens: prompt,
        want_logits: LogitsWanted::Last,
    }])?;
    Ok((t.elapsed(), seq.kv_bytes()))
}

struct Decoded {
    elapsed: Duration,
    first_ids: Vec<u32>,
    kv_bytes: usize,
}

/// Prefills one sequence per prompt (untimed, in one step), then times `n` steps in
/// which every sequence takes its greedy next token.
fn decode_together(model: &Model, prompts: &[&[u32]], n: usize) -> Result<Decoded> {
    let mut seqs: Vec<SeqState> = prompts.iter().map(|_| model.new_sequence()).collect();
    let mut items: Vec<BatchItem> = seqs
        .iter_mut()
        .zip(prompts)
        .map(|(seq, p)| BatchItem {
            seq,
            tokens: p,
            want_logits: LogitsWanted::Last,
        })
        .collect();
    let mut next = greedy(&model.forward(&mut items)?)?;
    drop(items);
    let mut first_ids = Vec::with_capacity(FIRST_IDS);
    let t = Instant::now();
    for _ in 0..n {
        if first_ids.len() < FIRST_IDS {
            first_ids.push(next[0]);
        }
        let mut items: Vec<BatchItem> = seqs
            .iter_mut()
            .zip(&next)
            .map(|(seq, tok)| BatchItem {
                seq,
                tokens: std::slice::from_ref(tok),
                want_logits: LogitsWanted::Last,
            })
            .collect();
        let logits = model.forward(&mut items)?;
        drop(items);
        next = greedy(&logits)?;
        model.recycle_logits(logits);
    }
    Ok(Decoded {
        elapsed: t.elapsed(),
        first_ids,
        kv_bytes: seqs.iter().map(SeqState::kv_bytes).sum(),
    })
}

/// Each item's highest-logit id (the first of equals).
fn greedy(logits: &[llamay_engine::ItemLogits]) -> Result<Vec<u32>> {
    logits
        .iter()
        .map(|l| {
            let row = l
                .last()
                .ok_or_else(|| anyhow::anyhow!("no logits returned"))?;
            Ok(argmax(row) as u32)
        })
        .collect()
}

/// The index of the first largest value (NaNs never win). Two passes, each of which
/// vectorizes, instead of one running (index, value) pair that does not: over a
/// 262,144-token vocabulary and 8 sequences that pair cost 3% of a decode step.
fn argmax(row: &[f32]) -> usize {
    let mut lanes = [f32::NEG_INFINITY; 16];
    let mut chunks = row.chunks_exact(16);
    for c in &mut chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = m.max(v);
        }
    }
    let best = chunks
        .remainder()
        .iter()
        .chain(&lanes)
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    row.iter().position(|&v| v == best).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_of_equal_maxima_and_skips_nans() {
        let mut row: Vec<f32> = (0..100).map(|i| ((i * 37) % 101) as f32).collect();
        let want =
            row.iter().enumerate().fold(
                (0, f32::NEG_INFINITY),
                |a, (i, &v)| if v > a.1 { (i, v) } else { a },
            );
        assert_eq!(argmax(&row), want.0);
        row[3] = 1000.0;
        row[70] = 1000.0;
        row[5] = f32::NAN;
        assert_eq!(argmax(&row), 3);
        assert_eq!(argmax(&[f32::NAN, 1.0]), 1);
        assert_eq!(argmax(&[]), 0);
    }

    #[test]
    fn workload_sizes_cover_the_longest_prompt_and_the_widest_batch() {
        let w = Workload {
            n_prompt: 32,
            n_gen: 8,
            batches: vec![1, 4],
        };
        assert_eq!(w.tokens_needed(), 64);
        assert_eq!(w.ctx_needed(), 32);
        let w = Workload {
            n_prompt: 4,
            n_gen: 100,
            batches: vec![1],
        };
        assert_eq!(w.tokens_needed(), 16);
        assert_eq!(w.ctx_needed(), 116);
    }
}
