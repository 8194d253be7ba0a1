//! End-to-end tests of the sessionwatch binary.

mod mcp_docs;
mod mcp_stdio;
