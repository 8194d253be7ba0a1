//! The sessionwatch gateway: sessions around the kernel, the OpenClaw-compatible tools, the host API, a
//! live stream, auth and config. This is the only crate that knows JSON wire shapes.

pub mod args;
pub mod auth;
pub mod config;
pub mod connections;
pub mod dashboard;
pub mod discovery;
pub mod embedded;
pub mod error;
pub mod gateway;
pub mod guard;
pub mod hook_protocol;
mod host_api;
pub mod host_protocol;
pub mod http;
pub mod http_nodes;
mod login;
pub mod mcp;
pub mod metrics;
pub mod node_protocol;
pub mod request_body;
mod serve;
pub mod sse;
mod state;
mod tool_invoke;
pub mod wire;

pub use config::Config;
pub use gateway::Gateway;
pub use http::app;
pub use serve::run;
pub use state::AppState;
