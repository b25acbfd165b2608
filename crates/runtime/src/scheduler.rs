//! Continuous batching: one engine thread per loaded model decodes every active
//! request together.
//!
//! Each step builds one [`BatchItem`] per active sequence (a chunk of its prompt
//! while it is joining, else its last token), calls `Model::forward` once, and hands
//! each sequence's logits to its own [`Decoder`] (the same per-step logic `llamay
//! run` uses). Requests join and leave between steps; a request whose client went
//! away (its event receiver was dropped) or whose deadline passed is dropped before
//! the next step, which frees its slot.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llamay_constrain::Constraint;
use llamay_engine::SeqState;
use llamay_engine::ThreadPool;
use llamay_engine::{BatchItem, ItemLogits, LogitsWanted};
use llamay_engine::{EXACT_PASS_TOKENS, KV_BLOCK_TOKENS, MAX_STEP_TOKENS};
use tokio::sync::mpsc::UnboundedSender;

use crate::constraint::EnforcementReport;
use crate::error::Error;
use crate::generate::{Decoder, DraftModel, Finish, GenerationParams, Replayed, Speculation};
use crate::image_rows::{is_image_id, usable_prefix, ImagePlace};
use crate::kv::{Prefix, PrefixCache, CHECKPOINT_TOKENS};
use crate::loaded::LoadedModel;
use crate::reasoning::ThinkPlan;
use crate::request::{GenEvent, Outcome};
use crate::stats::Stats;

/// How much work one model's engine takes on.
#[derive(Clone, Copy, Debug)]
pub struct SchedulerConfig {
    /// Sequences decoded together.
    pub max_active: usize,
    /// Requests waiting for a slot; beyond this, new requests get a 503.
    pub max_queue: usize,
    /// Longest a request may take from arrival to its last token.
    pub timeout: Duration,
    /// The KV pool bound in bytes (`-kv-cache-mb`) on every block alive: cached
    /// prefixes, contexts and running sequences. Unreferenced cached blocks are
    /// evicted past it, and a request waits until what it may write fits (0: nothing
    /// is cached and nothing waits; `None`: `kv::default_pool_bytes`, a quarter of
    /// the machine's memory, at most 8 GiB).
    pub kv_cache_bytes: Option<usize>,
    /// Most tokens a sequence drafts ahead in one pass (`serve -no-spec`: 0). A
    /// request may ask for fewer (`llamay_speculate: false`: none); a sequence drafts
    /// only while it decodes alone, within [`EXACT_PASS_TOKENS`] a pass: a batch, which
    /// already reads each weight once for several tokens, runs without drafts.
    pub max_draft: usize,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            max_active: 8,
            max_queue: 64,
            timeout: Duration::from_secs(300),
            kv_cache_bytes: None,
            max_draft: crate::generate::DEFAULT_DRAFT,
        }
    }
}

/// A request ready for the engine: tokens, settings and where to send events.
pub struct Job {
    /// The prompt's token ids, rendered and tokenized (a context's tokens included).
    pub prompt: Vec<u32>,
    /// Token limit, sampler and stop strings.
    pub params: GenerationParams,
    /// The output constraint, built for this model's vocabulary; `None`: unconstrained.
    pub constraint: Option<Constraint>,
    /// Echoed back in the outcome.
    pub report: EnforcementReport,
    /// Where text and the outcome go; dropping the receiver cancels the job.
    pub events: UnboundedSender<GenEvent>,
    /// Send text as it is decoded. Otherwise all of it goes in one event just before
    /// the outcome: a waiting handler has nothing to do with pieces, and waking it for
    /// each token takes the cores from the forward pass.
    pub stream: bool,
    /// When the request reached the server (the timeout counts from here).
    pub arrived: Instant,
    /// A reasoning model's thinking block (none: the answer from the first token).
    pub thinking: Option<ThinkPlan>,
    /// A harmony model's channels (thinking, the answer, a call), when it chats.
    pub harmony: Option<crate::generate::HarmonyPlan>,
    /// The rendered prompt, echoed in the outcome when asked for.
    pub prompt_text: Option<String>,
    /// Strict `auto` tool calls: the openers its free text is watched for.
    pub calls: Option<crate::generate::calls::CallTriggers>,
    /// A named context the prompt continues (`llamay_context`): its blocks are used
    /// as they are when the prompt starts with its tokens.
    pub context: Option<Prefix>,
    /// Prefill only (a context being created): the prompt's blocks go here once
    /// computed, and nothing is sampled.
    pub keep: Option<tokio::sync::oneshot::Sender<Prefix>>,
    /// The images in `prompt` (whose rows hold pseudo ids there), in order; empty
    /// for a text prompt.
    pub images: Vec<ImagePlace>,
}

