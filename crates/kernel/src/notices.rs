//! Notices in memory: queueing, the drain of a turn with its durable claim, acknowledgement without a
//! drain, the start-up sweep and reconciliation from durable cursors.

use crate::queues::Holder;
use crate::{Kernel, Signal};
use sessionwatch_core::{Acknowledged, AgentSessionKey, Millis, Notice, QueuedEvent, is_self_caused};
use sessionwatch_store::{SessionStore, SignalLog};
use std::collections::HashMap;
use std::sync::atomic::Ordering;

impl<S: SignalLog> Kernel<S> {
    /// Re-creates every pending notice from the durable cursors. Answers how many were queued.
    pub async fn sweep(&self) -> usize {
        let now = self.now();
        let store = self.inner.config.store_identity.clone();
        let swept = match &self.inner.config.host_id {
            None => self.inner.store.sweep(store, now).await,
            Some(host) => self.inner.store.sweep_for_host(store, Some(host.clone()), now).await,
        };
        match swept {
            Ok(notices) => {
                let n = notices.len();
                for notice in notices {
                    self.deliver(&notice, false);
                }
                n
            }
            Err(e) => {
                tracing::warn!(error = %e, "start-up sweep failed");
                0
            }
        }
    }

    /// Queues the notice for its watcher; wakes a main-session watcher unless coalesced. Answers
    /// whether the queue changed.
    pub(crate) fn deliver(&self, notice: &Notice, allow_wake: bool) -> bool {
        // A watcher has at most one line per target: a newer text for the same target replaces the old
        // one in place.
        let added = self.inner.queues.push_notice(notice);
        if let Some(text) = &added {
            self.inner.metrics.notices_queued.fetch_add(1, Ordering::Relaxed);
            let session = notice.watcher.as_str().to_string();
            let _ = self.inner.signals.send(Signal::Notice { session, text: text.clone() });
        }
        if allow_wake && notice.wakes() {
            self.wake(notice.watcher.as_str(), &notice.target);
        }
        added.is_some()
    }

    /// After a material change of `target` by `actor` (`notified`: the watchers it notified anew):
    /// every other watcher that still holds a queued notice about the target is reminded with a
    /// coalesced wake, as a repeated delivery of the same notice would do.
    ///
    /// A burst reminds the same holders on every event: one clock read and one look at the wake state
    /// for all of them, and a holder whose wake would only be absorbed (woken within the window, its
    /// trailing wake already scheduled) is passed over until its window ends. Once every holder is
    /// absorbed, the next events pass over them all at once ([`Queues::notice_holders_where`]).
    pub(crate) fn remind(&self, target: &AgentSessionKey, actor: Option<&str>, notified: &[Notice]) {
        let now = self.now();
        let window = self.inner.config.wake_coalesce_ms;
        let due = {
            // Lock order: the wake state, then the queues (`notice_holders_where` takes them).
            let last = self.inner.last_wake.lock().unwrap_or_else(|p| p.into_inner());
            let trailing = self.inner.trailing_wakes.lock().unwrap_or_else(|p| p.into_inner());
            // Absorbed until its window ends, unless its trailing wake ends first (which counts in
            // `trailing.ended`).
            let absorbed_until = |watcher: &str| {
                let at = *last.get(watcher)?;
                (trailing.sessions.contains(watcher) && self.within_window(at, now)).then_some(at + window)
            };
            self.inner.queues.notice_holders_where(target.as_str(), now, trailing.ended, |watcher, notice| {
                if !notice.wakes {
                    return Holder::QuietUntil(Millis::MAX);
                }
                if let Some(until) = absorbed_until(watcher) {
                    return Holder::QuietUntil(until);
                }
                if notified.iter().any(|n| n.watcher.as_str() == watcher) || is_self_caused(actor, watcher) {
                    Holder::Passed
                } else {
                    Holder::Kept
                }
            })
        };
        for watcher in due {
            self.wake_at(&watcher, target, now);
        }
    }

