//! The generation loop: prompt → forward passes → (mask) → sample → text.
//!
//! Written once and shared by `llamay run` and `llamay serve`. It is where the engine
//! and the constraint meet: the constraint's matcher fills a plain token bitset, and
//! the engine's sampler only ever sees that bitset.

pub(crate) mod calls;
mod decoder;
mod draft;
mod draft_model;
mod forced;
mod harmony;
mod speculation;
mod stats;
mod thinking;
mod utf8;

pub use draft_model::DraftModel;
pub use harmony::HarmonyPlan;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use llamay_constrain::Constraint;
use llamay_engine::SamplerConfig;
use llamay_engine::Tokenizer;
use llamay_engine::{BatchItem, ItemLogits, LogitsWanted, EXACT_PASS_TOKENS};
use llamay_engine::{ImageEmbeddings, Model, ModelError, ProjectorType};

pub(crate) use decoder::Decoder;
pub(crate) use speculation::{Replayed, Speculation};
pub use stats::GenerationStats;
pub(crate) use utf8::Utf8Assembler;

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The model wrote an end-of-generation token.
    Eog,
    /// The token limit was reached.
    Length,
    /// The constraint accepted and allows nothing more.
    Grammar,
    /// A stop string was written.
    Stop,
    /// The caller cancelled (Ctrl-C, a client that went away).
    Cancelled,
}

impl Finish {
    /// The word the `run` statistics line uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Eog => "eog",
            Finish::Length => "length",
            Finish::Grammar => "grammar",
            Finish::Stop => "stop",
            Finish::Cancelled => "cancelled",
        }
    }

    /// The two-word reason OpenAI (`finish_reason`) and Ollama (`done_reason`) both
    /// use: `length` at the token limit, `stop` for every other ending.
    pub fn stop_or_length(self) -> &'static str {
        match self {
            Finish::Length => "length",
            Finish::Eog | Finish::Grammar | Finish::Stop | Finish::Cancelled => "stop",
        }
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenerationParams {
    /// Most tokens to generate; the room the context leaves after the prompt caps it
    /// too.
    pub max_tokens: usize,
    /// How the engine's sampler picks each token (temperature, top-k/p, seed, …).
    pub sampler: SamplerConfig,
    /// Strings that end generation when written; the one matched is not in the output.
    pub stop: Vec<String>,
    /// Take the tokens of forced bytes without sampling (see `forced`).
    pub fast_forward: bool,
    /// Most tokens drafted ahead in one pass (speculative decoding, see `draft`);
    /// 0: none.
    pub draft: usize,
    /// The model that writes the drafts (same vocabulary); `None`: prompt lookup.
    pub draft_model: Option<DraftModel>,
}

/// Most tokens drafted ahead in one pass unless asked otherwise (`llamay run`,
/// `llamay serve`).
pub const DEFAULT_DRAFT: usize = 8;

impl Default for GenerationParams {
    fn default() -> Self {
        GenerationParams {
            max_tokens: 256,
            sampler: SamplerConfig::default(),
            stop: Vec::new(),
            fast_forward: true,
            draft: 0,
            draft_model: None,
        }
    }
}

/// A finished generation.
#[derive(Clone, Debug)]
pub struct Generation {
    /// The output text (never ends inside a UTF-8 character unless the model wrote
    /// invalid bytes).
    pub text: Vec<u8>,
    /// The generated token ids, EOG excluded.
    pub tokens: Vec<u32>,
    /// Why it ended.
    pub finish: Finish,
    /// Token counts and timings.
    pub stats: GenerationStats,
}

/// Why a generation could not start or could not go on.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The prompt leaves no room in the context for a single generated token.
    #[error("the prompt has {prompt} tokens, but the context holds {ctx}")]
    PromptTooLong {
        /// The prompt's length, in tokens.
        prompt: usize,
        /// The model's context, in positions.
        ctx: usize,
    },
    /// The prompt has no tokens.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// A forward pass failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The constraint's mask allowed no token before it accepted: a bug in llamay.
    #[error(
        "the constraint allows no token here (this is a bug in llamay: please report the grammar)"
    )]
    DeadEnd,
    /// The logits held NaN or infinity: a fault in the model file or the engine.
    #[error(
        "the model produced non-finite logits (NaN or infinity), so no token could be \
         chosen: a fault in the model file or the engine, not in the constraint"
    )]
    NonFiniteLogits,
    /// The constraint's matcher refused a token its own mask had allowed.
    #[error("the constraint refused a token it had allowed: {0}")]
    Constraint(#[from] llamay_constrain::Error),
}

