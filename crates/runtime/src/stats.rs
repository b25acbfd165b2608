//! Server-wide counters behind `GET /v1/stats`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use llamay_constrain::MatcherStats;

/// Counters updated by handlers and engine threads.
pub struct Stats {
    /// When the counters started (the server's start), for `uptime_s`.
    pub started: Instant,
    /// HTTP requests received, on every route (the server's guard counts them).
    pub requests: AtomicU64,
    /// Requests answered with a 4xx or 5xx, refusals before any handler included.
    pub errors: AtomicU64,
    /// Generations the engines finished (context prefills included).
    pub completed: AtomicU64,
    /// Generations whose client went away, and those ended by a shutdown.
    pub cancelled: AtomicU64,
    /// Pictures run through a vision encoder (one found in the prefix cache is not).
    pub images_encoded: AtomicU64,
    /// Generations stopped at their deadline (`SchedulerConfig::timeout`).
    pub timed_out: AtomicU64,
    /// Prompt tokens of generations (cached ones included) and of embedded inputs.
    pub prompt_tokens: AtomicU64,
    /// Tokens generated.
    pub completion_tokens: AtomicU64,
    /// Forward passes of the batching engines, every model together.
    pub steps: AtomicU64,
    /// Sum over steps of the sequences in the step (mean batch = this / steps).
    pub step_sequences: AtomicU64,
    /// Tokens fed over all steps (prompt chunks and sampled tokens).
    pub step_tokens: AtomicU64,
    /// Tokens drafted ahead by finished generations (speculative decoding).
    pub drafted_tokens: AtomicU64,
    /// Drafted tokens the generations' own choices took.
    pub accepted_tokens: AtomicU64,
    mask: Mutex<MaskTotals>,
}

/// Mask statistics summed over finished requests.
#[derive(Default, Clone, Copy)]
struct MaskTotals {
    requests: u64,
    steps: u64,
    mask_us: f64,
    cache_hits: u64,
    states_wanting_mask: u64,
    table_clears: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            started: Instant::now(),
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            images_encoded: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
            prompt_tokens: AtomicU64::new(0),
            completion_tokens: AtomicU64::new(0),
            steps: AtomicU64::new(0),
            step_sequences: AtomicU64::new(0),
            step_tokens: AtomicU64::new(0),
            drafted_tokens: AtomicU64::new(0),
            accepted_tokens: AtomicU64::new(0),
            mask: Mutex::new(MaskTotals::default()),
        }
    }
}

impl Stats {
    /// Counts one engine step of `sequences` sequences feeding `tokens` tokens.
    pub fn record_step(&self, sequences: usize, tokens: usize) {
        self.steps.fetch_add(1, Ordering::Relaxed);
        self.step_sequences
            .fetch_add(sequences as u64, Ordering::Relaxed);
        self.step_tokens.fetch_add(tokens as u64, Ordering::Relaxed);
    }

    /// Adds a finished request's drafts and the drafts it took.
    pub fn add_drafts(&self, drafted: usize, accepted: usize) {
        self.drafted_tokens
            .fetch_add(drafted as u64, Ordering::Relaxed);
        self.accepted_tokens
            .fetch_add(accepted as u64, Ordering::Relaxed);
    }

    /// Adds a finished request's mask statistics to the totals.
    pub fn add_mask(&self, m: &MatcherStats) {
        let mut t = self.mask.lock().unwrap_or_else(|e| e.into_inner());
        t.requests += 1;
        t.steps += m.steps;
        t.mask_us += m.mask_time.as_secs_f64() * 1e6;
        t.cache_hits += m.cache_hits;
        t.states_wanting_mask += m.states_wanting_mask;
        t.table_clears += m.table_clears;
    }

    /// The counters as JSON (the engine and model parts are added by the caller).
    pub fn to_json(&self) -> serde_json::Value {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let m = *self.mask.lock().unwrap_or_else(|e| e.into_inner());
        let steps = get(&self.steps);
        serde_json::json!({
            "uptime_s": self.started.elapsed().as_secs(),
            "requests": get(&self.requests),
            "errors": get(&self.errors),
            "completed": get(&self.completed),
            "cancelled": get(&self.cancelled),
            "images_encoded": get(&self.images_encoded),
            "timed_out": get(&self.timed_out),
            "tokens": {
                "prompt": get(&self.prompt_tokens),
                "completion": get(&self.completion_tokens),
            },
            "batching": {
                "steps": steps,
                "mean_sequences_per_step": if steps == 0 { 0.0 } else { get(&self.step_sequences) as f64 / steps as f64 },
                "tokens_fed": get(&self.step_tokens),
            },
            "speculation": {
                "drafted_tokens": get(&self.drafted_tokens),
                "accepted_tokens": get(&self.accepted_tokens),
                "acceptance": match get(&self.drafted_tokens) {
                    0 => 0.0,
                    d => get(&self.accepted_tokens) as f64 / d as f64,
                },
            },
            "mask": {
                "requests": m.requests,
                "steps": m.steps,
                "us_per_step": if m.steps == 0 { 0.0 } else { m.mask_us / m.steps as f64 },
                "cache_hits": m.cache_hits,
                "hit_rate": if m.steps == 0 { 0.0 } else { 100.0 * m.cache_hits as f64 / m.steps as f64 },
                "states_wanting_mask": m.states_wanting_mask,
                "table_clears": m.table_clears,
            },
        })
    }
}
