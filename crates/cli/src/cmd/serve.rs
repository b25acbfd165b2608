//! `llamay serve`: the HTTP server (OpenAI, Anthropic and Ollama routes).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use llamay_engine::{GgufFile, ModelFacts};
use llamay_runtime::{
    checked_grammar, Encoders, ModelSpec, PromptLayers, Registry, RegistryConfig, Runtime,
    SchedulerConfig, Stats, DEFAULT_DRAFT,
};
use llamay_server::{ServeOptions, DEFAULT_BODY_LIMIT};

use super::load_args::LoadArgs;
use super::run::DEFAULT_MODEL;
use super::UsageError;

#[derive(Args)]
pub struct ServeArgs {
    /// The model served by default: a .gguf file or a model name (pulled if missing).
    #[arg(short = 'm', long = "model", default_value = DEFAULT_MODEL)]
    pub model: String,
    /// A vision projector file (llama.cpp's `mmproj` GGUF) for the model of `-m`:
    /// it then reads images (a store model with a projector layer pairs itself).
    #[arg(long = "mmproj", value_name = "FILE")]
    pub mmproj: Option<PathBuf>,
    /// A smaller model with the same tokens that drafts for the model of `-m`
    /// (speculative decoding: checked by the model, so the output never changes);
    /// a .gguf file or a model name. Without it, drafts come from prompt lookup.
    #[arg(long = "draft", value_name = "MODEL")]
    pub draft: Option<String>,
    /// An embedding model (encoder) served on /v1/embeddings, /api/embed and
    /// /api/embeddings: a .gguf file or a model name.
    #[arg(long = "embed", value_name = "ENCODER")]
    pub embed: Option<String>,
    /// A reranker (cross-encoder) served on /rerank and /v1/rerank: a .gguf file or a
    /// model name.
    #[arg(long = "rerank", value_name = "RERANKER")]
    pub rerank: Option<String>,
    /// Address to listen on (loopback unless you say otherwise).
    #[arg(long, default_value = "localhost:11435")]
    pub addr: String,
    /// A GBNF grammar applied to every request that brings no constraint of its own.
    #[arg(long = "grammar-file", value_name = "FILE")]
    pub grammar_file: Option<PathBuf>,
    /// A lexicon requests may name (`llamay_lexicon: "NAME"`, `x-llamay-lexicon` in a
    /// schema): a file of one term per line. Repeatable.
    #[arg(long = "lexicon", value_name = "NAME=FILE")]
    pub lexicon: Vec<String>,
    /// Milliseconds a schema's compile may take before the request gets a 400 naming
    /// the part it was on (0: no limit).
    #[arg(long = "compile-budget-ms", default_value_t = 5000)]
    pub compile_budget_ms: u64,
    /// Nodes a schema may expand to (through `$ref`s and `anyOf`s) before it is refused.
    #[arg(long = "compile-budget-nodes", default_value_t = 100_000)]
    pub compile_budget_nodes: usize,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Require this key on every request (also $LLAMAY_API_KEY).
    #[arg(long = "api-key")]
    pub api_key: Option<String>,
    /// Most models loaded at once.
    #[arg(long = "max-loaded", default_value_t = 2)]
    pub max_loaded: usize,
    /// Seconds an idle model stays loaded.
    #[arg(long = "keep-alive", default_value_t = 300)]
    pub keep_alive: u64,
    /// Requests decoded together per model.
    #[arg(long, default_value_t = 8)]
    pub parallel: usize,
    /// Requests waiting per model before new ones get a 503.
    #[arg(long, default_value_t = 64)]
    pub queue: usize,
    /// Seconds a request may take before it is stopped.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Browser origins allowed besides loopback ones (`https://app.example`; `*`: any).
    #[arg(long = "allow-origin", value_delimiter = ',', value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Host names allowed besides loopback names and the listening address (`*`: any).
    #[arg(long = "allow-host", value_delimiter = ',', value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Listen beyond loopback without an API key (model management stays refused).
    #[arg(long = "insecure-no-key")]
    pub insecure_no_key: bool,
    /// Megabytes of compiled constraints each loaded model keeps (least recently
    /// used evicted first).
    #[arg(long = "constraint-cache-mb", default_value_t = 256)]
    pub constraint_cache_mb: usize,
    /// Megabytes of KV blocks each loaded model keeps (prefix cache, named contexts
    /// and running sequences; unreferenced cached blocks evicted least recently used
    /// first). Default: a quarter of the machine's memory, at most 8 GiB.
    #[arg(long = "kv-cache-mb")]
    pub kv_cache_mb: Option<usize>,
    /// Feed one token at a time: no drafts of likely continuations checked in the same
    /// pass (speculative decoding, which never changes the output; a request turns it
    /// off for itself with `llamay_speculate: false`).
    #[arg(long = "no-spec")]
    pub no_spec: bool,
    /// Seconds in-flight generations may run on after SIGTERM or Ctrl-C.
    #[arg(long = "drain-timeout", default_value_t = 30)]
    pub drain_timeout: u64,
    /// Let /api/pull (and linked images) reach loopback, link-local and private addresses.
    #[arg(long = "allow-private-pulls")]
    pub allow_private_pulls: bool,
    /// Let /api/pull (and linked images) use plain http and unverified TLS certificates.
    #[arg(long)]
    pub insecure: bool,
    /// Let requests link images by http(s) URL instead of sending them inline: each
    /// is fetched under the pull rules (public addresses only unless
    /// -allow-private-pulls; https unless -insecure), at most 20 MiB within 30 s.
    #[arg(long = "allow-image-urls")]
    pub allow_image_urls: bool,
}

