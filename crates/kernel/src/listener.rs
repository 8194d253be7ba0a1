//! The cross-gateway listener: the store's wake-ups from other gateways become reconciliations.

use crate::{Inner, Kernel};
use sessionwatch_store::{HostSignal, SignalLog};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use tokio::sync::mpsc;

impl<S: SignalLog> Kernel<S> {
    /// Runs the cross-gateway listener: on [`HostSignal::Listening`] (start and every reconnect) every
    /// hosted watcher is reconciled, on [`HostSignal::Watcher`] that watcher (bursts are coalesced).
    /// [`Kernel::start`] calls it when `host_id` is set and the store can push; the task stops at
    /// [`Kernel::shutdown`], when the kernel is dropped, or when the stream ends.
    pub fn spawn_listener(&self, mut signals: mpsc::Receiver<HostSignal>) {
        let weak: Weak<Inner<S>> = Arc::downgrade(&self.inner);
        self.spawn_background(async move {
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
    }
}
