//! Errors as the server sees them: a status, a kind and a message. Each API shape
//! renders them in its own error body (see [`ErrorShape`]). The runtime's errors
//! arrive through `From`, which gives each of its kinds its HTTP status.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
pub(crate) use llamay_runtime::ContextOverflow;

/// What went wrong, in the terms the API shapes have words for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ApiErrorKind {
    InvalidRequest,
    Authentication,
    /// Refused by the browser and network boundary.
    Forbidden,
    NotFound,
    TooLarge,
    Overloaded,
    Timeout,
    Internal,
}

/// An error answer.
#[derive(Clone, Debug)]
pub(crate) struct ApiError {
    pub status: u16,
    pub kind: ApiErrorKind,
    pub message: String,
    /// A schema the constraint cannot honour (the seed's refusal shape).
    pub refusal: bool,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u64>,
    /// The request field at fault (OpenAI's `param`).
    pub param: Option<String>,
    /// The prompt does not fit the context (each shape words it its own way).
    pub overflow: Option<ContextOverflow>,
}

impl ApiError {
    fn new(status: u16, kind: ApiErrorKind, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            kind,
            message: capped(message.into()),
            refusal: false,
            retry_after: None,
            param: None,
            overflow: None,
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
        Self::new(400, ApiErrorKind::InvalidRequest, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> ApiError {
        Self::new(404, ApiErrorKind::NotFound, message)
    }

    pub(crate) fn unauthorized() -> ApiError {
        Self::new(
            401,
            ApiErrorKind::Authentication,
            "a valid API key is required (Authorization: Bearer KEY, or x-api-key: KEY)",
        )
    }

    pub(crate) fn forbidden(message: impl Into<String>) -> ApiError {
        Self::new(403, ApiErrorKind::Forbidden, message)
    }

    pub(crate) fn unsupported_media_type() -> ApiError {
        Self::new(
            415,
            ApiErrorKind::InvalidRequest,
            "the request body must be JSON, sent with Content-Type: application/json",
        )
    }

    pub(crate) fn too_large(limit: usize) -> ApiError {
        Self::new(
            413,
            ApiErrorKind::TooLarge,
            format!("the request body is larger than {limit} bytes"),
        )
    }

    /// The body did not arrive within `limit` (408).
    pub(crate) fn body_timeout(limit: std::time::Duration) -> ApiError {
        Self::new(
            408,
            ApiErrorKind::Timeout,
            format!(
                "the request body did not arrive within {}s",
                limit.as_secs()
            ),
        )
    }

    pub(crate) fn internal(message: impl Into<String>) -> ApiError {
        Self::new(500, ApiErrorKind::Internal, message)
    }

    /// Renders the error in `shape`.
    pub(crate) fn into_response_as(self, shape: ErrorShape) -> Response {
        let body = shape.body(&self);
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        let mut r = (status, axum::Json(body)).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}

impl From<llamay_runtime::Error> for ApiError {
    fn from(e: llamay_runtime::Error) -> ApiError {
        use llamay_runtime::ErrorKind as K;
        let (status, kind) = match e.kind {
            K::InvalidRequest => (400, ApiErrorKind::InvalidRequest),
            K::NotFound => (404, ApiErrorKind::NotFound),
            K::Overloaded => (503, ApiErrorKind::Overloaded),
            K::Timeout => (504, ApiErrorKind::Timeout),
            K::Internal => (500, ApiErrorKind::Internal),
            K::Conflict => (409, ApiErrorKind::InvalidRequest),
            K::InsufficientStorage => (507, ApiErrorKind::Overloaded),
        };
        ApiError {
            status,
            kind,
            message: capped(e.message),
            refusal: e.refusal,
            retry_after: e.retry_after,
            param: e.param,
            overflow: e.overflow,
        }
    }
}

/// Longest message an error carries: enough for any explanation, while a message
/// that quotes the input (serde's "invalid type: string …") never echoes megabytes.
pub(crate) const MAX_MESSAGE_BYTES: usize = 600;

fn capped(mut message: String) -> String {
    if message.len() > MAX_MESSAGE_BYTES {
        let mut end = MAX_MESSAGE_BYTES;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str("… (cut)");
    }
    message
}

/// An API shape's error body. Each API module owns its function; the router picks
/// one by path for errors raised before a handler runs (auth, body size).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ErrorShape(pub fn(&ApiError) -> serde_json::Value);

impl ErrorShape {
    pub(crate) fn body(self, e: &ApiError) -> serde_json::Value {
        (self.0)(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let e = ApiError::bad_request("é".repeat(1000));
        assert!(e.message.len() <= MAX_MESSAGE_BYTES + "… (cut)".len());
        assert!(e.message.ends_with("… (cut)"));
        let short = ApiError::from(llamay_runtime::Error::bad_request("short"));
        assert_eq!(short.message, "short");
    }
}
