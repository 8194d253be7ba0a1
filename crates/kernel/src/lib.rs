//! The kernel: the signal log, watches and notices put together for a running process.
//!
//! It owns what lives in memory (each session's bounded system-event queue, wake coalescing, the prune
//! schedule) and drives the [`Store`] for everything durable. Recording is best effort: no method here
//! returns an error that could break the caller's turn; failures are logged and reported as values.

#[cfg(feature = "bench")]
pub mod bench;
#[cfg(feature = "bench")]
pub mod bench_pg;
mod queues;

use queues::Queues;
use sessionwatch_core::{
    AgentSessionKey, ChangesPage, Clock, HOUR_MS, Limit, Millis, NewEvent, Notice, Provenance, QueuedEvent,
    StoredEvent, classify_session_kind, decode_context_key,
};
use sessionwatch_store::{
    AppendOutcome, AppendRequest, Head, HostSignal, NewSession, PruneReport, RetentionPolicy, Store,
    StoreError,
};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::{broadcast, mpsc};

pub use sessionwatch_store as store;

#[derive(Clone, Debug)]
pub struct KernelConfig {
    /// The identity of the store the watchers hosted here live in (cursor store binding).
    pub store_identity: String,
    pub retention: RetentionPolicy,
    /// Pruning runs at most this often after writes (and always at start-up).
    pub prune_interval_ms: Millis,
    /// A main-session watcher is woken at most once per this window.
    pub wake_coalesce_ms: Millis,
    /// `session.mainKey`.
    pub main_key: String,
    /// This gateway's id when several gateways share one database (PostgreSQL). `None` (the default,
    /// and what SQLite uses): every notice is delivered here. `Some(id)`: notices of watchers hosted by
    /// another gateway are pushed to it, the start-up sweep takes only the watchers hosted here, and a
    /// listener reconciles pushed notices (see [`Kernel::spawn_listener`]). Every gateway sharing the
    /// database must use the same `store_identity`.
    pub host_id: Option<String>,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            store_identity: "default".into(),
            retention: RetentionPolicy::default(),
            prune_interval_ms: HOUR_MS,
            wake_coalesce_ms: 20_000,
            main_key: "main".into(),
            host_id: None,
        }
    }
}

/// What the kernel tells listeners (the live stream, other gateways).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Wake the session now (main-session watchers only).
    Wake { session: String, reason: String },
    /// A new entry was queued for the session.
    Notice { session: String, text: String },
    /// A message was added to the session's transcript or inbox (no content: the id and role only).
    Message { session: String, id: i64, role: String, run_id: Option<String> },
    /// An event was appended to the session's log (its new state version; no content).
    Changed { session: String, sequence: u64 },
    /// A turn of the session took delivery of its pending notices (how many).
    Acknowledged { session: String, notices: usize },
}

impl Signal {
    /// The session the signal is about.
    pub fn session(&self) -> &str {
        match self {
            Signal::Wake { session, .. }
            | Signal::Notice { session, .. }
            | Signal::Message { session, .. }
            | Signal::Changed { session, .. }
            | Signal::Acknowledged { session, .. } => session,
        }
    }
}

/// The outcome of a best-effort append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordOutcome {
    Recorded(StoredEvent),
    /// The dedupe key was already recorded: the existing row, nothing changed.
    Duplicate(StoredEvent),
    /// A human turn on a session nobody watches and without a parent: nothing written.
    Unwatched,
    /// The append failed (logged); the caller's turn goes on.
    NotRecorded(String),
}

impl RecordOutcome {
    pub fn event(&self) -> Option<&StoredEvent> {
        match self {
            RecordOutcome::Recorded(e) | RecordOutcome::Duplicate(e) => Some(e),
            _ => None,
        }
    }
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    pub events_recorded: AtomicU64,
    pub events_not_recorded: AtomicU64,
    pub notices_queued: AtomicU64,
    pub notices_acknowledged: AtomicU64,
    pub notices_reopened: AtomicU64,
    /// Drained notices their durable cursor no longer had pending (delivered elsewhere, watch gone).
    pub notices_dropped_stale: AtomicU64,
    pub wakes: AtomicU64,
    /// Reconciliations from durable cursors (after a cross-gateway wake-up or a (re)connect).
    pub reconciles: AtomicU64,
    /// Times the cross-gateway listener reported it was (again) listening.
    pub listener_connects: AtomicU64,
}

