//! The sessionwatch gateway: sessions around the kernel, the OpenClaw-compatible tools, the host API, a
//! live stream, auth and config. This is the only crate that knows JSON wire shapes.
//!
//! Its public API is what the binary, `crates/bench` and `tests/it` use; everything else is `pub(crate)`
//! (`unreachable_pub` keeps it so) or private.

#![warn(unreachable_pub)]

mod args;
pub mod auth;
pub mod config;
pub mod connections;
pub mod dashboard;
pub mod discovery;
pub mod embedded;
mod error;
mod gateway;
pub mod git_watch;
mod guard;
pub mod hook_protocol;
mod host_api;
pub mod host_protocol;
mod http;
mod http_nodes;
mod login;
pub mod mcp;
mod metrics;
pub mod node_protocol;
mod request_body;
mod serve;
mod sse;
mod state;
mod tool_invoke;
pub mod wire;

pub use config::Config;
pub use gateway::Gateway;
pub use serve::run;
pub use state::AppState;
