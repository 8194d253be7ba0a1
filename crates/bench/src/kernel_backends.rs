//! Where a kernel sub-bench's store lives, how its fixtures are written and what its bare baselines
//! are: SQLite files in a directory, or fresh schemas of a PostgreSQL database. The measurements
//! ([`crate::kernel`]) are the same on both.

use crate::postgres_fixtures::{self as pgf, RawBatches, RawSelect};
use crate::sqlite_fixtures::{self as sqf, Loader};
use sessionwatch_core::{Clock, SystemClock};
use sessionwatch_store::{PostgresStore, SqliteOptions, SqliteStore, Store};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

pub(crate) type BenchResult<T> = Result<T, String>;

/// The watcher store identity the kernels run with (cursors are bound to it).
pub(crate) const STORE_IDENTITY: &str = "bench";

/// Concurrent producers, as in a gateway serving many turns at once: their appends share group commits,
/// and each producer waits for its own commit before its next append.
pub const PRODUCERS: u64 = 16;

/// Sessions the 16 writers (and their bare baseline) spread their rows over.
pub(crate) const WRITER_SESSIONS: u64 = 100;

pub(crate) trait BenchBackend {
    type S: Store + Clone;
    /// The name of the bare commit-loop baseline figure.
    const RAW_FIGURE: &'static str;
    /// The name of the bare 16-row-batch baseline figure.
    const RAW_BATCHED_FIGURE: &'static str;
    /// A fresh, empty store for the sub-bench `name`.
    async fn open(&self, name: &str) -> BenchResult<Self::S>;
    /// Releases what [`open`](Self::open) created for `name` (after its kernel is dropped), and the
    /// baselines' connections of that name (`raw`, `raw-batched`).
    async fn close(&self, name: &str);
    /// Writes `per_session` events to each of `sessions` into the store of sub-bench `name`.
    async fn fill_events(
        &self,
        name: &str,
        s: &Self::S,
        sessions: &[(String, String)],
        per_session: u64,
    ) -> BenchResult<()>;
    async fn fill_cursors(
        &self,
        name: &str,
        s: &Self::S,
        cursors: Vec<(String, String, u64, u64, u64)>,
    ) -> BenchResult<()>;
    /// `rows` bare insert-and-commit round trips of the row an append writes, into the bare log that
    /// `first == 0` starts afresh and later calls continue (sequences after `first`); answers the
    /// elapsed time. [`close`](Self::close)`("raw")` releases it.
    async fn raw_commit_loop(&self, first: u64, rows: u64) -> BenchResult<Duration>;
    /// The bare baseline of the 16 writers: the same rows, 16 per transaction, over
    /// [`WRITER_SESSIONS`] sessions; `first == 0` starts afresh. `close("raw-batched")` releases it.
    async fn raw_batched_loop(&self, first: u64, rows: u64) -> BenchResult<Duration>;
    /// One bare one-row select of the durable head row of `key` in sub-bench `name`, where a recent
    /// page from the tail must validate against it (PostgreSQL: its latency); `None` where the store
    /// validates without a round trip.
    async fn raw_select(&self, name: &str, key: &str) -> BenchResult<Option<Duration>>;
}

pub(crate) struct SqliteBackend {
    pub dir: PathBuf,
}

impl SqliteBackend {
    fn fresh_path(&self, name: &str) -> PathBuf {
        let path = self.dir.join(format!("{name}.db"));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        path
    }
}

impl BenchBackend for SqliteBackend {
    type S = SqliteStore;
    const RAW_FIGURE: &'static str = "raw_sqlite_commit_per_s";
    const RAW_BATCHED_FIGURE: &'static str = "raw_sqlite_batched_16_per_s";

    async fn open(&self, name: &str) -> BenchResult<SqliteStore> {
        SqliteStore::open(self.fresh_path(name), SqliteOptions::default())
            .map_err(|e| format!("open {name}: {e}"))
    }

    async fn close(&self, _name: &str) {}

    async fn fill_events(
        &self,
        _name: &str,
        s: &SqliteStore,
        sessions: &[(String, String)],
        per_session: u64,
    ) -> BenchResult<()> {
        Loader::open(s.path())?
            .fill_events(sessions, per_session, SystemClock.now_ms(), &|_| {})
            .map_err(|e| format!("fill the log: {e}"))
    }

    async fn fill_cursors(
        &self,
        _name: &str,
        s: &SqliteStore,
        cursors: Vec<(String, String, u64, u64, u64)>,
    ) -> BenchResult<()> {
        Loader::open(s.path())?
            .fill_cursors(cursors, STORE_IDENTITY, SystemClock.now_ms(), &|_| {})
            .map_err(|e| format!("fill cursors: {e}"))
    }

    async fn raw_commit_loop(&self, first: u64, rows: u64) -> BenchResult<Duration> {
        let path = if first == 0 { self.fresh_path("raw") } else { self.dir.join("raw.db") };
        sqf::raw_commit_loop(&path, first, rows).map_err(|e| format!("raw loop: {e}"))
    }

    async fn raw_batched_loop(&self, first: u64, rows: u64) -> BenchResult<Duration> {
        let path = if first == 0 { self.fresh_path("raw-batched") } else { self.dir.join("raw-batched.db") };
        sqf::raw_batched_loop(&path, first, rows, PRODUCERS, WRITER_SESSIONS)
            .map_err(|e| format!("raw batched loop: {e}"))
    }

    async fn raw_select(&self, _name: &str, _key: &str) -> BenchResult<Option<Duration>> {
        Ok(None) // read in the same process's file, a few microseconds: part of the page's figure
    }
}

