//! `llamay bench -m MODEL [-p 512] [-n 128] [-b 1,4,8] [-threads N] [-r 3] [-json]`:
//! prompt-processing, decode and batched-decode throughput of the engine, repeated
//! and summarised as min / median / max, with peak resident memory beside the model
//! file and KV cache sizes. The token ids are those llama.cpp's side of
//! `scripts/bench-vs-llamacpp` is fed.

mod measure;
mod report;
mod tokens;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use llamay_engine::Backend;
use llamay_engine::{BatchSplit, LoadOptions, Model};

use super::load_args::LoadArgs;
use super::UsageError;
use measure::{Round, Workload, N_SHORT};
use report::{BatchFigures, Report, Spread};

/// Bounds that keep a mistyped number from running for hours or allocating wildly.
const MAX_TOKENS: usize = 1 << 16;
const MAX_BATCH: usize = 256;
const MAX_REPS: usize = 1000;

#[derive(Args)]
pub struct BenchArgs {
    /// A .gguf file or a model name in the store.
    #[arg(short = 'm', long = "model")]
    pub model: String,
    /// Prompt tokens processed in one batch from an empty cache.
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    pub n_prompt: usize,
    /// Tokens decoded one step at a time (after a 16-token prompt).
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    pub n_gen: usize,
    /// Batch sizes for batched decode, comma separated.
    #[arg(
        short = 'b',
        long = "batch",
        value_delimiter = ',',
        default_value = "1,4,8"
    )]
    pub batch: Vec<usize>,
    /// Repetitions of every measurement.
    #[arg(short = 'r', long = "reps", default_value_t = 3)]
    pub reps: usize,
    #[command(flatten)]
    pub load: LoadArgs,
    /// How batched steps use the threads: auto (measured as they run), rows (every
    /// thread on every sequence) or sequences (one step per thread).
    #[arg(long, default_value = "auto", value_parser = ["auto", "rows", "sequences"])]
    pub split: String,
    /// Print the figures as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let (workload, opts) = check(&a)?;
    let path = model_path(&a.model)?;
    let t = Instant::now();
    let model =
        Model::load(&path, &opts).with_context(|| format!("cannot load model {}", a.model))?;
    let load_s = t.elapsed().as_secs_f64();
    super::load_args::announce_device(&model);
    if workload.ctx_needed() > model.n_ctx_train() {
        return Err(UsageError(format!(
            "the benchmark needs {} positions, more than the model's context of {}",
            workload.ctx_needed(),
            model.n_ctx_train()
        ))
        .into());
    }
    let tokens = tokens::fixed_tokens(workload.tokens_needed(), model.n_vocab());
    anyhow::ensure!(!tokens.is_empty(), "the model has an empty vocabulary");

    measure::warm_up(&model, &tokens)?;
    let rounds = (0..a.reps)
        .map(|_| measure::round(&model, &tokens, &workload))
        .collect::<anyhow::Result<Vec<Round>>>()?;

    let report = summarise(&a, &model, &workload, &rounds, load_s)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}

/// Usage errors, decided before the model is loaded; the load options the
/// workload needs (`-ctx`, when given, may only make the context larger).
fn check(a: &BenchArgs) -> Result<(Workload, LoadOptions), UsageError> {
    let in_range = |flag: &str, v: usize, max: usize| {
        if (1..=max).contains(&v) {
            Ok(())
        } else {
            Err(UsageError(format!(
                "{flag} must be between 1 and {max}, not {v}"
            )))
        }
    };
    in_range("-p", a.n_prompt, MAX_TOKENS)?;
    in_range("-n", a.n_gen, MAX_TOKENS)?;
    in_range("-r", a.reps, MAX_REPS)?;
    if a.batch.is_empty() {
        return Err(UsageError("-b needs at least one batch size".into()));
    }
    for &b in &a.batch {
        in_range("-b", b, MAX_BATCH)?;
    }
    let workload = Workload {
        n_prompt: a.n_prompt,
        n_gen: a.n_gen,
        batches: a.batch.clone(),
    };
    let mut opts = a.load.options()?;
    let needed = workload.ctx_needed();
    if opts.n_ctx.is_some_and(|c| c < needed) {
        return Err(UsageError(format!(
            "-ctx {} is smaller than the {needed} positions this benchmark needs",
            opts.n_ctx.unwrap_or(0)
        )));
    }
    opts.n_ctx = Some(opts.n_ctx.unwrap_or(needed));
    opts.batch_split = match a.split.as_str() {
        "rows" => BatchSplit::Rows,
        "sequences" => BatchSplit::Sequences,
        _ => BatchSplit::Auto,
    };
    Ok((workload, opts))
}

/// A file as it is; anything else is looked up in the store (never pulled: a
/// download would distort nothing but would surprise someone measuring).
fn model_path(model: &str) -> anyhow::Result<PathBuf> {
    if Path::new(model).is_file() {
        return Ok(PathBuf::from(model));
    }
    Ok(crate::cmd::store::open_store()?.resolve(model)?.gguf)
}

fn summarise(
    a: &BenchArgs,
    model: &Model,
    w: &Workload,
    rounds: &[Round],
    load_s: f64,
) -> anyhow::Result<Report> {
    let spread = |f: &dyn Fn(&Round) -> f64| {
        Spread::of(&rounds.iter().map(f).collect::<Vec<_>>())
            .ok_or_else(|| anyhow::anyhow!("no rounds were run"))
    };
    let mut batched = Vec::with_capacity(w.batches.len());
    for (i, &b) in w.batches.iter().enumerate() {
        let aggregate = spread(&|r| r.batched_tps[i])?;
        let per_seq = spread(&|r| r.batched_tps[i] / b as f64)?;
        batched.push(BatchFigures {
            batch: b,
            aggregate,
            per_seq,
        });
    }
    let info = model.facts();
    Ok(Report {
        model: a.model.clone(),
        name: info.name.clone(),
        arch: info.architecture.clone(),
        parameters: info.parameters,
        file_type: info.file_type.clone(),
        file_size: info.file_size,
        threads: model.n_threads(),
        kernels: match model.device() {
            Some(a) => format!("gpu {a}"),
            None => format!("{:?}", Backend::active().set()).to_lowercase(),
        },
        kv_type: a.load.kv.clone(),
        reps: rounds.len(),
        load_s,
        n_prompt: w.n_prompt,
        n_gen: w.n_gen,
        n_short: N_SHORT,
        pp: spread(&|r| r.pp_tps)?,
        tg: spread(&|r| r.tg_tps)?,
        batched,
        first_gen_ids: rounds[0].first_gen_ids.clone(),
        peak_rss: peak_rss(),
        kv_bytes: rounds.iter().map(|r| r.kv_peak).max().unwrap_or(0) as u64,
    })
}

/// The process's peak resident set size (`VmHWM`), where /proc reports it.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}
