//! llamay's HTTP server: the OpenAI, Anthropic and Ollama API shapes on one port.
//!
//! HTTP only. Each shape lives in its own folder under [`api`] and translates its
//! wire format into the runtime's one request type
//! ([`llamay_runtime::GenRequest`]); [`http`] holds what the routes share (state,
//! body parsing, responses, errors in each API's shape); [`router`] joins the
//! routes and guards every request; [`serve`] runs it all on a socket.
#![forbid(unsafe_code)]

pub mod api;
pub mod banner;
pub mod boundary;
pub mod http;
mod ids;
pub mod kept;
mod listen;
pub mod router;
mod serve;

pub use boundary::Boundary;
pub use http::DEFAULT_BODY_LIMIT;
pub use serve::{check_exposure, serve, ServeError, ServeOptions};
