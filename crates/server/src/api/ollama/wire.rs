//! What both halves of the Ollama shape write alike: its error body and its times.

use std::time::SystemTime;

use axum::response::Response;
use serde_json::{json, Value};

use crate::http::error::{ApiError, ErrorShape};

/// Ollama's error body: `{"error":"…"}`.
pub(crate) fn error_body(e: &ApiError) -> Value {
    if let Some(o) = e.overflow {
        // Ollama's words when it does not truncate (`truncate: false`), with the numbers.
        return json!({"error": format!(
            "the input length exceeds the context length ({} tokens; the context holds {})",
            o.prompt, o.context
        )});
    }
    json!({"error": e.message})
}

pub(super) fn fail(e: impl Into<ApiError>) -> Response {
    e.into().into_response_as(ErrorShape(error_body))
}

pub(super) fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

pub(super) fn rfc3339(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}
