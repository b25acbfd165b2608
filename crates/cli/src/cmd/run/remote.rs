//! A model served by a running server, over its Ollama routes (NDJSON streams):
//! `/api/generate` with `raw` for a plain prompt, `/api/chat` for a conversation.

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use anyhow::{anyhow, Context};
use llamay_runtime::{GenerationParams, GenerationStats};
use serde_json::{json, Value};

use super::backend::{Backend, Input, Reply};
use super::constraint::{Constraint, QuoteSources};
use crate::client::{ServerClient, ServerError};

pub struct Remote {
    client: ServerClient,
    model: String,
    /// The server's `/api/show` answer, kept for `/show info`.
    show: Value,
}

impl Remote {
    /// The server, if it can serve `model` (it loads it now if needed); `Err` with the
    /// reason when it cannot, so the caller runs the model itself instead.
    pub fn connect(client: ServerClient, model: &str) -> Result<Remote, String> {
        match client.post_json("/api/show", &json!({"model": model})) {
            Ok(show) => Ok(Remote {
                client,
                model: model.to_string(),
                show,
            }),
            Err(e) => Err(e.to_string()),
        }
    }

    pub fn base(&self) -> &str {
        self.client.base()
    }
}

/// The conversation in Ollama's shape: each turn's images as base64 `images`.
fn wire_messages(messages: &[llamay_runtime::ChatMessage]) -> Vec<Value> {
    use base64::Engine;
    messages
        .iter()
        .map(|m| {
            let mut v = json!(m);
            if !m.images.is_empty() {
                let b64 = base64::engine::general_purpose::STANDARD;
                v["images"] = m.images.iter().map(|im| json!(b64.encode(&im.0))).collect();
            }
            v
        })
        .collect()
}

impl Backend for Remote {
    fn generate(
        &mut self,
        input: &Input,
        constraint: &Constraint,
        sources: &QuoteSources,
        params: &GenerationParams,
        cancel: &AtomicBool,
        on_text: &mut dyn FnMut(&str),
    ) -> anyhow::Result<Reply> {
        // Only what `run` has flags for (it sets no stop strings, and `--no-fast-forward`
        // runs the model here).
        let s = &params.sampler;
        let options = json!({
            "temperature": s.temperature,
            "top_k": s.top_k,
            "top_p": s.top_p,
            "min_p": s.min_p,
            "repeat_penalty": s.repeat_penalty,
            "seed": s.seed,
            "num_predict": params.max_tokens,
        });
        let (path, mut body) = match input {
            Input::Raw(prompt, _) => (
                "/api/generate",
                json!({"model": self.model, "prompt": prompt, "raw": true}),
            ),
            Input::Chat(messages) => (
                "/api/chat",
                json!({"model": self.model, "messages": wire_messages(messages)}),
            ),
        };
        body["stream"] = json!(true);
        body["options"] = options;
        constraint.add_to_body(&mut body);
        sources.add_to_body(&mut body);
        let response = self.client.post(path, &body)?;
        let lines = read_lines(response);
        let mut text = String::new();
        let mut last = None;
        while !cancel.load(Ordering::SeqCst) {
            let line = match lines.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => line.context("the server's stream broke off")?,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(&line)
                .with_context(|| format!("the server sent a line that is not JSON: {line}"))?;
            if let Some(e) = v.get("error") {
                let message = e.as_str().map_or_else(|| e.to_string(), str::to_string);
                return Err(ServerError {
                    status: 200,
                    message,
                }
                .into());
            }
            let piece = v["response"]
                .as_str()
                .or_else(|| v["message"]["content"].as_str())
                .unwrap_or("");
            if !piece.is_empty() {
                text.push_str(piece);
                on_text(piece);
            }
            if v["done"] == json!(true) {
                last = Some(v);
                break;
            }
        }
        let cancelled = cancel.load(Ordering::SeqCst);
        let Some(last) = last else {
            if cancelled {
                return Ok(Reply {
                    text,
                    cancelled,
                    stats: Vec::new(),
                    details: Vec::new(),
                });
            }
            return Err(anyhow!("the server's stream ended before its last line"));
        };
        Ok(Reply {
            text,
            cancelled,
            stats: stats_lines(&last),
            details: vec![format!(
                "served by {} · model {}",
                self.client.base(),
                self.model
            )],
        })
    }

