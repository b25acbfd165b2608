//! `-threads`, `-ctx`, `-kv` and `-device`: how a model is loaded, spelled once for `run`,
//! `serve` and `bench`.

use clap::Args;
use llamay_engine::{resolve_device, DeviceChoice, KvType, LoadOptions, Model};

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
    /// Where the forward pass runs: cpu, auto (a hardware GPU when present, else the
    /// CPU), gpu, gpu:N (the Nth hardware adapter) or gpu:NAME (any adapter whose name
    /// contains NAME, software ones included: gpu:llvmpipe).
    #[arg(long, default_value = "cpu")]
    pub device: String,
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
        let device: DeviceChoice = self
            .device
            .parse()
            .map_err(|e: llamay_engine::BadDeviceChoice| UsageError(e.to_string()))?;
        // A GPU that is not there is the caller's mistake, told before anything loads.
        resolve_device(&device).map_err(|e| UsageError(e.to_string()))?;
        Ok(LoadOptions {
            n_threads: self.threads,
            n_ctx: self.ctx,
            kv_type,
            device,
            ..LoadOptions::default()
        })
    }
}

/// Tells on stderr where a model runs when it is not the plain CPU default: the
/// adapter, or why `auto` stayed on the CPU.
pub fn announce_device(model: &Model) {
    if let Some(a) = model.device() {
        eprintln!("llamay: device {a}");
    }
    if let Some(note) = model.device_note() {
        eprintln!("llamay: -device auto: {note}");
    }
}
