//! Wake coalescing: a main-session watcher is woken at once, then at most once per window, with one
//! trailing wake when the window ends if it still has something queued.

use crate::{Kernel, Signal};
use sessionwatch_core::AgentSessionKey;
use sessionwatch_store::SignalLog;
use std::sync::atomic::Ordering;

impl<S: SignalLog> Kernel<S> {
    /// Wakes at once unless the session was woken within the coalescing window; then one trailing wake
    /// goes out when the window ends, if the session still has something queued by then.
    /// The reason a wake gives is `session-state:<target>`.
    pub(crate) fn wake(&self, session: &str, target: &AgentSessionKey) {
        self.wake_at(session, target, self.now());
    }

    /// [`Kernel::wake`] at `now`, read once by a caller that wakes many.
    pub(crate) fn wake_at(&self, session: &str, target: &AgentSessionKey, now: sessionwatch_core::Millis) {
        let mut last = self.inner.last_wake.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = last.get(session).copied()
            && self.within_window(at, now)
        {
            drop(last);
            let remaining = (self.inner.config.wake_coalesce_ms - (now - at)).max(0) as u64;
            self.schedule_trailing_wake(session, target, remaining);
            return;
        }
        last.insert(session.to_string(), now);
        drop(last);
        self.send_wake(session, &reason(target));
    }

    /// Whether a session woken at `woken_at` is still inside its coalescing window at `now`.
    pub(crate) fn within_window(
        &self,
        woken_at: sessionwatch_core::Millis,
        now: sessionwatch_core::Millis,
    ) -> bool {
        now - woken_at < self.inner.config.wake_coalesce_ms
    }

    fn schedule_trailing_wake(&self, session: &str, target: &AgentSessionKey, after_ms: u64) {
        {
            let mut scheduled = self.inner.trailing_wakes.lock().unwrap_or_else(|p| p.into_inner());
            if scheduled.sessions.contains(session) {
                return; // one is already scheduled for this window (the common case in a burst)
            }
            scheduled.sessions.insert(session.to_string());
        }
        let reason = reason(target);
        let kernel = self.clone();
        let key = session.to_string();
        let session = session.to_string();
        let started = self.spawn_background(async move {
            tokio::time::sleep(std::time::Duration::from_millis(after_ms)).await;
            kernel.inner.trailing_wakes.lock().unwrap_or_else(|p| p.into_inner()).end(&session);
            if kernel.inner.queues.peek(&session).is_empty() {
                return; // a turn drained it meanwhile: nothing to wake for
            }
            let now = kernel.now();
            kernel.inner.last_wake.lock().unwrap_or_else(|p| p.into_inner()).insert(session.clone(), now);
            kernel.send_wake(&session, &reason);
        });
        if !started {
            self.inner.trailing_wakes.lock().unwrap_or_else(|p| p.into_inner()).end(&key);
        }
    }

    fn send_wake(&self, session: &str, reason: &str) {
        self.inner.metrics.wakes.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .inner
            .signals
            .send(Signal::Wake { session: session.to_string(), reason: reason.to_string() });
    }
}

fn reason(target: &AgentSessionKey) -> String {
    format!("session-state:{target}")
}
