//! The one error type of the crate: every refusal names what is wrong and, for grammar
//! text, where (1-based line:column).

/// Why a grammar, regex or schema lowering was refused, or a token was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A grammar is malformed or unsupported; `at` is the (line, column) in its source text.
    #[error("{}{msg}", at.map(|(l, c)| format!("{l}:{c}: ")).unwrap_or_default())]
    Grammar {
        /// What is wrong, in words meant for the person who wrote the grammar.
        msg: String,
        /// 1-based line and column in the grammar text, when the grammar came from text.
        at: Option<(u32, u32)>,
    },
    /// A regular expression could not be compiled to a byte DFA within budget.
    #[error("pattern {pattern:?}: {msg}")]
    Regex {
        /// The pattern as given.
        pattern: String,
        /// Why it was refused.
        msg: String,
    },
    /// A lexicon (a file or a request's terms) could not be read.
    #[error("lexicon {name}: {msg}")]
    Lexicon {
        /// The lexicon's name.
        name: String,
        /// What is wrong (with the line, for a file).
        msg: String,
    },
    /// A token was committed that the constraint does not allow in the current state.
    #[error("token {token} is not allowed here")]
    TokenRejected {
        /// The token id.
        token: u32,
    },
}

impl Error {
    /// A grammar error without a source position.
    pub fn grammar(msg: impl Into<String>) -> Self {
        Error::Grammar {
            msg: msg.into(),
            at: None,
        }
    }

    /// A grammar error at a (line, column) of its source text.
    pub fn grammar_at(msg: impl Into<String>, line: u32, col: u32) -> Self {
        Error::Grammar {
            msg: msg.into(),
            at: Some((line, col)),
        }
    }
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
