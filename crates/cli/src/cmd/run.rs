//! `llamay run`: one generation, text to stdout, statistics to stderr.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use llamay_engine::SamplerConfig;
use llamay_runtime::chat::ChatMessage;
use llamay_runtime::{
    generate, ConstraintSpec, Finish, GenerationParams, LoadedModel, Surfaces, TemplateSource,
};

use super::load_args::LoadArgs;
use super::UsageError;

/// The small default model, as a store name.
pub const DEFAULT_MODEL: &str = "smollm2:135m";

#[derive(Args)]
pub struct RunArgs {
    /// A .gguf file or a model name (pulled into the store if missing).
    #[arg(short = 'm', long = "model", default_value = DEFAULT_MODEL)]
    pub model: String,
    /// The prompt; `-` reads it from stdin.
    #[arg(short = 'p', long = "prompt")]
    pub prompt: String,
    /// Wrap the prompt in the model's chat template.
    #[arg(long)]
    pub chat: bool,
    /// A system message (implies -chat).
    #[arg(long)]
    pub system: Option<String>,
    /// Constrain the output to any valid JSON value.
    #[arg(long)]
    pub json: bool,
    /// Constrain the output to a JSON Schema (a file).
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
    /// A text `x-llamay-quote` values may quote, as `NAME=FILE` or `FILE` (named by
    /// its stem); repeatable. `x-llamay-quote: true` quotes the prompt.
    #[arg(long = "source", value_name = "[NAME=]FILE")]
    pub source: Vec<String>,
    /// Constrain the output to a GBNF grammar (a file).
    #[arg(long = "grammar-file", value_name = "FILE")]
    pub grammar_file: Option<PathBuf>,
    /// Most tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 512)]
    pub n_predict: usize,
    /// Sampling temperature (0 = greedy).
    #[arg(long, default_value_t = 0.8)]
    pub temp: f32,
    #[arg(long = "top-k", default_value_t = 40)]
    pub top_k: usize,
    #[arg(long = "top-p", default_value_t = 0.95)]
    pub top_p: f32,
    #[arg(long = "min-p", default_value_t = 0.05)]
    pub min_p: f32,
    #[arg(long = "repeat-penalty", default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// Random seed (the same seed gives the same text).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Print extra statistics lines.
    #[arg(long)]
    pub stats: bool,
    /// Sample every token, even the constraint's forced continuations (for measuring).
    #[arg(long = "no-fast-forward", hide = true)]
    pub no_fast_forward: bool,
}

/// What the output is constrained to, decided (and checked) before the model loads,
/// by the same rules as every server route.
fn constraint(a: &RunArgs, prompt: &str) -> anyhow::Result<ConstraintSpec> {
    let chosen = [a.json, a.schema.is_some(), a.grammar_file.is_some()]
        .iter()
        .filter(|&&b| b)
        .count();
    if chosen > 1 {
        return Err(UsageError(
            "-json, -schema and -grammar-file are exclusive: give at most one".into(),
        )
        .into());
    }
    let schema = match &a.schema {
        Some(path) => {
            let text = read_user_file(path, "schema")?;
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| UsageError(format!("{} is not valid JSON: {e}", path.display())))?;
            Some(value)
        }
        None => None,
    };
    let grammar = match &a.grammar_file {
        Some(path) => Some(read_user_file(path, "grammar")?),
        None => None,
    };
    let mut surfaces = Surfaces::default();
    surfaces.sources.named = super::sources::read_sources(&a.source)?;
    surfaces.input(prompt.to_string());
    if let Some(v) = &schema {
        surfaces.schema("-schema", v);
    }
    if let Some(text) = grammar {
        surfaces.grammar = Some(("-grammar-file", text));
    }
    if a.json {
        surfaces.json = Some("-json");
    }
    let asked = surfaces.resolve().map_err(|e| UsageError(e.message))?;
    Ok(ConstraintSpec::decide(asked, None, None))
}

/// A file named on the command line: one that cannot be read is the caller's mistake.
fn read_user_file(path: &std::path::Path, what: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read {what} {}: {e}", path.display())).into())
}

fn read_prompt(p: &str) -> anyhow::Result<String> {
    if p != "-" {
        return Ok(p.to_string());
    }
    let mut s = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
        .context("cannot read the prompt from stdin")?;
    // `echo … | llamay run -p -` ends the prompt with a newline nobody meant to send.
    let kept = s.trim_end_matches(['\n', '\r']).len();
    s.truncate(kept);
    Ok(s)
}

