//! Integration tests for sessionwatch-upstream.

mod common;
mod fixture_tree;
mod fixtures;
mod fuzz;
mod gemini_cases;
mod missing;
mod opencode_cases;
mod row_replay;
mod streaming;
mod synthetic_claude;
mod synthetic_codex;
mod synthetic_opencode;
mod synthetic_pi;
