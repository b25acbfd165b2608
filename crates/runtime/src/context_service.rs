//! `Runtime`'s named-context operations (above the service, beside `retrieval`):
//! create (a prefix prefilled once by the model's scheduler, or restored from a
//! snapshot without prefilling), fork, snapshot. The contexts themselves and their
//! store are `kv::contexts`; the snapshot format is `kv::snapshot`.

use std::sync::Arc;
use std::time::Duration;

use llamay_engine::KV_BLOCK_TOKENS;
use llamay_store::Digest;

use crate::chat::ChatMessage;
use crate::error::Error;
use crate::kv::contexts::{NamedContext, DEFAULT_CONTEXT_TTL};
use crate::kv::snapshot;
use crate::kv::{ContextInfo, Prefix};
use crate::registry::Instance;
use crate::request::Prompt;
use crate::scheduler::Job;
use crate::service::Runtime;
use crate::tools::{prompt, ToolSet};

/// `POST /v1/contexts`: what to compute (or restore) and keep.
pub struct ContextRequest {
    /// The model name as the client wrote it (empty: the server's default).
    pub model: String,
    /// The prefix: messages (rendered with the model's template) or a raw prompt.
    /// Ignored when `snapshot` is given.
    pub prompt: Option<Prompt>,
    /// Tools offered with a chat prefix, rendered into it as a chat request offering
    /// them renders them (so its continuations, offering the same tools, share the
    /// prefix); unused with a raw prompt.
    pub tools: Option<Arc<ToolSet>>,
    /// `sha256:…` of a snapshot to restore instead of prefilling.
    pub snapshot: Option<String>,
    /// Idle time before the context is dropped.
    pub ttl: Option<Duration>,
}

/// What `POST /v1/contexts/{id}/snapshot` wrote.
pub struct Snapshotted {
    /// The blob's `sha256:…` in the model store, to restore it by.
    pub digest: String,
    /// The blob's size in bytes (header, tokens and KV blocks).
    pub bytes: usize,
    /// Tokens of the context's prefix the snapshot holds.
    pub tokens: usize,
}

/// The tokens every continuation of a chat shares: the longest common prefix of the
/// conversation followed by two different user turns. Rendering the messages alone
/// would end in the assistant's header, which a continuation (a user turn next)
/// does not have.
fn chat_prefix_tokens(
    lm: &crate::loaded::LoadedModel,
    messages: &[ChatMessage],
    tools: Option<&ToolSet>,
) -> Result<Vec<u32>, Error> {
    let render = |probe: &str| {
        let mut all = messages.to_vec();
        all.push(ChatMessage::new("user", probe));
        let (all, tools) = prompt::prepare(all, tools, lm.template_renders_tools());
        lm.render_chat(&all, tools.as_ref(), None)
            .map(|(ids, _)| ids)
            .map_err(|e| Error::bad_request(format!("cannot render the chat: {e}")))
    };
    let (a, b) = (render("A")?, render("Z")?);
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    Ok(a[..common].to_vec())
}