impl Job {
    /// A job for `prompt` under `params`, its events sent to `events`, with every other
    /// field at its plain default: unconstrained with an empty report, not streamed,
    /// arrived now, no thinking block or harmony channels, no prompt echo, no tool-call triggers, no
    /// context, and sampled (not prefill only). Set what differs with struct update
    /// syntax: `Job { keep: Some(tx), ..Job::new(prompt, params, events) }`.
    pub fn new(
        prompt: Vec<u32>,
        params: GenerationParams,
        events: UnboundedSender<GenEvent>,
    ) -> Job {
        Job {
            prompt,
            params,
            constraint: None,
            report: EnforcementReport::default(),
            events,
            stream: false,
            arrived: Instant::now(),
            thinking: None,
            harmony: None,
            prompt_text: None,
            calls: None,
            context: None,
            keep: None,
            images: Vec::new(),
        }
    }
}

/// The handle to one model's engine thread. Dropping it lets the thread finish its
/// active requests and exit.
pub struct Scheduler {
    tx: mpsc::Sender<Job>,
    counts: Arc<Counts>,
    cfg: SchedulerConfig,
    cache: Arc<PrefixCache>,
}

/// Requests waiting and running, shared with the engine thread.
#[derive(Default)]
pub struct Counts {
    /// Jobs submitted and not yet decoding (the queue `max_queue` bounds).
    pub waiting: AtomicUsize,
    /// Sequences in the batch now (at most `max_active`).
    pub active: AtomicUsize,
    /// Set when the engine thread has ended (after an unload, or a panic).
    pub stopped: std::sync::atomic::AtomicBool,
    /// Set when the server is shutting down: every request ends now, as cancelled.
    pub cancelling: std::sync::atomic::AtomicBool,
}

/// Marks the engine stopped however its thread ends, unwinding included.
struct StopGuard(Arc<Counts>);

impl Drop for StopGuard {
    fn drop(&mut self) {
        self.0.stopped.store(true, Ordering::SeqCst);
        self.0.active.store(0, Ordering::SeqCst);
    }
}

impl Scheduler {
    /// Starts the engine thread for `lm`; `name` is the model's name in messages.
    pub fn start(
        name: &str,
        lm: Arc<LoadedModel>,
        cfg: SchedulerConfig,
        stats: Arc<Stats>,
    ) -> Self {
        Self::start_with_draft(name, lm, None, cfg, stats)
    }

    /// [`Self::start`], with `draft` writing the drafts of every job that brings no
    /// draft model of its own (`serve -draft`).
    pub fn start_with_draft(
        name: &str,
        lm: Arc<LoadedModel>,
        draft: Option<DraftModel>,
        cfg: SchedulerConfig,
        stats: Arc<Stats>,
    ) -> Self {
        let (tx, rx) = mpsc::channel();
        let counts = Arc::new(Counts::default());
        let bound = cfg
            .kv_cache_bytes
            .unwrap_or_else(crate::kv::default_pool_bytes);
        let hybrid = lm.model.recurrent_bytes() > 0;
        let cache = Arc::new(PrefixCache::new(bound, hybrid));
        let engine = EngineLoop {
            cache: cache.clone(),
            name: name.to_string(),
            lm,
            draft,
            cfg,
            stats,
            counts: counts.clone(),
            rx,
            waiting: VecDeque::new(),
            active: Vec::new(),
        };
        std::thread::Builder::new()
            .name("llamay-engine".into())
            .spawn(move || engine.run())
            .expect("spawning the engine thread");
        Scheduler {
            tx,
            counts,
            cfg,
            cache,
        }
    }

