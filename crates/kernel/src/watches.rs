//! Watches: registration (with its outcome), unwatch, a watcher's reset and a session's deletion.

use crate::Kernel;
use sessionwatch_core::{
    AgentSessionKey, Provenance, RegisterDecision, SkipReason, check_watch_address, classify_session_kind,
    context_key,
};
use sessionwatch_store::{NewSession, SessionStore, SignalLog, StoreError, WatchRequest};

/// What [`Kernel::register_watch`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchOutcome {
    /// A new cursor at the target's head `at`: only later changes notify.
    Seeded { at: u64 },
    /// The watch was in place and is kept as it was, with any pending notice.
    Kept,
    /// An ambient watch became explicit; its positions are kept.
    Upgraded,
    /// Not a watch: a self-watch or an address that is not agent-qualified.
    Refused(SkipReason),
    /// The store failed (logged): no watch was registered.
    Failed(String),
}

impl WatchOutcome {
    /// Whether a watch is in place afterwards.
    pub fn is_watching(&self) -> bool {
        matches!(self, WatchOutcome::Seeded { .. } | WatchOutcome::Kept | WatchOutcome::Upgraded)
    }
}

impl<S: SignalLog> Kernel<S> {
    /// Drops a watch and any notice it has queued.
    pub async fn unwatch(&self, watcher: &str, target: &str) -> bool {
        let (Some(w), Some(t)) = (AgentSessionKey::parse(watcher), AgentSessionKey::parse(target)) else {
            return false;
        };
        self.inner.queues.remove(w.as_str(), &context_key(&t));
        match self.inner.store.unwatch(w.as_str().to_string(), t.as_str().to_string()).await {
            Ok(existed) => existed,
            Err(e) => {
                tracing::warn!(error = %e, watcher, target, "unwatch failed");
                false
            }
        }
    }

    /// A watcher session was reset: all its cursors go, with their queued notices.
    pub async fn reset_watcher(&self, watcher: &str) -> Result<usize, StoreError> {
        let targets = self.inner.store.clear_watcher(watcher.to_string()).await?;
        for t in &targets {
            if let Some(t) = AgentSessionKey::parse(t) {
                self.inner.queues.remove(watcher, &context_key(&t));
            }
        }
        Ok(targets.len())
    }

    /// A session was deleted: its history, head and every cursor on either side go, with queued notices.
    pub async fn delete_session(&self, key: &str, agent_id: &str) -> Result<(), StoreError> {
        self.inner.store.delete_session_state(key.to_string(), agent_id.to_string()).await?;
        self.inner.queues.forget(key);
        if let Some(t) = AgentSessionKey::parse(key) {
            self.inner.queues.remove_everywhere(&context_key(&t));
        }
        Ok(())
    }
}

/// Registration needs the watcher's session row: the sweep restores notices only of watchers that exist.
impl<S: SignalLog + SessionStore> Kernel<S> {
    /// Registers `watcher` on `target` at the target's current head ([`sessionwatch_core::decide_registration`]).
    pub async fn register_watch(&self, watcher: &str, target: &str, provenance: Provenance) -> WatchOutcome {
        if let Err(reason) = check_watch_address(watcher, target) {
            return WatchOutcome::Refused(reason);
        }
        let (Some(w), Some(t)) = (AgentSessionKey::parse(watcher), AgentSessionKey::parse(target)) else {
            return WatchOutcome::Refused(SkipReason::InvalidAddress);
        };
        self.ensure_session(&w).await;
        let now = self.now();
        let req = WatchRequest::new(w, t, provenance, self.inner.config.store_identity.clone());
        match self.inner.store.register_watch(req, now).await {
            Ok(outcome) => match outcome.decision {
                RegisterDecision::Seed(c) => WatchOutcome::Seeded { at: c.last_seen },
                RegisterDecision::Keep => WatchOutcome::Kept,
                RegisterDecision::UpgradeToExplicit => WatchOutcome::Upgraded,
                RegisterDecision::Refused(reason) => WatchOutcome::Refused(reason),
            },
            Err(e) => {
                tracing::warn!(error = %e, watcher, target, "watch registration failed");
                WatchOutcome::Failed(e.to_string())
            }
        }
    }

    /// Creates a bare session row for `key` if none exists (the sweep only restores notices of watchers
    /// that exist).
    async fn ensure_session(&self, key: &AgentSessionKey) {
        let kind = classify_session_kind(key.as_str(), None, &self.inner.config.main_key);
        let new = NewSession {
            session_key: key.as_str().to_string(),
            agent_id: key.agent_id().to_string(),
            session_id: format!("{}-{}", key.agent_id(), self.now()),
            kind: kind.as_str().to_string(),
            ..NewSession::default()
        };
        if let Err(e) = self.inner.store.ensure_session(new, self.now()).await {
            tracing::warn!(error = %e, session = %key, "could not ensure the session row");
        }
    }
}
