//! Support for tests and benchmarks that need a PostgreSQL server: a fresh, uniquely named schema per
//! test, dropped afterwards.
//!
//! The server comes from `SESSIONWATCH_TEST_PG_URL` (or `SESSIONWATCH_PG_URL`; default
//! `postgres://postgres@127.0.0.1:5432/test`).
//! When it does not answer, [`TestSchema::create`] prints a `SKIPPED` line and answers `None`, unless
//! `SESSIONWATCH_REQUIRE_PG=1` is set (CI), in which case it panics.

use super::{PostgresOptions, PostgresStore};
use crate::{Result, StoreError};
use std::time::Duration;
use tokio_postgres::NoTls;

pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The server URL tests use.
pub fn url() -> String {
    ["SESSIONWATCH_TEST_PG_URL", "SESSIONWATCH_PG_URL"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.trim().is_empty()))
        .unwrap_or_else(|| DEFAULT_URL.into())
}

fn required() -> bool {
    std::env::var("SESSIONWATCH_REQUIRE_PG").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

pub use super::unique_schema_name;

/// A raw connection to the test server (for fault injection such as `pg_terminate_backend`).
pub async fn admin_client(url: &str) -> Result<tokio_postgres::Client> {
    let (client, connection) = url
        .parse::<tokio_postgres::Config>()
        .map_err(|e| StoreError::Config(e.to_string()))?
        .connect(NoTls)
        .await?;
    tokio::spawn(connection);
    Ok(client)
}

/// A fresh schema on the test server, dropped when this value is dropped.
pub struct TestSchema {
    url: String,
    schema: String,
}

impl TestSchema {
    /// `None` (after printing `SKIPPED: <test>`) when the server does not answer, unless
    /// `SESSIONWATCH_REQUIRE_PG=1`, which turns that into a panic.
    pub async fn create(test: &str) -> Option<TestSchema> {
        let url = url();
        let reachable = tokio::time::timeout(Duration::from_secs(5), admin_client(&url)).await;
        match reachable {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return skip(test, &url, &e.to_string()),
            Err(_) => return skip(test, &url, "connection timed out"),
        }
        Some(TestSchema { url, schema: unique_schema_name("swt") })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// A new store (its own pool) on this schema; the first one creates and migrates it.
    pub async fn store(&self) -> PostgresStore {
        self.store_with(PostgresOptions::default()).await
    }

    pub async fn store_with(&self, mut options: PostgresOptions) -> PostgresStore {
        options.schema = Some(self.schema.clone());
        PostgresStore::connect_with(&self.url, options).await.expect("connect to the test schema")
    }
}

fn skip(test: &str, url: &str, why: &str) -> Option<TestSchema> {
    if required() {
        panic!("PostgreSQL at {url} is required (SESSIONWATCH_REQUIRE_PG=1) but unreachable: {why}");
    }
    eprintln!("SKIPPED: {test}: PostgreSQL at {url} is unreachable ({why}); set SESSIONWATCH_TEST_PG_URL");
    None
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let (url, schema) = (self.url.clone(), self.schema.clone());
        // Runs on its own thread and runtime: Drop may happen inside or outside a runtime.
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            rt.block_on(super::drop_schema(&url, &schema)).ok()
        })
        .join();
        if !matches!(done, Ok(Some(()))) {
            eprintln!("warning: could not drop test schema {}", self.schema);
        }
    }
}
