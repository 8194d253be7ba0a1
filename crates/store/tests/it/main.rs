//! Integration tests of the store: one binary (`tests/it`), one module per area.

mod conformance;
mod postgres;
mod sqlite;
