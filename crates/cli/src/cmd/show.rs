//! `llamay show MODEL [-json]`.

use super::UsageError;
use crate::units::human_count;
use anyhow::Context;
use clap::Args;
use llamay_engine::ModelFacts;
use llamay_engine::{resolve_device, DeviceChoice, GgufFile};

#[derive(Args)]
pub struct ShowArgs {
    /// A .gguf file, or a model name in the store (`smollm2:135m`).
    pub model: String,
    /// Print the facts as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The `-device` to name the adapter of (as run, serve and bench take it).
    #[arg(long, default_value = "auto")]
    pub device: String,
}

pub fn run(a: ShowArgs) -> anyhow::Result<()> {
    // A name that is not a file is looked up in the store, whose facts come first.
    let path = if std::path::Path::new(&a.model).is_file() {
        std::path::PathBuf::from(&a.model)
    } else {
        let facts = crate::cmd::store::store_facts(&a.model)?;
        if !a.json {
            crate::cmd::store::print_store_facts(&facts, &mut std::io::stdout())?;
        }
        crate::cmd::store::open_store()?.resolve(&a.model)?.gguf
    };
    let f = GgufFile::open(&path).with_context(|| format!("cannot open model {}", a.model))?;
    let facts = ModelFacts::from_gguf(&f).context("cannot describe model")?;
    let choice: DeviceChoice = a
        .device
        .parse()
        .map_err(|e: llamay_engine::BadDeviceChoice| UsageError(e.to_string()))?;
    let device = resolve_device(&choice)
        .map_err(|e| UsageError(e.to_string()))?
        .map_or_else(|| "cpu".to_string(), |d| d.to_string());
    if a.json {
        let mut v = to_json(&a.model, &facts);
        v["device"] = device.into();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render(&a.model, &facts));
        println!("  {:<18}{device}", "device");
    }
    Ok(())
}

fn to_json(path: &str, m: &ModelFacts) -> serde_json::Value {
    serde_json::json!({
        "model": path,
        "name": m.name,
        "architecture": m.architecture,
        "parameters": m.parameters,
        "file_type": m.file_type,
        "file_size": m.file_size,
        "gguf_version": m.gguf_version,
        "context_length": m.context_length,
        "embedding_length": m.embedding_length,
        "block_count": m.block_count,
        "head_count": m.head_count,
        "head_count_kv": m.head_count_kv,
        "expert_count": m.expert_count,
        "expert_used_count": m.expert_used_count,
        "vocab_size": m.vocab_size,
        "tokenizer": {"model": m.tokenizer_model, "pre": m.tokenizer_pre},
        "chat_template": m.has_chat_template,
        "tensor_count": m.tensor_count,
        "tensor_types": m.tensor_types,
    })
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("-".to_string(), |v| v.to_string())
}

pub fn render(path: &str, m: &ModelFacts) -> String {
    let tokenizer = match (&m.tokenizer_model, &m.tokenizer_pre) {
        (Some(model), Some(pre)) => format!("{model} (pre: {pre})"),
        (Some(model), None) => model.clone(),
        _ => "-".into(),
    };
    let types: Vec<String> = m
        .tensor_types
        .iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect();
    let rows = [
        ("model", path.to_string()),
        ("name", opt(&m.name)),
        ("architecture", m.architecture.clone()),
        (
            "parameters",
            format!("{} ({})", human_count(m.parameters), m.parameters),
        ),
        ("file type", opt(&m.file_type)),
        (
            "file size",
            format!(
                "{:.1} MB (GGUF v{})",
                m.file_size as f64 / 1e6,
                m.gguf_version
            ),
        ),
        ("context length", opt(&m.context_length)),
        ("embedding length", opt(&m.embedding_length)),
        ("layers", opt(&m.block_count)),
        (
            "heads",
            format!("{} (kv {})", opt(&m.head_count), opt(&m.head_count_kv)),
        ),
        (
            "experts",
            match (m.expert_count, m.expert_used_count) {
                (Some(n), Some(k)) => format!("{n} ({k} used per token)"),
                (Some(n), None) => n.to_string(),
                _ => "-".into(),
            },
        ),
        ("vocab size", m.vocab_size.to_string()),
        ("tokenizer", tokenizer),
        (
            "chat template",
            if m.has_chat_template { "yes" } else { "no" }.into(),
        ),
        (
            "tensors",
            format!("{} ({})", m.tensor_count, types.join(", ")),
        ),
    ];
    rows.iter()
        .map(|(k, v)| format!("  {k:<18}{v}\n"))
        .collect()
}
