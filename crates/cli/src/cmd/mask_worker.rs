//! `llamay mask-worker --gguf FILE`: a constraint-engine worker speaking the JSON-lines
//! protocol of `shared/bench/constrain/PROTOCOL.md`, so the benchmark harness measures
//! llamay's token masks beside other engines on the same schemas, tokenizers and token
//! sequences. The vocabulary comes from the engine's tokenizer, exactly as the server
//! builds it.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use llamay_constrain::{AdditionalProperties, Constraint, SchemaOptions, Vocabulary};
use llamay_engine::GgufFile;
use llamay_engine::Tokenizer;
use serde_json::{json, Value};

#[derive(Args)]
pub struct MaskWorkerArgs {
    /// A .gguf file whose tokenizer gives the vocabulary.
    #[arg(long)]
    pub gguf: String,
    /// `additionalProperties` when a schema does not write it: `open` (JSON Schema's
    /// own semantics, what other engines implement, so a benchmark compares one
    /// language) or `closed` (the API's default).
    #[arg(long, default_value = "open", value_parser = ["open", "closed"])]
    pub additional_properties: String,
}

pub fn run(a: MaskWorkerArgs) -> anyhow::Result<()> {
    let f = GgufFile::open(&a.gguf).with_context(|| format!("cannot open {}", a.gguf))?;
    let tok = Tokenizer::from_gguf(&f).context("cannot build the tokenizer")?;
    let eos = *tok
        .eog_ids()
        .first()
        .with_context(|| format!("{} names no end-of-generation token", a.gguf))?;
    let vocab = Arc::new(Vocabulary::new(
        tok.vocab_bytes(),
        tok.eog_ids(),
        &tok.control_ids(),
    ));
    let options = SchemaOptions {
        additional_properties: AdditionalProperties::from_name(&a.additional_properties)
            .context("--additional-properties is open or closed")?,
        ..SchemaOptions::default()
    };
    let mut out = std::io::stdout().lock();
    let ready = json!({"event": "ready", "peer": "llamay", "version": env!("CARGO_PKG_VERSION"),
        "n_vocab": vocab.len(), "formats": ["json_schema", "gbnf", "regex"]});
    writeln!(out, "{ready}")?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line.context("cannot read stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let resp = match serde_json::from_str::<Value>(&line) {
            Ok(req) => serve(&req, &vocab, eos, &options),
            Err(e) => json!({"id": null, "status": "crash", "error": format!("bad request: {e}")}),
        };
        writeln!(out, "{resp}")?;
        out.flush()?;
    }
    Ok(())
}

fn us(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

/// The constraint for a request, `None` for a format llamay does not take.
fn compile(
    format: &str,
    text: &str,
    vocab: &Arc<Vocabulary>,
    options: &SchemaOptions,
) -> Result<Option<Constraint>, String> {
    let v = vocab.clone();
    let c = match format {
        "json_schema" => {
            let schema: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
            Constraint::from_schema_with(&schema, v, options)
                .map(|(c, _)| c)
                .map_err(|e| e.to_string())?
        }
        "gbnf" => Constraint::from_gbnf(text, v).map_err(|e| e.to_string())?,
        "regex" => Constraint::from_regex(text, v).map_err(|e| e.to_string())?,
        _ => return Ok(None),
    };
    Ok(Some(c))
}

/// One request: compile, then mask/commit along the given tokens, timing each step.
fn serve(req: &Value, vocab: &Arc<Vocabulary>, eos: u32, options: &SchemaOptions) -> Value {
    let mut out = json!({"id": req["id"], "status": null, "compile_us": null, "matcher_us": null,
        "mask_us": [], "commit_us": [], "rejected_at": null, "error": ""});
    let t0 = Instant::now();
    let format = req["format"].as_str().unwrap_or("");
    let c = match compile(
        format,
        req["grammar"].as_str().unwrap_or(""),
        vocab,
        options,
    ) {
        Ok(Some(c)) => c,
        Ok(None) => {
            out["status"] = json!("unsupported");
            return out;
        }
        Err(e) => {
            out["status"] = json!("compile_error");
            out["error"] = json!(e);
            return out;
        }
    };
    out["compile_us"] = json!(us(t0));
    let t0 = Instant::now();
    let mut m = c.matcher();
    out["matcher_us"] = json!(us(t0));
    let tokens: Vec<u32> = req["tokens"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_u64().and_then(|t| u32::try_from(t).ok()))
        .collect();
    let record = req["record_allowed"].as_bool().unwrap_or(false);
    let (mut mask_us, mut commit_us, mut allowed) = (Vec::new(), Vec::new(), Vec::new());
    let mut words = vec![0u32; vocab.len().div_ceil(32)];
    // Bit `t` of the caller-owned words, as the protocol lays them out.
    let is_allowed = |words: &[u32], t: u32| {
        words
            .get(t as usize / 32)
            .is_some_and(|w| w >> (t % 32) & 1 != 0)
    };
    let mut status = "ok";
    for k in 0..=tokens.len() {
        let t0 = Instant::now();
        // The matcher's own copy goes straight into the words: no intermediate mask.
        m.write_mask_words(&mut words);
        mask_us.push(us(t0));
        if record {
            allowed.push(words.iter().map(|w| w.count_ones() as usize).sum::<usize>());
        }
        if k == tokens.len() {
            if !is_allowed(&words, eos) {
                status = "not_accepting";
            }
            break;
        }
        if !is_allowed(&words, tokens[k]) {
            status = "rejected";
            out["rejected_at"] = json!(k);
            break;
        }
        let t0 = Instant::now();
        let r = m.commit(tokens[k]);
        commit_us.push(us(t0));
        if let Err(e) = r {
            status = "rejected";
            out["rejected_at"] = json!(k);
            out["error"] = json!(e.to_string());
            break;
        }
    }
    out["status"] = json!(status);
    out["mask_us"] = json!(mask_us);
    out["commit_us"] = json!(commit_us);
    if record {
        out["allowed"] = json!(allowed);
    }
    out
}