pub(crate) fn resolve_model(m: &str) -> anyhow::Result<PathBuf> {
    let p = PathBuf::from(m);
    if p.is_file() {
        return Ok(p);
    }
    Ok(crate::store_cmds::ensure_model(m, &Default::default())?.gguf)
}

pub fn run(a: RunArgs) -> anyhow::Result<()> {
    let prompt = read_prompt(&a.prompt)?;
    let spec = constraint(&a, &prompt)?;
    let opts = a.load.options()?;
    let path = resolve_model(&a.model)?;
    let lm = LoadedModel::load(&path, &opts)
        .with_context(|| format!("cannot load {}", path.display()))?;

    let compile_start = Instant::now();
    let (constraint, _) = spec.build(&lm).map_err(|e| anyhow::anyhow!(e.message))?;
    let compile_time = compile_start.elapsed();

    let tokens = if a.chat || a.system.is_some() {
        let mut msgs = Vec::new();
        if let Some(s) = &a.system {
            msgs.push(ChatMessage::new("system", s));
        }
        msgs.push(ChatMessage::new("user", &prompt));
        lm.encode_chat(&msgs, None)?
    } else {
        lm.encode_raw(&prompt)
    };
    let params = GenerationParams {
        max_tokens: a.n_predict,
        sampler: SamplerConfig {
            temperature: a.temp,
            top_k: a.top_k,
            top_p: a.top_p,
            min_p: a.min_p,
            repeat_penalty: a.repeat_penalty,
            seed: a.seed,
            ..SamplerConfig::default()
        },
        stop: Vec::new(),
        fast_forward: !a.no_fast_forward,
    };

    let cancel = Arc::new(AtomicBool::new(false));
    {
        let cancel = cancel.clone();
        // A second Ctrl-C falls through to the default: the process ends at once.
        let _ = ctrlc::set_handler(move || {
            if cancel.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
        });
    }
    let mut stdout = std::io::stdout().lock();
    let mut last_newline = true;
    // JSON may open with whitespace the model chose to write; stdout carries just the
    // document (and a newline), so `| jq .` and friends see nothing else.
    let mut skip_leading_ws = matches!(spec, ConstraintSpec::Json | ConstraintSpec::Schema(_));
    let g = generate(
        &lm.model,
        &lm.tokenizer,
        &tokens,
        &params,
        constraint.as_ref(),
        &cancel,
        &mut |mut s: &str| {
            if skip_leading_ws {
                s = s.trim_start();
                if s.is_empty() {
                    return;
                }
                skip_leading_ws = false;
            }
            let _ = stdout.write_all(s.as_bytes());
            let _ = stdout.flush();
            last_newline = s.ends_with('\n');
        },
    )?;
    if !last_newline {
        let _ = writeln!(stdout);
    }
    drop(stdout);

    let mut err = std::io::stderr().lock();
    writeln!(err)?;
    writeln!(err, "{}", g.stats.summary(g.finish.as_str()))?;
    if let Some(m) = &g.stats.mask {
        writeln!(err, "{}", m.summary(spec.kind(), g.stats.decode_time))?;
    }
    if a.stats {
        let template = match lm.template_source {
            TemplateSource::File => "from the file".to_string(),
            TemplateSource::Builtin(b) => format!("builtin {}", format!("{b:?}").to_lowercase()),
        };
        writeln!(
            err,
            "model {} · {} threads · ctx {} · kv {} · template {template}",
            path.display(),
            lm.model.n_threads(),
            lm.model.n_ctx(),
            a.load.kv,
        )?;
        writeln!(
            err,
            "constraint compiled in {:.2} ms · {} tokens forced without sampling ({} fast-forwarded)",
            compile_time.as_secs_f64() * 1e3,
            g.stats.forced_tokens,
            g.stats.fast_forwarded_tokens,
        )?;
        if let Some(report) = spec.schema_report() {
            let report = report.to_string();
            if !report.is_empty() {
                writeln!(err, "schema: {report}")?;
            }
        }
    }
    if g.finish == Finish::Cancelled {
        // Interrupted, like any Ctrl-C'd command, but only after the statistics.
        drop(err);
        std::process::exit(130);
    }
    Ok(())
}
