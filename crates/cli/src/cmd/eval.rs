//! `llamay eval`: extraction scored field by field, with and without the constraint.
//!
//! Every document of a JSON-lines set runs constrained by the schema and, with
//! `-compare prompted`, unconstrained with the same prompt (which describes the schema),
//! the same model and the same sampling (one seed per document, shared by both); the
//! reply's JSON is then taken the way a user's parser would ([`extract`]). All runs go
//! through the runtime's batched scheduler at once. Scoring is in [`score`], the
//! figures in [`summary`], the outputs in [`table`] and [`html`].

mod data;
mod extract;
mod html;
mod score;
mod summary;
mod table;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use llamay_constrain::{CompiledSchema, Sources};
use llamay_runtime::ChatMessage;
use llamay_runtime::{
    collect, Encoders, GenRequest, Prompt, Registry, RegistryConfig, Runtime, SamplingAsk,
    SchedulerConfig, Stats, Surfaces,
};
use serde_json::Value;

use super::load_args::LoadArgs;
use super::UsageError;
use data::Case;
use score::Field;
use summary::{Doc, Evaluation, Mode, Run};

/// What the constrained runs are compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Compare {
    /// Constrained runs only.
    None,
    /// Also the same prompt without the constraint, the JSON taken from the reply text.
    Prompted,
}

#[derive(Args)]
pub struct EvalArgs {
    /// A .gguf file or a model name (pulled into the store if missing).
    #[arg(short = 'm', long = "model", default_value = super::run::DEFAULT_MODEL)]
    pub model: String,
    /// The JSON Schema of the objects to extract (an object schema; each top-level
    /// property is a scored field).
    #[arg(long, value_name = "FILE")]
    pub schema: PathBuf,
    /// The evaluation set: JSON lines of {"input": "...", "expected": {...}}, with an
    /// optional "id", "sources" (names to texts, for x-llamay-quote) and "images"
    /// (files beside the data or base64 data URLs; they need -mmproj).
    #[arg(long, value_name = "FILE.jsonl")]
    pub data: PathBuf,
    /// The model's vision projector (llama.cpp's `mmproj` GGUF), for data with images.
    #[arg(long = "mmproj", value_name = "FILE")]
    pub mmproj: Option<PathBuf>,
    /// The prompt: a file, or the text itself; `{input}` is the document, `{schema}`
    /// the schema (default: an extraction instruction with both).
    #[arg(long, value_name = "TEMPLATE")]
    pub prompt: Option<String>,
    /// Only the first N documents.
    #[arg(short = 'n', long = "n")]
    pub n: Option<usize>,
    /// Also run without the constraint, for comparison.
    #[arg(long, value_enum, default_value = "none")]
    pub compare: Compare,
    /// Print the report as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Write a self-contained HTML report here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// A source every document may quote, as `NAME=FILE` or `FILE`; repeatable (a
    /// line's own "sources" add to these).
    #[arg(long = "source", value_name = "[NAME=]FILE")]
    pub source: Vec<String>,
    /// Sampling temperature (0 = greedy).
    #[arg(long, default_value_t = 0.0)]
    pub temp: f64,
    /// Seed of the first document (document k uses seed + k, in both modes).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Most tokens per reply.
    #[arg(long = "max-tokens", default_value_t = 256)]
    pub max_tokens: usize,
    /// Absolute tolerance for numbers.
    #[arg(long, default_value_t = 0.005)]
    pub tolerance: f64,
    /// Sequences decoded together.
    #[arg(long, default_value_t = 8)]
    pub parallel: usize,
    /// No speculative drafts (they never change the output; for measuring).
    #[arg(long = "no-spec")]
    pub no_spec: bool,
    #[command(flatten)]
    pub load: LoadArgs,
}

const DEFAULT_TEMPLATE: &str = "Extract the fields described by this JSON Schema from the \
document below. Use null for anything the document does not state.\n\nJSON Schema:\n{schema}\n\n\
Document:\n{input}\n\nAnswer with one JSON object.";

/// Everything one run of a document needs, shared by all tasks.
struct Plan {
    schema: Value,
    schema_text: String,
    template: String,
    sources: std::collections::BTreeMap<String, String>,
    args_temp: f64,
    seed: u64,
    max_tokens: usize,
}