/// Default context per sequence: each concurrent request holds its own KV cache.
const DEFAULT_CTX: usize = 4096;

pub fn run(a: ServeArgs) -> anyhow::Result<()> {
    let mut load = a.load.options()?;
    if a.parallel == 0 || a.max_loaded == 0 {
        return Err(UsageError("-parallel and -max-loaded must be at least 1".into()).into());
    }
    let default_grammar = match &a.grammar_file {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read grammar {}", p.display()))?;
            Some(
                checked_grammar(&p.display().to_string(), &text)
                    .map_err(|e| UsageError(e.message))?,
            )
        }
        None => None,
    };
    let mut constraint_settings = llamay_runtime::ConstraintSettings::default();
    constraint_settings.budget = llamay_runtime::CompileBudget {
        time: (a.compile_budget_ms > 0).then(|| Duration::from_millis(a.compile_budget_ms)),
        nodes: a.compile_budget_nodes,
    };
    for spec in &a.lexicon {
        let (name, path) = spec
            .split_once('=')
            .ok_or_else(|| UsageError(format!("-lexicon takes NAME=FILE, not {spec:?}")))?;
        let l = llamay_runtime::load_lexicon(name, std::path::Path::new(path))
            .map_err(|e| UsageError(e.message))?;
        constraint_settings.serve_lexicon(l);
    }
    let api_key = a
        .api_key
        .clone()
        .or_else(|| std::env::var("LLAMAY_API_KEY").ok())
        .filter(|k| !k.is_empty())
        .map(Arc::<str>::from);
    llamay_server::check_exposure(&a.addr, api_key.is_some(), a.insecure_no_key)
        .map_err(|e| UsageError(e.to_string()))?;
    let mut spec = resolve(&a.model)?;
    if let Some(p) = &a.mmproj {
        if !p.is_file() {
            return Err(UsageError(format!("-mmproj: no file {}", p.display())).into());
        }
        spec.projector = Some(p.clone());
    }
    if let Some(d) = &a.draft {
        if a.no_spec {
            return Err(UsageError("-draft and -no-spec contradict each other".into()).into());
        }
        spec.draft = Some(resolve(d)?.path);
    }
    let embed = a.embed.as_deref().map(resolve).transpose()?;
    let rerank = a.rerank.as_deref().map(resolve).transpose()?;
    // Encoders stay on the CPU: their passes are short and few.
    let encoder_load = llamay_engine::LoadOptions {
        device: llamay_engine::DeviceChoice::Cpu,
        ..load.clone()
    };
    let encoders = Arc::new(Encoders::new(embed, rerank, encoder_load));
    let store = llamay_store::Store::from_env().ok();
    load.n_ctx = Some(a.load.ctx.unwrap_or_else(|| {
        GgufFile::open(&spec.path)
            .ok()
            .and_then(|f| ModelFacts::from_gguf(&f).ok())
            .and_then(|m| m.context_length)
            .map(|n| (n as usize).min(DEFAULT_CTX))
            .unwrap_or(DEFAULT_CTX)
    }));
    let cfg = RegistryConfig {
        load,
        scheduler: SchedulerConfig {
            max_active: a.parallel,
            max_queue: a.queue,
            timeout: Duration::from_secs(a.timeout),
            kv_cache_bytes: a.kv_cache_mb.map(|mb| mb.saturating_mul(1 << 20)),
            max_draft: if a.no_spec { 0 } else { DEFAULT_DRAFT },
        },
        max_loaded: a.max_loaded,
        keep_alive: Duration::from_secs(a.keep_alive),
        constraint_cache_bytes: a.constraint_cache_mb.saturating_mul(1 << 20),
    };
    let stats = Arc::new(Stats::default());
    let runtime = Arc::new(Runtime {
        registry: Arc::new(Registry::new(Some(spec), store, cfg, stats.clone())),
        stats,
        // The model-independent IR is kept beside the per-model automata, in a
        // quarter of their budget.
        constraints: llamay_runtime::Resolver::with_memo_bytes(
            default_grammar,
            a.constraint_cache_mb.saturating_mul(1 << 20) / 4,
        )
        .with_settings(constraint_settings),
        encoders,
    });
    llamay_server::serve(
        runtime,
        ServeOptions {
            addr: a.addr,
            api_key,
            body_limit: DEFAULT_BODY_LIMIT,
            kv_label: a.load.kv,
            allowed_origins: a.allow_origin,
            allowed_hosts: a.allow_host,
            insecure_no_key: a.insecure_no_key,
            drain_timeout: Duration::from_secs(a.drain_timeout),
            allow_private_pulls: a.allow_private_pulls,
            insecure_pulls: a.insecure,
            allow_image_urls: a.allow_image_urls,
        },
    )
    .map_err(Into::into)
}

/// The serve model: a file or a store name (pulled if missing). The exact string
/// given names it on every route, beside its short name.
pub(crate) fn resolve(m: &str) -> anyhow::Result<ModelSpec> {
    if Path::new(m).is_file() {
        return Ok(ModelSpec::from_arg(m, PathBuf::from(m), None));
    }
    let r = crate::cmd::store::ensure_model(m, &Default::default())?;
    let layers = PromptLayers::of(&r);
    Ok(ModelSpec {
        layers,
        projector: r.projector.clone(),
        ..ModelSpec::from_arg(m, r.gguf, r.name.map(|n| n.short()))
    })
}
