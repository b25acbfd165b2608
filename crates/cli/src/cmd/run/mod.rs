//! `llamay run`: one generation, text to stdout, statistics to stderr; or, with no
//! prompt at a terminal, an interactive chat. A running server does the work when one
//! answers (so a model is not loaded twice), unless `--local`.

mod backend;
mod constraint;
mod interactive;
mod local;
mod remote;
mod slash;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use llamay_engine::SamplerConfig;
use llamay_runtime::{ChatMessage, GenerationParams, DEFAULT_DRAFT};

use super::load_args::LoadArgs;
use super::UsageError;
use crate::client::ServerClient;
use crate::interrupt;
use backend::{Backend, Input};
use constraint::{Constraint, QuoteSources};

/// The small default model, as a store name.
pub const DEFAULT_MODEL: &str = "smollm2:135m";

#[derive(Args)]
#[command(after_help = "\
Examples:
  llamay run qwen2.5:0.5b                         a chat at the terminal
  llamay run qwen2.5:0.5b \"Why is the sky blue?\"  one answer
  llamay run -m model.gguf -chat -json -p \"Describe a cat as JSON\"
  cat doc.txt | llamay run smollm2:135m -schema examples/server.schema.json")]
pub struct RunArgs {
    /// MODEL [PROMPT...], as `ollama run` takes them (with -m, all the words are the
    /// prompt). The Ollama form talks to the model through its chat template.
    #[arg(value_name = "MODEL [PROMPT]")]
    pub words: Vec<String>,
    /// A .gguf file or a model name (pulled into the store if missing).
    #[arg(short = 'm', long = "model")]
    pub model: Option<String>,
    /// The prompt; `-` reads it from stdin. Without one: stdin when it is piped, else
    /// an interactive chat.
    #[arg(short = 'p', long = "prompt")]
    pub prompt: Option<String>,
    /// Wrap the prompt in the model's chat template.
    #[arg(long)]
    pub chat: bool,
    /// Send the prompt as written, even in the Ollama form.
    #[arg(long, conflicts_with = "chat")]
    pub raw: bool,
    /// A system message (implies -chat).
    #[arg(long)]
    pub system: Option<String>,
    /// Constrain the output to a JSON object (JSON mode).
    #[arg(long)]
    pub json: bool,
    /// Constrain the output to a JSON Schema (a file).
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
    /// Constrain the output to a GBNF grammar (a file).
    #[arg(long = "grammar-file", value_name = "FILE")]
    pub grammar_file: Option<PathBuf>,
    /// Constrain the output to one term of a lexicon: a file of one term per line.
    #[arg(long, value_name = "FILE")]
    pub lexicon: Option<PathBuf>,
    /// A text the schema's `x-llamay-quote` may name, as `NAME=FILE` or `FILE` (named
    /// by its stem); repeatable. `"x-llamay-quote": true` quotes the prompt.
    #[arg(long = "source", value_name = "[NAME=]FILE")]
    pub source: Vec<String>,
    /// Ollama's spelling: `json`, or a JSON Schema (inline or a file).
    #[arg(long, value_name = "json|SCHEMA")]
    pub format: Option<String>,
    /// Most tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 512)]
    pub n_predict: usize,
    /// Sampling temperature (0 = greedy).
    #[arg(long, default_value_t = 0.8)]
    pub temp: f32,
    #[arg(long = "top-k", default_value_t = 40)]
    pub top_k: usize,
    #[arg(long = "top-p", default_value_t = 0.95)]
    pub top_p: f32,
    #[arg(long = "min-p", default_value_t = 0.05)]
    pub min_p: f32,
    #[arg(long = "repeat-penalty", default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// Random seed (the same seed gives the same text).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Run the model in this process even when a server is up ($LLAMAY_HOST, default
    /// localhost:11435).
    #[arg(long)]
    pub local: bool,
    /// Print extra statistics lines (in the chat: after every reply).
    #[arg(long, visible_alias = "verbose")]
    pub stats: bool,
    /// Sample every token, even the constraint's forced continuations (for measuring).
    #[arg(long = "no-fast-forward", hide = true)]
    pub no_fast_forward: bool,
    /// Feed one token at a time: no drafts of likely continuations checked in the same
    /// pass (speculative decoding, which never changes the output).
    #[arg(long = "no-spec")]
    pub no_spec: bool,
    /// Keep the prompt's KV in FILE and reuse its longest common prefix next time
    /// (a KV snapshot tied to the model file; runs the model in this process).
    #[arg(long = "prompt-cache", value_name = "FILE")]
    pub prompt_cache: Option<std::path::PathBuf>,
    /// Draft with MODEL (same vocabulary, smaller) instead of prompt lookup: its
    /// greedy guesses are checked in the main model's passes and never change the
    /// output (runs the models in this process).
    #[arg(long = "draft", value_name = "MODEL")]
    pub draft: Option<String>,
    /// The model's vision projector (llama.cpp's `mmproj` file), which lets it read
    /// images (runs the model in this process).
    #[arg(long = "mmproj", value_name = "FILE")]
    pub mmproj: Option<PathBuf>,
    /// An image for the prompt (PNG, JPEG, WebP or GIF); repeatable. A plain prompt
    /// may place each at `<__media__>`; otherwise they go before the text. In the
    /// chat, `/image FILE` adds one to the next message.
    #[arg(long = "image", value_name = "FILE")]
    pub image: Vec<PathBuf>,
}

