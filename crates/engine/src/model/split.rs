//! How a step of many short sequences uses the threads: by weight rows (every thread
//! works on every sequence, and hands its share of each product to the others) or by
//! sequences (one step per thread over its own sequences, each thread streaming all
//! the weights). Which is faster depends on the model (how much of a step is
//! streaming weights: Gemma 3 270M's 178 MB output layer makes doubling that traffic
//! a loss) and on the machine at the moment (the project's VM places its two vCPUs in
//! one L3 domain or in two, and hand-overs then cost 60 or 340 ns), so it is measured
//! as steps run, per number of sequences, rather than guessed.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::forward::{Hidden, StepInput};
use super::{Model, ModelError};
use crate::batch::{BatchItem, ItemLogits};

/// How a step's work is split over the threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BatchSplit {
    /// Measured: each way is timed, the faster one used, the other retried now and
    /// then.
    #[default]
    Auto,
    /// Always by weight rows.
    Rows,
    /// By sequences whenever the step allows it.
    Sequences,
}

/// Steps of a batch size that are not timed: the first decode steps after a batch's
/// prompts run slow (fresh cache pages), and would count against whichever way ran
/// them.
const SETTLE: u64 = 2;
/// Samples of each way before the faster one is chosen.
const WARMUP: u32 = 4;
/// One step in this many retries the way not chosen, so a change (the machine's, or
/// the contexts' growth) is noticed; one in `EXPLORE_RARELY` when it was more than
/// `CLEARLY_SLOWER` slower, where each retry costs more and a change is less likely.
const EXPLORE_EVERY: u64 = 16;
const EXPLORE_RARELY: u64 = 64;
const CLEARLY_SLOWER: f64 = 1.1;
/// Latest samples kept per way; their median is the way's cost (a median, not a mean:
/// a step that a page fault or an interrupt slowed must not decide alone).
const KEPT: usize = 5;

#[derive(Clone, Copy, Default, Debug)]
struct Mean {
    latest: [f64; KEPT],
    samples: u32,
}

impl Mean {
    fn add(&mut self, ns_per_token: f64) {
        self.latest[self.samples as usize % KEPT] = ns_per_token;
        self.samples = self.samples.saturating_add(1);
    }

    /// The median of the kept samples.
    fn cost(&self) -> f64 {
        let n = (self.samples as usize).min(KEPT);
        let mut v = self.latest;
        let v = &mut v[..n];
        v.sort_by(f64::total_cmp);
        v.get(n / 2).copied().unwrap_or(f64::INFINITY)
    }
}

#[derive(Default, Debug)]
struct Record {
    rows: Mean,
    sequences: Mean,
    /// Steps chosen for, settling included.
    seen: u64,
    steps: u64,
}

/// Chooses the split of each step (see the module docs).
#[derive(Debug, Default)]
pub(super) struct SplitChooser {
    policy: BatchSplit,
    /// Per number of sequences in the step.
    records: Mutex<HashMap<usize, Record>>,
}

impl SplitChooser {
    pub(super) fn new(policy: BatchSplit) -> Self {
        SplitChooser {
            policy,
            records: Mutex::default(),
        }
    }

    /// The split for a step of `n_seqs` sequences (both splits possible).
    pub(super) fn choose(&self, n_seqs: usize) -> BatchSplit {
        if self.policy != BatchSplit::Auto {
            return self.policy;
        }
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let r = records.entry(n_seqs).or_default();
        r.seen += 1;
        if r.seen <= SETTLE {
            return BatchSplit::Rows;
        }
        let (rows, seqs) = (r.rows, r.sequences);
        if rows.samples < WARMUP || seqs.samples < WARMUP {
            return if rows.samples <= seqs.samples {
                BatchSplit::Rows
            } else {
                BatchSplit::Sequences
            };
        }
        r.steps += 1;
        let (rows, seqs) = (rows.cost(), seqs.cost());
        let rows_faster = rows <= seqs;
        let every = if rows.max(seqs) > CLEARLY_SLOWER * rows.min(seqs) {
            EXPLORE_RARELY
        } else {
            EXPLORE_EVERY
        };
        if rows_faster != r.steps.is_multiple_of(every) {
            BatchSplit::Rows
        } else {
            BatchSplit::Sequences
        }
    }

    /// A step of `n_seqs` sequences and `tokens` tokens took `elapsed`, split as `how`.
    pub(super) fn record(&self, n_seqs: usize, how: BatchSplit, elapsed: Duration, tokens: usize) {
        if self.policy != BatchSplit::Auto || tokens == 0 {
            return;
        }
        let ns = elapsed.as_nanos() as f64 / tokens as f64;
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let r = records.entry(n_seqs).or_default();
        if r.seen <= SETTLE {
            return;
        }
        match how {
            BatchSplit::Rows => r.rows.add(ns),
            BatchSplit::Sequences => r.sequences.add(ns),
            BatchSplit::Auto => {}
        }
    }
}

