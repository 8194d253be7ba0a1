//! Every session's bounded system-event queue, in memory, with an index of which sessions hold a
//! session-state notice about each target.

use foldhash::{HashMap, HashSet};
use sessionwatch_core::{Millis, Notice, NoticeRef, PushOutcome, QueuedEvent, SystemEventQueue};
use std::sync::Mutex;

#[derive(Default)]
pub(crate) struct Queues(Mutex<State>);

#[derive(Default)]
struct State {
    queues: HashMap<String, SystemEventQueue>,
    /// target → the sessions whose queue holds a notice about it. Kept by every change below; an entry
    /// a full queue evicted is dropped when [`Queues::notice_holders_where`] finds it gone.
    holders: HashMap<String, Holders>,
}

#[derive(Default)]
struct Holders {
    sessions: HashSet<String>,
    /// Until when none of them needs a reminder, as the caller of [`Queues::notice_holders_where`] last
    /// found; forgotten whenever a notice about the target is queued (a new holder, or a new text).
    quiet: Option<Quiet>,
}

/// No holder of a notice about a target needs a reminder before `until` (the kernel's clock) while the
/// kernel's count of ended trailing wakes stays `wakes_ended`: each holder was found woken within its
/// window with its trailing wake scheduled, and only a trailing wake's end, the window's end or a new
/// notice about the target changes that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Quiet {
    pub until: Millis,
    pub wakes_ended: u64,
}

/// What the caller of [`Queues::notice_holders_where`] says of one holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// Answer it.
    Kept,
    /// Not now.
    Passed,
    /// Not before `until` (the kernel's clock), whatever changes of the target come meanwhile, unless
    /// one of its trailing wakes ends first.
    QuietUntil(Millis),
}

impl State {
    fn hold(&mut self, session: &str, event: &QueuedEvent) {
        if let Some(n) = &event.notice {
            let holders = self.holders.entry(n.target.as_str().to_string()).or_default();
            holders.sessions.insert(session.to_string());
            holders.quiet = None;
        }
    }

    fn release(&mut self, session: &str, event: &QueuedEvent) {
        let Some(n) = &event.notice else { return };
        if let Some(holders) = self.holders.get_mut(n.target.as_str()) {
            holders.sessions.remove(session);
            if holders.sessions.is_empty() {
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

    /// The sessions holding a notice about `target` that `judge(session, notice)` keeps, at `now` with
    /// `wakes_ended` trailing wakes ended so far. Nothing is judged while an earlier call's finding that
    /// every holder was [`Holder::QuietUntil`] still holds ([`Quiet`]): a burst reminds the same holders
    /// on every change, and judging them all was most of an append's cost with 100 watchers. `judge` runs
    /// under the queues' lock: it must not take another lock of the kernel's.
    pub fn notice_holders_where(
        &self,
        target: &str,
        now: Millis,
        wakes_ended: u64,
        mut judge: impl FnMut(&str, &NoticeRef) -> Holder,
    ) -> Vec<String> {
        self.with(|s| {
            let Some(holders) = s.holders.get(target) else { return vec![] };
            if holders.quiet.is_some_and(|q| q.wakes_ended == wakes_ended && now < q.until) {
                return vec![];
            }
            let mut kept = vec![];
            let mut gone = vec![];
            let mut quiet_until = Some(Millis::MAX);
            for session in &holders.sessions {
                let notice = s.queues.get(session).and_then(|q| {
                    q.iter().find_map(|e| e.notice.as_ref().filter(|n| n.target.as_str() == target))
                });
                let Some(notice) = notice else {
                    gone.push(session.clone());
                    continue;
                };
                match judge(session, notice) {
                    Holder::Kept => {
                        kept.push(session.clone());
                        quiet_until = None;
                    }
                    Holder::Passed => quiet_until = None,
                    Holder::QuietUntil(until) => quiet_until = quiet_until.map(|q| q.min(until)),
                }
            }
            if let Some(holders) = s.holders.get_mut(target) {
                gone.iter().for_each(|g| _ = holders.sessions.remove(g));
                holders.quiet = quiet_until.map(|until| Quiet { until, wakes_ended });
                if holders.sessions.is_empty() {
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
