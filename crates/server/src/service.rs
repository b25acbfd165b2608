//! From an internal [`GenRequest`] to a running generation: model, prompt tokens,
//! constraint, queue. API modules call [`start`] and read the events back.

use std::time::{Instant, SystemTime};

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::app::AppState;
use crate::constraint_spec::ConstraintSpec;
use crate::error::ApiError;
use crate::generate::check_prompt;
use crate::request::{GenEvent, GenRequest, Outcome, Prompt};
use crate::scheduler::Job;
use crate::tools::hold::hold;
use crate::tools::prompt;

/// A generation that has been queued.
pub struct Started {
    pub events: UnboundedReceiver<GenEvent>,
    /// The model's name as the server reports it.
    pub model: String,
    pub prompt_tokens: usize,
    pub created: SystemTime,
}

/// Loads the model if needed, tokenizes the prompt, builds the constraint and
/// queues the request. Every refusal happens here, before any decoding.
pub async fn start(state: &AppState, req: GenRequest) -> Result<Started, ApiError> {
    let arrived = Instant::now();
    let engine = state.models.get(&req.model, req.keep_alive).await?;
    // A forced tool call replaces every other constraint on the request.
    let forced = req.tools.as_ref().and_then(|t| t.forced_constraint());
    let spec = match (forced, &req.constraint, &state.default_grammar) {
        (Some(t), _, _) => ConstraintSpec::Tools(t),
        (None, ConstraintSpec::None, Some(g)) => ConstraintSpec::Grammar(g.clone()),
        (None, c, _) => c.clone(),
    };
    let lm = engine.lm.clone();
    let prompt = req.prompt;
    let tools = req.tools.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        let tokens = match prompt {
            Prompt::Chat(messages) => {
                let (messages, tools) =
                    prompt::prepare(messages, tools.as_deref(), lm.template_renders_tools());
                lm.encode_chat(&messages, tools.as_ref())
                    .map_err(|e| ApiError::bad_request(format!("cannot render the chat: {e}")))?
            }
            Prompt::Raw(text) => lm.encode_raw(&text),
        };
        check_prompt(&tokens, lm.model.n_ctx())
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let (constraint, report) = spec.build(&lm)?;
        Ok::<_, ApiError>((tokens, constraint, report))
    })
    .await
    .map_err(|e| ApiError::internal(format!("preparing the request failed: {e}")))??;
    let (tokens, constraint, report) = prepared;
    let (tx, rx) = unbounded_channel();
    let prompt_tokens = tokens.len();
    engine.scheduler.submit(Job {
        prompt: tokens,
        params: req.params,
        constraint,
        report,
        events: tx,
        stream: req.stream,
        arrived,
    })?;
    Ok(Started {
        events: match req.tools {
            Some(set) => hold(rx, set),
            None => rx,
        },
        model: engine.name.clone(),
        prompt_tokens,
        created: SystemTime::now(),
    })
}

/// Waits for a whole generation: its text and how it ended.
pub async fn collect(
    mut events: UnboundedReceiver<GenEvent>,
) -> Result<(String, Outcome), ApiError> {
    let mut text = String::new();
    while let Some(ev) = events.recv().await {
        match ev {
            GenEvent::Text(t) => text.push_str(&t),
            GenEvent::Done(o) => return Ok((text, *o)),
            GenEvent::Error(e) => return Err(e),
        }
    }
    Err(ApiError::internal(
        "the engine stopped before the generation finished",
    ))
}

/// Seconds since the Unix epoch (the `created` fields).
pub fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A seed for requests that give none, so unseeded requests differ.
pub fn fresh_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ COUNTER.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
}
