//! The kernel: the signal log, watches and notices put together for a running process.
//!
//! It owns what lives in memory (each session's bounded system-event queue, wake coalescing, the prune
//! schedule, the cross-gateway listener) and drives the [`SignalLog`] for everything durable; of the
//! [`SessionStore`](sessionwatch_store::SessionStore) it needs only the watcher's row (registration) and
//! the host record (`host_session`). Nobody else drives the log: the gateway reads it through here. Recording is
//! best effort: no method here returns an error that could break the caller's turn; failures are logged
//! and reported as values. One module per job: `log` (recording and reads), `notices` (queues, drain,
//! acknowledgement, sweep and reconciliation), `watches`, `wake`, `prune`, `listener`.

mod listener;
mod log;
mod notices;
mod prune;
mod queues;
mod wake;
mod watches;

pub use log::RecordOutcome;
pub use watches::WatchOutcome;

use queues::Queues;
use sessionwatch_core::{Clock, HOUR_MS, Millis};
use sessionwatch_store::{RetentionPolicy, SignalLog};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;
use tokio::task::JoinSet;

pub use sessionwatch_core::RecordPolicy;
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

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    pub events_recorded: AtomicU64,
    pub events_not_recorded: AtomicU64,
    pub notices_queued: AtomicU64,
    pub notices_acknowledged: AtomicU64,
    /// Drained notices put back undelivered because the store failed to claim them.
    pub notices_claim_failed: AtomicU64,
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
    /// Told when a background prune ends.
    prune_done: tokio::sync::Notify,
    last_wake: Mutex<foldhash::HashMap<String, Millis>>,
    trailing_wakes: Mutex<TrailingWakes>,
    metrics: Metrics,
    /// Held while draining+acknowledging and while reconciling, so a reconcile never re-queues a notice
    /// that a drain is acknowledging.
    ack_lock: tokio::sync::Mutex<()>,
    /// The background tasks (listener, trailing wakes, scheduled prunes); `None` once shut down.
    tasks: Mutex<Option<JoinSet<()>>>,
}

/// The sessions with a trailing wake scheduled, and how many such wakes have ended (a reminder that
/// found a target's holders quiet holds only while none has: [`queues::Quiet`]).
#[derive(Default)]
struct TrailingWakes {
    sessions: foldhash::HashSet<String>,
    ended: u64,
}

impl TrailingWakes {
    fn end(&mut self, session: &str) {
        self.sessions.remove(session);
        self.ended += 1;
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

impl<S: SignalLog> Kernel<S> {
    /// Builds the kernel and runs the start-up sweep (re-creating pending notices from durable cursors),
    /// then starts a forced prune in the background.
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
                prune_done: tokio::sync::Notify::new(),
                last_wake: Mutex::default(),
                trailing_wakes: Mutex::default(),
                metrics: Metrics::default(),
                ack_lock: tokio::sync::Mutex::new(()),
                tasks: Mutex::new(Some(JoinSet::new())),
            }),
        };
        kernel.sweep().await;
        // The start-up prune runs behind the first requests: its expiry of untouched cursors reads every
        // cursor (568 ms over 1M against 29 ms over 10k, `bench scale`), and nothing waits for it.
        kernel.schedule_prune();
        if let Some(host) = kernel.inner.config.host_id.clone()
            && let Some(rx) = kernel.inner.store.listen_host(host)
        {
            kernel.spawn_listener(rx);
        }
        kernel
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

    /// Publishes a signal to every subscriber (the gateway's transcript messages).
    pub fn publish(&self, signal: Signal) {
        let _ = self.inner.signals.send(signal);
    }

    /// Stops every background task (the cross-gateway listener, trailing wakes, a scheduled prune) and
    /// waits for them to end; none is started afterwards. Durable state needs nothing: what a stopped
    /// task would have done is re-derived from the store at the next start.
    pub async fn shutdown(&self) {
        let tasks = self.inner.tasks.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut tasks) = tasks {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
    }

    /// Whether [`Kernel::shutdown`] ran.
    pub fn is_shut_down(&self) -> bool {
        self.inner.tasks.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// Runs `task` in the background unless the kernel was shut down or there is no runtime. Answers
    /// whether it was started.
    fn spawn_background(&self, task: impl Future<Output = ()> + Send + 'static) -> bool {
        let Ok(handle) = tokio::runtime::Handle::try_current() else { return false };
        let mut tasks = self.inner.tasks.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tasks) = tasks.as_mut() else { return false };
        while tasks.try_join_next().is_some() {}
        tasks.spawn_on(task, &handle);
        true
    }
}
