//! Shared fixtures: a database in a temp dir, a manual clock, and a kernel that can be restarted.

use sessionwatch_core::{
    HumanTurnSource, Limit, ManualClock, Millis, NewEvent, Provenance, QueuedEvent, RecordPolicy,
    context_key, notice_text,
};
use sessionwatch_kernel::{Kernel, KernelConfig, RecordOutcome};
use sessionwatch_store::{RetentionPolicy, SignalLog, SqliteOptions, SqliteStore};
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

/// A started kernel on a fresh store in which `watcher` watches `target` (explicitly).
pub async fn watching(watcher: &str, target: &str) -> (Env, Kernel<SqliteStore>) {
    let env = Env::new();
    let k = env.start().await;
    assert!(k.register_watch(watcher, target, Provenance::Explicit).await.is_watching());
    (env, k)
}

/// A drained or peeked queue as (target, since) pairs, in queue order, from the typed notices; each
/// text must say exactly what its typed notice says.
pub fn notices(events: &[QueuedEvent]) -> Vec<(String, u64)> {
    events
        .iter()
        .map(|e| {
            let n = e.notice.as_ref().expect("a session-state notice");
            assert_eq!(e.text, notice_text(&n.target, n.since), "the text says what the notice is");
            assert_eq!(e.context_key, context_key(&n.target));
            (n.target.as_str().to_string(), n.since)
        })
        .collect()
}

/// A person's message into `target` (agent `main`, from Telegram), recorded as the gateway records a
/// human turn.
pub async fn human_turn<S: SignalLog>(k: &Kernel<S>, target: &str) -> RecordOutcome {
    k.record(
        NewEvent::human_message(target, "main", "telegram", None),
        RecordPolicy::human_turn(HumanTurnSource::Gateway, None),
    )
    .await
}

/// [`human_turn`], which must be recorded: answers its sequence.
pub async fn human_sequence<S: SignalLog>(k: &Kernel<S>, target: &str) -> u64 {
    match human_turn(k, target).await {
        RecordOutcome::Recorded(e) => e.sequence,
        other => panic!("expected Recorded, got {other:?}"),
    }
}

/// The sequences of every event of `key` (agent `main`) the log answers, read page by page from 0.
pub async fn all_sequences(k: &Kernel<SqliteStore>, key: &str) -> Vec<u64> {
    let mut seqs = vec![];
    let mut since = 0;
    loop {
        let page = k.changes_since(key, "main", since, Limit::MAX).await.expect("page");
        seqs.extend(page.events.iter().map(|e| e.sequence));
        since = page.next_since(since);
        if !page.truncated {
            return seqs;
        }
    }
}
