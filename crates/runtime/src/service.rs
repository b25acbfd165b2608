//! From an internal [`GenRequest`] to a running generation: model, prompt tokens,
//! constraint, queue. Every API shape calls [`Runtime::start`] and reads the events
//! back.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::capabilities::no_tools;
use crate::chat::ChatMessage;
use crate::error::Error;
use crate::generate::GenerationParams;
use crate::generate::HarmonyPlan;
use crate::generate::{check_prompt, GenerateError};
use crate::hold::hold;
use crate::image_rows::image_prompt;
use crate::loaded::{PromptLayers, TemplateSource};
use crate::reasoning::{decide, start_of, ThinkPlan, HARMONY};
use crate::registry::Registry;
use crate::request::{GenEvent, GenRequest, Outcome, Prompt};
use crate::scheduler::Job;
use crate::stats::Stats;
use crate::tools::{harmony, plan, prompt};

/// The models being served, their counters, and the server-wide defaults: what
/// every request path shares.
pub struct Runtime {
    /// The served models: names, loaded instances and named contexts.
    pub registry: Arc<Registry>,
    /// The server-wide counters (`GET /v1/stats`).
    pub stats: Arc<Stats>,
    /// Resolves every request's constraint, with `serve -grammar-file`'s default.
    pub constraints: crate::resolver::Resolver,
    /// The encoder models (`serve -embed`, `-rerank`, and encoders named by requests).
    pub encoders: Arc<crate::embed::Encoders>,
}

/// A generation that has been queued.
pub struct Started {
    /// The generation's events, in the order [`GenEvent`] describes; dropping the
    /// receiver cancels the generation.
    pub events: UnboundedReceiver<GenEvent>,
    /// The model's name as the server reports it.
    pub model: String,
    /// The prompt's length in tokens, as queued (a context's tokens included).
    pub prompt_tokens: usize,
    /// When it was queued, for the responses' `created`.
    pub created: SystemTime,
    /// The generation opens with a thinking block (a reasoning model, thinking on).
    pub thinks: bool,
}

/// How a generation's decoder runs beside its constraint: a thinking block, harmony's
/// channels, strict `auto`'s call openers.
struct Steps {
    thinking: Option<ThinkPlan>,
    harmony: Option<HarmonyPlan>,
    calls: Option<crate::generate::calls::CallTriggers>,
}

/// A request that names no stop strings gets its model's params layer's, as Ollama
/// applies a model's defaults.
fn with_layer_stops(mut params: GenerationParams, layers: &PromptLayers) -> GenerationParams {
    if params.stop.is_empty() {
        params.stop = layers.stop();
    }
    params
}

