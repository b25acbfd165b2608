//! Which models are served: names resolved to files (the serve model, or the
//! store) in this one place for every route, loaded on first use, unloaded after their
//! keep-alive, at most `max_loaded` at once.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use llamay_engine::{Encoder, GgufFile, LoadOptions};
use llamay_store::{ModelName, Store};

use crate::error::Error;
use crate::generate::DraftModel;
use crate::loaded::{LoadError, LoadedModel, PromptLayers};
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::stats::Stats;

/// Most names a 404 lists.
pub const MAX_LISTED_NAMES: usize = 20;

/// A model name and the file it stands for.
#[derive(Clone, Debug)]
pub struct ModelSpec {
    /// The name clients use (and the server reports).
    pub name: String,
    /// The GGUF file holding the weights.
    pub path: PathBuf,
    /// Other strings that name this model: the exact `-m` argument it was served
    /// under (a path, or a name as typed), so a client can send what the user typed.
    pub aliases: Vec<String>,
    /// An Ollama store's template, system and params layers, when it has them.
    pub layers: PromptLayers,
    /// A vision projector file (`serve -mmproj`, or a store model's projector
    /// layer) loaded beside the weights: the model then reads images.
    pub projector: Option<PathBuf>,
    /// A model of the same tokens (`serve -draft`) loaded beside the weights: it
    /// writes the drafts of the model's speculative decoding.
    pub draft: Option<PathBuf>,
}

impl ModelSpec {
    /// The model `-m` named. `given` is the argument as typed; `store_name` the store's
    /// name for it when it came from the store. A file is named after its stem.
    pub fn from_arg(given: &str, path: PathBuf, store_name: Option<String>) -> ModelSpec {
        let name = store_name.unwrap_or_else(|| {
            if Path::new(given).is_file() {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| given.to_string())
            } else {
                given.to_string()
            }
        });
        let aliases = if given != name {
            vec![given.to_string()]
        } else {
            Vec::new()
        };
        ModelSpec {
            name,
            path,
            aliases,
            layers: PromptLayers::default(),
            projector: None,
            draft: None,
        }
    }

    /// Whether `asked` names this model.
    pub fn answers_to(&self, asked: &str) -> bool {
        same_name(asked, &self.name) || self.aliases.iter().any(|a| a == asked)
    }
}

/// A loaded model with its engine thread.
pub struct Instance {
    /// Its names and its GGUF file.
    pub spec: ModelSpec,
    /// The loaded weights, tokenizer and prompt format.
    pub lm: Arc<LoadedModel>,
    /// The engine thread decoding this model's requests.
    pub scheduler: Scheduler,
    /// When its load finished.
    pub loaded_at: SystemTime,
    /// File size in bytes.
    pub size: u64,
    use_state: Mutex<UseState>,
}

struct UseState {
    last_used: Instant,
    keep_alive: Duration,
}

impl Instance {
    /// Marks the model used now, optionally changing its keep-alive.
    pub fn touch(&self, keep_alive: Option<Duration>) {
        let mut u = self.use_state.lock().unwrap_or_else(|e| e.into_inner());
        u.last_used = Instant::now();
        if let Some(k) = keep_alive {
            u.keep_alive = k;
        }
    }

    /// When the model unloads if it stays idle.
    pub fn expires_at(&self) -> SystemTime {
        let u = self.use_state.lock().unwrap_or_else(|e| e.into_inner());
        SystemTime::now() + (u.last_used + u.keep_alive).saturating_duration_since(Instant::now())
    }

    fn busy(&self) -> bool {
        let c = self.scheduler.counts();
        c.active.load(std::sync::atomic::Ordering::SeqCst) > 0
            || c.waiting.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    fn expired(&self) -> bool {
        let u = self.use_state.lock().unwrap_or_else(|e| e.into_inner());
        u.last_used.elapsed() >= u.keep_alive && !self.busy()
    }

    fn last_used(&self) -> Instant {
        self.use_state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last_used
    }
}

/// Settings of the model registry.
#[derive(Clone, Debug)]
pub struct RegistryConfig {
    /// How each model is loaded (threads, context, KV type).
    pub load: LoadOptions,
    /// Each loaded model's engine settings.
    pub scheduler: SchedulerConfig,
    /// Most models loaded at once.
    pub max_loaded: usize,
    /// How long an idle model stays loaded unless a request says otherwise.
    pub keep_alive: Duration,
    /// Bytes of compiled constraints each loaded model keeps.
    pub constraint_cache_bytes: usize,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            load: LoadOptions::default(),
            scheduler: SchedulerConfig::default(),
            max_loaded: 2,
            keep_alive: Duration::from_secs(300),
            constraint_cache_bytes: crate::loaded::DEFAULT_CONSTRAINT_CACHE_BYTES,
        }
    }
}

