//! Model names in Ollama's grammar, `[host/][namespace/]model[:tag]`, and the wider
//! notion of a model reference (a name, a `.gguf` path or a `.gguf` URL).
//!
//! The rules are Ollama's (`types/model/name.go`): host 1–350 bytes, namespace,
//! model and tag 1–80 bytes; each part starts with an ASCII letter, digit or `_`
//! and continues with those or `-`, `_`, `.`; a namespace may not hold `.`; only the
//! host may hold `:` (a port). Because no part can start with `.`, no part can be `.`
//! or `..`, which keeps a name's manifest path inside the store.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// The registry host a name without one refers to.
pub const DEFAULT_HOST: &str = "registry.ollama.ai";
/// The namespace a name without one refers to.
pub const DEFAULT_NAMESPACE: &str = "library";
/// The tag a name without one refers to.
pub const DEFAULT_TAG: &str = "latest";

/// A fully qualified model name: every part present and valid.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelName {
    /// Registry host, possibly with a port (`registry.ollama.ai`).
    pub host: String,
    /// Namespace, `library` for official models.
    pub namespace: String,
    /// Model (`qwen2.5`).
    pub model: String,
    /// Tag (`0.5b`, `latest`).
    pub tag: String,
}

#[derive(Clone, Copy)]
enum Part {
    Host,
    Namespace,
    Model,
    Tag,
}

impl Part {
    fn label(self) -> &'static str {
        match self {
            Part::Host => "host",
            Part::Namespace => "namespace",
            Part::Model => "model",
            Part::Tag => "tag",
        }
    }

    fn max_len(self) -> usize {
        match self {
            Part::Host => 350,
            _ => 80,
        }
    }

    fn allows(self, c: u8) -> bool {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' => true,
            b'.' => !matches!(self, Part::Namespace),
            b':' => matches!(self, Part::Host),
            _ => false,
        }
    }
}

/// Checks one part; the error reason names the part and the offending character.
fn check_part(part: Part, s: &str) -> std::result::Result<(), String> {
    let label = part.label();
    if s.is_empty() {
        return Err(format!("empty {label}"));
    }
    if s.len() > part.max_len() {
        return Err(format!(
            "{label} is {} bytes long (at most {})",
            s.len(),
            part.max_len()
        ));
    }
    let first = s.as_bytes()[0];
    if !first.is_ascii_alphanumeric() && first != b'_' {
        return Err(format!(
            "{label} must start with a letter, digit or '_', not {:?}",
            s.chars().next().unwrap_or(' ')
        ));
    }
    if let Some(c) = s.chars().find(|&c| !c.is_ascii() || !part.allows(c as u8)) {
        return Err(format!("{label} {s:?} may not contain {c:?}"));
    }
    Ok(())
}

impl ModelName {
    /// Parses `[host/][namespace/]model[:tag]`, filling in the defaults.
    pub fn parse(s: &str) -> Result<ModelName> {
        let invalid = |reason: String| StoreError::InvalidName {
            name: s.chars().take(200).collect(),
            reason,
        };
        if s.is_empty() {
            return Err(invalid("the name is empty".into()));
        }
        if s.contains("://") {
            return Err(invalid(
                "a scheme belongs in --registry, not in the name".into(),
            ));
        }
        if s.contains('@') {
            return Err(invalid(
                "digest references (@sha256:...) are not supported".into(),
            ));
        }
        // '/' may not appear in a tag, so a ':' after the last '/' starts the tag;
        // an earlier ':' is a host's port.
        let (path, tag) = match (s.rfind(':'), s.rfind('/')) {
            (Some(c), Some(sl)) if c > sl => (&s[..c], Some(&s[c + 1..])),
            (Some(c), None) => (&s[..c], Some(&s[c + 1..])),
            _ => (s, None),
        };
        let parts: Vec<&str> = path.split('/').collect();
        let (host, namespace, model) = match parts.as_slice() {
            [m] => (None, None, *m),
            [n, m] => (None, Some(*n), *m),
            [h, n, m] => (Some(*h), Some(*n), *m),
            _ => {
                return Err(invalid(
                    "too many '/' (expected [host/][namespace/]model[:tag])".into(),
                ))
            }
        };
        let host = host.unwrap_or(DEFAULT_HOST);
        let namespace = namespace.unwrap_or(DEFAULT_NAMESPACE);
        let tag = tag.unwrap_or(DEFAULT_TAG);
        check_part(Part::Host, host).map_err(invalid)?;
        check_part(Part::Namespace, namespace).map_err(invalid)?;
        check_part(Part::Model, model).map_err(invalid)?;
        check_part(Part::Tag, tag).map_err(invalid)?;
        Ok(ModelName {
            host: host.to_string(),
            namespace: namespace.to_string(),
            model: model.to_string(),
            tag: tag.to_string(),
        })
    }

