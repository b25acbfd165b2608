//! A refused or failed request, in terms every API shape has words for. The server
//! gives each kind its HTTP status; `llamay run` prints the message.

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request itself is wrong (a 400).
    InvalidRequest,
    /// No such model.
    NotFound,
    /// Too much work queued or loaded; retrying later can succeed.
    Overloaded,
    /// The request ran past its deadline.
    Timeout,
    /// llamay failed.
    Internal,
    /// The request conflicts with what is stored (a snapshot of another model or
    /// KV type: a 409).
    Conflict,
    /// Memory reserved for pinned data is exhausted (a 507).
    InsufficientStorage,
}

/// A request the runtime refused or could not finish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What went wrong, which decides the HTTP status.
    pub kind: ErrorKind,
    /// The human-readable explanation, sent to the client as it is.
    pub message: String,
    /// A schema the constraint cannot honour (the seed's refusal shape).
    pub refusal: bool,
    /// Seconds after which a retry may succeed.
    pub retry_after: Option<u64>,
    /// The request field at fault, as the API shape spells it (OpenAI's `param`).
    pub param: Option<String>,
    /// The prompt does not fit the context: each API shape words this case as its own
    /// server does, because the clients' trimming and fallback logic looks for that.
    pub overflow: Option<ContextOverflow>,
}

/// A prompt longer than the context can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextOverflow {
    /// The prompt's tokens.
    pub prompt: usize,
    /// The tokens the context holds.
    pub context: usize,
}

impl Error {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            refusal: false,
            retry_after: None,
            param: None,
            overflow: None,
        }
    }

    /// A prompt of `prompt` tokens for a context of `context`: a bad request that
    /// says so in numbers.
    pub fn context_overflow(prompt: usize, context: usize) -> Error {
        Error {
            overflow: Some(ContextOverflow { prompt, context }),
            ..Self::bad_request(format!(
                "the prompt has {prompt} tokens, but the context holds {context}"
            ))
        }
    }

    /// Names the request field at fault.
    pub fn at(mut self, field: &str) -> Error {
        self.param = Some(field.to_string());
        self
    }

    /// The request itself is wrong ([`ErrorKind::InvalidRequest`], a 400).
    pub fn bad_request(message: impl Into<String>) -> Error {
        Self::new(ErrorKind::InvalidRequest, message)
    }

    /// A schema refused by the constraint compiler, before any inference.
    pub fn refusal(message: impl Into<String>) -> Error {
        Error {
            refusal: true,
            ..Self::bad_request(message)
        }
    }

    /// No such model ([`ErrorKind::NotFound`]).
    pub fn not_found(message: impl Into<String>) -> Error {
        Self::new(ErrorKind::NotFound, message)
    }

    /// Too much work ([`ErrorKind::Overloaded`]), with a retry after one second.
    pub fn overloaded(message: impl Into<String>) -> Error {
        Error {
            retry_after: Some(1),
            ..Self::new(ErrorKind::Overloaded, message)
        }
    }

    /// The request ran past its deadline ([`ErrorKind::Timeout`]).
    pub fn timeout(message: impl Into<String>) -> Error {
        Self::new(ErrorKind::Timeout, message)
    }

    /// The request conflicts with what is stored ([`ErrorKind::Conflict`], a 409).
    pub fn conflict(message: impl Into<String>) -> Error {
        Self::new(ErrorKind::Conflict, message)
    }

    /// Memory reserved for pinned data is exhausted
    /// ([`ErrorKind::InsufficientStorage`], a 507).
    pub fn insufficient_storage(message: impl Into<String>) -> Error {
        Self::new(ErrorKind::InsufficientStorage, message)
    }

    /// llamay itself failed ([`ErrorKind::Internal`]).
    pub fn internal(message: impl Into<String>) -> Error {
        Self::new(ErrorKind::Internal, message)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
