//! A mask-benchmark worker speaking `shared/bench/constrain/PROTOCOL.md` (persistent
//! JSON-lines mode), so this crate can be measured beside llguidance and XGrammar:
//!
//! `python bench_masks.py run --out results/x --peer llguidance \
//!    --peer-cmd llamay='target/release/examples/bench_worker --gguf {gguf}'`
//!
//! Dev tooling only: it reads the tokenizer with a minimal GGUF reader of its own.

#[path = "../benches/gguf_vocab.rs"]
mod gguf_vocab;

use llamay_constrain::{Constraint, TokenMask, Vocabulary};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Instant;

fn us(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

fn compile(
    format: &str,
    grammar: &str,
    vocab: &Arc<Vocabulary>,
) -> Result<Option<Constraint>, String> {
    match format {
        "json_schema" => {
            let schema: Value = serde_json::from_str(grammar).map_err(|e| e.to_string())?;
            llamay_constrain::schema::constraint(&schema, vocab.clone())
                .map(|(c, _)| Some(c))
                .map_err(|e| e.to_string())
        }
        "gbnf" => Constraint::from_gbnf(grammar, vocab.clone())
            .map(Some)
            .map_err(|e| e.to_string()),
        "regex" => Constraint::from_regex(grammar, vocab.clone())
            .map(Some)
            .map_err(|e| e.to_string()),
        _ => Ok(None),
    }
}

fn serve(req: &Value, vocab: &Arc<Vocabulary>, eos: u32) -> Value {
    let mut out = json!({"id": req["id"], "status": null, "compile_us": null, "matcher_us": null,
        "mask_us": [], "commit_us": [], "rejected_at": null, "error": ""});
    let t0 = Instant::now();
    let c = match compile(
        req["format"].as_str().unwrap_or(""),
        req["grammar"].as_str().unwrap_or(""),
        vocab,
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
        .filter_map(|t| t.as_u64())
        .map(|t| t as u32)
        .collect();
    let record = req["record_allowed"].as_bool().unwrap_or(false);
    let (mut mask_us, mut commit_us, mut allowed) = (Vec::new(), Vec::new(), Vec::new());
    let mut mask = TokenMask::new(vocab.len());
    let mut words = vec![0u32; vocab.len().div_ceil(32)];
    let mut status = "ok";
    for k in 0..=tokens.len() {
        let t0 = Instant::now();
        m.mask(&mut mask);
        mask.write_u32_words(&mut words);
        mask_us.push(us(t0));
        if record {
            allowed.push(mask.count());
        }
        if k == tokens.len() {
            if !mask.is_allowed(eos) {
                status = "not_accepting";
            }
            break;
        }
        if !mask.is_allowed(tokens[k]) {
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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(gguf) = args
        .iter()
        .position(|a| a == "--gguf")
        .and_then(|i| args.get(i + 1))
    else {
        eprintln!("usage: bench_worker --gguf PATH");
        std::process::exit(2);
    };
    let gv = gguf_vocab::load(std::path::Path::new(gguf)).unwrap_or_else(|e| {
        eprintln!("cannot read {gguf}: {e}");
        std::process::exit(1);
    });
    let Some(&eos) = gv.eog.first() else {
        eprintln!("{gguf} names no end-of-sequence token");
        std::process::exit(1);
    };
    eprintln!(
        "bench_worker: {} tokenizer, {} tokens",
        gv.model,
        gv.tokens.len()
    );
    let vocab = Arc::new(Vocabulary::new(gv.tokens, &gv.eog, &gv.special));
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    let ready = json!({"event": "ready", "peer": "llamay", "version": env!("CARGO_PKG_VERSION"),
        "n_vocab": vocab.len(), "formats": ["json_schema", "gbnf", "regex"]});
    writeln!(w, "{ready}").unwrap();
    w.flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let resp = match serde_json::from_str::<Value>(&line) {
            Ok(req) => serve(&req, &vocab, eos),
            Err(e) => json!({"id": null, "status": "crash", "error": format!("bad request: {e}")}),
        };
        writeln!(w, "{resp}").unwrap();
        w.flush().unwrap();
    }
}
