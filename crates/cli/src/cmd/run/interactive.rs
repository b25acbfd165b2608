//! `llamay run MODEL` at a terminal: a chat, as `ollama run` opens one. Replies
//! stream as they are written; the conversation is the chat history of every turn;
//! the typed lines are kept between sessions.

use std::io::Write;
use std::path::PathBuf;

use llamay_runtime::{ChatMessage, GenerationParams, ImageInput};
use rustyline::error::ReadlineError;
use rustyline::DefaultEditor;

use super::backend::{Backend, Input, Reply};
use super::constraint::{Constraint, QuoteSources};
use super::slash::{self, Slash};
use super::Output;
use crate::interrupt;

pub struct Chat<'a> {
    pub backend: &'a mut dyn Backend,
    /// `run`'s flags, changed by `/set parameter`.
    pub params: GenerationParams,
    pub constraint: Constraint,
    /// `-source`s, for the schema's quotes.
    pub sources: QuoteSources,
    pub system: Option<String>,
    pub verbose: bool,
    /// Where the model runs, for the first line.
    pub served_by: String,
    /// Images for the next message (`-image`, `/image`).
    pub images: Vec<ImageInput>,
}

/// `$LLAMAY_HISTORY`, else `history` in llamay's data folder.
fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LLAMAY_HISTORY").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    dirs::data_dir().map(|d| d.join("llamay").join("history"))
}

impl Chat<'_> {
    pub fn run(mut self) -> anyhow::Result<()> {
        let mut editor = DefaultEditor::new()?;
        let history = history_path();
        if let Some(h) = &history {
            // A first session has no file yet.
            let _ = editor.load_history(h);
        }
        eprintln!("{} · /? for help, /bye or Ctrl-D to leave", self.served_by);
        let mut messages: Vec<ChatMessage> = Vec::new();
        let mut last: Option<Reply> = None;
        loop {
            let line = match editor.readline(">>> ") {
                Ok(line) => line,
                Err(ReadlineError::Interrupted) => {
                    eprintln!("Use Ctrl + d or /bye to exit.");
                    continue;
                }
                Err(ReadlineError::Eof) => break,
                Err(e) => return Err(e.into()),
            };
            if line.trim().is_empty() {
                continue;
            }
            let message = if line.trim_start().starts_with("\"\"\"") {
                let mut more = || editor.readline("... ").ok();
                match slash::multi_line(&line, &mut more) {
                    Some(m) => m,
                    None => continue,
                }
            } else {
                line.clone()
            };
            let _ = editor.add_history_entry(message.as_str());
            if let Some(h) = &history {
                save_history(&mut editor, h);
            }
            if message.starts_with('/') && !line.trim_start().starts_with("\"\"\"") {
                match slash::parse(&message) {
                    Ok(Slash::Bye) => break,
                    Ok(c) => self.command(c, &mut messages, last.as_ref()),
                    Err(e) => eprintln!("{e}"),
                }
                continue;
            }
            let images = std::mem::take(&mut self.images);
            messages.push(super::backend::user_turn(&message, images.clone()));
            match self.turn(&messages) {
                Ok(reply) => {
                    messages.push(ChatMessage::new("assistant", &reply.text));
                    if self.verbose {
                        print_lines(&reply, true);
                    }
                    last = Some(reply);
                }
                Err(e) => {
                    messages.pop();
                    // Kept for the next try, as the message is in the history.
                    self.images = images;
                    eprintln!("error: {}", crate::cmd::one_line(&e));
                }
            }
        }
        Ok(())
    }

    fn turn(&mut self, messages: &[ChatMessage]) -> anyhow::Result<Reply> {
        let mut all = Vec::with_capacity(messages.len() + 1);
        if let Some(s) = &self.system {
            all.push(ChatMessage::new("system", s));
        }
        all.extend(messages.iter().cloned());
        interrupt::reset();
        let mut out = Output::new(self.constraint.is_json());
        let reply = self.backend.generate(
            &Input::Chat(all),
            &self.constraint,
            &self.sources,
            &self.params,
            interrupt::cancel_flag(),
            &mut |s| out.write(s),
        );
        out.end_line();
        println!();
        reply
    }

    fn command(&mut self, c: Slash, messages: &mut Vec<ChatMessage>, last: Option<&Reply>) {
        match c {
            Slash::Help => eprint!("{}", slash::HELP),
            Slash::Bye => {}
            Slash::Clear => {
                messages.clear();
                eprintln!("Cleared the conversation.");
            }
            Slash::Stats => match last {
                Some(r) => print_lines(r, true),
                None => eprintln!("No reply yet."),
            },
            Slash::ShowInfo => match self.backend.describe() {
                Ok(s) => print!("{s}"),
                Err(e) => eprintln!("error: {e}"),
            },
            Slash::ShowSystem => match &self.system {
                Some(s) => println!("{s}"),
                None => eprintln!("No system message."),
            },
            Slash::ShowParameters => print!("{}", slash::show_parameters(&self.params)),
            Slash::SetSystem(s) => {
                self.system = Some(s);
                eprintln!("Set the system message.");
            }
            Slash::UnsetSystem => {
                self.system = None;
                eprintln!("Cleared the system message.");
            }
            Slash::SetParameter(name, value) => {
                match slash::set_parameter(&mut self.params, &name, &value) {
                    Ok(()) => eprintln!("Set parameter '{name}' to '{value}'."),
                    Err(e) => eprintln!("{e}"),
                }
            }
            Slash::SetFormatJson => self.constrain(Ok(Constraint::Json)),
            Slash::UnsetFormat => {
                self.constraint = Constraint::None;
                eprintln!("Replies are free text.");
            }
            Slash::SetVerbose(v) => {
                self.verbose = v;
                eprintln!("Set {} mode.", if v { "verbose" } else { "quiet" });
            }
            Slash::Schema(path) => self.constrain(Constraint::schema_file(&path)),
            Slash::Grammar(path) => self.constrain(
                super::constraint::read_user_file(&path, "grammar").map(Constraint::Grammar),
            ),
            Slash::Image(path) => match super::backend::read_images(&[path]) {
                Ok(im) => {
                    self.images.extend(im);
                    eprintln!("{} image(s) go with your next message.", self.images.len());
                }
                Err(e) => eprintln!("{e}"),
            },
        }
    }

    /// A new constraint, taken only if it can be enforced.
    fn constrain(&mut self, c: Result<Constraint, crate::cmd::UsageError>) {
        let sources = self.sources.for_input(None);
        match c.and_then(|c| c.spec_with(&sources).map(|_| c)) {
            Ok(c) => {
                eprintln!("Replies are constrained to {}.", c.label());
                self.constraint = c;
            }
            Err(e) => eprintln!("{e}"),
        }
    }
}

fn save_history(editor: &mut DefaultEditor, path: &std::path::Path) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = editor.save_history(path);
}

/// A reply's statistics lines on stderr (and its details when `details`).
pub fn print_lines(r: &Reply, details: bool) {
    let mut err = std::io::stderr().lock();
    for line in &r.stats {
        let _ = writeln!(err, "{line}");
    }
    if details {
        for line in &r.details {
            let _ = writeln!(err, "{line}");
        }
    }
}
