//! Named contexts: a prefix computed once and kept, by id, for any number of
//! requests to continue (`llamay_context`), to fork and to snapshot.
//!
//! A context holds its [`Prefix`]'s blocks by reference count, so they are pinned:
//! the prefix cache never evicts a block anybody holds. Forks hold the same blocks
//! (nothing is copied); a request continuing a context copies at most its partly
//! filled last block, when it writes there. A hybrid model's context also holds the
//! recurrent state after its last token, shared by its forks the same way; each
//! continuation starts from a copy of it. Idle contexts expire after their TTL.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::Prefix;
use crate::error::Error;

/// Default idle time before a context is dropped.
pub(crate) const DEFAULT_CONTEXT_TTL: Duration = Duration::from_secs(3600);
/// Most contexts kept at once (forks included).
pub(crate) const MAX_CONTEXTS: usize = 4096;
/// Most forks one call makes.
pub(crate) const MAX_FORKS: usize = 64;

/// One named context.
pub struct NamedContext {
    pub id: String,
    /// The model's name as the server reports it.
    pub model: String,
    pub prefix: Prefix,
    pub created: SystemTime,
    /// The context it was forked from.
    pub parent: Option<String>,
    /// The snapshot it was restored from.
    pub snapshot: Option<String>,
    /// The chat it was created from, when it was (a request's messages continue it).
    pub messages: Option<Vec<crate::chat::ChatMessage>>,
    pub ttl: Duration,
    last_used: Mutex<Instant>,
}

impl NamedContext {
    pub fn new(
        id: String,
        model: String,
        prefix: Prefix,
        messages: Option<Vec<crate::chat::ChatMessage>>,
        ttl: Duration,
    ) -> NamedContext {
        NamedContext {
            id,
            model,
            prefix,
            created: SystemTime::now(),
            parent: None,
            snapshot: None,
            messages,
            ttl,
            last_used: Mutex::new(Instant::now()),
        }
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn idle(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }

    /// A request's prompt after this context: a chat context's messages come before
    /// a chat request's own; anything else continues after its tokens
    /// ([`NamedContext::continued_tokens`]).
    pub fn continued(&self, prompt: crate::request::Prompt) -> crate::request::Prompt {
        use crate::request::Prompt;
        match (prompt, &self.messages) {
            (Prompt::Chat(own), Some(ctx)) => {
                Prompt::Chat(ctx.iter().cloned().chain(own).collect())
            }
            (p, _) => p,
        }
    }

    /// Whether [`NamedContext::continued`] puts this context's messages into `prompt`
    /// (then its rendering holds the context, and [`NamedContext::continued_tokens`]
    /// adds nothing).
    pub fn merges(&self, prompt: &crate::request::Prompt) -> bool {
        matches!(prompt, crate::request::Prompt::Chat(_)) && self.messages.is_some()
    }

    /// The tokens of a request continuing this context, given the tokens its own
    /// prompt rendered to (`merged`: the context's messages were rendered with it):
    /// otherwise the context's tokens come first and the prompt's own BOS is dropped.
    pub fn continued_tokens(&self, own: Vec<u32>, bos: Option<u32>, merged: bool) -> Vec<u32> {
        if merged {
            return own;
        }
        let rest = match (own.first(), bos) {
            (Some(&first), Some(b)) if first == b => &own[1..],
            _ => &own[..],
        };
        self.prefix.tokens.iter().chain(rest).copied().collect()
    }

    /// What `GET /v1/contexts/{id}` shows.
    pub fn info(&self) -> ContextInfo {
        ContextInfo {
            id: self.id.clone(),
            model: self.model.clone(),
            tokens: self.prefix.len(),
            kv_bytes: self.prefix.bytes(),
            created: self.created,
            parent: self.parent.clone(),
            snapshot: self.snapshot.clone(),
            ttl_s: self.ttl.as_secs(),
        }
    }
}

/// A context as the API lists it.
#[derive(Clone, Debug)]
pub struct ContextInfo {
    /// Its id, `ctx_…`, which requests name in `llamay_context`.
    pub id: String,
    /// The name of the model it belongs to, as the server reports it.
    pub model: String,
    /// Its prefix's length, in tokens.
    pub tokens: usize,
    /// Bytes of its blocks (shared blocks counted in every context holding them).
    pub kv_bytes: usize,
    /// When it was created (a fork or a restore is created anew).
    pub created: SystemTime,
    /// The id of the context it was forked from; `None` unless it is a fork.
    pub parent: Option<String>,
    /// The `sha256:…` of the snapshot it was restored from; `None` unless restored.
    pub snapshot: Option<String>,
    /// Seconds it may stay idle before it is dropped.
    pub ttl_s: u64,
}

impl ContextInfo {
    /// The API's JSON for it (`created` in Unix seconds; `parent` and `snapshot` only
    /// when set).
    pub fn to_json(&self) -> serde_json::Value {
        let created = self
            .created
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut v = serde_json::json!({
            "id": self.id,
            "object": "llamay.context",
            "model": self.model,
            "tokens": self.tokens,
            "kv_bytes": self.kv_bytes,
            "created": created,
            "ttl_s": self.ttl_s,
        });
        if let Some(p) = &self.parent {
            v["parent"] = p.clone().into();
        }
        if let Some(s) = &self.snapshot {
            v["snapshot"] = s.clone().into();
        }
        v
    }
}

/// Every named context, by id.
#[derive(Default)]
pub struct Contexts {
    map: Mutex<HashMap<String, Arc<NamedContext>>>,
    /// The sha256 of each model file a snapshot was tied to, computed once.
    digests: Mutex<HashMap<std::path::PathBuf, String>>,
}

impl Contexts {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<NamedContext>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `ctx`; refused (503) when `MAX_CONTEXTS` (4096) are kept already.
    pub fn insert(&self, ctx: NamedContext) -> Result<ContextInfo, Error> {
        self.sweep();
        let mut map = self.lock();
        if map.len() >= MAX_CONTEXTS {
            return Err(Error::overloaded(format!(
                "{MAX_CONTEXTS} contexts exist already; delete some first"
            )));
        }
        let info = ctx.info();
        map.insert(ctx.id.clone(), Arc::new(ctx));
        Ok(info)
    }