    /// Delivers every pending notice of the watchers hosted here (`host_id`; all watchers without one)
    /// from the durable cursors. Read-only: a notice already queued is not queued again, and only a
    /// newly queued notice wakes. Answers how many were newly queued.
    pub async fn reconcile_hosted(&self) -> usize {
        self.reconcile(None).await
    }

    /// [`Kernel::reconcile_hosted`] for one watcher (what a cross-gateway wake-up names).
    pub async fn reconcile_watcher(&self, watcher: &str) -> usize {
        self.reconcile(Some(watcher.to_string())).await
    }

    async fn reconcile(&self, watcher: Option<String>) -> usize {
        let _guard = self.inner.ack_lock.lock().await;
        self.inner.metrics.reconciles.fetch_add(1, Ordering::Relaxed);
        let pending = self
            .inner
            .store
            .pending_notices_for_host(
                self.inner.config.store_identity.clone(),
                self.inner.config.host_id.clone(),
                watcher,
            )
            .await;
        match pending {
            Ok(notices) => notices.iter().filter(|n| self.deliver_new(n)).count(),
            Err(e) => {
                tracing::warn!(error = %e, "reconciling hosted watchers failed");
                0
            }
        }
    }

    /// Queues the notice; wakes (as usual) only when it was not already queued.
    fn deliver_new(&self, notice: &Notice) -> bool {
        let added = self.deliver(notice, false);
        if added && notice.wakes() {
            self.wake(notice.watcher.as_str(), &notice.target);
        }
        added
    }

    /// The store recorded that this gateway serves `key` (a turn's [`SessionStore::record_turn`]): with
    /// a `host_id`, delivers any notice pending for it, e.g. one pushed to its previous host.
    pub async fn served(&self, key: &str) {
        if self.inner.config.host_id.is_some() {
            self.reconcile_watcher(key).await;
        }
    }

    /// Queues a system event that is not a watch notice (e.g. the Home creation notice). No wake.
    pub fn enqueue(&self, session: &str, event: QueuedEvent, replace: bool) -> bool {
        let text = event.text.clone();
        let added = self.inner.queues.push(session, event, replace);
        if added {
            let _ = self.inner.signals.send(Signal::Notice { session: session.to_string(), text });
        }
        added
    }

    /// Drops the session's queued events without acknowledging anything (its incarnation ended).
    pub fn discard_queue(&self, session: &str) {
        self.inner.queues.forget(session);
    }

    /// The session's queued system events, without draining them; a session-state notice carries its
    /// target and `changesSince` ([`QueuedEvent::notice`]).
    pub fn peek(&self, session: &str) -> Vec<QueuedEvent> {
        self.inner.queues.peek(session)
    }

    pub fn queue_depths(&self) -> Vec<(String, usize)> {
        self.inner.queues.depths()
    }

    /// Begins a turn of `session`: drains its queue and claims every drained session-state notice from
    /// its durable cursor ([`sessionwatch_core::Cursor::claim`]), acknowledging it through the present.
    /// Only claimed notices are delivered, at the cursor's current `changesSince`: one that another
    /// gateway already delivered, or whose watch is gone, is dropped. Other system events pass through.
    ///
    /// When the store cannot claim, no notice is delivered: they go back into the queue as they were and
    /// their cursors stay pending, so the next drain (or a restart's sweep) delivers them once the store
    /// answers. Delivering them unclaimed would repeat them at every drain point until then (and a
    /// restart would repeat them again), which is the spam this product exists to prevent.
    pub async fn drain(&self, session: &str) -> Vec<QueuedEvent> {
        let _guard = self.inner.ack_lock.lock().await;
        let drained = self.inner.queues.drain(session);
        let targets: Vec<AgentSessionKey> =
            drained.iter().filter_map(|e| e.notice.as_ref().map(|n| n.target.clone())).collect();
        let Some(watcher) = AgentSessionKey::parse(session).filter(|_| !targets.is_empty()) else {
            return drained;
        };
        let Some(claimed) = self.claim(&watcher, targets).await else {
            let (notices, others): (Vec<_>, Vec<_>) = drained.into_iter().partition(|e| e.notice.is_some());
            self.inner.metrics.notices_claim_failed.fetch_add(notices.len() as u64, Ordering::Relaxed);
            for e in notices {
                self.inner.queues.push(session, e, true);
            }
            return others;
        };
        let mut delivered: HashMap<String, QueuedEvent> =
            claimed.delivered.iter().map(|n| (n.context_key(), QueuedEvent::from(n))).collect();
        drained
            .into_iter()
            .filter_map(|e| match e.notice {
                None => Some(e),
                Some(_) => delivered.remove(&e.context_key),
            })
            .collect()
    }

