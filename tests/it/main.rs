//! End-to-end tests of the `sessionwatch` binary, started the way a user starts it.

mod cli;
mod postgres;
mod restart;
mod support;