    /// Builds a name from a file name stem (for imports and URL pulls): characters a
    /// model part may not hold become `-`, and the result is cut to 80 bytes.
    pub fn from_file_stem(stem: &str) -> Result<ModelName> {
        let mut model: String = stem
            .chars()
            .map(|c| {
                if c.is_ascii() && Part::Model.allows(c as u8) {
                    c
                } else {
                    '-'
                }
            })
            .take(80)
            .collect();
        if !model.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            model.insert(0, 'm');
            model.truncate(80);
        }
        ModelName::parse(&model)
    }

    /// The manifest's path relative to the `manifests/` folder.
    pub fn manifest_rel_path(&self) -> PathBuf {
        Path::new(&self.host)
            .join(&self.namespace)
            .join(&self.model)
            .join(&self.tag)
    }

    /// The repository path used in registry URLs: `namespace/model`.
    pub fn repository(&self) -> String {
        format!("{}/{}", self.namespace, self.model)
    }

    /// The shortest spelling that parses back to this name, as Ollama displays it
    /// (`qwen2.5:0.5b`, `user/model:tag`, `host/ns/model:tag`).
    pub fn short(&self) -> String {
        if self.host == DEFAULT_HOST && self.namespace == DEFAULT_NAMESPACE {
            format!("{}:{}", self.model, self.tag)
        } else if self.host == DEFAULT_HOST {
            format!("{}/{}:{}", self.namespace, self.model, self.tag)
        } else {
            self.to_string()
        }
    }
}

impl fmt::Display for ModelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}:{}",
            self.host, self.namespace, self.model, self.tag
        )
    }
}

impl std::str::FromStr for ModelName {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self> {
        ModelName::parse(s)
    }
}

/// What a user may name as a model: a store name, a local `.gguf` file or a URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelRef {
    /// A name in the store (or to pull from a registry).
    Name(ModelName),
    /// A path to a `.gguf` file, used as it is.
    File(PathBuf),
    /// An `http(s)://` URL of a `.gguf` file.
    Url(String),
}

impl ModelRef {
    /// Classifies `s`: a URL, a path ending in `.gguf`, or else a model name.
    pub fn parse(s: &str) -> Result<ModelRef> {
        let lower = s.to_ascii_lowercase();
        if lower.starts_with("https://") || lower.starts_with("http://") {
            url_file_name(s)?;
            return Ok(ModelRef::Url(s.to_string()));
        }
        if lower.ends_with(".gguf") {
            return Ok(ModelRef::File(PathBuf::from(s)));
        }
        ModelName::parse(s).map(ModelRef::Name)
    }
}

/// The `.gguf` file name at the end of a URL's path (query and fragment ignored).
pub fn url_file_name(url: &str) -> Result<String> {
    let bad = |reason: &str| StoreError::InvalidName {
        name: url.chars().take(200).collect(),
        reason: reason.to_string(),
    };
    let rest = url
        .split_once("://")
        .map(|(_, r)| r)
        .ok_or_else(|| bad("not a URL"))?;
    let path = rest.split(['?', '#']).next().unwrap_or("");
    let (host, path) = path
        .split_once('/')
        .ok_or_else(|| bad("the URL has no path"))?;
    if host.is_empty() {
        return Err(bad("the URL has no host"));
    }
    let file = path.rsplit('/').next().unwrap_or("");
    if !file.to_ascii_lowercase().ends_with(".gguf") || file.len() <= 5 {
        return Err(bad("a model URL must name a .gguf file"));
    }
    Ok(file.to_string())
}

