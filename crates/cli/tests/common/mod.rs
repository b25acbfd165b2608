//! Helpers shared by the CLI's test binaries: `run` drives `llamay run` and checks
//! its output against a grammar; `serve` starts the real `llamay serve` on a free
//! loopback port. Each binary uses its own part.

#![allow(dead_code, unused_imports)]

pub mod run;
pub mod serve;
