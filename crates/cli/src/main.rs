//! The `llamay` command: argument parsing and terminal output only.

mod args;
mod cmd;

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
    /// Describe a model: architecture, size, tokenizer, tensor types.
    Show(cmd::show::ShowArgs),
    /// Print the token ids of text read from stdin.
    Tokenize(cmd::tokenize::TokenizeArgs),
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
        Command::Show(a) => cmd::show::run(a),
        Command::Tokenize(a) => cmd::tokenize::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("llamay: {}", cmd::one_line(&e));
            ExitCode::from(cmd::exit_code(&e))
        }
    }
}