/// The model named and the prompt given, from the flags and the words after `run`.
struct Asked {
    model: String,
    /// `None`: read stdin, or chat at the terminal.
    prompt: Option<String>,
}

fn asked(a: &RunArgs) -> anyhow::Result<Asked> {
    let (model, words) = match (&a.model, a.words.split_first()) {
        (Some(m), _) => (m.clone(), a.words.join(" ")),
        (None, Some((m, rest))) => (m.clone(), rest.join(" ")),
        (None, None) => (DEFAULT_MODEL.to_string(), String::new()),
    };
    let prompt = match (&a.prompt, words.is_empty()) {
        (Some(_), false) => {
            return Err(UsageError(
                "give the prompt once: with -p or after the model, not both".into(),
            )
            .into())
        }
        (Some(p), true) => Some(read_prompt(p)?),
        (None, false) => Some(words),
        (None, true) => None,
    };
    Ok(Asked { model, prompt })
}

fn read_prompt(p: &str) -> anyhow::Result<String> {
    if p != "-" {
        return Ok(p.to_string());
    }
    read_stdin()
}

fn read_stdin() -> anyhow::Result<String> {
    let mut s = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
        .context("cannot read the prompt from stdin")?;
    // `echo … | llamay run` ends the prompt with a newline nobody meant to send.
    let kept = s.trim_end_matches(['\n', '\r']).len();
    s.truncate(kept);
    Ok(s)
}

/// Whether the prompt goes through the chat template: `-chat`, `-system`, or Ollama's
/// form `llamay run MODEL …`, unless `-raw`.
fn chat_asked(a: &RunArgs) -> bool {
    !a.raw && (a.chat || a.system.is_some() || (a.model.is_none() && !a.words.is_empty()))
}

/// Who generates: a server that answers and can serve the model, else this process.
/// Load flags (`-threads`, `-ctx`, `-kv`) describe a model this process loads.
fn backend(a: &RunArgs, model: &str) -> anyhow::Result<(Box<dyn Backend>, String)> {
    let load_flags = a.load.threads.is_some()
        || a.load.ctx.is_some()
        || a.load.kv != "f32"
        || a.no_fast_forward
        || a.no_spec
        || a.draft.is_some()
        || a.prompt_cache.is_some()
        || a.mmproj.is_some()
        // A server takes a plain prompt's images nowhere (Ollama's `raw` has no place
        // for them).
        || (!a.image.is_empty() && !chat_asked(a));
    if !a.local && !load_flags {
        let client = ServerClient::from_env()?;
        let named = std::env::var_os("LLAMAY_HOST").is_some_and(|h| !h.is_empty());
        if client.is_up() {
            let base = client.base().to_string();
            match remote::Remote::connect(client, model) {
                Ok(r) => {
                    let served_by = format!("{model} · served by {}", r.base());
                    return Ok((Box::new(r), served_by));
                }
                Err(why) => {
                    if named || a.stats {
                        eprintln!("llamay: the server at {base} cannot serve {model} ({why}); running it here");
                    }
                }
            }
        } else if named {
            eprintln!(
                "llamay: no server answers at {}; running the model here",
                client.base()
            );
        }
    }
    let opts = a.load.options()?;
    let mut l = local::Local::load(model, &opts, &a.load.kv)?;
    if let Some(p) = &a.mmproj {
        l.lm =
            l.lm.with_vision(p, &opts)
                .with_context(|| format!("cannot load the projector {}", p.display()))?;
    }
    super::load_args::announce_device(&l.lm.model);
    l.prompt_cache = a.prompt_cache.clone();
    if let Some(d) = &a.draft {
        l.draft = Some(local::load_draft(d, &opts, &l.lm)?);
    }
    Ok((Box::new(l), format!("{model} · running in this process")))
}

