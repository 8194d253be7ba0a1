//! Integration tests of the gateway: one test binary, one module per area.

mod mcp;
mod mcp_story;