/// The store name a URL pull gives its file: the file name without `.gguf`.
pub fn url_model_name(url: &str) -> Result<ModelName> {
    let file = url_file_name(url)?;
    ModelName::from_file_stem(&file[..file.len() - ".gguf".len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> ModelName {
        ModelName::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn defaults_fill_missing_parts() {
        assert_eq!(
            n("qwen2.5:0.5b").to_string(),
            "registry.ollama.ai/library/qwen2.5:0.5b"
        );
        assert_eq!(n("smollm2").tag, "latest");
        assert_eq!(n("user/m:t").namespace, "user");
        let h = n("localhost:5000/ns/model:v1");
        assert_eq!(
            (
                h.host.as_str(),
                h.namespace.as_str(),
                h.model.as_str(),
                h.tag.as_str()
            ),
            ("localhost:5000", "ns", "model", "v1")
        );
        assert_eq!(n("localhost:5000/ns/model").tag, "latest");
    }

    #[test]
    fn short_form_round_trips() {
        for s in [
            "gemma2:2b",
            "user/m:latest",
            "example.com/ns/m:tag",
            "h:1/n/m:t",
        ] {
            let a = n(s);
            assert_eq!(n(&a.short()), a);
            assert_eq!(n(&a.to_string()), a);
        }
        assert_eq!(n("gemma2:2b").short(), "gemma2:2b");
    }

    #[test]
    fn malformed_names_are_refused_with_a_reason() {
        let cases = [
            ("", "empty"),
            ("a/b/c/d", "too many"),
            ("model:", "empty tag"),
            (":tag", "empty model"),
            ("/m", "empty namespace"),
            ("ns.x/m", "may not contain '.'"),
            ("m:t:u", "may not contain ':'"),
            (".hidden", "must start"),
            ("../x/m", "must start"),
            ("m o", "may not contain ' '"),
            ("mödel", "may not contain 'ö'"),
            ("m@sha256:00", "digest"),
            ("https://h/ns/m", "scheme"),
        ];
        for (s, want) in cases {
            let e = ModelName::parse(s).expect_err(s).to_string();
            assert!(e.contains(want), "{s:?}: {e}");
            assert!(!e.contains('\n'));
        }
        let long = "a".repeat(81);
        assert!(ModelName::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("at most 80"));
        assert!(ModelName::parse(&"a".repeat(80)).is_ok());
    }

    #[test]
    fn refs_classify_urls_paths_and_names() {
        assert_eq!(
            ModelRef::parse("./x/Model.Q4.gguf").unwrap(),
            ModelRef::File("./x/Model.Q4.gguf".into())
        );
        assert!(matches!(
            ModelRef::parse("https://h.co/a/resolve/main/m.gguf?download=true").unwrap(),
            ModelRef::Url(_)
        ));
        assert!(ModelRef::parse("https://h.co/a/b.bin").is_err());
        assert!(matches!(
            ModelRef::parse("llama3").unwrap(),
            ModelRef::Name(_)
        ));
    }

    #[test]
    fn file_stems_become_valid_names() {
        assert_eq!(
            ModelName::from_file_stem("SmolLM2-135M.Q4_1")
                .unwrap()
                .short(),
            "SmolLM2-135M.Q4_1:latest"
        );
        assert_eq!(ModelName::from_file_stem("a b+c").unwrap().model, "a-b-c");
        assert_eq!(ModelName::from_file_stem(".x").unwrap().model, "m.x");
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics_and_valid_names_round_trip(s in "\\PC{0,40}|[a-z0-9._:/-]{0,40}") {
            if let Ok(name) = ModelName::parse(&s) {
                proptest::prop_assert_eq!(ModelName::parse(&name.to_string()).unwrap(), name.clone());
                proptest::prop_assert_eq!(ModelName::parse(&name.short()).unwrap(), name);
            }
            let _ = ModelRef::parse(&s);
            let _ = ModelName::from_file_stem(&s);
        }
    }
}