    /// The model's prefix cache (and pool bound).
    pub fn kv_cache(&self) -> &Arc<PrefixCache> {
        &self.cache
    }

    /// Queues a job, or refuses it with a 503 when the queue is full.
    pub fn submit(&self, job: Job) -> Result<(), Error> {
        if self.counts.cancelling.load(Ordering::SeqCst) {
            return Err(Error::overloaded("the server is shutting down"));
        }
        let waiting = self.counts.waiting.fetch_add(1, Ordering::SeqCst);
        if waiting >= self.cfg.max_queue {
            self.counts.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(Error::overloaded(format!(
                "the server is busy ({waiting} requests waiting); retry shortly"
            )));
        }
        self.tx.send(job).map_err(|_| {
            self.counts.waiting.fetch_sub(1, Ordering::SeqCst);
            Error::overloaded("the model is unloading; retry shortly")
        })
    }

    /// Ends every request, running or waiting, as cancelled (each gets its final
    /// event), and refuses new ones: the end of a shutdown's drain.
    pub fn cancel_all(&self) {
        self.counts.cancelling.store(true, Ordering::SeqCst);
    }

    /// Requests waiting and running now.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Whether the engine thread still runs (a bug that panics it ends it; the
    /// model registry then loads the model afresh).
    pub fn is_alive(&self) -> bool {
        !self.counts.stopped.load(Ordering::SeqCst)
    }
}

/// Blocks a job's sequence holds at its longest: its prompt and, unless it only
/// prefills a context, a reply of its token limit, within the context size.
fn blocks_needed(job: &Job, n_ctx: usize) -> usize {
    let reply = if job.keep.is_some() {
        0
    } else {
        job.params.max_tokens
    };
    job.prompt
        .len()
        .saturating_add(reply)
        .min(n_ctx)
        .div_ceil(KV_BLOCK_TOKENS)
}

/// One sequence being decoded.
struct Slot {
    job: Job,
    seq: SeqState,
    decoder: Decoder,
    /// Tokens to feed: the prompt while joining, then the last sampled token.
    feed: Vec<u32>,
    fed: usize,
    prefilling: bool,
    joined: Instant,
    prompt_time: Duration,
    decode_start: Instant,
    /// Text held back for a job that does not stream.
    held: String,
    /// The tokens whose keys and values the sequence holds, in order.
    history: Vec<u32>,
    /// Prompt tokens found computed (a cached prefix or the job's context).
    cached: usize,
    /// Drafts: the lookup's history, the drafts in flight, the counts.
    spec: Speculation,
    /// Drafts at the end of `feed` (their rows are wanted too).
    drafts: usize,
}

impl Slot {
    /// Sends `t` now, or holds it for the end (see [`Job::stream`]).
    fn emit(job: &Job, held: &mut String, t: &str) {
        if job.stream {
            let _ = job.events.send(GenEvent::Text(t.to_string()));
        } else {
            held.push_str(t);
        }
    }
}

struct EngineLoop {
    cache: Arc<PrefixCache>,
    name: String,
    lm: Arc<LoadedModel>,
    /// The server's draft model, for jobs without one of their own.
    draft: Option<DraftModel>,
    cfg: SchedulerConfig,
    stats: Arc<Stats>,
    counts: Arc<Counts>,
    rx: mpsc::Receiver<Job>,
    waiting: VecDeque<Job>,
    active: Vec<Slot>,
}

