//! Shared fixtures: a database in a temp dir, a manual clock, and a kernel that can be restarted.

use sessionwatch_core::{ManualClock, Millis, QueuedEvent, decode_context_key};
use sessionwatch_kernel::{Kernel, KernelConfig};
use sessionwatch_store::{RetentionPolicy, SqliteOptions, SqliteStore};
use std::path::PathBuf;
use std::sync::Arc;
use tempfile::TempDir;

pub const NOW: Millis = 1_750_000_000_000;
pub const STORE: &str = "store-a";

pub struct Env {
    pub dir: TempDir,
    pub clock: Arc<ManualClock>,
    pub config: KernelConfig,
}

impl Env {
    pub fn new() -> Env {
        Env::with_retention(RetentionPolicy::default())
    }

    pub fn with_retention(retention: RetentionPolicy) -> Env {
        let config = KernelConfig {
            store_identity: STORE.into(),
            retention,
            // Only explicit prunes (and the start-up prune) in tests: no background timing.
            prune_interval_ms: Millis::MAX / 4,
            ..KernelConfig::default()
        };
        Env { dir: tempfile::tempdir().expect("tempdir"), clock: Arc::new(ManualClock::new(NOW)), config }
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("state.db")
    }

    pub fn open(&self) -> SqliteStore {
        SqliteStore::open(self.db(), SqliteOptions::default()).expect("open store")
    }

    /// A (re)start of the process: a fresh store handle and a fresh kernel (empty in-memory queues).
    pub async fn start(&self) -> Kernel<SqliteStore> {
        Kernel::start(self.open(), self.clock.clone(), self.config.clone()).await
    }
}

/// The `changesSince` value a notice text names.
pub fn since_of(text: &str) -> u64 {
    text.rsplit(' ').next().unwrap().trim_end_matches('.').parse().expect("notice ends with changesSince N.")
}

/// A drained or peeked queue as (target, since) pairs, in queue order.
pub fn notices(events: &[QueuedEvent]) -> Vec<(String, u64)> {
    events
        .iter()
        .map(|e| {
            let t = decode_context_key(&e.context_key).expect("a session-state context key");
            (t.as_str().to_string(), since_of(&e.text))
        })
        .collect()
}