struct Inner<S> {
    store: S,
    clock: Arc<dyn Clock>,
    config: KernelConfig,
    queues: Queues,
    signals: broadcast::Sender<Signal>,
    last_prune: Mutex<Option<Millis>>,
    pruning: AtomicBool,
    last_wake: Mutex<HashMap<String, Millis>>,
    trailing_wakes: Mutex<std::collections::HashSet<String>>,
    metrics: Metrics,
    /// Held while draining+acknowledging and while reconciling, so a reconcile never re-queues a notice
    /// that a drain is acknowledging.
    ack_lock: tokio::sync::Mutex<()>,
    listener: Mutex<Option<AbortOnDrop>>,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Cheap to clone; clones share state.
pub struct Kernel<S> {
    inner: Arc<Inner<S>>,
}

impl<S> Clone for Kernel<S> {
    fn clone(&self) -> Self {
        Kernel { inner: self.inner.clone() }
    }
}

impl<S: Store> Kernel<S> {
    /// Builds the kernel and runs the start-up sweep (re-creating pending notices from durable cursors),
    /// then a forced prune.
    pub async fn start(store: S, clock: Arc<dyn Clock>, config: KernelConfig) -> Kernel<S> {
        let (signals, _) = broadcast::channel(4096);
        let kernel = Kernel {
            inner: Arc::new(Inner {
                store,
                clock,
                config,
                queues: Queues::default(),
                signals,
                last_prune: Mutex::new(None),
                pruning: AtomicBool::new(false),
                last_wake: Mutex::new(HashMap::new()),
                trailing_wakes: Mutex::new(std::collections::HashSet::new()),
                metrics: Metrics::default(),
                ack_lock: tokio::sync::Mutex::new(()),
                listener: Mutex::new(None),
            }),
        };
        kernel.sweep().await;
        if let Err(e) = kernel.prune_now().await {
            tracing::warn!(error = %e, "start-up prune failed");
        }
        if let Some(host) = kernel.inner.config.host_id.clone()
            && let Some(rx) = kernel.inner.store.listen_host(host)
        {
            kernel.spawn_listener(rx);
        }
        kernel
    }

    pub fn store(&self) -> &S {
        &self.inner.store
    }

    pub fn config(&self) -> &KernelConfig {
        &self.inner.config
    }

    pub fn now(&self) -> Millis {
        self.inner.clock.now_ms()
    }

    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Signal> {
        self.inner.signals.subscribe()
    }

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

