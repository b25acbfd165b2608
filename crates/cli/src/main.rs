//! The `llamay` command: argument parsing and terminal output only.
#![forbid(unsafe_code)]

mod args;
mod client;
mod cmd;
mod interrupt;
mod units;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// A local LLM runtime whose structured output cannot break.
#[derive(Parser)]
#[command(name = "llamay", version, about, long_about = None, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Every command with an example, under `llamay --help`.
const EXAMPLES: &str = "\
Examples:
  llamay run qwen2.5:0.5b                      chat at the terminal (Ctrl-D or /bye leaves)
  llamay run -m model.gguf -chat -json -p \"Describe a cat as JSON\"
  llamay serve -m smollm2:135m                 OpenAI, Anthropic and Ollama routes on :11435
  llamay eval -m model.gguf -schema examples/invoices/invoice.schema.json -data examples/invoices/invoices.jsonl
                                               fields scored with and without the schema
  llamay embed -m encoder.gguf \"a sentence\"     one JSON vector per line
  llamay ps                                    the models a running server holds
  llamay stop smollm2:135m                     unload one of them
  llamay show smollm2:135m                     architecture, size, tokenizer
  llamay bench -m model.gguf                   prompt, decode and batched throughput
  echo 'Hello' | llamay tokenize -m model.gguf token ids
  llamay pull qwen2.5:0.5b                     download from a registry
  llamay list                                  the models in the store
  llamay cp qwen2.5:0.5b mine:latest           copy under a new name
  llamay rm mine:latest                        remove a model
  llamay import ./model.gguf mine:latest       add a local file to the store
  llamay prune                                 delete blobs no model uses
  llamay completions bash                      a shell completion script
  llamay mask-worker -gguf model.gguf          token masks over JSON lines (benchmarks)

Set LLAMAY_HOST to talk to a server elsewhere (run, ps and stop).";

#[derive(Subcommand)]
enum Command {
    /// Generate text, optionally constrained to JSON, a JSON Schema or a GBNF grammar.
    Run(Box<cmd::run::RunArgs>),
    /// Score extraction field by field on a JSON-lines set, with and without the constraint.
    Eval(Box<cmd::eval::EvalArgs>),
    /// Serve models over HTTP (OpenAI, Anthropic and Ollama routes).
    Serve(Box<cmd::serve::ServeArgs>),
    /// List the models a running server holds in memory.
    Ps(cmd::loaded::PsArgs),
    /// Unload a model from a running server.
    Stop(cmd::loaded::StopArgs),
    /// Embed texts with an encoder model: one JSON vector per line.
    Embed(cmd::embed::EmbedArgs),
    /// Describe a model: architecture, size, tokenizer, tensor types.
    Show(cmd::show::ShowArgs),
    /// Measure prompt, decode and batched-decode throughput and peak memory.
    Bench(cmd::bench::BenchArgs),
    /// Print the token ids of text read from stdin.
    Tokenize(cmd::tokenize::TokenizeArgs),
    /// Serve token masks over JSON lines for the mask benchmark harness.
    MaskWorker(cmd::mask_worker::MaskWorkerArgs),
    /// Download a model from a registry (or a .gguf URL).
    Pull(cmd::store::PullArgs),
    /// List the models in the store.
    List(cmd::store::ListArgs),
    /// Copy a model to a new name.
    Cp(cmd::store::CpArgs),
    /// Remove a model.
    Rm(cmd::store::RmArgs),
    /// Add a local .gguf file to the store.
    Import(cmd::store::ImportArgs),
    /// Delete the blobs no model uses (and what interrupted pulls left).
    Prune(cmd::store::PruneArgs),
    /// Print a shell completion script.
    Completions(cmd::completions::CompletionsArgs),
}

fn main() -> ExitCode {
    let argv = args::normalize(std::env::args_os().collect(), &Cli::command());
    let matches = match Cli::command().try_get_matches_from(argv) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Run(a) => cmd::run::run(*a),
        Command::Serve(a) => cmd::serve::run(*a),
        Command::Embed(a) => cmd::embed::run(a),
        Command::Eval(a) => cmd::eval::run(*a),
        Command::Show(a) => cmd::show::run(a),
        Command::Tokenize(a) => cmd::tokenize::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::MaskWorker(a) => cmd::mask_worker::run(a),
        Command::Pull(a) => cmd::store::run_pull(&a),
        Command::List(a) => cmd::store::run_list(&a),
        Command::Cp(a) => cmd::store::run_cp(&a),
        Command::Rm(a) => cmd::store::run_rm(&a),
        Command::Import(a) => cmd::store::run_import(&a),
        Command::Prune(a) => cmd::store::run_prune(&a),
        Command::Ps(a) => cmd::loaded::run_ps(&a),
        Command::Stop(a) => cmd::loaded::run_stop(&a),
        Command::Completions(a) => cmd::completions::run(&a, Cli::command()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("llamay: {}", cmd::one_line(&e));
            ExitCode::from(cmd::exit_code(&e))
        }
    }
}