/// Sequences per thread from which a step runs as one step per thread (see
/// `Model::step_split`): fewer would leave the threads' matmuls with tiles too
/// narrow to pay for streaming the weights once per thread.
const PER_THREAD_MIN_SEQS: usize = 2;
/// Most tokens of a step run as one step per thread: larger steps (prompts) are
/// matrix products that split well by rows.
const PER_THREAD_MAX_TOKENS: usize = 64;

impl Model {
    /// One step over validated inputs (`total` tokens). A step of enough sequences
    /// of few tokens may instead run as one step per thread, each over its own
    /// sequences, whichever is measured faster (see the module docs): every thread
    /// then streams all the weights, but no activation passes between threads and
    /// none waits for another before the end. On the 2-core VM, SmolLM2's 8
    /// sequences went from 760–830 tok/s to 910–1,150 when its cores share no cache;
    /// Gemma 3's lost 13–18% (its 178 MB output layer streamed twice).
    pub(super) fn step_split(
        &self,
        batch: &mut [BatchItem],
        total: usize,
    ) -> Result<Vec<ItemLogits>, ModelError> {
        let n = self.pool.n_threads();
        let busy = batch.iter().filter(|i| !i.tokens.is_empty()).count();
        if n < 2 || busy < PER_THREAD_MIN_SEQS * n || total > PER_THREAD_MAX_TOKENS {
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
            *result = Some(self.step_layers(items, StepInput::TOKENS));
        });
        let mut ran = Vec::with_capacity(groups.len());
        let mut failed = None;
        for group in groups {
            let (items, result) = group.into_inner().unwrap_or_else(|e| e.into_inner());
            match result.expect("every group ran") {
                Ok(hidden) => ran.push((items, hidden)),
                Err(e) => failed = Some(e),
            }
        }
        // The output layer for all groups at once, split by rows as usual: streamed
        // once, not once per thread (Gemma 3's is 178 MB).
        let out = match failed {
            Some(e) => Err(e),
            None => {
                let mut parts: Vec<(&[BatchItem], Option<&mut Hidden>)> = ran
                    .iter_mut()
                    .map(|(items, hidden)| (&**items, hidden.as_mut()))
                    .collect();
                self.logits(&mut parts)
            }
        };
        for (_, hidden) in ran {
            self.give_back(hidden);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `steps` steps against per-token costs that `cost(step, how)` gives, and
    /// returns how many used each split.
    fn simulate(steps: usize, cost: impl Fn(usize, BatchSplit) -> u64) -> (usize, usize) {
        let c = SplitChooser::new(BatchSplit::Auto);
        let (mut rows, mut seqs) = (0, 0);
        for s in 0..steps {
            let how = c.choose(8);
            match how {
                BatchSplit::Rows => rows += 1,
                _ => seqs += 1,
            }
            c.record(8, how, Duration::from_nanos(8 * cost(s, how)), 8);
        }
        (rows, seqs)
    }

    #[test]
    fn the_faster_split_is_used_and_the_other_only_retried() {
        let (rows, seqs) = simulate(1000, |_, how| match how {
            BatchSplit::Rows => 1000,
            _ => 800,
        });
        // The slower way: its warm-up, then one step in EXPLORE_EVERY (and the
        // settling steps, split by rows).
        let retries =
            WARMUP as usize..=(WARMUP + SETTLE as u32) as usize + 1000 / EXPLORE_EVERY as usize;
        assert!(retries.contains(&rows), "{rows} {seqs}");
        let (rows, seqs) = simulate(1000, |_, how| match how {
            BatchSplit::Rows => 700,
            _ => 800,
        });
        assert!(retries.contains(&seqs), "{rows} {seqs}");
    }

    #[test]
    fn a_change_of_machine_is_followed() {
        // Sequences faster for 500 steps, then rows: the last 300 steps are mostly rows.
        let c = SplitChooser::new(BatchSplit::Auto);
        let mut late_rows = 0;
        for s in 0..1000 {
            let how = c.choose(4);
            let ns = match (s < 500, how) {
                (true, BatchSplit::Rows) | (false, BatchSplit::Sequences) => 1000,
                _ => 700,
            };
            if s >= 700 && how == BatchSplit::Rows {
                late_rows += 1;
            }
            c.record(4, how, Duration::from_nanos(4 * ns), 4);
        }
        assert!(late_rows > 270, "{late_rows}");
    }

    #[test]
    fn a_fixed_policy_is_kept() {
        let c = SplitChooser::new(BatchSplit::Rows);
        for _ in 0..100 {
            assert_eq!(c.choose(8), BatchSplit::Rows);
            c.record(8, BatchSplit::Rows, Duration::from_millis(1), 8);
        }
    }
}
