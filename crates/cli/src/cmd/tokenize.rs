//! `llamay tokenize -m FILE.gguf [-special] [-json]`.

use clap::Args;

#[derive(Args)]
pub struct TokenizeArgs {
    /// A .gguf file whose tokenizer to use.
    #[arg(short = 'm', long = "model")]
    pub model: String,
    /// Parse special tokens (`<|im_start|>`) written in the text.
    #[arg(long)]
    pub special: bool,
    /// Print ids and each token's bytes (hex) as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_a: TokenizeArgs) -> anyhow::Result<()> {
    anyhow::bail!("tokenize is not wired yet")
}
