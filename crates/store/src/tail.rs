//! A bounded in-memory tail of each active session's recent events (the etcd watchable-store idea), so
//! a `changesSince` window near the head is answered without a range scan.
//!
//! Coherent with the log by construction: an entry changes only after the commit that made it true, in
//! commit order (the writer's completions run in order while it still holds the connection), and
//! whatever removes history (prune, delete, reset, maintenance writes) drops entries. Because another
//! process may share the database, a page is served from the tail only when the durable head row read in
//! the same read transaction still says exactly what the entry says ([`HeadRow`]); otherwise
//! the caller falls back to the range scan.
//!
//! A store that knows every commit to its file (SQLite holding the gateway lock: its writer is the only
//! one, and its WAL hook counts the commits) may skip that read: an entry checked against the head row
//! in a read that began after commit `n` is still the log's while no later commit happened
//! ([`Tail::page_unchanged`]).

use foldhash::{HashMap, HashMapExt};
use sessionwatch_core::{ChangesPage, Limit, Millis, StoredEvent};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard};

/// Events kept per session: a full page (200) plus the one that tells truncation, with room to spare.
pub(crate) const EVENTS_PER_SESSION: usize = 256;
/// Sessions kept; beyond this an arbitrary entry is dropped (its next reads fall back to the scan).
pub(crate) const SESSIONS: usize = 4096;

/// The durable head row an entry was derived from: whatever tells one state of a session's log from
/// another with the same head and floor (say, deleted and appended to again by another process).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct HeadRow {
    pub head: u64,
    pub floor: u64,
    /// When the stored head row last changed (0: no row); every append and every raised floor moves it.
    pub updated_at: Millis,
    /// SQLite: the head event's global id and time, as its head row names them (0: none, e.g. pruned
    /// away before schema 6). 0 on PostgreSQL.
    pub head_id: i64,
    pub head_at: Millis,
}

impl HeadRow {
    /// A stored head row that every append moves (PostgreSQL): the row alone tells one state from another.
    pub fn moved_by_every_append(head: u64, floor: u64, updated_at: Millis) -> HeadRow {
        HeadRow { head, floor, updated_at, ..HeadRow::default() }
    }
}

/// What a committed write does to the tail, decided from its result before its caller hears and applied
/// right after (by the SQLite writer, in commit order).
pub(crate) enum TailChange {
    /// [`Tail::committed`].
    Committed(Arc<StoredEvent>, HeadRow),
    /// [`Tail::forget`].
    Forget { key: String, agent: String },
    /// [`Tail::clear`].
    Clear,
}

struct SessionTail {
    row: HeadRow,
    /// Contiguous sequences ending at `row.head`.
    events: VecDeque<Arc<StoredEvent>>,
    /// The store's commit count taken before the read that last found `row` durable (0: never checked,
    /// or changed since).
    checked_at: u64,
}

/// Keyed by agent, then session key, so a lookup by `&str` needs no allocation.
#[derive(Default)]
pub(crate) struct Tail {
    agents: Mutex<HashMap<String, HashMap<String, SessionTail>>>,
}

impl Tail {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, HashMap<String, SessionTail>>> {
        self.agents.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After the commit that appended `event`, whose session's head row became `row`.
    pub fn committed(&self, event: Arc<StoredEvent>, row: HeadRow) {
        let mut agents = self.lock();
        // Looked up by `&str` first: the agent's key is allocated once, not on every append.
        if !agents.contains_key(&event.agent_id) {
            agents.insert(event.agent_id.clone(), HashMap::new());
        }
        let Some(sessions) = agents.get_mut(&event.agent_id) else { return };
        if let Some(t) = sessions.get_mut(&event.session_key)
            && t.row.head + 1 == event.sequence
            && t.row.floor == row.floor
        {
            t.events.push_back(event);
            if t.events.len() > EVENTS_PER_SESSION {
                t.events.pop_front();
            }
            t.row = row;
            t.checked_at = 0;
            return;
        }
        // New, or not the continuation of what is held (e.g. after another process's writes): start over
        // from this one event, which is exactly the log's tail.
        let fresh = SessionTail { row, events: VecDeque::from([event.clone()]), checked_at: 0 };
        if sessions.insert(event.session_key.clone(), fresh).is_none() {
            let total: usize = agents.values().map(HashMap::len).sum();
            if total > SESSIONS {
                evict_one(&mut agents, &event.agent_id, &event.session_key);
            }
        }
    }

    /// Whether anything is held for the session (a miss need not read the head row first).
    pub fn holds(&self, key: &str, agent: &str) -> bool {
        self.lock().get(agent).is_some_and(|s| s.contains_key(key))
    }

    /// Drops what is held for one session.
    pub fn forget(&self, key: &str, agent: &str) {
        let mut agents = self.lock();
        if let Some(sessions) = agents.get_mut(agent) {
            sessions.remove(key);
        }
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    pub fn apply(&self, change: TailChange) {
        match change {
            TailChange::Committed(event, row) => self.committed(event, row),
            TailChange::Forget { key, agent } => self.forget(&key, &agent),
            TailChange::Clear => self.clear(),
        }
    }

    /// The page after `since` if the entry was derived from `durable` and holds every event after `since`.
    /// `checked_at`: the store's commit count taken before `durable` was read, kept with the entry when
    /// it matches (for [`page_unchanged`](Self::page_unchanged)).
    pub fn page(
        &self,
        key: &str,
        agent: &str,
        since: u64,
        limit: Limit,
        durable: HeadRow,
        checked_at: Option<u64>,
    ) -> Option<ChangesPage> {
        let mut agents = self.lock();
        let t = agents.get_mut(agent)?.get_mut(key)?;
        if t.row != durable {
            return None;
        }
        if let Some(n) = checked_at {
            t.checked_at = n;
        }
        t.page(since, limit)
    }

    /// The page after `since` without reading the head row: only when the entry was found durable in a
    /// read that began after commit `commits` and the store has committed nothing since (`commits` is its
    /// count now; the caller must know every commit to the file).
    pub fn page_unchanged(
        &self,
        key: &str,
        agent: &str,
        since: u64,
        limit: Limit,
        commits: u64,
    ) -> Option<ChangesPage> {
        let agents = self.lock();
        let t = agents.get(agent)?.get(key)?;
        if t.checked_at == 0 || t.checked_at != commits {
            return None;
        }
        t.page(since, limit)
    }
}

impl SessionTail {
    fn page(&self, since: u64, limit: Limit) -> Option<ChangesPage> {
        let first = self.row.head + 1 - self.events.len() as u64;
        let after = since.saturating_add(1);
        if after < first {
            return None; // older than the tail: the range scan answers
        }
        let skip = (after - first).min(self.events.len() as u64) as usize;
        let rows = self.events.iter().skip(skip).take(limit.get() as usize + 1).cloned().collect();
        Some(ChangesPage::assemble(rows, limit, since, self.row.head, self.row.floor))
    }
}

fn evict_one(agents: &mut HashMap<String, HashMap<String, SessionTail>>, keep_agent: &str, keep_key: &str) {
    let victim = agents.iter().find_map(|(agent, sessions)| {
        sessions.keys().find(|k| !(agent == keep_agent && *k == keep_key)).map(|k| (agent.clone(), k.clone()))
    });
    if let Some((agent, key)) = victim
        && let Some(sessions) = agents.get_mut(&agent)
    {
        sessions.remove(&key);
        if sessions.is_empty() {
            agents.remove(&agent);
        }
    }
}

#[cfg(test)]
mod tests;
