//! Recording events (best effort) and reading the log back.

use crate::{Kernel, Signal};
use sessionwatch_core::{
    AgentSessionKey, ChangesPage, Cursor, EventKind, Limit, Millis, NewEvent, RecordPolicy, StoredEvent,
};
use sessionwatch_store::{
    AppendOutcome, AppendRequest, GroupCommits, Head, SignalLog, StoreError, WatchEdge,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The outcome of a best-effort append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordOutcome {
    /// The event as recorded, shared with the store's tail cache (no copy for a caller that drops it).
    Recorded(Arc<StoredEvent>),
    /// The dedupe key was already recorded: the existing row, nothing changed.
    Duplicate(Box<StoredEvent>),
    /// The policy asked for nothing to be written unless watched, and nobody watches the session.
    Unwatched,
    /// The append failed (logged); the caller's turn goes on.
    NotRecorded(String),
}

impl RecordOutcome {
    pub fn event(&self) -> Option<&StoredEvent> {
        match self {
            RecordOutcome::Recorded(e) => Some(e),
            RecordOutcome::Duplicate(e) => Some(e),
            _ => None,
        }
    }
}

impl<S: SignalLog> Kernel<S> {
    /// Appends an event, best effort, under `policy` (who else learns of it, whether it is written
    /// when unwatched: [`RecordPolicy`]). Notices it causes are queued (and may wake) before this
    /// answers.
    pub async fn record(&self, event: NewEvent, policy: RecordPolicy) -> RecordOutcome {
        let now = self.now();
        let req = self.append_request(event, policy);
        let (kind, key) = (req.event.kind, req.event.session_key.clone());
        let result = self.inner.store.append(req, now).await;
        self.recorded(kind, key, result, now)
    }

    /// The append of `event` under `policy` from this gateway, for a store write that carries it (a
    /// turn's, [`sessionwatch_store::SessionStore::record_turn`]); its result goes to [`Kernel::recorded`].
    pub fn append_request(&self, event: NewEvent, policy: RecordPolicy) -> AppendRequest {
        AppendRequest {
            event,
            policy,
            watcher_store: self.inner.config.store_identity.clone(),
            host_id: self.inner.config.host_id.clone(),
        }
    }

    /// What follows an append of `kind` to session `key` (made at `now`): its notices are queued (and may
    /// wake), the change is signalled, a failure logged and counted.
    pub fn recorded(
        &self,
        kind: EventKind,
        key: String,
        result: Result<AppendOutcome, StoreError>,
        now: Millis,
    ) -> RecordOutcome {
        match result {
            Ok(AppendOutcome::Recorded { event, notices }) => {
                self.inner.metrics.events_recorded.fetch_add(1, Ordering::Relaxed);
                let _ = self.inner.signals.send(Signal::Changed { session: key, sequence: event.sequence });
                for notice in &notices {
                    self.deliver(notice, true);
                }
                if kind.notifies()
                    && let Some(target) = AgentSessionKey::parse(&event.session_key)
                {
                    self.remind(&target, event.actor.id.as_deref(), &notices);
                }
                self.maybe_schedule_prune(now);
                RecordOutcome::Recorded(event)
            }
            Ok(AppendOutcome::Duplicate(e)) => RecordOutcome::Duplicate(e),
            Ok(AppendOutcome::Unwatched) => RecordOutcome::Unwatched,
            Err(e) => {
                self.inner.metrics.events_not_recorded.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, kind = kind.as_str(), session = %key, "event not recorded");
                RecordOutcome::NotRecorded(e.to_string())
            }
        }
    }

    /// `changesSince`, with the head read in the same read as the page. A read failure is an error for
    /// the caller to report (never an invented empty page: a reconciling agent would be told "nothing
    /// changed").
    pub async fn changes_since(
        &self,
        key: &str,
        agent_id: &str,
        since: u64,
        limit: Limit,
    ) -> Result<ChangesPage, StoreError> {
        self.inner
            .store
            .changes_since(key.to_string(), agent_id.to_string(), since, limit)
            .await
            .inspect_err(|e| tracing::warn!(error = %e, session = key, "changesSince read failed"))
    }

    /// The session's head (state version) and floor.
    pub async fn head(&self, key: &str, agent_id: &str) -> Result<Head, StoreError> {
        self.inner
            .store
            .head(key.to_string(), agent_id.to_string())
            .await
            .inspect_err(|e| tracing::warn!(error = %e, session = key, "head read failed"))
    }

    /// The state versions of `sessions` (a session without events is absent).
    pub async fn state_versions(
        &self,
        sessions: Vec<(String, String)>,
    ) -> Result<HashMap<(String, String), u64>, StoreError> {
        self.inner
            .store
            .state_versions(sessions)
            .await
            .inspect_err(|e| tracing::warn!(error = %e, "state versions read failed"))
    }

    /// The durable cursor of `watcher` on `target`, if any.
    pub async fn cursor(&self, watcher: &str, target: &str) -> Result<Option<Cursor>, StoreError> {
        self.inner.store.cursor(watcher.to_string(), target.to_string()).await
    }

    /// The watches with one of `keys` on either end, ordered by (watcher, target), at most `limit`.
    pub async fn watch_edges(&self, keys: Vec<String>, limit: u32) -> Result<Vec<WatchEdge>, StoreError> {
        self.inner.store.watch_edges(keys, limit).await
    }

    /// The store's group commits so far (`/metrics`).
    pub fn group_commits(&self) -> GroupCommits {
        self.inner.store.group_commits()
    }
}