impl Runtime {
    /// Loads the model if needed, tokenizes the prompt, builds the constraint and
    /// queues the request. Every refusal happens here, before any decoding.
    pub async fn start(&self, req: GenRequest) -> Result<Started, Error> {
        let arrived = Instant::now();
        if let Some(enc) = self.encoders.served(&req.model) {
            return Err(crate::capabilities::cannot_generate(&enc.name));
        }
        // Bad images and a refused constraint are answered before any model loads.
        let images = crate::capabilities::check_images(&req.prompt).await?;
        let whole_tool_calls = req.constraint.whole_tool_calls;
        let spec = self.constraints.resolve(req.constraint).await?;
        let instance = self.registry.get(&req.model, req.keep_alive).await?;
        let lm = instance.lm.clone();
        let context = match &req.context {
            Some(id) => Some(
                self.registry
                    .contexts()
                    .for_model(id, &instance.spec.name)?,
            ),
            None => None,
        };
        if req.tools.is_some() && matches!(lm.template_source, TemplateSource::Builtin(_)) {
            return Err(no_tools(&instance.spec.name));
        }
        let vision = match (images.is_empty(), lm.vision()) {
            (true, _) => None,
            (false, None) => return Err(crate::capabilities::no_vision(&instance.spec.name)),
            (false, Some(enc)) => {
                refuse_image_setups(req.context.is_some(), &lm)?;
                Some((enc.clone(), images, instance.scheduler.kv_cache().clone()))
            }
        };
        let prompt = req.prompt;
        let tools = req.tools.clone();
        // Thinking is a chat matter: a raw prompt is the caller's own.
        let facts = match &prompt {
            Prompt::Chat(_) => lm.thinking.clone(),
            Prompt::Raw(_) if req.thinking.enabled.is_some() || req.thinking.budget.is_some() => {
                return Err(Error::bad_request(format!(
                    "{} applies to chat prompts: a raw prompt is the caller's own, thinking \
                     markers included",
                    req.thinking.field
                )))
            }
            Prompt::Raw(_) => None,
        };
        // A harmony model chats in its channels; a raw prompt is the caller's own.
        let harmony = match &prompt {
            Prompt::Chat(_) => lm.harmony.clone(),
            Prompt::Raw(_) => None,
        };
        let convention = match &harmony {
            Some(_) => Some(&HARMONY),
            None => facts.as_ref().map(|f| f.convention),
        };
        let decided = decide(
            convention,
            &req.thinking,
            &instance.spec.name,
            req.params.max_tokens,
        )?;
        let mut kwargs = req.template_kwargs.unwrap_or_default();
        if let Some((name, on)) = decided.as_ref().and_then(|d| d.kwarg) {
            kwargs.insert(name.into(), serde_json::Value::Bool(on));
        }
        // Harmony's system message says the effort (`Reasoning: high`).
        if let (Some(_), Some(effort)) = (&harmony, req.thinking.effort) {
            kwargs
                .entry("reasoning_effort")
                .or_insert_with(|| effort.into());
        }
        let harmony_budget = decided.as_ref().map_or(1, |d| d.budget);
        let echo = req.echo_prompt;
        let ctx = context.clone();
        let stats = self.stats.clone();
        let prepared = tokio::task::spawn_blocking(move || {
            let merged = ctx.as_ref().is_some_and(|c| c.merges(&prompt));
            let prompt = match &ctx {
                Some(c) => c.continued(prompt),
                None => prompt,
            };
            let mut image_places = Vec::new();
            let (tokens, text) = match prompt {
                Prompt::Chat(messages) => {
                    // Images become libmtmd's markers where the wire placed them.
                    let messages = messages
                        .into_iter()
                        .map(ChatMessage::with_markers)
                        .collect();
                    let (messages, tools) =
                        prompt::prepare(messages, tools.as_deref(), lm.template_renders_tools());
                    let kwargs = (!kwargs.is_empty()).then_some(&kwargs);
                    lm.render_chat(&messages, tools.as_ref(), kwargs)
                        .map_err(|e| Error::bad_request(format!("cannot render the chat: {e}")))?
                }
                Prompt::Raw(text) => (lm.encode_raw(&text), text),
            };
            let (tokens, text) = match &vision {
                Some((enc, images, cache)) => {
                    let counted = (&**cache, &stats.images_encoded);
                    let (ids, places) = image_prompt(&lm, enc, &text, images, counted)?;
                    image_places = places;
                    (ids, text)
                }
                None => (tokens, text),
            };
            let tokens = match &ctx {
                Some(c) => c.continued_tokens(tokens, lm.tokenizer.bos(), merged),
                None => tokens,
            };
            check_prompt(&tokens, lm.model.n_ctx()).map_err(|e| match e {
                GenerateError::PromptTooLong { prompt, ctx } => {
                    Error::context_overflow(prompt, ctx)
                }
                e => Error::bad_request(e.to_string()),
            })?;
            let (spec, calls) = match (tools.as_deref(), &harmony) {
                // Harmony's channels keep calls apart from the answer (`crate::harmony`).
                (Some(_), Some(_)) => (spec, None),
                (Some(set), None) => plan::apply(set, lm.tool_convention, spec, &lm)?,
                (None, _) => (spec, None),
            };
            let (constraint, mut report) = spec.build(&lm)?;
            let harmony = match harmony {
                Some(facts) => {
                    let p = harmony::plan(
                        facts,
                        &lm,
                        tools.as_deref(),
                        constraint.as_ref(),
                        harmony_budget,
                    )?;
                    report.enforced.extend(p.enforced(constraint.is_some()));
                    if tools.as_deref().is_some_and(|t| t.is_forced()) {
                        report.kind = "tools";
                    }
                    Some(p)
                }
                None => None,
            };
            if calls.is_some() {
                report.enforced.push(format!(
                    "tool calls: enforced from the opener on ({})",
                    lm.tool_convention.name()
                ));
            }
            let thinking = facts.zip(decided).map(|(facts, d)| ThinkPlan {
                start: start_of(facts.convention, &text, d.enabled),
                budget: d.budget,
                facts,
            });
            let prompt_text = echo.then_some(text);
            let steps = Steps {
                thinking,
                harmony,
                calls,
            };
            Ok::<_, Error>((tokens, constraint, report, steps, prompt_text, image_places))
        })
        .await
        .map_err(|e| Error::internal(format!("preparing the request failed: {e}")))??;
        let (tokens, constraint, report, steps, prompt_text, images) = prepared;
        let Steps {
            thinking,
            harmony,
            calls,
        } = steps;
        let (tx, rx) = unbounded_channel();
        let prompt_tokens = tokens.len();
        let thinks = harmony.is_some()
            || thinking
                .as_ref()
                .is_some_and(|p| p.start != crate::reasoning::ThinkStart::Answer);
        instance.scheduler.submit(Job {
            prompt: tokens,
            params: with_layer_stops(req.params, &instance.spec.layers),
            constraint,
            report,
            events: tx,
            stream: req.stream,
            arrived,
            thinking,
            harmony,
            prompt_text,
            calls,
            context: context.map(|c| c.prefix.clone()),
            keep: None,
            images,
        })?;
        Ok(Started {
            events: match req.tools {
                Some(set) => hold(rx, set, req.stream && !whole_tool_calls),
                None => rx,
            },
            model: instance.spec.name.clone(),
            prompt_tokens,
            thinks,
            created: SystemTime::now(),
        })
    }
}

