//! `llamay completions SHELL`: the shell's completion script, from the same clap
//! definition the binary parses with.

use clap::Args;
use clap_complete::Shell;

#[derive(Args)]
#[command(
    after_help = "Example:\n  llamay completions bash > ~/.local/share/bash-completion/completions/llamay"
)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: Shell,
}

pub fn run(a: &CompletionsArgs, mut cli: clap::Command) -> anyhow::Result<()> {
    clap_complete::generate(a.shell, &mut cli, "llamay", &mut std::io::stdout());
    Ok(())
}
