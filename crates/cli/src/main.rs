//! The `llamay` command: argument parsing and terminal output only.
#![forbid(unsafe_code)]

mod args;
mod cmd;
mod store_cmds;
mod units;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// A local LLM runtime whose structured output cannot break.
#[derive(Parser)]
#[command(name = "llamay", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text, optionally constrained to JSON, a JSON Schema or a GBNF grammar.
    Run(Box<cmd::run::RunArgs>),
    /// Score extraction field by field on a JSON-lines set, with and without the constraint.
    Eval(Box<cmd::eval::EvalArgs>),
    /// Serve models over HTTP (OpenAI, Anthropic and Ollama routes).
    Serve(Box<cmd::serve::ServeArgs>),
    /// Describe a model: architecture, size, tokenizer, tensor types.
    Show(cmd::show::ShowArgs),
    /// Measure prompt, decode and batched-decode throughput and peak memory.
    Bench(cmd::bench::BenchArgs),
    /// Print the token ids of text read from stdin.
    Tokenize(cmd::tokenize::TokenizeArgs),
    /// Serve token masks over JSON lines for the mask benchmark harness.
    MaskWorker(cmd::mask_worker::MaskWorkerArgs),
    /// Download a model from a registry (or a .gguf URL).
    Pull(store_cmds::PullArgs),
    /// List the models in the store.
    List(store_cmds::ListArgs),
    /// Copy a model to a new name.
    Cp(store_cmds::CpArgs),
    /// Remove a model.
    Rm(store_cmds::RmArgs),
    /// Add a local .gguf file to the store.
    Import(store_cmds::ImportArgs),
    /// Delete the blobs no model uses (and what interrupted pulls left).
    Prune(store_cmds::PruneArgs),
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
        Command::Eval(a) => cmd::eval::run(*a),
        Command::Show(a) => cmd::show::run(a),
        Command::Tokenize(a) => cmd::tokenize::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::MaskWorker(a) => cmd::mask_worker::run(a),
        Command::Pull(a) => store_cmds::run_pull(&a),
        Command::List(a) => store_cmds::run_list(&a),
        Command::Cp(a) => store_cmds::run_cp(&a),
        Command::Rm(a) => store_cmds::run_rm(&a),
        Command::Import(a) => store_cmds::run_import(&a),
        Command::Prune(a) => store_cmds::run_prune(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("llamay: {}", cmd::one_line(&e));
            ExitCode::from(cmd::exit_code(&e))
        }
    }
}