pub(crate) struct PostgresBackend {
    pub url: String,
    /// The schema of every open sub-bench, by name.
    schemas: Mutex<HashMap<String, String>>,
    /// The bare commit loop's connection while its blocks run.
    raw: tokio::sync::Mutex<Option<tokio_postgres::Client>>,
    /// The bare 16-row batches' connections while their blocks run.
    raw_batched: tokio::sync::Mutex<Option<RawBatches>>,
    /// The bare select's connection, with the name of the sub-bench whose schema it reads.
    raw_select: tokio::sync::Mutex<Option<(String, RawSelect)>>,
}

impl PostgresBackend {
    pub fn new(url: &str) -> PostgresBackend {
        PostgresBackend {
            url: url.to_string(),
            schemas: Default::default(),
            raw: Default::default(),
            raw_batched: Default::default(),
            raw_select: Default::default(),
        }
    }

    async fn connect(&self, name: &str) -> BenchResult<PostgresStore> {
        let schema = pgf::unique_schema_name(&format!("swbench_{}", name.replace('-', "_")));
        self.schemas.lock().unwrap().insert(name.to_string(), schema.clone());
        PostgresStore::connect(&self.url, Some(&schema)).await.map_err(|e| format!("connect ({name}): {e}"))
    }

    fn schema(&self, name: &str) -> BenchResult<String> {
        self.schemas.lock().unwrap().get(name).cloned().ok_or_else(|| format!("no schema open for {name}"))
    }

    /// A bare connection to the schema of sub-bench `name`.
    async fn bare(&self, name: &str) -> BenchResult<tokio_postgres::Client> {
        pgf::connect(&self.url, Some(&self.schema(name)?)).await
    }

    /// Creates and migrates a fresh schema for the baseline `name` (the store that did it is dropped).
    async fn fresh_schema(&self, name: &str) -> BenchResult<String> {
        self.close(name).await;
        drop(self.connect(name).await?);
        self.schema(name)
    }

    /// Drops every schema still open (after a failed run).
    pub async fn close_all(&self) {
        let names: Vec<String> = self.schemas.lock().unwrap().keys().cloned().collect();
        for name in names {
            self.close(&name).await;
        }
    }
}

impl BenchBackend for PostgresBackend {
    type S = PostgresStore;
    const RAW_FIGURE: &'static str = "raw_postgres_commit_per_s";
    const RAW_BATCHED_FIGURE: &'static str = "raw_postgres_batched_16_per_s";

    async fn open(&self, name: &str) -> BenchResult<PostgresStore> {
        self.connect(name).await
    }

    async fn close(&self, name: &str) {
        match name {
            "raw" => drop(self.raw.lock().await.take()),
            "raw-batched" => drop(self.raw_batched.lock().await.take()),
            _ => {}
        }
        let mut select = self.raw_select.lock().await;
        if select.as_ref().is_some_and(|(n, _)| n == name) {
            *select = None;
        }
        drop(select);
        let schema = self.schemas.lock().unwrap().remove(name);
        if let Some(schema) = schema
            && let Err(e) = pgf::drop_schema(&self.url, &schema).await
        {
            tracing::warn!(error = %e, schema, "could not drop the bench schema");
        }
    }

    async fn fill_events(
        &self,
        name: &str,
        _s: &PostgresStore,
        sessions: &[(String, String)],
        per_session: u64,
    ) -> BenchResult<()> {
        let mut client = self.bare(name).await?;
        pgf::fill_events(&mut client, sessions, per_session, SystemClock.now_ms())
            .await
            .map_err(|e| format!("fill the log: {e}"))
    }

    async fn fill_cursors(
        &self,
        name: &str,
        _s: &PostgresStore,
        cursors: Vec<(String, String, u64, u64, u64)>,
    ) -> BenchResult<()> {
        let mut client = self.bare(name).await?;
        pgf::fill_cursors(&mut client, &cursors, STORE_IDENTITY, SystemClock.now_ms())
            .await
            .map_err(|e| format!("fill cursors: {e}"))
    }

    async fn raw_commit_loop(&self, first: u64, rows: u64) -> BenchResult<Duration> {
        if first == 0 {
            self.fresh_schema("raw").await?;
            *self.raw.lock().await = Some(self.bare("raw").await?);
        }
        let mut raw = self.raw.lock().await;
        let client = raw.as_mut().ok_or("raw loop: continued before it started")?;
        pgf::raw_commit_loop(client, first, rows).await.map_err(|e| format!("raw loop: {e}"))
    }

    async fn raw_batched_loop(&self, first: u64, rows: u64) -> BenchResult<Duration> {
        if first == 0 {
            let schema = self.fresh_schema("raw-batched").await?;
            let writers = PRODUCERS as usize;
            let batches =
                RawBatches::connect(&self.url, &schema, writers, WRITER_SESSIONS as usize, writers).await?;
            *self.raw_batched.lock().await = Some(batches);
        }
        let mut raw = self.raw_batched.lock().await;
        let batches = raw.as_mut().ok_or("raw batched loop: continued before it started")?;
        batches.run(rows).await.map_err(|e| format!("raw batched loop: {e}"))
    }

    async fn raw_select(&self, name: &str, key: &str) -> BenchResult<Option<Duration>> {
        let mut select = self.raw_select.lock().await;
        if select.as_ref().is_none_or(|(n, _)| n != name) {
            *select = Some((name.to_string(), RawSelect::connect(&self.url, &self.schema(name)?).await?));
        }
        let (_, s) = select.as_ref().ok_or("raw select: not connected")?;
        s.once(key, "main").await.map(Some).map_err(|e| format!("raw select: {e}"))
    }
}