/// Runs one generation on one sequence. `on_text` receives the output as it becomes
/// final (whole UTF-8 characters, stop strings held back until they are ruled out).
pub fn generate(
    model: &Model,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    params: &GenerationParams,
    constraint: Option<&Constraint>,
    cancel: &AtomicBool,
    on_text: &mut dyn FnMut(&str),
) -> Result<Generation, GenerateError> {
    generate_continuing(
        model,
        tokenizer,
        model.new_sequence(),
        prompt,
        (params, constraint, None),
        cancel,
        on_text,
        &mut |_| {},
    )
}

/// [`generate`] from `seq`, which already holds the keys and values of a prefix of
/// `prompt` (`llamay run -prompt-cache`): only the rest is fed (at least one token:
/// the next-token logits come from it). `on_prompt` sees the sequence once the
/// whole prompt is in it. A harmony model's chat runs in its channels when given
/// their plan ([`chat_channels`](crate::chat_channels)): `on_text` then gets the
/// answer only.
#[allow(clippy::too_many_arguments)]
pub fn generate_continuing(
    model: &Model,
    tokenizer: &Tokenizer,
    mut seq: llamay_engine::SeqState,
    prompt: &[u32],
    (params, constraint, harmony): (&GenerationParams, Option<&Constraint>, Option<&HarmonyPlan>),
    cancel: &AtomicBool,
    on_text: &mut dyn FnMut(&str),
    on_prompt: &mut dyn FnMut(&llamay_engine::SeqState),
) -> Result<Generation, GenerateError> {
    check_prompt(prompt, model.n_ctx())?;
    let keep = seq.len().min(prompt.len().saturating_sub(1));
    if !seq.truncate(keep) {
        seq = model.new_sequence();
    }
    let t0 = Instant::now();
    let held = seq.len();
    let logits = step(model, &mut seq, &prompt[held..], LogitsWanted::Last)?;
    let prompt_time = t0.elapsed();
    on_prompt(&seq);
    let prefilled = Prefilled {
        seq,
        logits,
        history: prompt,
        n_pos: prompt.len(),
        prompt_time,
    };
    decode(
        model,
        tokenizer,
        prefilled,
        (params, constraint, harmony),
        cancel,
        on_text,
    )
}

/// One piece of a prompt holding images: token ids, or a picture's rows from the
/// vision encoder with the projector that made them (which decides their attention).
#[derive(Clone, Copy, Debug)]
pub enum PromptPiece<'a> {
    /// Token ids.
    Tokens(&'a [u32]),
    /// An image's rows, fed one position each (`Model::forward_image`).
    Image(&'a ImageEmbeddings, ProjectorType),
}

impl PromptPiece<'_> {
    /// The positions the piece takes in the sequence.
    pub fn n_pos(&self) -> usize {
        match self {
            PromptPiece::Tokens(t) => t.len(),
            PromptPiece::Image(rows, _) => rows.n_tokens,
        }
    }
}

/// [`generate`] from a prompt of pieces (text and images, in the order the chat
/// template and libmtmd lay them out), each prefilled in turn from a fresh sequence,
/// then decoded as any prompt (sampling and constraints unchanged). Drafting is off:
/// neither prompt lookup nor a draft model sees the image rows.
pub fn generate_pieces(
    model: &Model,
    tokenizer: &Tokenizer,
    pieces: &[PromptPiece<'_>],
    (params, constraint): (&GenerationParams, Option<&Constraint>),
    cancel: &AtomicBool,
    on_text: &mut dyn FnMut(&str),
) -> Result<Generation, GenerateError> {
    let n_pos: usize = pieces.iter().map(PromptPiece::n_pos).sum();
    if n_pos == 0 {
        return Err(GenerateError::EmptyPrompt);
    }
    if n_pos >= model.n_ctx() {
        return Err(GenerateError::PromptTooLong {
            prompt: n_pos,
            ctx: model.n_ctx(),
        });
    }
    let t0 = Instant::now();
    let mut seq = model.new_sequence();
    let pieces: Vec<_> = pieces.iter().filter(|p| p.n_pos() > 0).collect();
    let mut logits = None;
    for (i, piece) in pieces.iter().enumerate() {
        // Only the last position's logits are read.
        let want = match i + 1 == pieces.len() {
            true => LogitsWanted::Last,
            false => LogitsWanted::None,
        };
        logits = Some(match piece {
            PromptPiece::Tokens(ids) => step(model, &mut seq, ids, want)?,
            PromptPiece::Image(rows, projector) => {
                model.forward_image(&mut seq, rows, *projector, want)?
            }
        });
    }
    let history: Vec<u32> = pieces
        .iter()
        .filter_map(|p| match p {
            PromptPiece::Tokens(t) => Some(*t),
            PromptPiece::Image(..) => None,
        })
        .flatten()
        .copied()
        .collect();
    let prefilled = Prefilled {
        seq,
        logits: logits.ok_or(GenerateError::EmptyPrompt)?,
        history: &history,
        n_pos,
        prompt_time: t0.elapsed(),
    };
    let params = GenerationParams {
        draft: 0,
        draft_model: None,
        ..params.clone()
    };
    decode(
        model,
        tokenizer,
        prefilled,
        (&params, constraint, None),
        cancel,
        on_text,
    )
}

/// A sequence holding its whole prompt, ready to decode.
struct Prefilled<'a> {
    seq: llamay_engine::SeqState,
    /// The last prompt position's logits.
    logits: ItemLogits,
    /// The prompt's token ids (an image's rows have none): the sampler's penalties
    /// and prompt lookup read them.
    history: &'a [u32],
    /// The positions the prompt takes (its tokens and image rows).
    n_pos: usize,
    prompt_time: std::time::Duration,
}

