//! Lexicons: a closed set of terms (a product catalogue, a city list, a million ids)
//! the output, or a schema string, must be exactly one of.
//!
//! A lexicon compiles to a trie (a [`ByteDfa`] stored sparsely, breadth-first), not to
//! an alternation: no member limit, built in time linear in its bytes, and masks come
//! from walking the vocabulary's trie against it like any other DFA state, so a step
//! costs what the live prefixes cost, not what the lexicon holds.
//!
//! The file format is one term per line (UTF-8; `\n` or `\r\n`; blank lines skipped;
//! a term is taken as written, spaces included).

use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::grammar::ByteDfa;

/// Longest term, in bytes.
pub(crate) const MAX_TERM_BYTES: usize = 4096;

/// A named, compiled set of terms. Cheap to share (`Arc` it).
pub struct Lexicon {
    name: String,
    /// The terms, one per line, as read (kept to build the JSON form on first use).
    text: Vec<u8>,
    terms: usize,
    /// Exactly the terms' bytes: the whole output is one term.
    whole: Arc<ByteDfa>,
    /// The terms as JSON string contents (canonical escaping), for a schema string.
    json: OnceLock<Arc<ByteDfa>>,
}

impl std::fmt::Debug for Lexicon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lexicon({:?}, {} terms)", self.name, self.terms)
    }
}

/// Two lexicons are the same when they hold the same terms under the same name.
impl PartialEq for Lexicon {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.text == other.text
    }
}

impl Eq for Lexicon {}

impl Lexicon {
    /// Reads a lexicon file's bytes (see the module doc); errors name the line.
    pub fn parse(name: &str, text: &[u8]) -> Result<Lexicon> {
        let mut terms: Vec<&[u8]> = Vec::new();
        for (i, line) in lines(text).enumerate() {
            let bad = |msg: String| Error::Lexicon {
                name: name.to_string(),
                msg: format!("line {}: {msg}", i + 1),
            };
            if line.len() > MAX_TERM_BYTES {
                return Err(bad(format!(
                    "a term of {} bytes; the limit is {MAX_TERM_BYTES}",
                    line.len()
                )));
            }
            if std::str::from_utf8(line).is_err() {
                return Err(bad("is not UTF-8".into()));
            }
            if !line.is_empty() {
                terms.push(line);
            }
        }
        let whole = ByteDfa::from_terms(&format!("lexicon {name}"), &terms).map_err(|_| {
            Error::Lexicon {
                name: name.to_string(),
                msg: "has no terms".into(),
            }
        })?;
        // Distinct terms: the trie's accepting states.
        let terms = (0..whole.len() as u32)
            .filter(|&s| whole.is_accepting(s))
            .count();
        Ok(Lexicon {
            name: name.to_string(),
            text: text.to_vec(),
            terms,
            whole: Arc::new(whole),
            json: OnceLock::new(),
        })
    }

    /// A lexicon of the given terms (a request's `{"terms": [...]}`); a term may not hold
    /// a line break.
    pub fn from_terms(name: &str, terms: &[String]) -> Result<Lexicon> {
        if let Some(t) = terms.iter().find(|t| t.contains(['\n', '\r'])) {
            return Err(Error::Lexicon {
                name: name.to_string(),
                msg: format!("the term {t:?} holds a line break"),
            });
        }
        if terms.iter().any(String::is_empty) {
            return Err(Error::Lexicon {
                name: name.to_string(),
                msg: "a term is empty".into(),
            });
        }
        Self::parse(name, terms.join("\n").as_bytes())
    }

    /// The lexicon's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Distinct terms.
    pub fn len(&self) -> usize {
        self.terms
    }

    /// Never true: a lexicon has a term.
    pub fn is_empty(&self) -> bool {
        self.terms == 0
    }

    /// The DFA of the terms themselves (the whole output is one term).
    pub fn dfa(&self) -> &Arc<ByteDfa> {
        &self.whole
    }

    /// The DFA of the terms as the contents of a JSON string, each in its canonical
    /// escaping (`"` as `\"`, controls as `\n` or `\u001f`, the rest as written), so a
    /// schema string's value is one term: the same spelling rule as declared keys.
    pub fn json_dfa(&self) -> &Arc<ByteDfa> {
        self.json.get_or_init(|| {
            let escaped: Vec<String> = lines(&self.text)
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let s = std::str::from_utf8(l).expect("checked when parsed");
                    let q = serde_json::to_string(s).expect("a string serializes");
                    q[1..q.len() - 1].to_string()
                })
                .collect();
            let refs: Vec<&[u8]> = escaped.iter().map(|s| s.as_bytes()).collect();
            let name = format!("lexicon {} (JSON)", self.name);
            Arc::new(ByteDfa::from_terms(&name, &refs).expect("the lexicon has terms"))
        })
    }
}

/// The lines of `text`, without their `\n` or `\r\n`.
fn lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_one_term_per_line() {
        let l = Lexicon::parse("cities", b"Paris\r\nLyon\n\nSaint-\xc3\x89tienne\nLyon\n").unwrap();
        assert_eq!(l.len(), 3);
        assert!(l.dfa().matches(b"Paris") && l.dfa().matches("Saint-Étienne".as_bytes()));
        assert!(!l.dfa().matches(b"Pari") && !l.dfa().matches(b"Lyon\n"));
        let e = Lexicon::parse("bad", b"ok\n\xff\n").unwrap_err();
        assert_eq!(e.to_string(), "lexicon bad: line 2: is not UTF-8");
        assert!(Lexicon::parse("empty", b"\n\n").is_err());
        let long = vec![b'a'; MAX_TERM_BYTES + 1];
        assert!(Lexicon::parse("long", &long).is_err());
    }

    #[test]
    fn the_json_form_escapes_canonically() {
        let l = Lexicon::from_terms("q", &["say \"hi\"".into(), "tab\there".into()]).unwrap();
        let j = l.json_dfa();
        assert!(j.matches(br#"say \"hi\""#) && j.matches(br"tab\there"));
        assert!(!j.matches(b"say \"hi\"") && !j.matches(br"tab\u0009here"));
        assert!(Lexicon::from_terms("n", &["a\nb".into()]).is_err());
        assert!(Lexicon::from_terms("e", &[String::new()]).is_err());
    }
}