/// The served models and how to find more.
pub struct Registry {
    default: Option<ModelSpec>,
    store: Option<Store>,
    cfg: RegistryConfig,
    stats: Arc<Stats>,
    loaded: Mutex<Vec<Arc<Instance>>>,
    /// Serializes loads, so two requests for one model load it once.
    loading: tokio::sync::Mutex<()>,
    /// The named contexts, each of one of these models (`/v1/contexts`).
    contexts: crate::kv::Contexts,
}

impl Registry {
    /// A registry serving `default` (the serve model) and the names in `store`.
    pub fn new(
        default: Option<ModelSpec>,
        store: Option<Store>,
        cfg: RegistryConfig,
        stats: Arc<Stats>,
    ) -> Registry {
        Registry {
            default,
            store,
            cfg,
            stats,
            loaded: Mutex::new(Vec::new()),
            loading: tokio::sync::Mutex::new(()),
            contexts: crate::kv::Contexts::default(),
        }
    }

    /// The named contexts.
    pub fn contexts(&self) -> &crate::kv::Contexts {
        &self.contexts
    }

    /// The serve model (`-m`), which an empty model name means; `None` when the server
    /// serves only the store.
    pub fn default_model(&self) -> Option<&ModelSpec> {
        self.default.as_ref()
    }

    /// The model store that names resolve in and snapshots are kept in; `None`
    /// without one.
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// The settings it was made with.
    pub fn config(&self) -> &RegistryConfig {
        &self.cfg
    }

    /// The file a request's model name stands for. Names only: a request never
    /// makes the server open a path of its choosing.
    pub fn resolve(&self, name: &str) -> Result<ModelSpec, Error> {
        let name = name.trim();
        if let Some(d) = &self.default {
            if name.is_empty() || d.answers_to(name) {
                return Ok(d.clone());
            }
        } else if name.is_empty() {
            return Err(Error::bad_request("no model was named"));
        }
        let not_found = || {
            Error::not_found(format!(
                "model {name:?} not found; this server serves: {}",
                self.served_names().join(", ")
            ))
        };
        let store = self.store.as_ref().ok_or_else(not_found)?;
        let parsed = ModelName::parse(name).map_err(|_| not_found())?;
        if !store.contains(&parsed).unwrap_or(false) {
            return Err(not_found());
        }
        let r = store.resolve_name(&parsed).map_err(|_| not_found())?;
        Ok(ModelSpec {
            name: parsed.short(),
            layers: PromptLayers::of(&r),
            path: r.gguf,
            aliases: Vec::new(),
            projector: r.projector,
            draft: None,
        })
    }

