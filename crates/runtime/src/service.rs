//! From an internal [`GenRequest`] to a running generation: model, prompt tokens,
//! constraint, queue. Every API shape calls [`Runtime::start`] and reads the events
//! back.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::constraint::ConstraintSpec;
use crate::error::Error;
use crate::generate::check_prompt;
use crate::hold::hold;
use crate::registry::Registry;
use crate::request::{GenEvent, GenRequest, Outcome, Prompt};
use crate::scheduler::Job;
use crate::stats::Stats;
use crate::tools::prompt;

/// The models being served, their counters, and the server-wide defaults: what
/// every request path shares.
pub struct Runtime {
    pub registry: Arc<Registry>,
    pub stats: Arc<Stats>,
    /// `serve -grammar-file`: the grammar of requests that bring no constraint.
    pub default_grammar: Option<Arc<str>>,
    /// The encoder models (`serve -embed`, `-rerank`, and encoders named by requests).
    pub encoders: Arc<crate::embed::Encoders>,
}

/// A generation that has been queued.
pub struct Started {
    pub events: UnboundedReceiver<GenEvent>,
    /// The model's name as the server reports it.
    pub model: String,
    pub prompt_tokens: usize,
    pub created: SystemTime,
}

impl Runtime {
    /// Loads the model if needed, tokenizes the prompt, builds the constraint and
    /// queues the request. Every refusal happens here, before any decoding.
    pub async fn start(&self, req: GenRequest) -> Result<Started, Error> {
        let arrived = Instant::now();
        if let Some(enc) = self.encoders.served(&req.model) {
            return Err(crate::embed::cannot_generate(&enc.name));
        }
        let instance = self.registry.get(&req.model, req.keep_alive).await?;
        let spec = ConstraintSpec::decide(
            req.constraint,
            req.tools.as_ref().and_then(|t| t.forced_constraint()),
            self.default_grammar.as_ref(),
        );
        let lm = instance.lm.clone();
        let prompt = req.prompt;
        let tools = req.tools.clone();
        let prepared = tokio::task::spawn_blocking(move || {
            let tokens = match prompt {
                Prompt::Chat(messages) => {
                    let (messages, tools) =
                        prompt::prepare(messages, tools.as_deref(), lm.template_renders_tools());
                    lm.encode_chat(&messages, tools.as_ref())
                        .map_err(|e| Error::bad_request(format!("cannot render the chat: {e}")))?
                }
                Prompt::Raw(text) => lm.encode_raw(&text),
            };
            check_prompt(&tokens, lm.model.n_ctx())
                .map_err(|e| Error::bad_request(e.to_string()))?;
            let (constraint, report) = spec.build(&lm)?;
            Ok::<_, Error>((tokens, constraint, report))
        })
        .await
        .map_err(|e| Error::internal(format!("preparing the request failed: {e}")))??;
        let (tokens, constraint, report) = prepared;
        let (tx, rx) = unbounded_channel();
        let prompt_tokens = tokens.len();
        instance.scheduler.submit(Job {
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
            model: instance.spec.name.clone(),
            prompt_tokens,
            created: SystemTime::now(),
        })
    }
}

/// Waits for a whole generation: its text and how it ended.
pub async fn collect(mut events: UnboundedReceiver<GenEvent>) -> Result<(String, Outcome), Error> {
    let mut text = String::new();
    while let Some(ev) = events.recv().await {
        match ev {
            GenEvent::Text(t) => text.push_str(&t),
            GenEvent::Done(o) => return Ok((text, *o)),
            GenEvent::Error(e) => return Err(e),
        }
    }
    Err(Error::internal(
        "the engine stopped before the generation finished",
    ))
}
