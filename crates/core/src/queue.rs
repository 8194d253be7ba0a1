//! The per-session system-event queue: bounded, deduplicating, in memory.

use crate::key::AgentSessionKey;
use crate::notice::Notice;
use std::collections::VecDeque;

pub const SYSTEM_EVENT_QUEUE_CAP: usize = 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedEvent {
    pub text: String,
    pub context_key: String,
    /// For a session-state notice, what its text says: which session changed and the `changesSince`
    /// to reconcile from (so nobody parses the text back). `None` for other system events.
    pub notice: Option<NoticeRef>,
}

/// The typed content of a queued session-state notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoticeRef {
    pub target: AgentSessionKey,
    pub since: u64,
    /// Whether the notice wakes its watcher ([`Notice::wakes`]).
    pub wakes: bool,
}

impl QueuedEvent {
    /// A system event that is not a session-state notice (e.g. the Home creation notice).
    pub fn other(text: impl Into<String>, context_key: impl Into<String>) -> QueuedEvent {
        QueuedEvent { text: text.into(), context_key: context_key.into(), notice: None }
    }
}

impl From<&Notice> for QueuedEvent {
    fn from(n: &Notice) -> QueuedEvent {
        QueuedEvent {
            text: n.text(),
            context_key: n.context_key(),
            notice: Some(NoticeRef { target: n.target.clone(), since: n.since, wakes: n.wakes() }),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct SystemEventQueue {
    entries: VecDeque<QueuedEvent>,
}

/// What a push did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushOutcome {
    Added,
    /// The same text is already queued.
    Duplicate,
    /// `replace` swapped the text of the entry with the same context key.
    Replaced,
}

impl SystemEventQueue {
    /// Queues `text`. An identical text already queued is not added again; with `replace`, an entry with
    /// the same context key has its text replaced in place. When full, the oldest entry is dropped.
    pub fn push(&mut self, event: QueuedEvent, replace: bool) -> PushOutcome {
        if self.entries.iter().any(|e| e.text == event.text) {
            return PushOutcome::Duplicate;
        }
        if replace && let Some(e) = self.entries.iter_mut().find(|e| e.context_key == event.context_key) {
            *e = event;
            return PushOutcome::Replaced;
        }
        if self.entries.len() == SYSTEM_EVENT_QUEUE_CAP {
            self.entries.pop_front();
        }
        self.entries.push_back(event);
        PushOutcome::Added
    }

    pub fn find(&self, context_key: &str) -> Option<&QueuedEvent> {
        self.entries.iter().find(|e| e.context_key == context_key)
    }

    /// Removes every entry with this context key (a dropped watch takes its notice with it).
    pub fn remove(&mut self, context_key: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.context_key != context_key);
        before != self.entries.len()
    }

    pub fn drain(&mut self) -> Vec<QueuedEvent> {
        self.entries.drain(..).collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &QueuedEvent> {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedupes_identical_text() {
        let mut q = SystemEventQueue::default();
        for _ in 0..20 {
            q.push(QueuedEvent::other("same", "ck"), false);
        }
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn replace_swaps_text_in_place() {
        let mut q = SystemEventQueue::default();
        q.push(QueuedEvent::other("a", "x"), false);
        q.push(QueuedEvent::other("b", "ck"), true);
        assert_eq!(q.push(QueuedEvent::other("c", "ck"), true), PushOutcome::Replaced);
        let texts: Vec<_> = q.drain().into_iter().map(|e| e.text).collect();
        assert_eq!(texts, ["a", "c"]);
        assert!(q.is_empty());
    }

    #[test]
    fn bounded_drops_oldest() {
        let mut q = SystemEventQueue::default();
        for i in 0..25 {
            q.push(QueuedEvent::other(format!("t{i}"), format!("c{i}")), false);
        }
        assert_eq!(q.len(), SYSTEM_EVENT_QUEUE_CAP);
        assert_eq!(q.iter().next().unwrap().text, "t5");
        assert!(q.remove("c6"));
        assert_eq!(q.len(), SYSTEM_EVENT_QUEUE_CAP - 1);
    }
}