    /// Acknowledges `watcher`'s notices about `targets` without draining its queue: for a caller that
    /// showed the agent the change another way. Each is claimed from its durable cursor exactly as a
    /// drain claims it (and its queued line removed). Answers the notices claimed, at the `changesSince`
    /// they were pending at; none when the store fails (they stay pending and queued).
    pub async fn acknowledge(&self, watcher: &AgentSessionKey, targets: &[AgentSessionKey]) -> Vec<Notice> {
        let _guard = self.inner.ack_lock.lock().await;
        let taken: Vec<QueuedEvent> = self
            .inner
            .queues
            .peek(watcher.as_str())
            .into_iter()
            .filter(|e| e.notice.as_ref().is_some_and(|n| targets.contains(&n.target)))
            .collect();
        for e in &taken {
            self.inner.queues.remove(watcher.as_str(), &e.context_key);
        }
        match self.claim(watcher, targets.to_vec()).await {
            Some(claimed) => claimed.delivered,
            None => {
                // Nothing was claimed: the lines go back as they were.
                for e in taken {
                    self.inner.queues.push(watcher.as_str(), e, true);
                }
                vec![]
            }
        }
    }

    /// The durable claim behind a drain and an acknowledgement (the caller holds `ack_lock`): counts and
    /// signals. `None` when the store failed (logged).
    async fn claim(&self, watcher: &AgentSessionKey, targets: Vec<AgentSessionKey>) -> Option<Acknowledged> {
        let asked = targets.len();
        let now = self.now();
        let store = self.inner.config.store_identity.clone();
        let claimed = match self.inner.store.acknowledge(watcher.clone(), targets, store, now).await {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::warn!(error = %e, session = %watcher, "acknowledging notices failed");
                return None;
            }
        };
        let m = &self.inner.metrics;
        m.notices_acknowledged.fetch_add(claimed.delivered.len() as u64, Ordering::Relaxed);
        m.notices_dropped_stale.fetch_add((asked - claimed.delivered.len()) as u64, Ordering::Relaxed);
        if !claimed.delivered.is_empty() {
            let notices = claimed.delivered.len();
            let _ = self.inner.signals.send(Signal::Acknowledged { session: watcher.to_string(), notices });
        }
        Some(claimed)
    }
}

/// What needs the session rows besides the log.
impl<S: SignalLog + SessionStore> Kernel<S> {
    /// A gateway serves `key` (an inbound turn, a turn, a stream): records that this gateway hosts it
    /// (when `host_id` is set) and delivers any notice pending for it, e.g. one pushed to its previous
    /// host.
    pub async fn host_session(&self, key: &str, agent_id: &str) {
        let now = self.now();
        let host = self.inner.config.host_id.clone();
        if let Err(e) = self.inner.store.touch_session(key.to_string(), agent_id.to_string(), host, now).await
        {
            tracing::warn!(error = %e, session = key, "recording the session's host failed");
            return;
        }
        self.served(key).await;
    }
}