/// What an image prompt cannot be yet, refused clearly before any model work: a
/// named context (its blocks would be pinned under pseudo ids no snapshot knows),
/// a hybrid model (its checkpoints would fall inside an image's one step), a model
/// on a GPU (`forward_embeddings` runs on the CPU only).
fn refuse_image_setups(context: bool, lm: &crate::loaded::LoadedModel) -> Result<(), Error> {
    let why = if context {
        "named contexts (llamay_context) do not take images yet"
    } else if lm.model.recurrent_bytes() > 0 {
        "images on a hybrid (recurrent) model are not supported yet"
    } else if lm.model.device().is_some() {
        "images are read on the CPU only: serve the model with -device cpu"
    } else {
        return Ok(());
    };
    Err(Error::bad_request(why).at("messages"))
}

/// Waits for a whole generation: its text and how it ended.
pub async fn collect(mut events: UnboundedReceiver<GenEvent>) -> Result<(String, Outcome), Error> {
    let mut text = String::new();
    while let Some(ev) = events.recv().await {
        match ev {
            GenEvent::Text(t) => text.push_str(&t),
            // The outcome carries the whole thinking text, and every call.
            GenEvent::Reasoning(_) | GenEvent::CallStart { .. } | GenEvent::CallArgs { .. } => {}
            GenEvent::Done(o) => return Ok((text, *o)),
            GenEvent::Error(e) => return Err(e),
        }
    }
    Err(Error::internal(
        "the engine stopped before the generation finished",
    ))
}
