//! The gateway end to end: a real server on port 0, driven over HTTP.

mod bad_input;
mod story;
mod support;
mod upstream;
mod wire_shapes;
