//! `llamay embed -m MODEL [TEXT ...| -f FILE]`: one JSON array per input on stdout, for
//! scripts. Texts come from the arguments, else from the lines of FILE (`-` or no
//! argument at all: stdin).

use std::io::{BufRead, Write};

use anyhow::Context;
use clap::Args;
use llamay_engine::Pooling;
use llamay_runtime::{embed_blocking, EmbedInput, EmbedOptions, LoadedEncoder};

use super::load_args::LoadArgs;
use super::serve::resolve;
use super::UsageError;

#[derive(Args)]
pub struct EmbedArgs {
    /// The encoder: a .gguf file or a model name.
    #[arg(short = 'm', long = "model")]
    pub model: String,
    /// Texts to embed (each one line of output).
    pub texts: Vec<String>,
    /// Read one text per line from FILE (`-`: stdin).
    #[arg(
        short = 'f',
        long = "file",
        value_name = "FILE",
        conflicts_with = "texts"
    )]
    pub file: Option<String>,
    /// Pooling instead of the model's: none, mean, cls, last or rank.
    #[arg(long)]
    pub pooling: Option<String>,
    /// Keep the vectors as pooled (no L2 normalisation).
    #[arg(long = "no-normalize")]
    pub no_normalize: bool,
    /// Cut texts longer than the context instead of failing.
    #[arg(long)]
    pub truncate: bool,
    /// Keep the first N values of each vector (renormalised).
    #[arg(long)]
    pub dimensions: Option<usize>,
    #[command(flatten)]
    pub load: LoadArgs,
}

pub fn run(a: EmbedArgs) -> anyhow::Result<()> {
    let pooling = match a.pooling.as_deref() {
        None => None,
        Some(p) => Some(Pooling::from_name(p).ok_or_else(|| {
            UsageError(format!(
                "-pooling must be none, mean, cls, last or rank, not {p:?}"
            ))
        })?),
    };
    if a.dimensions == Some(0) {
        return Err(UsageError("-dimensions must be at least 1".into()).into());
    }
    let spec = resolve(&a.model)?;
    let enc = LoadedEncoder::load(&spec.name, &spec.path, &a.load.options()?)
        .map_err(|e| anyhow::anyhow!(e.message))?;
    if let Some(d) = a.dimensions {
        if d > enc.n_embd() {
            return Err(UsageError(format!(
                "-dimensions {d} is more than the model's {}",
                enc.n_embd()
            ))
            .into());
        }
    }
    let texts: Vec<String> = if !a.texts.is_empty() {
        a.texts
    } else {
        let reader: Box<dyn BufRead> = match a.file.as_deref() {
            None | Some("-") => Box::new(std::io::stdin().lock()),
            Some(p) => Box::new(std::io::BufReader::new(
                std::fs::File::open(p).with_context(|| format!("cannot read {p}"))?,
            )),
        };
        reader.lines().collect::<Result<_, _>>()?
    };
    let opts = EmbedOptions {
        truncate: a.truncate,
        dimensions: a.dimensions,
        pooling,
        normalize: !a.no_normalize,
    };
    // One engine call: the encoder packs the texts into passes itself.
    let inputs: Vec<EmbedInput> = texts.into_iter().map(EmbedInput::Text).collect();
    let (vectors, _) = embed_blocking(&enc, &inputs, &opts)
        .map_err(|e| anyhow::anyhow!(e.message.replacen("input[", "text[", 1)))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for v in vectors {
        serde_json::to_writer(&mut out, &v)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}
