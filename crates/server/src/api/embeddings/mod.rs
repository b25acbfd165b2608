//! The embedding routes, each in its API's shape: OpenAI's `POST /v1/embeddings`,
//! Ollama's `POST /api/embed` and its older `POST /api/embeddings`. Each translates its
//! body to the runtime's [`llamay_runtime::EmbedRequest`] and calls
//! `Runtime::embed`.

mod ollama;
mod openai;

use axum::routing::post;
use axum::Router;

use crate::http::AppState;

/// The embedding routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/embeddings", post(openai::embeddings))
        .route("/api/embed", post(ollama::embed))
        .route("/api/embeddings", post(ollama::embeddings))
}
