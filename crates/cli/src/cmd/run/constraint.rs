//! What `llamay run` constrains its output to, from the flags (or the chat's slash
//! commands): decided and checked before any model work, by the runtime's own rules
//! for a local run, or sent as the Ollama fields a server reads.

use std::collections::BTreeMap;
use std::path::Path;

use llamay_constrain::Sources;
use llamay_runtime::{ConstraintSpec, Surfaces};
use serde_json::{json, Value};

use crate::cmd::UsageError;

/// `-source [NAME=]FILE`s: the texts a schema's `"x-llamay-quote": "NAME"` must quote;
/// `true` quotes the prompt's user text, as a server would.
#[derive(Clone, Debug, Default)]
pub struct QuoteSources(pub BTreeMap<String, String>);

impl QuoteSources {
    /// What quotes are checked against for an input whose user text is `user_text`
    /// (`None`: not known yet, as when a chat has not started; then the input is taken
    /// as empty, so only what the schema itself asks is checked).
    pub fn for_input(&self, user_text: Option<String>) -> Sources {
        Sources {
            input: Some(user_text.unwrap_or_default()),
            named: self.0.clone(),
            ..Sources::default()
        }
    }

    /// The same sources as a server reads them (`llamay_sources`).
    pub fn add_to_body(&self, body: &mut Value) {
        if !self.0.is_empty() {
            body["llamay_sources"] = json!(self.0);
        }
    }
}

#[derive(Clone, Debug, Default)]
pub enum Constraint {
    #[default]
    None,
    Json,
    Schema(Value),
    Grammar(String),
    /// `-lexicon FILE`: the output is one term of the file (one per line).
    Lexicon(std::path::PathBuf),
}

impl Constraint {
    /// `-json`, `-schema FILE`, `-grammar-file FILE` and Ollama's `--format`, of which
    /// at most one may be given. Checked once the input is known ([`Self::spec_with`]).
    pub fn from_flags(
        json: bool,
        schema: Option<&Path>,
        grammar: Option<&Path>,
        format: Option<&str>,
        lexicon: Option<&Path>,
    ) -> Result<Constraint, UsageError> {
        let chosen = [
            json,
            schema.is_some(),
            grammar.is_some(),
            format.is_some(),
            lexicon.is_some(),
        ]
        .iter()
        .filter(|&&b| b)
        .count();
        if chosen > 1 {
            return Err(UsageError(
                "-json, -schema, -grammar-file, --format and -lexicon are exclusive: give at most one"
                    .into(),
            ));
        }
        let c = if json {
            Constraint::Json
        } else if let Some(path) = schema {
            Constraint::schema_file(path)?
        } else if let Some(path) = grammar {
            Constraint::Grammar(read_user_file(path, "grammar")?)
        } else if let Some(f) = format {
            Constraint::format(f)?
        } else if let Some(path) = lexicon {
            Constraint::Lexicon(path.to_path_buf())
        } else {
            Constraint::None
        };
        Ok(c)
    }

    pub fn schema_file(path: &Path) -> Result<Constraint, UsageError> {
        let text = read_user_file(path, "schema")?;
        let value = serde_json::from_str(&text)
            .map_err(|e| UsageError(format!("{} is not valid JSON: {e}", path.display())))?;
        Ok(Constraint::Schema(value))
    }

    /// Ollama's `--format`: `json`, a JSON Schema written inline, or (llamay's
    /// addition) a schema file.
    pub fn format(f: &str) -> Result<Constraint, UsageError> {
        let f = f.trim();
        if f == "json" {
            return Ok(Constraint::Json);
        }
        if f.starts_with('{') {
            return serde_json::from_str(f)
                .map(Constraint::Schema)
                .map_err(|e| UsageError(format!("--format is not a valid JSON Schema: {e}")));
        }
        if Path::new(f).is_file() {
            return Constraint::schema_file(Path::new(f));
        }
        Err(UsageError(format!(
            "--format must be json, a JSON Schema or a schema file, not {f:?}"
        )))
    }

    /// The runtime's constraint with no sources to quote.
    #[cfg(test)]
    pub fn spec(&self) -> Result<ConstraintSpec, UsageError> {
        self.spec_with(&Sources::default())
    }

