//! People paste llamay commands from docs written with single-dash long flags
//! (`-chat`, `-grammar-file`, `-addr`); clap only knows `--chat`. Before parsing,
//! a single-dash word that names one of the subcommand's long options is rewritten to
//! its double-dash form. Values are never rewritten: the argument after an option
//! that takes a value is passed through as it is (so `-p -json` stays a prompt).

use std::ffi::OsString;

use clap::Command;

pub fn normalize(argv: Vec<OsString>, cli: &Command) -> Vec<OsString> {
    let mut out = Vec::with_capacity(argv.len());
    let mut iter = argv.into_iter();
    if let Some(prog) = iter.next() {
        out.push(prog);
    }
    let mut sub: Option<&Command> = None;
    let mut value_follows = false;
    for arg in iter {
        if value_follows {
            value_follows = false;
            out.push(arg);
            continue;
        }
        let Some(s) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        let Some(cmd) = sub else {
            sub = cli.find_subcommand(s);
            out.push(arg);
            continue;
        };
        let (rewritten, takes_value) = rewrite(s, cmd);
        value_follows = takes_value;
        out.push(rewritten.map(OsString::from).unwrap_or(arg));
    }
    out
}

/// Returns the rewritten argument (if any) and whether the next argument is its value.
fn rewrite(s: &str, cmd: &Command) -> (Option<String>, bool) {
    if s == "--" {
        return (None, false);
    }
    let find_long = |name: &str| {
        cmd.get_arguments().find(|a| {
            a.get_long() == Some(name) || a.get_all_aliases().is_some_and(|al| al.contains(&name))
        })
    };
    let find_short = |c: char| cmd.get_arguments().find(|a| a.get_short() == Some(c));
    let takes_value = |a: &clap::Arg| a.get_action().takes_values();
    if let Some(long) = s.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or(long);
        let tv = find_long(name).is_some_and(|a| takes_value(a) && !long.contains('='));
        return (None, tv);
    }
    let Some(word) = s.strip_prefix('-') else {
        return (None, false);
    };
    let name = word.split('=').next().unwrap_or(word);
    if name.chars().count() >= 2 {
        if let Some(a) = find_long(name) {
            return (Some(format!("-{s}")), takes_value(a) && !word.contains('='));
        }
    }
    if name.chars().count() == 1 {
        if let Some(a) = find_short(name.chars().next().unwrap_or('-')) {
            return (None, takes_value(a) && !word.contains('='));
        }
    }
    (None, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    fn cmd() -> Command {
        Command::new("llamay").subcommand(
            Command::new("run")
                .arg(Arg::new("chat").long("chat").action(ArgAction::SetTrue))
                .arg(Arg::new("json").long("json").action(ArgAction::SetTrue))
                .arg(Arg::new("prompt").short('p').long("prompt"))
                .arg(Arg::new("grammar-file").long("grammar-file"))
                .arg(Arg::new("model").short('m').long("model"))
                .arg(Arg::new("mmproj").long("mmproj")),
        )
    }

    fn norm(args: &[&str]) -> Vec<String> {
        let argv = args.iter().map(OsString::from).collect();
        normalize(argv, &cmd())
            .into_iter()
            .map(|s| s.into_string().unwrap())
            .collect()
    }

    #[test]
    fn single_dash_long_flags_become_double_dash() {
        assert_eq!(
            norm(&["llamay", "run", "-chat", "-json", "-grammar-file", "g.gbnf"]),
            [
                "llamay",
                "run",
                "--chat",
                "--json",
                "--grammar-file",
                "g.gbnf"
            ]
        );
    }

    #[test]
    fn values_are_left_alone() {
        assert_eq!(
            norm(&["llamay", "run", "-p", "-json", "-chat"]),
            ["llamay", "run", "-p", "-json", "--chat"]
        );
        assert_eq!(
            norm(&["llamay", "run", "--prompt", "-chat"]),
            ["llamay", "run", "--prompt", "-chat"]
        );
        assert_eq!(
            norm(&["llamay", "run", "-p", "-"]),
            ["llamay", "run", "-p", "-"]
        );
    }

    /// `-mmproj` is the long flag, not `-m` with the value `mproj`.
    #[test]
    fn a_long_flag_wins_over_a_short_flag_with_its_value_attached() {
        assert_eq!(
            norm(&["llamay", "run", "-m", "a.gguf", "-mmproj", "p.gguf"]),
            ["llamay", "run", "-m", "a.gguf", "--mmproj", "p.gguf"]
        );
        assert_eq!(
            norm(&["llamay", "run", "-ma.gguf"]),
            ["llamay", "run", "-ma.gguf"]
        );
    }

    #[test]
    fn unknown_words_are_not_invented() {
        assert_eq!(
            norm(&["llamay", "run", "-bogus"]),
            ["llamay", "run", "-bogus"]
        );
        assert_eq!(
            norm(&["llamay", "run", "-grammar-file=x"]),
            ["llamay", "run", "--grammar-file=x"]
        );
    }
}
