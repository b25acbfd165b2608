//! `llamay tokenize -m FILE.gguf [-special] [-json] [-no-bos]`: the token ids of the
//! raw bytes on stdin, as llama.cpp's tokenize tool prints them.

use std::io::{Read, Write};

use anyhow::Context;
use clap::Args;
use llamay_engine::GgufFile;
use llamay_engine::Tokenizer;

#[derive(Args)]
pub struct TokenizeArgs {
    /// A .gguf file whose tokenizer to use.
    #[arg(short = 'm', long = "model")]
    pub model: String,
    /// Parse special tokens (`<|im_start|>`) written in the text.
    #[arg(long)]
    pub special: bool,
    /// Do not add the BOS/EOS tokens the model's metadata asks for.
    #[arg(long = "no-bos")]
    pub no_bos: bool,
    /// Print ids and each token's bytes (hex) as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: TokenizeArgs) -> anyhow::Result<()> {
    let f = GgufFile::open(&a.model).with_context(|| format!("cannot open model {}", a.model))?;
    let tok = Tokenizer::from_gguf(&f).context("cannot build the tokenizer")?;
    let mut text = Vec::new();
    std::io::stdin()
        .read_to_end(&mut text)
        .context("cannot read stdin")?;
    let ids = tok.encode(&text, !a.no_bos, a.special);
    let mut out = std::io::stdout().lock();
    if a.json {
        let tokens: Vec<serde_json::Value> = ids
            .iter()
            .map(|&id| {
                let bytes = tok.token_bytes(id);
                serde_json::json!({
                    "id": id,
                    "hex": hex(bytes),
                    "text": std::str::from_utf8(bytes).ok(),
                })
            })
            .collect();
        let v = serde_json::json!({"ids": ids, "tokens": tokens});
        writeln!(out, "{v}")?;
    } else {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        writeln!(out, "[{}]", list.join(", "))?;
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