impl Runtime {
    /// Creates a named context: prefilled once on the model's scheduler (its blocks
    /// then pinned while it exists), or restored from a snapshot.
    pub async fn create_context(&self, req: ContextRequest) -> Result<ContextInfo, Error> {
        let instance = self.registry.get(&req.model, None).await?;
        let ttl = req.ttl.unwrap_or(DEFAULT_CONTEXT_TTL);
        if let Some(digest) = &req.snapshot {
            return self.restore_context(&instance, digest, ttl).await;
        }
        let Some(prompt) = req.prompt else {
            return Err(Error::bad_request(
                "a context needs messages or a prompt (or a snapshot to restore)",
            ));
        };
        if let Prompt::Chat(m) = &prompt {
            if m.iter().any(|m| !m.images.is_empty()) {
                return Err(
                    Error::bad_request("named contexts do not take images yet").at("messages")
                );
            }
        }
        let lm = instance.lm.clone();
        let tools = req.tools.clone();
        let messages = match &prompt {
            Prompt::Chat(m) => Some(m.clone()),
            Prompt::Raw(_) => None,
        };
        let tokens = tokio::task::spawn_blocking(move || match &prompt {
            Prompt::Chat(m) => chat_prefix_tokens(&lm, m, tools.as_deref()),
            Prompt::Raw(text) => Ok(lm.encode_raw(text)),
        })
        .await
        .map_err(|e| Error::internal(format!("preparing the context failed: {e}")))??;
        if tokens.is_empty() {
            return Err(Error::bad_request(
                "the context's prompt renders to no tokens",
            ));
        }
        let n_ctx = instance.lm.model.n_ctx();
        if tokens.len() >= n_ctx {
            return Err(Error::bad_request(format!(
                "the context holds {} tokens; the model's context is {n_ctx} and a \
                 continuation needs room",
                tokens.len()
            )));
        }
        let model = &instance.lm.model;
        self.check_pool(
            &instance,
            tokens.len().div_ceil(KV_BLOCK_TOKENS) * model.kv_block_bytes()
                + model.recurrent_bytes(),
        )?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (events, _events_rx) = tokio::sync::mpsc::unbounded_channel();
        instance.scheduler.submit(Job {
            keep: Some(tx),
            ..Job::new(tokens, Default::default(), events)
        })?;
        let prefix = rx
            .await
            .map_err(|_| Error::internal("the engine stopped before the context was computed"))?;
        self.registry.contexts().insert(NamedContext::new(
            format!("ctx_{}", crate::ids::short_id()),
            instance.spec.name.clone(),
            prefix,
            messages,
            ttl,
        ))
    }

    /// A 507 when the contexts pinned in `instance`'s pool leave no room for
    /// `needed` more bytes (blocks and a hybrid model's recurrent state).
    fn check_pool(&self, instance: &Instance, needed: usize) -> Result<(), Error> {
        let cache = instance.scheduler.kv_cache();
        let pinned = self.registry.contexts().pinned_bytes(&instance.spec.name);
        if pinned + needed > cache.bound() {
            return Err(Error::insufficient_storage(format!(
                "the KV pool of {} ({} MiB) is taken by named contexts ({} MiB pinned); \
                 this one needs {} MiB more: delete contexts or raise -kv-cache-mb",
                instance.spec.name,
                cache.bound() >> 20,
                pinned >> 20,
                needed.div_ceil(1 << 20)
            )));
        }
        cache.enforce(&instance.lm.model);
        Ok(())
    }

    /// `n` forks of context `id`, sharing its blocks.
    pub fn fork_context(&self, id: &str, n: usize) -> Result<Vec<ContextInfo>, Error> {
        self.registry
            .contexts()
            .fork(id, n, || format!("ctx_{}", crate::ids::short_id()))
    }

    /// The `sha256:…` of the model file behind `instance` (read once per file).
    async fn model_digest(&self, instance: &Instance) -> Result<String, Error> {
        let path = instance.spec.path.clone();
        let contexts = self.registry.contexts();
        if let Some(d) = contexts.known_digest(&path) {
            return Ok(d);
        }
        let p = path.clone();
        let d = tokio::task::spawn_blocking(move || Digest::of_file(&p))
            .await
            .map_err(|e| Error::internal(format!("hashing the model failed: {e}")))?
            .map_err(|e| Error::internal(format!("cannot hash the model file: {e}")))?
            .to_string();
        contexts.remember_digest(path, d.clone());
        Ok(d)
    }

    fn snapshot_store(&self) -> Result<&llamay_store::Store, Error> {
        self.registry.store().ok_or_else(|| {
            Error::bad_request("snapshots are kept in the model store, and this server has none")
        })
    }