impl EngineLoop {
    fn run(mut self) {
        let _guard = StopGuard(self.counts.clone());
        // The probe of whether drafts leave the output unchanged runs once, here,
        // rather than inside the first request's time.
        let draft_max = match self.cfg.max_draft > 0 && self.lm.model.rows_match_steps() {
            true => self.cfg.max_draft,
            false => 0,
        };
        let mut open = true;
        while open || !self.active.is_empty() || !self.waiting.is_empty() {
            if open && self.active.is_empty() && self.waiting.is_empty() {
                match self.rx.recv_timeout(Duration::from_millis(500)) {
                    Ok(job) => self.waiting.push_back(job),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            loop {
                match self.rx.try_recv() {
                    Ok(job) => self.waiting.push_back(job),
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            }
            if self.counts.cancelling.load(Ordering::SeqCst) {
                self.cancel_everything();
            }
            self.admit(draft_max);
            self.drop_gone();
            if !self.active.is_empty() {
                self.step();
            }
            self.counts
                .active
                .store(self.active.len(), Ordering::SeqCst);
        }
    }

    fn admit(&mut self, draft_max: usize) {
        while self.active.len() < self.cfg.max_active {
            let Some(job) = self.waiting.front() else {
                break;
            };
            if !job.events.is_closed() && !self.room_for(job) {
                break; // first come, first served: the next job waits its turn too
            }
            let Some(job) = self.waiting.pop_front() else {
                break;
            };
            self.counts.waiting.fetch_sub(1, Ordering::SeqCst);
            if job.events.is_closed() {
                self.stats.cancelled.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let model = &self.lm.model;
            // An image's rows are no tokens: the sampler's penalties and the prompt
            // lookup read the prompt's real ids, and the room counts every position.
            let text: Vec<u32> = match job.images.is_empty() {
                true => job.prompt.clone(),
                false => job
                    .prompt
                    .iter()
                    .copied()
                    .filter(|&t| !is_image_id(t))
                    .collect(),
            };
            let image_rows = job.prompt.len() - text.len();
            let decoder = Decoder::new(
                &self.lm.tokenizer,
                model.n_vocab(),
                model.n_ctx() - image_rows,
                &text,
                &job.params,
                job.constraint.as_ref(),
            )
            .with_thinking(job.thinking.clone())
            .with_harmony(job.harmony.clone())
            .with_call_triggers(job.calls.clone());
            let now = Instant::now();
            let (seq, cached) = self.attach(&job);
            // No drafts over an image prompt: a draft model reads no image rows, and
            // a lookup must never propose a pseudo id.
            let max_draft = match job.images.is_empty() {
                true => job.params.draft.min(draft_max),
                false => 0,
            };
            let drafter = job.params.draft_model.as_ref().or(self.draft.as_ref());
            let spec = Speculation::new(&text, max_draft, drafter);
            let mut job = job;
            // Images the cache already holds are neither encoded nor fed.
            for im in job.images.iter_mut().filter(|im| im.end() <= cached) {
                im.release();
            }
            self.active.push(Slot {
                spec,
                drafts: 0,
                seq,
                decoder,
                feed: job.prompt.clone(),
                fed: cached,
                history: job.prompt[..cached].to_vec(),
                cached,
                prefilling: true,
                joined: now,
                prompt_time: Duration::ZERO,
                decode_start: now,
                held: String::new(),
                job,
            });
        }
    }

    /// Whether the KV pool can hold all `job` may write (its prompt and its reply up
    /// to the token limit) beside all the running sequences may still write, once
    /// unreferenced cached blocks are evicted (here, before the step that fills its
    /// blocks, which the eviction after each step would only catch afterwards).
    /// Reserving the worst case up front keeps the pool a hard bound without
    /// preempting anyone; a job that waits for room costs a queue turn, not memory.
    /// With nothing running a job always has room: a request larger than the pool
    /// runs alone rather than never.
    fn room_for(&self, job: &Job) -> bool {
        let model = &self.lm.model;
        let reserved = self.reserved_blocks();
        // Blocks the job would share (held here, so eviction cannot take them); a
        // context's partly filled last block is copied on the first write, so only
        // its full blocks count.
        let shared = match &job.context {
            Some(ctx) if job.prompt.starts_with(&ctx.tokens) => ctx.len() / KV_BLOCK_TOKENS,
            _ => 0,
        };
        // Likewise a cached prefix's partly matched last block.
        let found = self
            .cache
            .cached_len(&job.prompt, job.prompt.len().saturating_sub(1));
        let shared = shared.max(found / KV_BLOCK_TOKENS);
        // A hybrid model's sequence holds a recurrent state of its own beside the
        // checkpoint `reserved_blocks` counts.
        let own =
            blocks_needed(job, model.n_ctx()).saturating_sub(shared) + 2 * self.state_blocks();
        self.cache.make_room(model, reserved + own) || self.active.is_empty()
    }

    /// Blocks' worth (rounded up) of one recurrent state: 0 but for a hybrid model.
    fn state_blocks(&self) -> usize {
        let model = &self.lm.model;
        model
            .recurrent_bytes()
            .div_ceil(model.kv_block_bytes().max(1))
    }

    /// Blocks the running sequences may still write (their prompts and token limits)
    /// and, for a hybrid model, the checkpoint each may file in a step before the
    /// step's eviction: the pool keeps room for them.
    fn reserved_blocks(&self) -> usize {
        let n_ctx = self.lm.model.n_ctx();
        let state = self.state_blocks();
        self.active
            .iter()
            .map(|s| blocks_needed(&s.job, n_ctx).saturating_sub(s.seq.blocks().len()) + state)
            .sum()
    }

    /// The sequence a job starts from, and how many of its prompt tokens it already
    /// holds: its context's blocks when the prompt continues the context, else the
    /// longest cached prefix, else nothing. At least one prompt
    /// token is always left to feed, for the next-token logits.
    fn attach(&self, job: &Job) -> (SeqState, usize) {
        let model = &self.lm.model;
        if let Some(ctx) = &job.context {
            if ctx.len() < job.prompt.len() && job.prompt.starts_with(&ctx.tokens) {
                if let Ok(seq) = ctx.sequence(model) {
                    let c = &self.cache.counters;
                    c.lookups.fetch_add(1, Ordering::Relaxed);
                    c.hits.fetch_add(1, Ordering::Relaxed);
                    c.prompt_tokens
                        .fetch_add(job.prompt.len() as u64, Ordering::Relaxed);
                    c.hit_tokens.fetch_add(ctx.len() as u64, Ordering::Relaxed);
                    return (seq, ctx.len());
                }
            }
        }
        let mut found = self.cache.lookup(&job.prompt);
        found.cut_to(usable_prefix(found.tokens, &job.images));
        let n = found.tokens;
        if n > 0 {
            if let Ok(seq) = found.sequence(model) {
                return (seq, n);
            }
        }
        (model.new_sequence(), 0)
    }

    /// A shutdown's drain is over: running requests end as cancelled with what they
    /// wrote so far, waiting ones with a refusal.
    fn cancel_everything(&mut self) {
        for job in self.waiting.drain(..) {
            self.counts.waiting.fetch_sub(1, Ordering::SeqCst);
            let _ = job.events.send(GenEvent::Error(Error::overloaded(
                "the server is shutting down",
            )));
        }
        for s in std::mem::take(&mut self.active) {
            self.stats.cancelled.fetch_add(1, Ordering::Relaxed);
            self.finish(s, Ok(Finish::Cancelled));
        }
    }

    /// Frees the slots of clients that went away and of requests past their time.
    fn drop_gone(&mut self) {
        let timeout = self.cfg.timeout;
        let stats = &self.stats;
        self.active.retain(|s| {
            if s.job.events.is_closed() {
                stats.cancelled.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            if s.job.arrived.elapsed() > timeout {
                let _ = s.job.events.send(GenEvent::Error(Error::timeout(format!(
                    "the request took longer than {}s and was stopped",
                    timeout.as_secs()
                ))));
                stats.timed_out.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            true
        });
    }

    /// Gives decoding sequences their drafts for this step: only while one sequence
    /// decodes alone (a batch already reads each weight once for several tokens: on
    /// two cores, drafts beside eight sequences measured 0.59-1.08x the rate without,
    /// median 0.72, so a batch runs without them), none while a prompt joins (its
    /// chunk makes the pass long), within [`EXACT_PASS_TOKENS`] fed in all, and never
    /// past what the sequence reserved in the pool (its prompt and token limit).
    fn draft(&mut self) {
        let alone = self.active.len() == 1 && !self.active[0].prefilling;
        let chosen: usize = self
            .active
            .iter()
            .filter(|s| !s.prefilling)
            .map(|s| s.feed.len() - s.fed)
            .sum();
        let mut spare = match alone {
            true => EXACT_PASS_TOKENS.saturating_sub(chosen),
            false => 0,
        };
        let n_ctx = self.lm.model.n_ctx();
        for s in self.active.iter_mut().filter(|s| !s.prefilling) {
            let reserved = (s.job.prompt.len() + s.job.params.max_tokens).min(n_ctx);
            // The token limit's last token ends the generation unfed.
            let room = reserved.saturating_sub(s.seq.len() + s.feed.len() + 1);
            let drafts = s
                .spec
                .draft(&mut s.decoder, &self.lm.tokenizer, &s.feed, spare.min(room));
            spare -= drafts.len();
            s.drafts = drafts.len();
            s.feed.extend(drafts);
        }
    }

    /// One forward pass over every active sequence, then one sampling step for each
    /// sequence whose logits came back.
    fn step(&mut self) {
        self.feed_images();
        if self.active.is_empty() {
            return;
        }
        self.draft();
        // Decoding sequences take one token each; joining ones share what is left of
        // the step budget, so a long prompt never stalls the others' next token.
        let mut budget =
            MAX_STEP_TOKENS.saturating_sub(self.active.iter().filter(|s| !s.prefilling).count());
        let mut takes = Vec::with_capacity(self.active.len());
        for s in &self.active {
            let left = s.feed.len() - s.fed;
            let take = if s.prefilling {
                // A prompt chunk stops where an image starts: its rows go in a step
                // of their own (`feed_images`).
                let to_image = next_image(s).map_or(left, |im| im.start - s.fed);
                let t = left.min(to_image).min(budget).min(self.piece_limit(&s.seq));
                budget -= t;
                t
            } else {
                left
            };
            takes.push(take);
        }
        let mut items: Vec<BatchItem> = Vec::new();
        let mut index: Vec<usize> = Vec::new();
        for (i, (s, &take)) in self.active.iter_mut().zip(&takes).enumerate() {
            if take == 0 {
                continue;
            }
            let end = s.fed + take;
            items.push(BatchItem {
                seq: &mut s.seq,
                tokens: &s.feed[s.fed..end],
                want_logits: match (end == s.feed.len(), s.drafts > 0) {
                    (false, _) => LogitsWanted::None,
                    (true, false) => LogitsWanted::Last,
                    (true, true) => LogitsWanted::All,
                },
            });
            index.push(i);
        }
        let n_tokens: usize = items.iter().map(|it| it.tokens.len()).sum();
        let result = self.lm.model.forward(&mut items);
        drop(items);
        self.stats.record_step(index.len(), n_tokens);
        let logits = match result {
            Ok(l) => l,
            Err(e) => {
                let msg = format!("model {}: the forward pass failed: {e}", self.name);
                for &i in index.iter().rev() {
                    let s = self.active.remove(i);
                    let _ = s
                        .job
                        .events
                        .send(GenEvent::Error(Error::internal(msg.clone())));
                }
                return;
            }
        };
        // Sequences whose logits came back take a step (sample, mask, stop checks).
        let mut kept: Vec<usize> = Vec::new();
        let mut work: Vec<(usize, &mut Slot, &ItemLogits)> = Vec::new();
        let mut results = index.iter().zip(&logits).peekable();
        for (i, s) in self.active.iter_mut().enumerate() {
            let Some((_, l)) = results.next_if(|(&j, _)| j == i) else {
                continue;
            };
            s.history
                .extend_from_slice(&s.feed[s.fed..s.fed + takes[i]]);
            s.fed += takes[i];
            if l.n_rows() == 0 {
                // A prompt chunk that is not the last: a hybrid model's ends on a
                // checkpoint boundary, and its state there is filed.
                if s.seq.recurrent().is_some() {
                    self.cache
                        .insert(&s.history, s.seq.blocks(), s.seq.recurrent());
                }
                continue;
            }
            if s.prefilling {
                // The prompt's blocks are cached as soon as they exist, for the
                // requests that share it while this one still decodes.
                self.cache
                    .insert(&s.history, s.seq.blocks(), s.seq.recurrent());
                if let Some(keep) = s.job.keep.take() {
                    let _ = keep.send(Prefix::of_sequence(s.history.clone().into(), &s.seq));
                    kept.push(i);
                    continue;
                }
                s.prefilling = false;
                s.prompt_time = s.joined.elapsed();
                s.decode_start = Instant::now();
                self.stats
                    .prompt_tokens
                    .fetch_add(s.feed.len() as u64, Ordering::Relaxed);
            }
            work.push((i, s, l));
        }
        let tokenizer = &*self.lm.tokenizer;
        // Sampling (a sort over the vocabulary) and masks are per sequence and
        // independent: spread them over the forward pass's threads, still spinning
        // (threads spawned for each step cost more than greedy sampling itself).
        let stepped = par_map(self.lm.model.pool(), work, |(i, s, l)| {
            let (job, held) = (&s.job, &mut s.held);
            // With drafts, the rows from the last chosen token's on; else the one row.
            let row = l.n_rows().saturating_sub(s.drafts + 1);
            let r = s
                .spec
                .replay(&mut s.decoder, tokenizer, l, row, &mut |t: &str| {
                    Slot::emit(job, held, t)
                });
            // Thinking goes out as it comes when streaming; the outcome has all of it.
            if let Some(t) = s.decoder.take_reasoning() {
                if job.stream {
                    let _ = job.events.send(GenEvent::Reasoning(t));
                }
            }
            let (r, drop) = match r {
                Ok(Replayed::Feed { rest, drop }) => {
                    s.feed = rest;
                    s.fed = 0;
                    (None, drop)
                }
                Ok(Replayed::Done { finish, drop }) => (Some((i, Ok(finish))), drop),
                Err(e) => (Some((i, Err(e.to_string()))), 0),
            };
            // The drafts past the first refused one leave the KV (and the history the
            // prefix cache files the blocks under).
            let keep = s.history.len() - drop;
            s.seq.truncate(keep);
            s.history.truncate(keep);
            s.drafts = 0;
            r
        });
        self.lm.model.recycle_logits(logits);
        let mut done: Vec<(usize, Option<Result<Finish, String>>)> = stepped
            .into_iter()
            .flatten()
            .map(|(i, r)| (i, Some(r)))
            .chain(kept.into_iter().map(|i| (i, None)))
            .collect();
        done.sort_by_key(|d| d.0);
        for (i, r) in done.into_iter().rev() {
            let s = self.active.remove(i);
            match r {
                Some(r) => self.finish(s, r),
                // A context's prefill: its blocks went to whoever keeps them.
                None => {
                    self.stats.completed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        // Room is kept for what the running sequences may still write: a hybrid
        // model's checkpoints of their prompts are filed as they go, and must not
        // take it.
        self.cache
            .enforce_beside(&self.lm.model, self.reserved_blocks());
    }

    /// Feeds each joining sequence that stands at an image its rows, encoding the
    /// picture first if that was not done before it was queued (on this engine
    /// thread and the encoder's pool: never an async thread). All of one image's
    /// rows are one step, as Gemma 3's non-causal rows must be; a sequence whose
    /// image fails ends with the error.
    fn feed_images(&mut self) {
        let Some(enc) = self.lm.vision().cloned() else {
            return;
        };
        let model = &self.lm.model;
        let mut failed = Vec::new();
        for (i, s) in self.active.iter_mut().enumerate() {
            while s.prefilling {
                let fed = s.fed;
                let Some(im) = s.job.images.iter_mut().find(|im| im.start == fed) else {
                    break;
                };
                let projector = im.projector;
                let rows = match im.encode(&enc, &self.stats.images_encoded) {
                    Ok(r) => r,
                    Err(e) => {
                        failed.push((i, format!("encoding an image failed: {e}")));
                        break;
                    }
                };
                // Text always follows (`Runtime::start` refuses a prompt ending in
                // an image): the next-token logits come from it.
                let want = LogitsWanted::None;
                if let Err(e) = model.forward_image(&mut s.seq, rows, projector, want) {
                    failed.push((i, format!("feeding an image failed: {e}")));
                    break;
                }
                let end = im.end();
                im.release();
                self.stats.record_step(1, end - fed);
                s.history.extend_from_slice(&s.feed[fed..end]);
                s.fed = end;
            }
        }
        for (i, e) in failed.into_iter().rev() {
            let s = self.active.remove(i);
            let e = Error::internal(format!("model {}: {e}", self.name));
            let _ = s.job.events.send(GenEvent::Error(e));
        }
    }

    /// Most prompt tokens `seq` takes in one pass: a hybrid model's stop at the next
    /// multiple of [`CHECKPOINT_TOKENS`], where its recurrent state is filed as a
    /// checkpoint (the state cannot be rewound, so a later request sharing the
    /// prompt can only start where one was taken); others take the step's budget.
    fn piece_limit(&self, seq: &SeqState) -> usize {
        match seq.recurrent() {
            Some(_) => CHECKPOINT_TOKENS - seq.len() % CHECKPOINT_TOKENS,
            None => usize::MAX,
        }
    }

    fn finish(&self, s: Slot, r: Result<Finish, String>) {
        // Everything the sequence computed (prompt and reply) is cached: the next
        // turn of a chat resends both, and a repeated prompt finds all of itself.
        let mut s = s;
        let (blocks, state) = s.seq.into_parts();
        self.cache
            .insert_settled(&s.history, &blocks, state.map(std::borrow::Cow::Owned));
        drop(blocks);
        let finish = match r {
            Ok(f) => f,
            Err(e) => {
                let e = format!("model {}: {e}", self.name);
                let _ = s.job.events.send(GenEvent::Error(Error::internal(e)));
                return;
            }
        };
        let (job, held) = (&s.job, &mut s.held);
        let done = s
            .decoder
            .finish(finish, &mut |t: &str| Slot::emit(job, held, t));
        let events = s.job.events.clone();
        if !s.held.is_empty() {
            let _ = events.send(GenEvent::Text(std::mem::take(&mut s.held)));
        }
        self.stats
            .completion_tokens
            .fetch_add(done.tokens.len() as u64, Ordering::Relaxed);
        self.stats.add_drafts(s.spec.drafted, s.spec.accepted);
        if let Some(m) = &done.mask {
            self.stats.add_mask(m);
        }
        self.stats.completed.fetch_add(1, Ordering::Relaxed);
        let stop_sequence = done
            .stop_index
            .and_then(|i| s.job.params.stop.get(i).cloned());
        let outcome = Outcome {
            finish,
            stop_sequence,
            prompt_tokens: s.job.prompt.len(),
            cached_tokens: s.cached,
            completion_tokens: done.tokens.len(),
            prompt_time: s.prompt_time,
            decode_time: s.decode_start.elapsed(),
            queue_time: s.joined.saturating_duration_since(s.job.arrived),
            mask: done.mask,
            report: s.job.report.clone(),
            tool_calls: Vec::new(),
            calls_opened: done.calls_opened,
            reasoning: done.reasoning,
            reasoning_tokens: done.reasoning_tokens,
            prompt_text: s.job.prompt_text.take(),
            drafted_tokens: s.spec.drafted,
            accepted_tokens: s.spec.accepted,
        };
        let _ = events.send(GenEvent::Done(Box::new(outcome)));
    }
}

/// The first image of a joining sequence not fed yet.
fn next_image(s: &Slot) -> Option<&ImagePlace> {
    s.job.images.iter().find(|im| im.start >= s.fed)
}

/// Maps `items` in order, spread over the model's thread pool.
fn par_map<T: Send, R: Send>(
    pool: &ThreadPool,
    items: Vec<T>,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    if pool.n_threads() <= 1 || items.len() <= 1 {
        return items.into_iter().map(f).collect();
    }
    // One cell per item: a task takes its input out and leaves its result.
    let cells: Vec<Mutex<(Option<T>, Option<R>)>> = items
        .into_iter()
        .map(|t| Mutex::new((Some(t), None)))
        .collect();
    pool.run(cells.len(), &|i| {
        let mut cell = cells[i].lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = cell.0.take() {
            cell.1 = Some(f(t));
        }
    });
    cells
        .into_iter()
        .map(|c| {
            let (_, r) = c.into_inner().unwrap_or_else(|e| e.into_inner());
            r.expect("every task ran (the pool re-raises a task's panic)")
        })
        .collect()
}
