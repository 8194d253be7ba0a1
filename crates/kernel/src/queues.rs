//! Every session's bounded system-event queue, in memory.

use sessionwatch_core::{Notice, NoticeRef, PushOutcome, QueuedEvent, SystemEventQueue};
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Default)]
pub(crate) struct Queues(Mutex<HashMap<String, SystemEventQueue>>);

impl Queues {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, SystemEventQueue>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Answers whether the queue changed (added or replaced).
    pub fn push(&self, session: &str, event: QueuedEvent, replace: bool) -> bool {
        self.with(|m| m.entry(session.to_string()).or_default().push(event, replace))
            != PushOutcome::Duplicate
    }

    /// Queues a session-state notice unless the same one (target and `changesSince`) is queued, which is
    /// checked before its text is built; a newer one for the same target replaces the old in place.
    /// Answers the text when the queue changed.
    pub fn push_notice(&self, notice: &Notice) -> Option<String> {
        self.with(|m| {
            let session = notice.watcher.as_str();
            let queued = m.get(session).is_some_and(|q| {
                q.iter().any(|e| {
                    e.notice.as_ref().is_some_and(|n| n.since == notice.since && n.target == notice.target)
                })
            });
            if queued {
                return None;
            }
            let event = QueuedEvent::from(notice);
            let text = event.text.clone();
            let q = match m.get_mut(session) {
                Some(q) => q,
                None => m.entry(session.to_string()).or_default(),
            };
            (q.push(event, true) != PushOutcome::Duplicate).then_some(text)
        })
    }

    /// The session-state notice about `target` queued for `session`, if any.
    pub fn notice_about(&self, session: &str, target: &str) -> Option<NoticeRef> {
        self.with(|m| {
            m.get(session)?
                .iter()
                .find_map(|e| e.notice.as_ref().filter(|n| n.target.as_str() == target).cloned())
        })
    }

    pub fn drain(&self, session: &str) -> Vec<QueuedEvent> {
        self.with(|m| m.remove(session).map(|mut q| q.drain()).unwrap_or_default())
    }

    pub fn peek(&self, session: &str) -> Vec<QueuedEvent> {
        self.with(|m| m.get(session).map(|q| q.iter().cloned().collect()).unwrap_or_default())
    }

    pub fn remove(&self, session: &str, context_key: &str) {
        self.with(|m| {
            if let Some(q) = m.get_mut(session) {
                q.remove(context_key);
            }
        })
    }

    pub fn remove_everywhere(&self, context_key: &str) {
        self.with(|m| m.values_mut().for_each(|q| _ = q.remove(context_key)))
    }

    pub fn forget(&self, session: &str) {
        self.with(|m| m.remove(session));
    }

    pub fn depths(&self) -> Vec<(String, usize)> {
        self.with(|m| m.iter().filter(|(_, q)| !q.is_empty()).map(|(k, q)| (k.clone(), q.len())).collect())
    }
}
