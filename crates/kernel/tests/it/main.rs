//! Integration tests of the kernel on the real SQLite store: one binary (`tests/it`), one module per area.

mod bench;
mod common;
mod crash;
mod faults;
mod model;
mod restart;
mod wake;
mod workqueue;
