//! `llamay serve`: the HTTP server (OpenAI, Anthropic and Ollama routes).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use llamay_engine::kv_cache::KvType;
use llamay_engine::model::LoadOptions;
use llamay_server::app::{router, sweep_models, AppState, DEFAULT_BODY_LIMIT};
use llamay_server::banner;
use llamay_server::models::{ModelSpec, Models, ModelsConfig};
use llamay_server::scheduler::SchedulerConfig;
use llamay_server::stats::ServerStats;

use super::run::DEFAULT_MODEL;
use super::UsageError;

#[derive(Args)]
pub struct ServeArgs {
    /// The model served by default: a .gguf file or a model name (pulled if missing).
    #[arg(short = 'm', long = "model", default_value = DEFAULT_MODEL)]
    pub model: String,
    /// Address to listen on (loopback unless you say otherwise).
    #[arg(long, default_value = "localhost:11435")]
    pub addr: String,
    /// A GBNF grammar applied to every request that brings no constraint of its own.
    #[arg(long = "grammar-file", value_name = "FILE")]
    pub grammar_file: Option<PathBuf>,
    /// Threads for the forward pass (default: physical cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Context size per sequence in tokens (default: the model's, at most 4096).
    #[arg(long)]
    pub ctx: Option<usize>,
    /// KV cache type: f32 or f16.
    #[arg(long, default_value = "f32")]
    pub kv: String,
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
}

/// Default context per sequence: each concurrent request holds its own KV cache.
const DEFAULT_CTX: usize = 4096;

pub fn run(a: ServeArgs) -> anyhow::Result<()> {
    let kv_type = match a.kv.as_str() {
        "f32" => KvType::F32,
        "f16" => KvType::F16,
        other => return Err(UsageError(format!("-kv must be f32 or f16, not {other:?}")).into()),
    };
    if a.parallel == 0 || a.max_loaded == 0 {
        return Err(UsageError("-parallel and -max-loaded must be at least 1".into()).into());
    }
    let default_grammar = match &a.grammar_file {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read grammar {}", p.display()))?;
            llamay_constrain::gbnf::parse_gbnf(&text)
                .map_err(|e| UsageError(format!("{}: {e}", p.display())))?;
            Some(Arc::<str>::from(text))
        }
        None => None,
    };
    let api_key = a
        .api_key
        .clone()
        .or_else(|| std::env::var("LLAMAY_API_KEY").ok())
        .filter(|k| !k.is_empty())
        .map(Arc::<str>::from);
    let spec = resolve(&a.model)?;
    let store = llamay_store::Store::from_env().ok();
    let n_ctx = a.ctx.unwrap_or_else(|| {
        llamay_engine::gguf::GgufFile::open(&spec.path)
            .ok()
            .and_then(|f| llamay_engine::model::HParams::from_gguf(&f).ok())
            .map(|hp| hp.n_ctx_train.min(DEFAULT_CTX))
            .unwrap_or(DEFAULT_CTX)
    });
    let cfg = ModelsConfig {
        load: LoadOptions {
            n_threads: a.threads,
            n_ctx: Some(n_ctx),
            kv_type,
            ..LoadOptions::default()
        },
        scheduler: SchedulerConfig {
            max_active: a.parallel,
            max_queue: a.queue,
            timeout: Duration::from_secs(a.timeout),
        },
        max_loaded: a.max_loaded,
        keep_alive: Duration::from_secs(a.keep_alive),
    };
    let stats = Arc::new(ServerStats::default());
    let models = Arc::new(Models::new(
        Some(spec.clone()),
        store,
        cfg.clone(),
        stats.clone(),
    ));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&a.addr)
            .await
            .with_context(|| format!("cannot listen on {}", a.addr))?;
        let engine = models
            .preload()
            .await
            .map_err(|e| anyhow::anyhow!("{}", e.message))?
            .context("no default model")?;
        let info = engine.lm.model.info();
        eprintln!(
            "{}",
            banner::log_line(
                &a.addr,
                &banner::ModelFacts {
                    name: &spec.name,
                    arch: &info.arch,
                    params: info.parameter_count,
                    context: engine.lm.model.n_ctx(),
                    threads: engine.lm.model.n_threads(),
                    kv: &a.kv,
                },
                &cfg,
            )
        );
        println!("{}", banner::routes(&a.addr));
        drop(engine);
        tokio::spawn(sweep_models(models.clone()));
        let app = router(AppState {
            models,
            stats,
            api_key,
            default_grammar,
            body_limit: DEFAULT_BODY_LIMIT,
        });
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .context("the server stopped")
    })
}

/// The serve model: a file (named after its stem) or a store name (pulled if missing).
fn resolve(m: &str) -> anyhow::Result<ModelSpec> {
    let p = PathBuf::from(m);
    if p.is_file() {
        let name = p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| m.to_string());
        return Ok(ModelSpec { name, path: p });
    }
    let r = crate::store_cmds::ensure_model(m, &Default::default())?;
    let name = r.name.map(|n| n.short()).unwrap_or_else(|| m.to_string());
    Ok(ModelSpec { name, path: r.gguf })
}