    /// Appends an event, best effort. `producer_watchers` are watchers the producer knows (the spawner);
    /// `only_if_watched` makes the append write nothing when no cursor targets the session.
    pub async fn record(
        &self,
        event: NewEvent,
        producer_watchers: Vec<String>,
        only_if_watched: bool,
    ) -> RecordOutcome {
        let now = self.now();
        let kind = event.kind;
        let key = event.session_key.clone();
        let req = AppendRequest {
            event,
            producer_watchers,
            only_if_watched,
            watcher_store: self.inner.config.store_identity.clone(),
            host_id: self.inner.config.host_id.clone(),
        };
        match self.inner.store.append(req, now).await {
            Ok(AppendOutcome::Recorded { event, notices }) => {
                self.inner.metrics.events_recorded.fetch_add(1, Ordering::Relaxed);
                let _ = self.inner.signals.send(Signal::Changed { session: key, sequence: event.sequence });
                for notice in &notices {
                    self.deliver(notice, true);
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

    /// A human turn reached `key`: recorded only when the session has a parent (who then watches it) or
    /// some cursor targets it.
    pub async fn record_human_turn(
        &self,
        key: &str,
        agent_id: &str,
        channel: &str,
        parent: Option<&str>,
        run_id: Option<String>,
    ) -> RecordOutcome {
        let event = NewEvent::human_message(key, agent_id, channel, None).with_run_id(run_id);
        let watchers: Vec<String> = parent.map(str::to_string).into_iter().collect();
        let only_if_watched = watchers.is_empty();
        self.record(event, watchers, only_if_watched).await
    }

    /// Queues the notice for its watcher; wakes a main-session watcher unless coalesced. Answers
    /// whether the queue changed.
    fn deliver(&self, notice: &Notice, allow_wake: bool) -> bool {
        let watcher = notice.watcher.as_str().to_string();
        let text = notice.text();
        // A watcher has at most one line per target: a newer text for the same target replaces the old
        // one in place. (A material event recorded between a drain and its acknowledgement queues a line
        // with the old `changesSince`; the reopen after the acknowledgement must not add a second one.)
        let added = self.inner.queues.push(&watcher, text.clone(), notice.context_key(), true);
        if added {
            self.inner.metrics.notices_queued.fetch_add(1, Ordering::Relaxed);
            let _ = self.inner.signals.send(Signal::Notice { session: watcher.clone(), text });
        }
        if allow_wake && notice.wakes() {
            self.wake(&watcher, &format!("session-state:{}", notice.target));
        }
        added
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
            self.wake(notice.watcher.as_str(), &format!("session-state:{}", notice.target));
        }
        added
    }

    /// Runs the cross-gateway listener: on [`HostSignal::Listening`] (start and every reconnect) every
    /// hosted watcher is reconciled, on [`HostSignal::Watcher`] that watcher (bursts are coalesced).
    /// [`Kernel::start`] calls it when `host_id` is set and the store can push; the task stops when the
    /// kernel is dropped or the stream ends.
    pub fn spawn_listener(&self, mut signals: mpsc::Receiver<HostSignal>) {
        let weak: Weak<Inner<S>> = Arc::downgrade(&self.inner);
        let task = tokio::spawn(async move {
            while let Some(first) = signals.recv().await {
                let mut all = false;
                let mut watchers = BTreeSet::new();
                let mut next = Some(first);
                while let Some(signal) = next {
                    match signal {
                        HostSignal::Listening => all = true,
                        HostSignal::Watcher(w) => _ = watchers.insert(w),
                    }
                    next = signals.try_recv().ok();
                }
                let Some(inner) = weak.upgrade() else { return };
                let kernel = Kernel { inner };
                if all {
                    kernel.inner.metrics.listener_connects.fetch_add(1, Ordering::Relaxed);
                    kernel.reconcile_hosted().await;
                } else {
                    for w in watchers {
                        kernel.reconcile_watcher(&w).await;
                    }
                }
            }
        });
        *self.inner.listener.lock().unwrap_or_else(|p| p.into_inner()) = Some(AbortOnDrop(task));
    }

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
        if self.inner.config.host_id.is_some() {
            self.reconcile_watcher(key).await;
        }
    }

    /// Wakes at once unless the session was woken within the coalescing window; then one trailing wake
    /// goes out when the window ends, if the session still has something queued by then.
    fn wake(&self, session: &str, reason: &str) {
        let now = self.now();
        let mut last = self.inner.last_wake.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = last.get(session).copied()
            && now - at < self.inner.config.wake_coalesce_ms
        {
            drop(last);
            let remaining = (self.inner.config.wake_coalesce_ms - (now - at)).max(0) as u64;
            self.schedule_trailing_wake(session, reason, remaining);
            return;
        }
        last.insert(session.to_string(), now);
        drop(last);
        self.send_wake(session, reason);
    }

    fn schedule_trailing_wake(&self, session: &str, reason: &str, after_ms: u64) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else { return };
        if !self.inner.trailing_wakes.lock().unwrap_or_else(|p| p.into_inner()).insert(session.to_string()) {
            return; // one is already scheduled for this window
        }
        let kernel = self.clone();
        let (session, reason) = (session.to_string(), reason.to_string());
        handle.spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(after_ms)).await;
            kernel.inner.trailing_wakes.lock().unwrap_or_else(|p| p.into_inner()).remove(&session);
            if kernel.inner.queues.peek(&session).is_empty() {
                return; // a turn drained it meanwhile: nothing to wake for
            }
            let now = kernel.now();
            kernel.inner.last_wake.lock().unwrap_or_else(|p| p.into_inner()).insert(session.clone(), now);
            kernel.send_wake(&session, &reason);
        });
    }

    fn send_wake(&self, session: &str, reason: &str) {
        self.inner.metrics.wakes.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .inner
            .signals
            .send(Signal::Wake { session: session.to_string(), reason: reason.to_string() });
    }

    /// Publishes a signal to every subscriber (the gateway's transcript messages).
    pub fn publish(&self, signal: Signal) {
        let _ = self.inner.signals.send(signal);
    }

    /// Queues a non-watch system event (e.g. the Home creation notice). No wake.
    pub fn enqueue(&self, session: &str, text: String, context_key: String, replace: bool) -> bool {
        let added = self.inner.queues.push(session, text.clone(), context_key, replace);
        if added {
            let _ = self.inner.signals.send(Signal::Notice { session: session.to_string(), text });
        }
        added
    }

    /// Drops the session's queued events without acknowledging anything (its incarnation ended).
    pub fn discard_queue(&self, session: &str) {
        self.inner.queues.forget(session);
    }

    /// The session's queued system events, without draining them.
    pub fn peek(&self, session: &str) -> Vec<QueuedEvent> {
        self.inner.queues.peek(session)
    }

    pub fn queue_depths(&self) -> Vec<(String, usize)> {
        self.inner.queues.depths()
    }

    /// Begins a turn of `session`: drains its queue and claims every drained session-state notice from
    /// its durable cursor ([`sessionwatch_core::Cursor::claim`]). Only claimed notices are delivered, at
    /// the cursor's current `changesSince`: one that another gateway already delivered, or whose watch
    /// is gone, is dropped. A notice whose target changed again meanwhile re-opens exactly once, queued
    /// for the next turn. Other system events pass through.
    pub async fn drain(&self, session: &str) -> Vec<QueuedEvent> {
        let _guard = self.inner.ack_lock.lock().await;
        let drained = self.inner.queues.drain(session);
        let targets: Vec<AgentSessionKey> =
            drained.iter().filter_map(|e| decode_context_key(&e.context_key)).collect();
        let Some(watcher) = AgentSessionKey::parse(session).filter(|_| !targets.is_empty()) else {
            return drained;
        };
        let targets_len = targets.len();
        let now = self.now();
        let claimed = match self
            .inner
            .store
            .acknowledge(watcher, targets, self.inner.config.store_identity.clone(), now)
            .await
        {
            Ok(claimed) => claimed,
            Err(e) => {
                // Delivered anyway and the cursors stay pending: at least once while the store fails
                // (the next start-up or material event re-notifies), never lost.
                tracing::warn!(error = %e, session, "acknowledging drained notices failed");
                return drained;
            }
        };
        let m = &self.inner.metrics;
        m.notices_acknowledged.fetch_add(claimed.delivered.len() as u64, Ordering::Relaxed);
        if !claimed.delivered.is_empty() {
            let notices = claimed.delivered.len();
            let _ = self.inner.signals.send(Signal::Acknowledged { session: session.to_string(), notices });
        }
        for notice in &claimed.reopened {
            m.notices_reopened.fetch_add(1, Ordering::Relaxed);
            self.deliver(notice, false);
        }
        let mut delivered: HashMap<String, String> =
            claimed.delivered.iter().map(|n| (n.context_key(), n.text())).collect();
        let out: Vec<QueuedEvent> = drained
            .into_iter()
            .filter_map(|e| match decode_context_key(&e.context_key) {
                None => Some(e),
                Some(_) => delivered.remove(&e.context_key).map(|text| QueuedEvent { text, ..e }),
            })
            .collect();
        m.notices_dropped_stale.fetch_add((targets_len - claimed.delivered.len()) as u64, Ordering::Relaxed);
        out
    }

    /// Registers `watcher` on `target` at the target's current head. Answers whether a watch is in place.
    pub async fn register_watch(&self, watcher: &str, target: &str, provenance: Provenance) -> bool {
        let (Some(w), Some(t)) = (AgentSessionKey::parse(watcher), AgentSessionKey::parse(target)) else {
            return false;
        };
        if w == t {
            return false;
        }
        self.ensure_session(&w).await;
        let now = self.now();
        match self
            .inner
            .store
            .register_watch(w, t, provenance, self.inner.config.store_identity.clone(), now)
            .await
        {
            Ok(outcome) => outcome.registered,
            Err(e) => {
                tracing::warn!(error = %e, watcher, target, "watch registration failed");
                false
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

    /// Drops a watch and any notice it has queued.
    pub async fn unwatch(&self, watcher: &str, target: &str) -> bool {
        let (Some(w), Some(t)) = (AgentSessionKey::parse(watcher), AgentSessionKey::parse(target)) else {
            return false;
        };
        self.inner.queues.remove(w.as_str(), &sessionwatch_core::context_key(&t));
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
                self.inner.queues.remove(watcher, &sessionwatch_core::context_key(&t));
            }
        }
        Ok(targets.len())
    }

    /// A session was deleted: its history, head and every cursor on either side go, with queued notices.
    pub async fn delete_session(&self, key: &str, agent_id: &str) -> Result<(), StoreError> {
        self.inner.store.delete_session_state(key.to_string(), agent_id.to_string()).await?;
        self.inner.queues.forget(key);
        if let Some(t) = AgentSessionKey::parse(key) {
            self.inner.queues.remove_everywhere(&sessionwatch_core::context_key(&t));
        }
        Ok(())
    }

    /// `changesSince`: a read failure answers an empty page, never an error.
    pub async fn changes_since(&self, key: &str, agent_id: &str, since: u64, limit: Limit) -> ChangesPage {
        match self.inner.store.changes_since(key.to_string(), agent_id.to_string(), since, limit).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, session = key, "changesSince read failed");
                ChangesPage::empty()
            }
        }
    }

    /// The session's head (state version) and floor; zeros on a read failure.
    pub async fn head(&self, key: &str, agent_id: &str) -> Head {
        self.inner.store.head(key.to_string(), agent_id.to_string()).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, session = key, "head read failed");
            Head::default()
        })
    }

    pub async fn state_versions(&self, sessions: Vec<(String, String)>) -> HashMap<(String, String), u64> {
        self.inner.store.state_versions(sessions).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "state versions read failed");
            HashMap::new()
        })
    }

    /// Prunes now (forced). Watches retention removed take their queued notices with them, as an
    /// unwatch, a reset or a delete does.
    pub async fn prune_now(&self) -> Result<PruneReport, StoreError> {
        let now = self.now();
        let report = self.inner.store.prune(self.inner.config.retention, now).await;
        *self.inner.last_prune.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
        if let Ok(r) = &report {
            for (watcher, target) in &r.cursors_expired {
                if let Some(t) = AgentSessionKey::parse(target) {
                    self.inner.queues.remove(watcher, &sessionwatch_core::context_key(&t));
                }
            }
        }
        report
    }

    /// After a write: prune in the background if the last prune is older than the interval.
    fn maybe_schedule_prune(&self, now: Millis) {
        {
            let last = self.inner.last_prune.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| now - at < self.inner.config.prune_interval_ms) {
                return;
            }
        }
        if self.inner.pruning.swap(true, Ordering::SeqCst) {
            return;
        }
        let kernel = self.clone();
        let run = async move {
            if let Err(e) = kernel.prune_now().await {
                tracing::warn!(error = %e, "scheduled prune failed");
            }
            kernel.inner.pruning.store(false, Ordering::SeqCst);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(run);
            }
            Err(_) => self.inner.pruning.store(false, Ordering::SeqCst),
        }
    }
}