    fn describe(&self) -> anyhow::Result<String> {
        let v = &self.show;
        let details = &v["details"];
        let info = &v["model_info"];
        let arch = info["general.architecture"].as_str().unwrap_or("-");
        let field = |k: &str| {
            let x = &info[format!("{arch}.{k}")];
            if x.is_null() {
                "-".to_string()
            } else {
                x.to_string()
            }
        };
        let rows = [
            ("model", self.model.clone()),
            ("served by", self.client.base().to_string()),
            ("architecture", arch.to_string()),
            (
                "parameters",
                details["parameter_size"]
                    .as_str()
                    .unwrap_or("-")
                    .to_string(),
            ),
            (
                "quantization",
                details["quantization_level"]
                    .as_str()
                    .unwrap_or("-")
                    .to_string(),
            ),
            ("context length", field("context_length")),
            ("embedding length", field("embedding_length")),
            ("layers", field("block_count")),
        ];
        Ok(rows
            .iter()
            .map(|(k, v)| format!("  {k:<18}{v}\n"))
            .collect())
    }
}

/// The stream's lines, read on a thread of their own so that Ctrl-C is seen while the
/// server is still reading the prompt. When the receiver goes away, the thread's next
/// send fails and it drops the response, which closes the connection: the server then
/// stops generating.
fn read_lines(response: reqwest::blocking::Response) -> Receiver<std::io::Result<String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(response).lines() {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The one-shot statistics lines, from the stream's last line (Ollama's counts and
/// durations, and llamay's enforcement block beside them).
fn stats_lines(last: &Value) -> Vec<String> {
    let ns = |k: &str| Duration::from_nanos(last[k].as_u64().unwrap_or(0));
    let count = |k: &str| last[k].as_u64().unwrap_or(0) as usize;
    let stats = GenerationStats {
        prompt_tokens: count("prompt_eval_count"),
        prompt_time: ns("prompt_eval_duration"),
        generated_tokens: count("eval_count"),
        decode_time: ns("eval_duration"),
        ..GenerationStats::default()
    };
    let llamay = &last["llamay"];
    let finish = llamay["finish"]
        .as_str()
        .or_else(|| last["done_reason"].as_str())
        .unwrap_or("stop");
    let mut lines = vec![stats.summary(finish)];
    if let (Some(steps), Some(us)) = (
        llamay["mask_steps"].as_u64(),
        llamay["mask_us_per_token"].as_f64(),
    ) {
        let hits = llamay["mask_cache_hits"].as_u64().unwrap_or(0);
        let rate = if steps > 0 {
            100.0 * hits as f64 / steps as f64
        } else {
            0.0
        };
        lines.push(format!(
            "{} mask: {steps} steps, {:.2} ms each · {hits} cached ({rate:.1}% hit rate)",
            llamay["constraint"].as_str().unwrap_or("constraint"),
            us / 1000.0,
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_gives_the_seed_stats_lines() {
        let last = json!({
            "done": true, "done_reason": "stop",
            "prompt_eval_count": 25, "prompt_eval_duration": 175_000_000u64,
            "eval_count": 26, "eval_duration": 1_473_000_000u64,
            "llamay": {"constraint": "json", "finish": "eog", "mask_steps": 27,
                       "mask_us_per_token": 50.0, "mask_cache_hits": 21}
        });
        let lines = stats_lines(&last);
        assert_eq!(
            lines[0],
            "prompt 25 tokens in 175ms (142.9 tok/s) · generated 26 in 1.473s (17.7 tok/s) · stop: eog"
        );
        assert_eq!(
            lines[1],
            "json mask: 27 steps, 0.05 ms each · 21 cached (77.8% hit rate)"
        );
        // An unconstrained reply (or an Ollama server) has no mask line.
        assert_eq!(stats_lines(&json!({"eval_count": 3})).len(), 1);
    }
}
