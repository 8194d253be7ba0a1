//! The gateway end to end: a real server on port 0, driven over HTTP (and MCP).

mod bad_input;
mod dashboard;
mod delivery;
mod gemini_hooks;
mod hooks;
mod in_process;
mod mcp;
mod mcp_sessions;
mod mcp_story;
mod module_graph;
mod node_workspace;
mod opencode_plugin;
mod pi_hooks;
mod slow_clients;
mod slow_store;
mod story;
mod support;
mod upstream;
mod wire_shapes;
mod workspace;