    /// The context `id` (and it counts as used now), or a 404.
    pub fn get(&self, id: &str) -> Result<Arc<NamedContext>, Error> {
        self.sweep();
        let ctx = self.lock().get(id).cloned().ok_or_else(|| unknown(id))?;
        ctx.touch();
        Ok(ctx)
    }

    /// The context `id` for a request to `model` (the served name), or a 404 (no
    /// such context) or a 400 (a context of another model).
    pub fn for_model(&self, id: &str, model: &str) -> Result<Arc<NamedContext>, Error> {
        let ctx = self.get(id)?;
        if ctx.model != model {
            return Err(Error::bad_request(format!(
                "context {id:?} belongs to model {:?}, not {model:?}",
                ctx.model
            ))
            .at("llamay_context"));
        }
        Ok(ctx)
    }

    /// Every context not expired, oldest first.
    pub fn list(&self) -> Vec<ContextInfo> {
        self.sweep();
        let mut v: Vec<ContextInfo> = self.lock().values().map(|c| c.info()).collect();
        v.sort_by(|a, b| a.created.cmp(&b.created).then(a.id.cmp(&b.id)));
        v
    }

    /// Deletes context `id` (its blocks are freed once no running request holds them),
    /// or a 404.
    pub fn remove(&self, id: &str) -> Result<ContextInfo, Error> {
        self.lock()
            .remove(id)
            .map(|c| c.info())
            .ok_or_else(|| unknown(id))
    }

    /// `n` new contexts holding the same blocks as `id` (no copy).
    pub fn fork(
        &self,
        id: &str,
        n: usize,
        ids: impl Fn() -> String,
    ) -> Result<Vec<ContextInfo>, Error> {
        if !(1..=MAX_FORKS).contains(&n) {
            return Err(Error::bad_request(format!(
                "n must be between 1 and {MAX_FORKS}, not {n}"
            ))
            .at("n"));
        }
        let parent = self.get(id)?;
        (0..n)
            .map(|_| {
                let mut c = NamedContext::new(
                    ids(),
                    parent.model.clone(),
                    parent.prefix.clone(),
                    parent.messages.clone(),
                    parent.ttl,
                );
                c.parent = Some(parent.id.clone());
                self.insert(c)
            })
            .collect()
    }

    /// Drops contexts idle past their TTL.
    pub fn sweep(&self) {
        self.lock().retain(|_, c| c.idle() <= c.ttl);
    }

    /// Bytes of blocks and recurrent states held by contexts of `model` (each once:
    /// forks share both).
    pub fn pinned_bytes(&self, model: &str) -> usize {
        let map = self.lock();
        let ours = || map.values().filter(|c| c.model == model);
        let mut seen = std::collections::HashSet::new();
        let blocks: usize = ours()
            .flat_map(|c| c.prefix.blocks.iter())
            .filter(|b| seen.insert(Arc::as_ptr(b) as usize))
            .map(|b| b.bytes())
            .sum();
        let states: usize = ours()
            .filter_map(|c| c.prefix.state.as_ref())
            .filter(|s| seen.insert(Arc::as_ptr(s) as usize))
            .map(|s| s.bytes())
            .sum();
        blocks + states
    }

    /// The `sha256:…` of the model file at `path`, if it was hashed already
    /// (snapshots are tied to it, and hashing a large file takes seconds).
    pub fn known_digest(&self, path: &std::path::Path) -> Option<String> {
        self.digests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)
            .cloned()
    }

    /// Records the `sha256:…` of the model file at `path`, for
    /// [`Contexts::known_digest`].
    pub fn remember_digest(&self, path: std::path::PathBuf, digest: String) {
        self.digests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path, digest);
    }

    /// How many contexts are kept (expired ones not yet swept included).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no context is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The 404 of an id nobody knows (or that expired).
fn unknown(id: &str) -> Error {
    Error::not_found(format!(
        "context {id:?} does not exist (deleted, expired, or from before a restart: \
         restore it from its snapshot)"
    ))
}