    /// Writes context `id` (tokens and blocks) into the model store as one
    /// content-addressed blob.
    pub async fn snapshot_context(&self, id: &str) -> Result<Snapshotted, Error> {
        let ctx = self.registry.contexts().get(id)?;
        let instance = self.registry.get(&ctx.model, None).await?;
        let model = &instance.lm.model;
        let header = snapshot::header_for(
            model,
            &self.model_digest(&instance).await?,
            ctx.prefix.len(),
            ctx.prefix.blocks.len(),
            ctx.prefix.state.as_ref().map_or(0, |s| s.bytes()),
        );
        let store = self.snapshot_store()?.clone();
        tokio::task::spawn_blocking(move || {
            let blocks: Vec<Vec<u8>> = ctx.prefix.blocks.iter().map(|b| b.to_le_bytes()).collect();
            let state = ctx
                .prefix
                .state
                .as_ref()
                .map_or(Vec::new(), |s| s.to_le_bytes());
            let bytes = snapshot::write(&header, &ctx.prefix.tokens, &blocks, &state);
            let digest = store
                .put_snapshot(&bytes)
                .map_err(|e| Error::internal(format!("cannot write the snapshot: {e}")))?;
            Ok(Snapshotted {
                digest: digest.to_string(),
                bytes: bytes.len(),
                tokens: header.tokens,
            })
        })
        .await
        .map_err(|e| Error::internal(format!("writing the snapshot failed: {e}")))?
    }

    /// A context restored from snapshot `digest` for `instance`'s model: refused
    /// (409) when the snapshot's model, KV type, block layout or engine differ.
    async fn restore_context(
        &self,
        instance: &Arc<Instance>,
        digest: &str,
        ttl: Duration,
    ) -> Result<ContextInfo, Error> {
        let want = Digest::parse(digest)
            .map_err(|e| Error::bad_request(format!("snapshot: {e}")).at("snapshot"))?;
        let model_digest = self.model_digest(instance).await?;
        let store = self.snapshot_store()?.clone();
        let inst = instance.clone();
        let prefix = tokio::task::spawn_blocking(move || {
            let bytes = store
                .read_snapshot(&want)
                .map_err(|e| Error::internal(format!("cannot read the snapshot: {e}")))?
                .ok_or_else(|| Error::not_found(format!("no snapshot {want} in the store")))?;
            if Digest::of_bytes(&bytes) != want {
                return Err(Error::internal(format!(
                    "the stored snapshot {want} does not hash to its name (damaged store)"
                )));
            }
            let snap = snapshot::parse(&bytes)
                .map_err(|e| Error::bad_request(format!("snapshot {want}: {e}")))?;
            let model = &inst.lm.model;
            if let Some(why) = snapshot::mismatch(&snap.header, model, &model_digest) {
                return Err(Error::conflict(format!(
                    "snapshot {want} does not fit model {}: {why}",
                    inst.spec.name
                )));
            }
            if snap.tokens.is_empty() || snap.tokens.len() >= model.n_ctx() {
                return Err(Error::bad_request(format!(
                    "snapshot {want} holds {} tokens; the model's context is {}",
                    snap.tokens.len(),
                    model.n_ctx()
                )));
            }
            if let Some(&t) = snap.tokens.iter().find(|&&t| t as usize >= model.n_vocab()) {
                return Err(Error::bad_request(format!(
                    "snapshot {want} holds token {t}, outside the vocabulary"
                )));
            }
            let blocks = snap
                .blocks
                .iter()
                .map(|b| model.block_from_bytes(b))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| Error::bad_request(format!("snapshot {want}: {e}")))?;
            // `mismatch` checked the state's size against the model's: a hybrid
            // model's snapshot has one, another model's none.
            let state = match snap.recurrent {
                [] => None,
                bytes => Some(Arc::new(
                    model
                        .recurrent_from_bytes(bytes, snap.tokens.len())
                        .map_err(|e| Error::bad_request(format!("snapshot {want}: {e}")))?,
                )),
            };
            Ok(Prefix {
                tokens: snap.tokens.into(),
                blocks: blocks.into(),
                state,
            })
        })
        .await
        .map_err(|e| Error::internal(format!("reading the snapshot failed: {e}")))??;
        self.check_pool(instance, prefix.bytes())?;
        // Its blocks (and its state, as their checkpoint) serve the prefix cache too.
        instance.scheduler.kv_cache().insert_settled(
            &prefix.tokens,
            &prefix.blocks,
            prefix.state.as_deref().map(std::borrow::Cow::Borrowed),
        );
        let mut ctx = NamedContext::new(
            format!("ctx_{}", crate::ids::short_id()),
            instance.spec.name.clone(),
            prefix,
            None,
            ttl,
        );
        ctx.snapshot = Some(digest.to_string());
        self.registry.contexts().insert(ctx)
    }
}
