//! Every session's bounded system-event queue, in memory, with an index of which sessions hold a
//! session-state notice about each target.

use foldhash::{HashMap, HashSet};
use sessionwatch_core::{Notice, NoticeRef, PushOutcome, QueuedEvent, SystemEventQueue};
use std::sync::Mutex;

#[derive(Default)]
pub(crate) struct Queues(Mutex<State>);

#[derive(Default)]
struct State {
    queues: HashMap<String, SystemEventQueue>,
    /// target → the sessions whose queue holds a notice about it. Kept by every change below; an entry
    /// a full queue evicted is dropped when [`Queues::notice_holders_where`] finds it gone.
    holders: HashMap<String, HashSet<String>>,
}

impl State {
    fn hold(&mut self, session: &str, event: &QueuedEvent) {
        if let Some(n) = &event.notice {
            self.holders.entry(n.target.as_str().to_string()).or_default().insert(session.to_string());
        }
    }

    fn release(&mut self, session: &str, event: &QueuedEvent) {
        let Some(n) = &event.notice else { return };
        if let Some(set) = self.holders.get_mut(n.target.as_str()) {
            set.remove(session);
            if set.is_empty() {
                self.holders.remove(n.target.as_str());
            }
        }
    }

    fn queue(&mut self, session: &str) -> &mut SystemEventQueue {
        if !self.queues.contains_key(session) {
            self.queues.insert(session.to_string(), SystemEventQueue::default());
        }
        self.queues.get_mut(session).expect("inserted above")
    }

    fn push(&mut self, session: &str, event: QueuedEvent, replace: bool) -> bool {
        self.hold(session, &event);
        self.queue(session).push(event, replace) != PushOutcome::Duplicate
    }
}

impl Queues {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Answers whether the queue changed (added or replaced).
    pub fn push(&self, session: &str, event: QueuedEvent, replace: bool) -> bool {
        self.with(|s| s.push(session, event, replace))
    }

    /// Queues a session-state notice unless the same one (target and `changesSince`) is queued, which is
    /// checked before its text is built; a newer one for the same target replaces the old in place.
    /// Answers the text when the queue changed.
    pub fn push_notice(&self, notice: &Notice) -> Option<String> {
        self.with(|s| {
            let session = notice.watcher.as_str();
            let queued = s.queues.get(session).is_some_and(|q| {
                q.iter().any(|e| {
                    e.notice.as_ref().is_some_and(|n| n.since == notice.since && n.target == notice.target)
                })
            });
            if queued {
                return None;
            }
            let event = QueuedEvent::from(notice);
            let text = event.text.clone();
            s.push(session, event, true).then_some(text)
        })
    }

    /// The sessions holding a notice about `target` for which `keep(session, notice)` holds. `keep` runs
    /// under the queues' lock: it must not take another lock of the kernel's.
    pub fn notice_holders_where(
        &self,
        target: &str,
        mut keep: impl FnMut(&str, &NoticeRef) -> bool,
    ) -> Vec<String> {
        self.with(|s| {
            let Some(sessions) = s.holders.get(target) else { return vec![] };
            let mut kept = vec![];
            let mut gone = vec![];
            for session in sessions {
                let notice = s.queues.get(session).and_then(|q| {
                    q.iter().find_map(|e| e.notice.as_ref().filter(|n| n.target.as_str() == target))
                });
                match notice {
                    Some(n) if keep(session, n) => kept.push(session.clone()),
                    Some(_) => {}
                    None => gone.push(session.clone()),
                }
            }
            if let Some(set) = s.holders.get_mut(target) {
                gone.iter().for_each(|g| _ = set.remove(g));
                if set.is_empty() {
                    s.holders.remove(target);
                }
            }
            kept
        })
    }

    pub fn drain(&self, session: &str) -> Vec<QueuedEvent> {
        self.with(|s| {
            let drained = s.queues.remove(session).map(|mut q| q.drain()).unwrap_or_default();
            drained.iter().for_each(|e| s.release(session, e));
            drained
        })
    }

    pub fn peek(&self, session: &str) -> Vec<QueuedEvent> {
        self.with(|s| s.queues.get(session).map(|q| q.iter().cloned().collect()).unwrap_or_default())
    }

    pub fn remove(&self, session: &str, context_key: &str) {
        self.with(|s| {
            let Some(q) = s.queues.get_mut(session) else { return };
            let removed: Vec<QueuedEvent> =
                q.iter().filter(|e| e.context_key == context_key).cloned().collect();
            q.remove(context_key);
            removed.iter().for_each(|e| s.release(session, e));
        })
    }

    pub fn remove_everywhere(&self, context_key: &str) {
        let sessions: Vec<String> = self.with(|s| s.queues.keys().cloned().collect());
        for session in sessions {
            self.remove(&session, context_key);
        }
    }

    pub fn forget(&self, session: &str) {
        self.drain(session);
    }

    pub fn depths(&self) -> Vec<(String, usize)> {
        self.with(|s| {
            s.queues.iter().filter(|(_, q)| !q.is_empty()).map(|(k, q)| (k.clone(), q.len())).collect()
        })
    }
}