    /// The runtime's constraint, its quotes bound to `sources` (as the server binds a
    /// request's), refused here (exit 2) if it cannot be enforced.
    pub fn spec_with(&self, sources: &Sources) -> Result<ConstraintSpec, UsageError> {
        let mut surfaces = Surfaces {
            sources: sources.clone(),
            ..Surfaces::default()
        };
        let mut settings = llamay_runtime::ConstraintSettings::default();
        match self {
            Constraint::None => {}
            Constraint::Json => surfaces.json = Some("-json"),
            Constraint::Schema(v) => surfaces.schema("-schema", v),
            Constraint::Grammar(text) => surfaces.grammar = Some(("-grammar-file", text.clone())),
            Constraint::Lexicon(path) => {
                let name = lexicon_name(path);
                let l =
                    llamay_runtime::load_lexicon(&name, path).map_err(|e| UsageError(e.message))?;
                settings.serve_lexicon(l);
                surfaces.lexicon = Some(("-lexicon", llamay_runtime::LexiconAsk::Named(name)));
            }
        }
        let asked = surfaces
            .resolve(&settings)
            .map_err(|e| UsageError(e.message))?;
        Ok(ConstraintSpec::decide(asked, None))
    }

    /// The same constraint as the fields of an Ollama `/api/chat` or `/api/generate`
    /// body (`llamay_grammar` is llamay's extension there).
    pub fn add_to_body(&self, body: &mut Value) {
        match self {
            Constraint::None => {}
            Constraint::Json => body["format"] = json!("json"),
            Constraint::Schema(v) => body["format"] = v.clone(),
            Constraint::Grammar(text) => body["llamay_grammar"] = json!(text),
            Constraint::Lexicon(path) => {
                // The server has its own lexicons: the terms travel with the request.
                let text = std::fs::read_to_string(path).unwrap_or_default();
                let terms: Vec<&str> = text
                    .lines()
                    .map(|l| l.strip_suffix('\r').unwrap_or(l))
                    .filter(|l| !l.is_empty())
                    .collect();
                body["llamay_lexicon"] = json!({ "terms": terms });
            }
        }
    }

    /// JSON output goes to stdout as just the document: no whitespace before it.
    pub fn is_json(&self) -> bool {
        matches!(self, Constraint::Json | Constraint::Schema(_))
    }

    pub fn label(&self) -> &'static str {
        match self {
            Constraint::None => "none",
            Constraint::Json => "json",
            Constraint::Schema(_) => "json schema",
            Constraint::Grammar(_) => "grammar",
            Constraint::Lexicon(_) => "lexicon",
        }
    }
}

/// A lexicon file's name: its stem (`cities.txt` -> `cities`), which a `-schema`'s
/// `x-llamay-lexicon` may then name.
fn lexicon_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "lexicon".into())
}

/// A file named on the command line: one that cannot be read is the caller's mistake.
pub fn read_user_file(path: &Path, what: &str) -> Result<String, UsageError> {
    std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read {what} {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_reads_json_and_inline_schemas() {
        assert!(matches!(Constraint::format("json"), Ok(Constraint::Json)));
        let s = Constraint::format(r#"{"type":"object","properties":{"a":{"type":"integer"}}}"#);
        assert!(matches!(s, Ok(Constraint::Schema(_))));
        assert!(Constraint::format("yaml").is_err());
        assert!(Constraint::format("{not json").is_err());
    }

    #[test]
    fn quotes_take_the_prompt_and_named_sources() {
        let schema = |q: Value| Constraint::Schema(json!({"type": "string", "x-llamay-quote": q}));
        let sources = QuoteSources([("contract".to_string(), "Clause 4".to_string())].into());
        let input = || Some("the prompt".to_string());
        assert!(schema(json!(true))
            .spec_with(&sources.for_input(input()))
            .is_ok());
        assert!(schema(json!("contract"))
            .spec_with(&sources.for_input(None))
            .is_ok());
        let e = schema(json!("invoice"))
            .spec_with(&sources.for_input(input()))
            .unwrap_err();
        assert!(
            e.0.contains("x-llamay-quote")
                && e.0.contains("\"invoice\"")
                && e.0.contains("contract"),
            "{}",
            e.0
        );
        // Before a chat's first message, a quote of the input is not refused.
        assert!(schema(json!(true))
            .spec_with(&sources.for_input(None))
            .is_ok());
        let mut body = json!({});
        sources.add_to_body(&mut body);
        assert_eq!(body["llamay_sources"]["contract"], "Clause 4");
    }

    #[test]
    fn flags_are_exclusive_and_checked() {
        assert!(Constraint::from_flags(true, None, None, Some("json"), None).is_err());
        assert!(matches!(
            Constraint::from_flags(false, None, None, None, None),
            Ok(Constraint::None)
        ));
        // A keyword the constraint cannot enforce is refused before any model work.
        let refused = Constraint::format(r#"{"type":"string","pattern":"(?=x)"}"#)
            .unwrap()
            .spec();
        assert!(refused.is_err());
    }

    #[test]
    fn the_wire_fields_are_ollamas() {
        let mut body = json!({});
        Constraint::Json.add_to_body(&mut body);
        assert_eq!(body["format"], "json");
        let mut body = json!({});
        Constraint::Grammar("root ::= \"a\"".into()).add_to_body(&mut body);
        assert_eq!(body["llamay_grammar"], "root ::= \"a\"");
    }
}
