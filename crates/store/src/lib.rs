//! The durable state of sessionwatch: the signal log, per-session heads and floors, watch cursors and
//! sessions. This is the only crate that speaks SQL. Every backend implements [`Store`] with the same
//! behaviour, checked by one conformance suite (`tests/it/conformance.rs`).

mod error;
mod payload;
pub mod sqlite;
mod types;

pub use error::StoreError;
pub use sqlite::{SqliteOptions, SqliteStore, Synchronous};
pub use types::*;

use sessionwatch_core::{AgentSessionKey, ChangesPage, Cursor, Limit, Millis, Notice, Provenance};
use std::collections::HashMap;
use std::future::Future;

pub type Result<T> = std::result::Result<T, StoreError>;

/// One interface over SQLite and PostgreSQL. Times are passed in (`now`) so callers own the clock.
pub trait Store: Send + Sync + 'static {
    /// Appends one event in one write transaction: dedupe, head bump, cursor seeding/updates.
    fn append(&self, req: AppendRequest, now: Millis) -> impl Future<Output = Result<AppendOutcome>> + Send;

    /// Registers `watcher` on `target` at the target's current head (see `decide_registration`).
    fn register_watch(
        &self,
        watcher: AgentSessionKey,
        target: AgentSessionKey,
        provenance: Provenance,
        watcher_store: String,
        now: Millis,
    ) -> impl Future<Output = Result<RegisterOutcome>> + Send;

    /// Drops a watch; its pending notice goes with it. Answers whether a cursor existed.
    fn unwatch(&self, watcher: String, target: String) -> impl Future<Output = Result<bool>> + Send;

    /// Acknowledges drained notices of `watcher` for `targets`; answers the reopened notices.
    fn acknowledge(
        &self,
        watcher: AgentSessionKey,
        targets: Vec<AgentSessionKey>,
        watcher_store: String,
        now: Millis,
    ) -> impl Future<Output = Result<Vec<Notice>>> + Send;

    /// Start-up recovery: every pending cursor of an existing watcher with a matching store re-opens its
    /// notice (`N = M`).
    fn sweep(&self, watcher_store: String, now: Millis) -> impl Future<Output = Result<Vec<Notice>>> + Send;

    fn changes_since(
        &self,
        session_key: String,
        agent_id: String,
        since: u64,
        limit: Limit,
    ) -> impl Future<Output = Result<ChangesPage>> + Send;

    fn head(&self, session_key: String, agent_id: String) -> impl Future<Output = Result<Head>> + Send;

    /// State versions of many sessions in one query; sessions without a head are absent.
    fn state_versions(
        &self,
        sessions: Vec<(String, String)>,
    ) -> impl Future<Output = Result<HashMap<(String, String), u64>>> + Send;

    fn prune(&self, policy: RetentionPolicy, now: Millis)
    -> impl Future<Output = Result<PruneReport>> + Send;

    fn cursor(&self, watcher: String, target: String) -> impl Future<Output = Result<Option<Cursor>>> + Send;

    fn cursors_of_watcher(
        &self,
        watcher: String,
    ) -> impl Future<Output = Result<Vec<(String, Cursor)>>> + Send;

    /// Removes every cursor held by `watcher` (a reset); answers the targets it watched.
    fn clear_watcher(&self, watcher: String) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// Deletes a session's history, head and every cursor on either side of it.
    fn delete_session_state(
        &self,
        session_key: String,
        agent_id: String,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Creates the session row if missing (idempotent). Answers the row and whether it was created.
    fn ensure_session(
        &self,
        new: NewSession,
        now: Millis,
    ) -> impl Future<Output = Result<(SessionRow, bool)>> + Send;
}
