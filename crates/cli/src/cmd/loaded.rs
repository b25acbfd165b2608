//! `llamay ps` and `llamay stop`: the models a running server holds in memory
//! ($LLAMAY_HOST, default localhost:11435), through its Ollama routes.

use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail};
use clap::Args;
use serde_json::{json, Value};

use crate::client::ServerClient;
use crate::cmd::store::{format_size, format_until, write_table};

#[derive(Args)]
#[command(after_help = "Example:\n  llamay ps")]
pub struct PsArgs {}

#[derive(Args)]
#[command(after_help = "Example:\n  llamay stop qwen2.5:0.5b")]
pub struct StopArgs {
    /// The model to unload, as `llamay ps` names it.
    pub model: String,
}

fn loaded(client: &ServerClient) -> anyhow::Result<Vec<Value>> {
    let v = client.get_json("/api/ps")?;
    Ok(v["models"].as_array().cloned().unwrap_or_default())
}

/// `llamay ps`: NAME, SIZE, PROCESSOR, CONTEXT, ACTIVE, UNTIL.
pub fn run_ps(_a: &PsArgs) -> anyhow::Result<()> {
    let client = ServerClient::from_env()?;
    let models = loaded(&client)?;
    let now = SystemTime::now();
    let header = ["NAME", "SIZE", "PROCESSOR", "CONTEXT", "ACTIVE", "UNTIL"].map(String::from);
    let rows: Vec<[String; 6]> = models
        .iter()
        .map(|m| {
            let size = m["size"].as_u64().unwrap_or(0);
            let vram = m["size_vram"].as_u64().unwrap_or(0);
            let processor = if vram == 0 {
                "100% CPU".to_string()
            } else {
                format!("{}% GPU", (100 * vram / size.max(1)).min(100))
            };
            let until = m["expires_at"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| {
                    let secs = t.timestamp().max(0) as u64;
                    format_until(now, SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
                })
                .unwrap_or_else(|| "-".into());
            [
                m["name"].as_str().unwrap_or("?").to_string(),
                format_size(size),
                processor,
                m["context_length"]
                    .as_u64()
                    .map_or("-".into(), |c| c.to_string()),
                m["llamay"]["active"]
                    .as_u64()
                    .map_or("-".into(), |c| c.to_string()),
                until,
            ]
        })
        .collect();
    write_table(&mut std::io::stdout().lock(), &header, &rows)?;
    Ok(())
}

/// `llamay stop MODEL`: unloads it now (Ollama's empty request with `keep_alive: 0`).
pub fn run_stop(a: &StopArgs) -> anyhow::Result<()> {
    let client = ServerClient::from_env()?;
    let models = loaded(&client)?;
    let names: Vec<&str> = models.iter().filter_map(|m| m["name"].as_str()).collect();
    let Some(name) = names.iter().find(|n| same_model(n, &a.model)) else {
        if names.is_empty() {
            bail!(
                "{} is not loaded: the server at {} holds no model",
                a.model,
                client.base()
            );
        }
        return Err(anyhow!(
            "{} is not loaded (loaded: {})",
            a.model,
            names.join(", ")
        ));
    };
    client.post_json(
        "/api/generate",
        &json!({"model": name, "prompt": "", "keep_alive": 0, "stream": false}),
    )?;
    eprintln!("stopped {name}");
    Ok(())
}

/// `qwen2.5` names `qwen2.5:latest`, as in Ollama; a `.gguf` path names the model the
/// server loaded from it (which it names by the file's stem).
fn same_model(loaded: &str, asked: &str) -> bool {
    if asked.ends_with(".gguf") {
        let stem = std::path::Path::new(asked).file_stem();
        if stem.is_some_and(|s| s == loaded) {
            return true;
        }
    }
    let with_tag = |s: &str| {
        if s.contains(':') || s.ends_with(".gguf") {
            s.to_string()
        } else {
            format!("{s}:latest")
        }
    };
    loaded == asked || with_tag(loaded) == with_tag(asked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_as_ollama_matches_them() {
        assert!(same_model("qwen2.5:latest", "qwen2.5"));
        assert!(same_model("smollm2:135m", "smollm2:135m"));
        assert!(!same_model("smollm2:135m", "smollm2"));
        assert!(same_model("/m/x.gguf", "/m/x.gguf"));
        assert!(same_model("x.Q4_1", "/m/x.Q4_1.gguf"));
        assert!(!same_model("y", "/m/x.gguf"));
    }
}
