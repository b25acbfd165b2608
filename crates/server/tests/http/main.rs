//! The server's HTTP behaviour in-process, one theme a module, all in one test binary
//! (each binary costs a link of the whole runtime): the real `router` over the tiny
//! Qwen3 (see `common`). Moved here from the binary tests in `crates/cli/tests`, which
//! keep what needs a real process or a real model (issue 44).

#[path = "../common/mod.rs"]
mod common;

mod bodies;
mod boundary;
mod constraints;
mod expert_contexts;
mod harmony;
mod hybrid_contexts;
mod image_links;
mod images;
mod refusals;
mod speculation;
mod vision;
