//! The prune schedule: at start-up, then in the background at most once per interval after writes.

use crate::Kernel;
use sessionwatch_core::Millis;
use sessionwatch_store::{PruneReport, SignalLog, StoreError};
use std::sync::atomic::Ordering;

impl<S: SignalLog> Kernel<S> {
    /// Prunes now (forced). Watches retention removed take their queued notices with them, as an
    /// unwatch, a reset or a delete does.
    pub async fn prune_now(&self) -> Result<PruneReport, StoreError> {
        let now = self.now();
        let report = self.inner.store.prune(self.inner.config.retention, now).await;
        *self.inner.last_prune.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
        if let Ok(r) = &report {
            for (watcher, target) in &r.cursors_expired {
                if let Some(t) = sessionwatch_core::AgentSessionKey::parse(target) {
                    self.inner.queues.remove(watcher, &sessionwatch_core::context_key(&t));
                }
            }
        }
        report
    }

    /// After a write: prune in the background if the last prune is older than the interval.
    pub(crate) fn maybe_schedule_prune(&self, now: Millis) {
        {
            let last = self.inner.last_prune.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| now - at < self.inner.config.prune_interval_ms) {
                return;
            }
        }
        self.schedule_prune();
    }

    /// Prunes in the background now, unless a prune is running.
    pub(crate) fn schedule_prune(&self) {
        if self.inner.pruning.swap(true, Ordering::SeqCst) {
            return;
        }
        let kernel = self.clone();
        let started = self.spawn_background(async move {
            if let Err(e) = kernel.prune_now().await {
                tracing::warn!(error = %e, "scheduled prune failed");
            }
            kernel.inner.pruning.store(false, Ordering::SeqCst);
            kernel.inner.prune_done.notify_waiters();
        });
        if !started {
            self.inner.pruning.store(false, Ordering::SeqCst);
        }
    }

    /// Waits until no background prune runs (the start-up prune, or one a write scheduled).
    pub async fn background_prune_done(&self) {
        loop {
            let notified = self.inner.prune_done.notified();
            tokio::pin!(notified);
            // Registered before the check: an end between the check and the wait still wakes it.
            notified.as_mut().enable();
            if !self.inner.pruning.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }
}
