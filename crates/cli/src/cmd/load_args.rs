//! `-threads`, `-ctx` and `-kv`: how a model is loaded, spelled once for `run`,
//! `serve` and `bench`.

use clap::Args;
use llamay_engine::{KvType, LoadOptions};

use super::UsageError;

#[derive(Args, Clone, Debug)]
pub struct LoadArgs {
    /// Threads for the forward pass (default: physical cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Context size per sequence in tokens (default: the model's, at most 4096).
    #[arg(long)]
    pub ctx: Option<usize>,
    /// KV cache type: f32 or f16.
    #[arg(long, default_value = "f32", value_parser = ["f32", "f16"])]
    pub kv: String,
}

/// Most threads anyone means to ask for.
const MAX_THREADS: usize = 1024;

impl LoadArgs {
    /// The engine's load options, with `n_ctx` when the command decides the
    /// context itself (`None`: the one `-ctx` gave).
    pub fn options(&self) -> Result<LoadOptions, UsageError> {
        let kv_type = match self.kv.as_str() {
            "f32" => KvType::F32,
            "f16" => KvType::F16,
            other => return Err(UsageError(format!("-kv must be f32 or f16, not {other:?}"))),
        };
        if let Some(t) = self.threads {
            if !(1..=MAX_THREADS).contains(&t) {
                return Err(UsageError(format!(
                    "-threads must be between 1 and {MAX_THREADS}, not {t}"
                )));
            }
        }
        if self.ctx == Some(0) {
            return Err(UsageError("-ctx must be at least 1".into()));
        }
        Ok(LoadOptions {
            n_threads: self.threads,
            n_ctx: self.ctx,
            kv_type,
            ..LoadOptions::default()
        })
    }
}