pub fn run(a: RunArgs) -> anyhow::Result<()> {
    let constraint = Constraint::from_flags(
        a.json,
        a.schema.as_deref(),
        a.grammar_file.as_deref(),
        a.format.as_deref(),
        a.lexicon.as_deref(),
    )?;
    let sources = QuoteSources(super::sources::read_sources(&a.source)?);
    a.load.options()?;
    let asked = asked(&a)?;
    let interactive = asked.prompt.is_none() && std::io::stdin().is_terminal();
    if interactive && a.raw {
        return Err(UsageError(
            "the chat uses the model's chat template: --raw needs a prompt".into(),
        )
        .into());
    }
    let prompt = match (asked.prompt, interactive) {
        (Some(p), _) => Some(p),
        (None, true) => None,
        (None, false) => {
            let p = read_stdin()?;
            if p.trim().is_empty() {
                return Err(UsageError(
                    "no prompt: give one with -p, after the model, or on stdin".into(),
                )
                .into());
            }
            Some(p)
        }
    };
    let params = GenerationParams {
        max_tokens: a.n_predict,
        sampler: SamplerConfig {
            temperature: a.temp,
            top_k: a.top_k,
            top_p: a.top_p,
            min_p: a.min_p,
            repeat_penalty: a.repeat_penalty,
            seed: a.seed,
            ..SamplerConfig::default()
        },
        stop: Vec::new(),
        fast_forward: !a.no_fast_forward,
        draft: if a.no_spec { 0 } else { DEFAULT_DRAFT },
        draft_model: None,
    };
    let chat = chat_asked(&a);
    let images = backend::read_images(&a.image)?;
    let input = match prompt {
        Some(prompt) if chat => {
            let mut msgs = Vec::new();
            if let Some(s) = &a.system {
                msgs.push(ChatMessage::new("system", s));
            }
            msgs.push(backend::user_turn(&prompt, images.clone()));
            Some(Input::Chat(msgs))
        }
        Some(prompt) => Some(Input::raw(prompt, images.clone())),
        None => None,
    };
    // Refused before any model work (exit 2), its quotes bound as the run will bind them.
    constraint.spec_with(&sources.for_input(input.as_ref().map(Input::user_text)))?;
    interrupt::install(interactive);
    let (mut backend, served_by) = backend(&a, &asked.model)?;
    let Some(input) = input else {
        return interactive::Chat {
            backend: backend.as_mut(),
            params,
            constraint,
            sources,
            system: a.system.clone(),
            verbose: a.stats,
            served_by,
            images,
        }
        .run();
    };
    let mut out = Output::new(constraint.is_json());
    let reply = backend.generate(
        &input,
        &constraint,
        &sources,
        &params,
        interrupt::cancel_flag(),
        &mut |s| out.write(s),
    )?;
    out.end_line();
    eprintln!();
    interactive::print_lines(&reply, a.stats);
    if reply.cancelled {
        // Interrupted, like any Ctrl-C'd command, but only after the statistics.
        std::process::exit(130);
    }
    Ok(())
}

/// Replies on stdout as they come. JSON may open with whitespace the model chose to
/// write; stdout carries just the document (and a newline), so `| jq .` and friends
/// see nothing else.
struct Output {
    skip_leading_ws: bool,
    last_newline: bool,
}

impl Output {
    fn new(json: bool) -> Output {
        Output {
            skip_leading_ws: json,
            last_newline: true,
        }
    }

    fn write(&mut self, mut s: &str) {
        if self.skip_leading_ws {
            s = s.trim_start();
            if s.is_empty() {
                return;
            }
            self.skip_leading_ws = false;
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(s.as_bytes());
        let _ = stdout.flush();
        self.last_newline = s.ends_with('\n');
    }

    fn end_line(&mut self) {
        if !self.last_newline {
            // As in `write`: a reader that has gone (`| head`) is no reason to panic.
            let _ = writeln!(std::io::stdout().lock());
            self.last_newline = true;
        }
    }
}
