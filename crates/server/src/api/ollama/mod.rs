//! The Ollama shape: `/api/chat`, `/api/generate` (NDJSON streaming by default),
//! and the model routes `/api/tags`, `/api/show`, `/api/pull`, `/api/copy`,
//! `/api/delete`, `/api/ps`, `/api/version`.

mod generation;
mod models;
mod wire;

use axum::routing::{delete, get, post};
use axum::Router;

use crate::http::AppState;
use generation::{chat, generate};
use models::{copy, ps, pull, remove, show, tags, version};

pub(crate) use generation::parse_keep_alive;
pub(crate) use wire::error_body;

/// The Ollama routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/chat", post(chat))
        .route("/api/generate", post(generate))
        .route("/api/tags", get(tags))
        .route("/api/show", post(show))
        .route("/api/pull", post(pull))
        .route("/api/copy", post(copy))
        .route("/api/delete", delete(remove))
        .route("/api/ps", get(ps))
        .route("/api/version", get(version))
}