/// The decode loop, shared by every prompt shape.
fn decode(
    model: &Model,
    tokenizer: &Tokenizer,
    prefilled: Prefilled<'_>,
    (params, constraint, harmony): (&GenerationParams, Option<&Constraint>, Option<&HarmonyPlan>),
    cancel: &AtomicBool,
    on_text: &mut dyn FnMut(&str),
) -> Result<Generation, GenerateError> {
    let Prefilled {
        mut seq,
        mut logits,
        history: prompt,
        n_pos,
        prompt_time,
    } = prefilled;
    // The decoder counts its room from the ids it is given: image rows take
    // positions too.
    let image_pos = n_pos - prompt.len();
    let mut decoder = Decoder::new(
        tokenizer,
        model.n_vocab(),
        model.n_ctx() - image_pos,
        prompt,
        params,
        constraint,
    )
    .with_harmony(harmony.cloned());
    // Drafts are checked by replaying the decoder on a pass's rows: only where those
    // are the one-token steps' bits does that leave the output unchanged (a property
    // of the loaded model, probed once: not decoding time).
    let draft = match params.draft > 0 && model.rows_match_steps() {
        true => params.draft,
        false => 0,
    };
    let decode_start = Instant::now();
    let mut spec = Speculation::new(prompt, draft, params.draft_model.as_ref());
    // The row of `logits` the next step reads (one per token of the last pass).
    let mut row = 0;
    let finish = loop {
        if cancel.load(Ordering::Relaxed) {
            break Finish::Cancelled;
        }
        let rest = match spec.replay(&mut decoder, tokenizer, &logits, row, on_text)? {
            Replayed::Done { finish, .. } => break finish,
            Replayed::Feed { rest, drop } => {
                // The drafts past the first refused one leave the KV.
                let keep = seq.len() - drop;
                seq.truncate(keep);
                rest
            }
        };
        // Within the context and the token limit (whose last token ends the
        // generation unfed), and within the pass the engine vouches for.
        let reserved = (n_pos + params.max_tokens).min(model.n_ctx());
        let room = reserved
            .saturating_sub(seq.len() + rest.len() + 1)
            .min(EXACT_PASS_TOKENS.saturating_sub(rest.len()));
        let drafts = spec.draft(&mut decoder, tokenizer, &rest, room);
        let mut tokens = rest.clone();
        tokens.extend_from_slice(&drafts);
        let next = match drafts.is_empty() {
            true => step(model, &mut seq, &tokens, LogitsWanted::Last)?,
            false => step(model, &mut seq, &tokens, LogitsWanted::All)?,
        };
        row = if drafts.is_empty() { 0 } else { rest.len() - 1 };
        model.recycle_logits([std::mem::replace(&mut logits, next)]);
    };
    let done = decoder.finish(finish, on_text);
    let stats = GenerationStats {
        prompt_tokens: n_pos,
        prompt_time,
        generated_tokens: done.tokens.len(),
        decode_time: decode_start.elapsed(),
        forced_tokens: done.forced,
        fast_forwarded_tokens: done.fast_forwarded,
        drafted_tokens: spec.drafted,
        accepted_tokens: spec.accepted,
        mask: done.mask,
    };
    Ok(Generation {
        text: done.text,
        tokens: done.tokens,
        finish,
        stats,
    })
}

/// Refuses prompts no sequence can take (empty, or filling the whole context).
pub fn check_prompt(prompt: &[u32], n_ctx: usize) -> Result<(), GenerateError> {
    if prompt.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    if prompt.len() >= n_ctx {
        return Err(GenerateError::PromptTooLong {
            prompt: prompt.len(),
            ctx: n_ctx,
        });
    }
    Ok(())
}

/// Feeds tokens and returns the logits of the last one, or of each (`All`).
fn step(
    model: &Model,
    seq: &mut llamay_engine::SeqState,
    tokens: &[u32],
    want_logits: LogitsWanted,
) -> Result<ItemLogits, GenerateError> {
    let mut batch = [BatchItem {
        seq,
        tokens,
        want_logits,
    }];
    let out = model.forward(&mut batch)?;
    Ok(out.into_iter().next().unwrap_or(ItemLogits {
        n_vocab: model.n_vocab(),
        data: Vec::new(),
    }))
}
