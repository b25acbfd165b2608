//! One module per subcommand. Each exposes a clap `Args` struct and `run`.

pub mod bench;
pub mod completions;
pub mod embed;
pub mod eval;
pub mod load_args;
pub mod loaded;
pub mod mask_worker;
pub mod run;
pub mod serve;
pub mod show;
pub mod sources;
pub mod store;
pub mod tokenize;

/// An error the user caused by how they called llamay (exit code 2), as opposed to
/// one met while doing the work (exit code 1).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<UsageError>().is_some() {
        2
    } else {
        1
    }
}

/// The error and its causes on one line, as `outer: cause: cause`.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if !parts.last().is_some_and(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ").replace('\n', " ")
}
