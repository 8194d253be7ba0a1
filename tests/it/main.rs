//! End-to-end tests of the `sessionwatch` binary, started the way a user starts it.

mod agents;
mod bench_hooks;
mod bench_scale;
mod browser;
mod cli;
mod discovery;
mod idle_connections;
mod mcp_docs;
mod mcp_stdio;
mod names;
mod nodes;
mod openclaw_wire;
mod postgres;
mod process;
mod restart;
mod support;
mod workspace;
