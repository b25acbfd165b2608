//! Choosing the next token from logits.
//!
//! The steps follow llama.cpp's default chain: allowed-token mask (first, so that a
//! constraint engine's choice can never be overridden), repetition/frequency/presence
//! penalties, then greedy or top-k → top-p → min-p → temperature → a seeded draw.

mod rng;
mod stop;

pub use rng::Rng;
pub use stop::{StopConditions, StopReason, StopStep};

/// Sampling settings. The default matches llama.cpp's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// 0 (or below) picks the most likely token (greedy).
    pub temperature: f32,
    /// Keep the k most likely tokens; 0 disables.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches p; 1 disables.
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` × the top probability; 0 disables.
    pub min_p: f32,
    /// Divides positive (multiplies negative) logits of tokens seen recently; 1 disables.
    pub repeat_penalty: f32,
    /// Subtracted once per recent occurrence.
    pub frequency_penalty: f32,
    /// Subtracted once if the token occurred recently.
    pub presence_penalty: f32,
    /// How many of the most recent tokens the penalties look at.
    pub penalty_last_n: usize,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_last_n: 64,
            seed: 0,
        }
    }
}

impl SamplerConfig {
    /// Always the most likely token.
    pub fn greedy() -> Self {
        SamplerConfig {
            temperature: 0.0,
            ..Default::default()
        }
    }
}

/// Whether `token` is allowed by a bitset mask (bit `t % 64` of word `t / 64`).
/// Tokens beyond the mask's words are not allowed.
pub fn mask_allows(mask: &[u64], token: u32) -> bool {
    let t = token as usize;
    mask.get(t / 64).is_some_and(|w| (w >> (t % 64)) & 1 == 1)
}

/// A sampler with its own random stream (one per sequence).
#[derive(Clone, Debug)]
pub struct Sampler {
    cfg: SamplerConfig,
    rng: Rng,
    /// Scratch: (token, logit) of the tokens still in the running.
    cand: Vec<(u32, f32)>,
}

impl Sampler {
    pub fn new(cfg: SamplerConfig) -> Sampler {
        Sampler {
            rng: Rng::new(cfg.seed),
            cfg,
            cand: Vec::new(),
        }
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// Picks a token from `logits` given the tokens generated or read so far
    /// (`history`, for the penalties) and an optional allowed-token bitset. Returns
    /// `None` only when the mask allows no token.
    pub fn sample(&mut self, logits: &[f32], history: &[u32], mask: Option<&[u64]>) -> Option<u32> {
        if self.cfg.temperature <= 0.0 && mask.is_none() && !self.penalizes() {
            // The common greedy case without building the candidate list: a serving
            // step samples every sequence on one thread while the others wait.
            return first_max(logits);
        }
        self.cand.clear();
        match mask {
            None => self
                .cand
                .extend(logits.iter().enumerate().map(|(i, &l)| (i as u32, l))),
            Some(m) => self.cand.extend(
                logits
                    .iter()
                    .enumerate()
                    .map(|(i, &l)| (i as u32, l))
                    .filter(|&(i, _)| mask_allows(m, i)),
            ),
        }
        // NaN logits can never be chosen.
        self.cand.retain(|c| !c.1.is_nan());
        if self.cand.is_empty() {
            return None;
        }
        self.apply_penalties(history);
        if self.cfg.temperature <= 0.0 {
            return Some(best(&self.cand));
        }
        self.truncate_sorted();
        let probs = softmax(&self.cand, self.cfg.temperature);
        let mut r = self.rng.next_f64();
        for (c, p) in self.cand.iter().zip(&probs) {
            if r < *p {
                return Some(c.0);
            }
            r -= p;
        }
        // Rounding left r just above the total: the last candidate.
        self.cand.last().map(|c| c.0)
    }

    /// Leaves the candidates that survive top-k, then top-p, then min-p, most likely
    /// first. Each cut keeps a prefix of the sorted candidates, so only as much of
    /// the vocabulary is sorted as the cuts can reach: the best `k` are selected in
    /// linear time and sorted, growing `k` until the cut falls inside (sorting a
    /// 262,144-token vocabulary on every step would cost more than the forward pass).
    fn truncate_sorted(&mut self) {
        let cfg = &self.cfg;
        let cand = &mut self.cand;
        if cfg.top_k > 0 && cfg.top_k < cand.len() {
            cand.select_nth_unstable_by(cfg.top_k - 1, desc);
            cand.truncate(cfg.top_k);
        }
        let max = cand.iter().fold(f32::NEG_INFINITY, |m, c| m.max(c.1));
        // Min-p keeps the candidates within ln(min_p) of the best logit.
        let min_p_keep = if cfg.min_p > 0.0 {
            let floor = max + cfg.min_p.ln();
            cand.iter().filter(|c| c.1 >= floor).count().max(1)
        } else {
            cand.len()
        };
        // Top-p's probabilities are over all candidates left by top-k.
        let nucleus = (cfg.top_p < 1.0).then(|| {
            let m = max as f64;
            let total: f64 = cand.iter().map(|c| (c.1 as f64 - m).exp()).sum();
            (m, total)
        });
        // Without a nucleus the cut is known (min-p's count): select and sort it at once.
        let mut sorted = if nucleus.is_some() {
            64.min(min_p_keep)
        } else {
            min_p_keep
        };
        loop {
            if sorted < cand.len() {
                cand.select_nth_unstable_by(sorted - 1, desc);
            }
            cand[..sorted].sort_unstable_by(desc);
            let mut keep = min_p_keep.min(sorted);
            let mut cut = min_p_keep <= sorted;
            if let Some((m, total)) = nucleus {
                let mut cum = 0.0;
                for (i, c) in cand[..keep].iter().enumerate() {
                    cum += if total > 0.0 && total.is_finite() {
                        (c.1 as f64 - m).exp() / total
                    } else {
                        1.0 / cand.len() as f64
                    };
                    if cum >= cfg.top_p as f64 {
                        keep = i + 1;
                        cut = true;
                        break;
                    }
                }
            }
            // The cut is final once it falls inside the sorted prefix (or all is sorted).
            if cut || sorted == cand.len() {
                cand.truncate(keep);
                return;
            }
            sorted = (sorted * 4).min(cand.len());
        }
    }

    /// Whether any penalty would change a logit.
    fn penalizes(&self) -> bool {
        let c = &self.cfg;
        c.penalty_last_n != 0
            && (c.repeat_penalty != 1.0 || c.frequency_penalty != 0.0 || c.presence_penalty != 0.0)
    }

    fn apply_penalties(&mut self, history: &[u32]) {
        if !self.penalizes() {
            return;
        }
        let c = &self.cfg;
        let recent = &history[history.len().saturating_sub(c.penalty_last_n)..];
        let mut counts = std::collections::HashMap::new();
        for &t in recent {
            *counts.entry(t).or_insert(0u32) += 1;
        }
        for cand in &mut self.cand {
            if let Some(&n) = counts.get(&cand.0) {
                let l = &mut cand.1;
                *l = if *l > 0.0 {
                    *l / c.repeat_penalty
                } else {
                    *l * c.repeat_penalty
                };
                *l -= n as f32 * c.frequency_penalty + c.presence_penalty;
            }
        }
    }
}

/// The most likely candidate; ties go to the lowest id.
fn best(cand: &[(u32, f32)]) -> u32 {
    let mut b = cand[0];
    for &c in &cand[1..] {
        if c.1 > b.1 || (c.1 == b.1 && c.0 < b.0) {
            b = c;
        }
    }
    b.0
}

/// [`best`] over all of `logits` but NaNs: the highest, the lowest id of equals. Two
/// passes, each of which vectorizes.
fn first_max(logits: &[f32]) -> Option<u32> {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &l| m.max(l));
    logits.iter().position(|&l| l == max).map(|i| i as u32)
}

/// Most likely first; ties by lower id, so results do not depend on the sort.
fn desc(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// Probabilities of the candidates at `temperature`, in f64.
fn softmax(cand: &[(u32, f32)], temperature: f32) -> Vec<f64> {
    let t = temperature as f64;
    let max = cand
        .iter()
        .fold(f64::NEG_INFINITY, |m, c| m.max(c.1 as f64));
    if max == f64::NEG_INFINITY {
        // Every candidate is impossible by its logit but allowed by the mask.
        return vec![1.0 / cand.len() as f64; cand.len()];
    }
    let e: Vec<f64> = cand
        .iter()
        .map(|c| ((c.1 as f64 - max) / t).exp())
        .collect();
    let sum: f64 = e.iter().sum();
    e.into_iter().map(|v| v / sum).collect()
}