fn user_error(msg: String) -> anyhow::Error {
    UsageError(msg).into()
}

pub fn run(a: EvalArgs) -> anyhow::Result<()> {
    let schema_text = std::fs::read_to_string(&a.schema)
        .map_err(|e| user_error(format!("cannot read schema {}: {e}", a.schema.display())))?;
    let schema: Value = serde_json::from_str(&schema_text)
        .map_err(|e| user_error(format!("{} is not valid JSON: {e}", a.schema.display())))?;
    // A schema the constraint refuses is refused before any model work, naming the
    // keyword and where it sits.
    let tree = llamay_constrain::compile_schema(&schema)
        .map_err(|e| user_error(format!("{}: {e}", a.schema.display())))?;
    let fields = score::fields_of(&schema)
        .map_err(|e| user_error(format!("{}: {e}", a.schema.display())))?;
    let data = std::fs::read_to_string(&a.data)
        .map_err(|e| user_error(format!("cannot read data {}: {e}", a.data.display())))?;
    let dir = a.data.parent().unwrap_or(std::path::Path::new("."));
    let (mut cases, bad_lines) = data::parse(&data, dir);
    for b in &bad_lines {
        eprintln!(
            "{}: line {}: {} (skipped)",
            a.data.display(),
            b.line,
            b.error
        );
    }
    if let Some(n) = a.n {
        cases.truncate(n);
    }
    if cases.is_empty() {
        return Err(user_error(format!(
            "{} has no usable lines",
            a.data.display()
        )));
    }
    let template = match &a.prompt {
        Some(p) if std::path::Path::new(p).is_file() => {
            std::fs::read_to_string(p).with_context(|| format!("cannot read prompt {p}"))?
        }
        Some(p) => p.clone(),
        None => DEFAULT_TEMPLATE.to_string(),
    };
    if !template.contains("{input}") {
        return Err(user_error(
            "-prompt must contain {input}, where the document goes".into(),
        ));
    }
    let plan = Arc::new(Plan {
        schema_text: serde_json::to_string_pretty(&schema)?,
        schema,
        template,
        sources: super::sources::read_sources(&a.source)?,
        args_temp: a.temp,
        seed: a.seed,
        max_tokens: a.max_tokens,
    });
    let modes = match a.compare {
        Compare::None => vec![Mode::Constrained],
        Compare::Prompted => vec![Mode::Constrained, Mode::Prompted],
    };

    let mut load = a.load.options()?;
    load.n_ctx = Some(a.load.ctx.unwrap_or(4096));
    let cfg = RegistryConfig {
        load,
        scheduler: SchedulerConfig {
            max_active: a.parallel.max(1),
            max_queue: cases.len() * modes.len() + 1,
            timeout: Duration::from_secs(3600),
            max_draft: if a.no_spec {
                0
            } else {
                llamay_runtime::DEFAULT_DRAFT
            },
            ..SchedulerConfig::default()
        },
        ..RegistryConfig::default()
    };
    let stats = Arc::new(Stats::default());
    let mut spec = super::serve::resolve(&a.model)?;
    if let Some(p) = &a.mmproj {
        if !p.is_file() {
            return Err(user_error(format!("-mmproj: no file {}", p.display())));
        }
        spec.projector = Some(p.clone());
    }
    let model_name = spec.name.clone();
    let runtime = Arc::new(Runtime {
        registry: Arc::new(Registry::new(Some(spec), None, cfg, stats.clone())),
        stats,
        constraints: llamay_runtime::Resolver::new(None),
        encoders: Arc::new(Encoders::new(None, None, Default::default())),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let total = (cases.len() * modes.len()) as u64;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} {bar:32} {pos}/{len} runs · {elapsed} (eta {eta}) {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let docs = rt.block_on(async {
        // Load once before the flood, so a load failure is one clear error.
        runtime
            .registry
            .get("", None)
            .await
            .map_err(|e| anyhow::anyhow!("cannot load {}: {}", a.model, e.message))?;
        let mut tasks = Vec::new();
        for (k, case) in cases.iter().enumerate() {
            for &mode in &modes {
                let (runtime, plan, case, bar) =
                    (runtime.clone(), plan.clone(), case.clone(), bar.clone());
                tasks.push(tokio::spawn(async move {
                    let r = one_run(&runtime, &plan, &case, k, mode).await;
                    bar.inc(1);
                    r
                }));
            }
        }
        let mut runs = Vec::with_capacity(tasks.len());
        for t in tasks {
            runs.push(t.await.unwrap_or_else(|e| Run {
                error: Some(format!("the run failed: {e}")),
                ..Run::default()
            }));
        }
        anyhow::Ok(runs)
    })?;
    bar.finish_and_clear();

    let mut runs = docs.into_iter();
    let docs: Vec<Doc> = cases
        .into_iter()
        .map(|case| {
            let runs: Vec<Run> = modes
                .iter()
                .map(|_| runs.next().unwrap_or_default())
                .map(|r| scored(r, &case, &fields, &tree, &plan, a.tolerance))
                .collect();
            Doc { case, runs }
        })
        .collect();
    let e = Evaluation {
        model: model_name,
        fields,
        modes,
        docs,
        bad_lines,
        temperature: a.temp,
    };
    if let Some(p) = &a.html {
        std::fs::write(p, html::render(&e))
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    if a.json {
        // The table still goes to the terminal, on stderr, so CI logs show it.
        eprint!("{}", table::render(&e));
        println!("{}", serde_json::to_string_pretty(&e.to_json())?);
    } else {
        print!("{}", table::render(&e));
    }
    Ok(())
}

/// The sources of one document: `-source`s, its own, and its input.
fn sources_of(plan: &Plan, case: &Case) -> Sources {
    let mut named = plan.sources.clone();
    named.extend(case.sources.clone());
    Sources {
        // A document of pictures only has no text to quote.
        input: (!case.input.trim().is_empty()).then(|| case.input.clone()),
        named,
        ..Sources::default()
    }
}

async fn one_run(runtime: &Runtime, plan: &Plan, case: &Case, k: usize, mode: Mode) -> Run {
    let fail = |e: String| Run {
        error: Some(e),
        ..Run::default()
    };
    let mut constraint = Surfaces::default();
    if mode == Mode::Constrained {
        constraint.schema("-schema", &plan.schema);
        constraint.sources = sources_of(plan, case);
    }
    let with_schema = plan.template.replace("{schema}", &plan.schema_text);
    // The document's pictures go where its text does, before it.
    let image_at = with_schema.find("{input}").unwrap_or(0);
    let text = with_schema.replace("{input}", &case.input);
    let params = match (SamplingAsk {
        temperature: Some(plan.args_temp),
        seed: Some((plan.seed + k as u64) as i64),
        max_tokens: Some(plan.max_tokens as i64),
        ..SamplingAsk::default()
    })
    .into_params()
    {
        Ok(p) => p,
        Err(e) => return fail(e.message),
    };
    let t0 = Instant::now();
    let mut message = ChatMessage::new("user", &text);
    message.image_at = vec![image_at; case.images.len()];
    message.images = case.images.clone();
    let prompt = Prompt::Chat(vec![message]);
    let mut req = GenRequest::new(String::new(), prompt, params);
    req.constraint = constraint;
    let started = runtime.start(req).await;
    let started = match started {
        Ok(s) => s,
        Err(e) => return fail(e.message),
    };
    match collect(started.events).await {
        Ok((text, outcome)) => Run {
            text,
            tokens: outcome.completion_tokens,
            latency: t0.elapsed(),
            ..Run::default()
        },
        Err(e) => fail(e.message),
    }
}

/// Parses, validates and scores a finished run.
fn scored(
    mut r: Run,
    case: &Case,
    fields: &[Field],
    tree: &CompiledSchema,
    plan: &Plan,
    tol: f64,
) -> Run {
    if r.error.is_none() {
        r.value = extract::first_json_value(&r.text).filter(Value::is_object);
    }
    r.valid = r.value.as_ref().is_some_and(|v| tree.check(v).is_ok());
    let sources = sources_of(plan, case);
    r.verdicts = fields
        .iter()
        .map(|f| score::score(f, &case.expected, r.value.as_ref(), tol))
        .collect();
    r.grounded = fields
        .iter()
        .map(|f| {
            let q = f.quote.as_ref()?;
            let v = r.value.as_ref()?.get(&f.name)?;
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            score::grounded(q, &text, &sources)
        })
        .collect();
    r
}
