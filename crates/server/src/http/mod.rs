//! What every route shares: the state handlers see, reading a JSON body, writing a
//! JSON or streamed response, and errors in each API's shape.

pub(crate) mod error;
pub(crate) mod stream;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use llamay_runtime::Runtime;
use llamay_store::FetchLimits;

use crate::boundary::Boundary;
use crate::kept::KeptResponses;

use error::ApiError;

/// Largest request body accepted (413 above).
pub const DEFAULT_BODY_LIMIT: usize = 8 << 20;

/// What every handler shares. Built with [`AppState::new`] (the defaults of a
/// loopback server without a key); `serve` sets the rest from its options.
#[derive(Clone)]
pub struct AppState {
    /// The models, their schedulers and the counters.
    pub(crate) runtime: Arc<Runtime>,
    /// When set, every route wants `Authorization: Bearer KEY` or `x-api-key: KEY`.
    pub(crate) api_key: Option<Arc<str>>,
    pub(crate) body_limit: usize,
    /// Which origins, hosts and body types may reach the handlers.
    pub(crate) boundary: Arc<Boundary>,
    /// `/api/pull` may reach loopback, link-local and private addresses.
    pub(crate) allow_private_pulls: bool,
    /// `/api/pull` may use plain http and unverified certificates.
    pub(crate) insecure_pulls: bool,
    /// `-allow-image-urls`: requests may link images (fetched under the pull rules
    /// above, each within these limits); `None` refuses links.
    pub(crate) image_urls: Option<FetchLimits>,
    /// Responses kept for `previous_response_id` (`/v1/responses`).
    pub(crate) kept: Arc<KeptResponses>,
}

impl AppState {
    /// The state of routes over `runtime` behind `boundary`: no API key, the default
    /// body limit, pulls from public addresses over verified TLS only.
    pub fn new(runtime: Arc<Runtime>, boundary: Boundary) -> AppState {
        AppState {
            runtime,
            api_key: None,
            body_limit: DEFAULT_BODY_LIMIT,
            boundary: Arc::new(boundary),
            allow_private_pulls: false,
            insecure_pulls: false,
            image_urls: None,
            kept: Arc::default(),
        }
    }

    /// Requests may link images, each fetched within `limits` (`-allow-image-urls`).
    pub fn allow_image_urls(mut self, limits: FetchLimits) -> AppState {
        self.image_urls = Some(limits);
        self
    }

    /// Pulls and linked images may reach loopback, link-local and private addresses
    /// (`-allow-private-pulls`).
    pub fn allow_private_addresses(mut self) -> AppState {
        self.allow_private_pulls = true;
        self
    }

    /// Pulls and linked images may use plain http and unverified certificates
    /// (`-insecure`).
    pub fn allow_insecure_transport(mut self) -> AppState {
        self.insecure_pulls = true;
        self
    }
}

/// A JSON response with a status.
pub(crate) fn json_response(status: StatusCode, v: serde_json::Value) -> Response {
    (status, Json(v)).into_response()
}

/// A streamed response with a content type.
pub(crate) fn stream_response(content_type: &'static str, body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Parses a JSON request body into `T`; malformed JSON and wrong types are 400s.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request(
            "the request body is empty; send a JSON object",
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not a valid request: {e}")))
}
