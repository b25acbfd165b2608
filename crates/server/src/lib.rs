//! llamay's HTTP server: the OpenAI, Anthropic and Ollama API shapes on one port.
//!
//! HTTP only. Each shape lives in its own folder under `api` and translates its wire
//! format into the runtime's one request type ([`llamay_runtime::GenRequest`]);
//! `http` holds what the routes share (state, body parsing, responses, errors in each
//! API's shape); `router` joins the routes and guards every request; `serve` runs it
//! all on a socket.
//!
//! The door: [`serve`] with its [`ServeOptions`] (and [`check_exposure`], the check
//! `llamay serve` runs on its flags first); [`router`] with its [`AppState`] and
//! [`Boundary`], for driving the routes in-process (the crate's own tests).
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod api;
mod banner;
mod boundary;
mod http;
mod ids;
mod kept;
mod listen;
mod router;
mod serve;

pub use boundary::Boundary;
pub use http::{AppState, DEFAULT_BODY_LIMIT};
pub use router::router;
pub use serve::{check_exposure, serve, ServeError, ServeOptions};
