//! End-to-end tests of the `sessionwatch` binary, started the way a user starts it.

mod cli;
mod restart;
mod support;