    /// The names a request may use, most useful first: the serve model's (and what
    /// `-m` said), then the store's; at most [`MAX_LISTED_NAMES`].
    pub fn served_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        if let Some(d) = &self.default {
            names.push(d.name.clone());
            names.extend(d.aliases.iter().cloned());
        }
        if let Some(list) = self.store.as_ref().and_then(|s| s.list().ok()) {
            for e in list {
                let n = e.name.short();
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        if names.len() > MAX_LISTED_NAMES {
            let more = names.len() - MAX_LISTED_NAMES;
            names.truncate(MAX_LISTED_NAMES);
            names.push(format!("and {more} more (GET /v1/models)"));
        }
        if names.is_empty() {
            names.push("no models".into());
        }
        names
    }

    /// The model for `name`, loading the model if needed.
    pub async fn get(
        &self,
        name: &str,
        keep_alive: Option<Duration>,
    ) -> Result<Arc<Instance>, Error> {
        let spec = self.resolve(name)?;
        if let Some(e) = self.find(&spec) {
            e.touch(keep_alive);
            return Ok(e);
        }
        let _guard = self.loading.lock().await;
        if let Some(e) = self.find(&spec) {
            e.touch(keep_alive);
            return Ok(e);
        }
        if GgufFile::open(&spec.path).is_ok_and(|f| Encoder::is_encoder(&f)) {
            return Err(crate::capabilities::cannot_generate(&spec.name));
        }
        self.make_room()?;
        let opts = self.cfg.load.clone();
        let path = spec.path.clone();
        let cache = self.cfg.constraint_cache_bytes;
        let layers = spec.layers.clone();
        let projector = spec.projector.clone();
        let draft_path = spec.draft.clone();
        let (lm, draft) = tokio::task::spawn_blocking(move || {
            let lm = LoadedModel::load_with_layers(&path, &opts, cache, &layers)?;
            let lm = match &projector {
                Some(p) => lm.with_vision(p, &opts)?,
                None => lm,
            };
            let draft = match &draft_path {
                Some(p) => Some(load_draft(p, &opts, &lm)?),
                None => None,
            };
            Ok::<_, LoadError>((lm, draft))
        })
        .await
        .map_err(|e| Error::internal(format!("loading the model failed: {e}")))?
        .map_err(|e| Error::bad_request(format!("cannot load {}: {e}", spec.name)))?;
        let lm = Arc::new(lm);
        let instance = Arc::new(Instance {
            size: std::fs::metadata(&spec.path).map(|m| m.len()).unwrap_or(0),
            spec: spec.clone(),
            scheduler: Scheduler::start_with_draft(
                &spec.name,
                lm.clone(),
                draft,
                self.cfg.scheduler,
                self.stats.clone(),
            ),
            lm,
            loaded_at: SystemTime::now(),
            use_state: Mutex::new(UseState {
                last_used: Instant::now(),
                keep_alive: keep_alive.unwrap_or(self.cfg.keep_alive),
            }),
        });
        self.lock().push(instance.clone());
        Ok(instance)
    }

    /// Loads the serve model now (so the first request does not wait for it).
    pub async fn preload(&self) -> Result<Option<Arc<Instance>>, Error> {
        match &self.default {
            Some(d) => self.get(&d.name.clone(), None).await.map(Some),
            None => Ok(None),
        }
    }

    /// The models loaded now.
    pub fn loaded(&self) -> Vec<Arc<Instance>> {
        self.lock().clone()
    }

    /// Unloads idle models whose keep-alive has passed. A busy model counts as
    /// used now, so its keep-alive runs from the end of its last request.
    pub fn sweep(&self) {
        self.lock().retain(|e| {
            if e.busy() {
                e.touch(None);
            }
            !e.expired()
        });
    }

    /// Ends every request on every loaded model as cancelled, and refuses new ones
    /// (see [`Scheduler::cancel_all`]).
    pub fn cancel_all(&self) {
        for i in self.lock().iter() {
            i.scheduler.cancel_all();
        }
    }

    /// Whether any loaded model has a request running or waiting.
    pub fn any_busy(&self) -> bool {
        self.lock().iter().any(|i| i.busy())
    }

    /// Unloads `name` if it is loaded and idle.
    pub fn unload(&self, name: &str) {
        self.lock().retain(|e| !e.spec.answers_to(name) || e.busy());
    }

    fn find(&self, spec: &ModelSpec) -> Option<Arc<Instance>> {
        let mut loaded = self.lock();
        loaded.retain(|e| e.scheduler.is_alive());
        // By name: two names may share one blob, and each is its own loaded model.
        loaded.iter().find(|e| e.spec.name == spec.name).cloned()
    }

    /// Evicts the least recently used idle model when `max_loaded` are loaded.
    fn make_room(&self) -> Result<(), Error> {
        let mut loaded = self.lock();
        if loaded.len() < self.cfg.max_loaded.max(1) {
            return Ok(());
        }
        let victim = loaded
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.busy())
            .min_by_key(|(_, e)| e.last_used())
            .map(|(i, _)| i);
        match victim {
            Some(i) => {
                loaded.remove(i);
                Ok(())
            }
            None => Err(Error::overloaded(format!(
                "{} models are loaded and busy (max-loaded); retry shortly",
                loaded.len()
            ))),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Instance>>> {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `serve -draft`: the GGUF at `path` writing `lm`'s drafts, refused unless the two
/// have the same tokens.
fn load_draft(path: &Path, opts: &LoadOptions, lm: &LoadedModel) -> Result<DraftModel, LoadError> {
    let refuse = |reason: String| LoadError::Draft {
        path: path.display().to_string(),
        reason,
    };
    let d = LoadedModel::load(path, opts).map_err(|e| refuse(e.to_string()))?;
    DraftModel::sharing_tokens(d.model, &d.tokenizer, &lm.tokenizer).map_err(refuse)
}

/// Whether two model names are the same model (`smollm2` = `smollm2:latest`).
pub fn same_name(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (ModelName::parse(a), ModelName::parse(b)) {
        (Ok(x), Ok(y)) => x.short() == y.short(),
        _ => false,
    }
}
