//! Session rows kept in memory between the writes that change them.
//!
//! Every tool call reads its caller's row and its target's (`get_session`): in `bench gateway` those two
//! point reads were two thirds of what the gateway itself did for a `session_status`, each a read
//! transaction with its shared-memory locks (two `fcntl` calls). Rows change far less often than they are
//! read, so they are kept here and dropped when a write changes them.
//!
//! What drops them cannot be forgotten by a new write path: temporary triggers on the writer's
//! connection (the only connection that writes the file: only a store opened with `open_locked`, holding
//! the gateway lock, keeps rows) name each session row a statement inserts, updates or deletes, and the writer's WAL hook
//! drops those rows once the commit is done, before any writer of the batch is answered. A reader that
//! misses reads the database and keeps what it read only if no drop happened meanwhile (a generation
//! counter), so a row read before a commit is never kept after the commit that changed it.

use crate::SessionRow;
use foldhash::{HashMap, HashMapExt};
use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;
use std::sync::{Arc, Mutex, MutexGuard};

/// At most this many rows are kept (about 0.5 KB each); a full cache starts over.
const CAPACITY: usize = 4096;

/// The SQL function the triggers call with a changed row's key.
const CHANGED_FN: &str = "sessionwatch_session_changed";

/// A changed row's session key and agent.
type Key = (String, String);

#[derive(Default)]
struct Rows {
    /// Keyed by agent, then session key (as the tail cache), so a lookup by `&str` needs no allocation.
    agents: HashMap<String, HashMap<String, SessionRow>>,
    /// Rows held in all.
    len: usize,
    /// Moves with every drop: a read that began before it is not kept.
    generation: u64,
}

impl Rows {
    fn remove(&mut self, key: &str, agent: &str) {
        if let Some(sessions) = self.agents.get_mut(agent)
            && sessions.remove(key).is_some()
        {
            self.len -= 1;
            if sessions.is_empty() {
                self.agents.remove(agent);
            }
        }
    }
}

#[derive(Default)]
pub(crate) struct SessionCache {
    rows: Mutex<Rows>,
    /// Rows the writer's open transaction changed: dropped once it commits.
    changed: Mutex<Vec<Key>>,
}

impl SessionCache {
    fn lock(&self) -> MutexGuard<'_, Rows> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_changed(&self) -> MutexGuard<'_, Vec<Key>> {
        self.changed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The kept row, if any.
    pub(crate) fn get(&self, key: &str, agent: &str) -> Option<SessionRow> {
        self.lock().agents.get(agent)?.get(key).cloned()
    }

    /// The generation to pass to [`keep`](Self::keep): taken before the database is read.
    pub(crate) fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Keeps a row read from the database, unless a drop happened since `generation` was taken (the
    /// row may be older than that drop's commit).
    pub(crate) fn keep(&self, generation: u64, row: &SessionRow) {
        let mut rows = self.lock();
        if rows.generation != generation {
            return;
        }
        if rows.len >= CAPACITY {
            rows.agents.clear();
            rows.len = 0;
        }
        if !rows.agents.contains_key(&row.agent_id) {
            rows.agents.insert(row.agent_id.clone(), HashMap::new());
        }
        let Some(sessions) = rows.agents.get_mut(&row.agent_id) else { return };
        if sessions.insert(row.session_key.clone(), row.clone()).is_none() {
            rows.len += 1;
        }
    }

    /// Called by the triggers, inside the writer's transaction.
    fn note_changed(&self, key: String, agent: String) {
        self.lock_changed().push((key, agent));
    }

    /// Called by the writer's WAL hook after each commit: drops the rows the transaction changed (and
    /// those of transactions rolled back since the last commit, which changed nothing: harmless).
    pub(crate) fn committed(&self) {
        let changed = std::mem::take(&mut *self.lock_changed());
        if changed.is_empty() {
            return;
        }
        let mut rows = self.lock();
        rows.generation += 1;
        for (key, agent) in &changed {
            rows.remove(key, agent);
        }
    }

    /// Installs the function and the temporary triggers on the writer's connection (after the schema
    /// is migrated: the triggers name the `sessions` table).
    pub(crate) fn attach(self: &Arc<Self>, writer: &Connection) -> rusqlite::Result<()> {
        let cache = self.clone();
        writer.create_scalar_function(CHANGED_FN, 2, FunctionFlags::SQLITE_UTF8, move |ctx| {
            cache.note_changed(ctx.get::<String>(0)?, ctx.get::<String>(1)?);
            Ok(0)
        })?;
        writer.execute_batch(&format!(
            "CREATE TEMP TRIGGER sessionwatch_session_inserted AFTER INSERT ON main.sessions
               BEGIN SELECT {CHANGED_FN}(NEW.session_key, NEW.agent_id); END;
             CREATE TEMP TRIGGER sessionwatch_session_updated AFTER UPDATE ON main.sessions
               BEGIN SELECT {CHANGED_FN}(OLD.session_key, OLD.agent_id), {CHANGED_FN}(NEW.session_key, NEW.agent_id); END;
             CREATE TEMP TRIGGER sessionwatch_session_deleted AFTER DELETE ON main.sessions
               BEGIN SELECT {CHANGED_FN}(OLD.session_key, OLD.agent_id); END;"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, label: &str) -> SessionRow {
        SessionRow {
            session_key: key.into(),
            agent_id: "main".into(),
            session_id: "s".into(),
            kind: "other".into(),
            chat_type: None,
            channel: None,
            label: Some(label.into()),
            spawned_by: None,
            created_via: None,
            goal_objective: None,
            goal_status: None,
            host_id: None,
            created_at: 0,
            updated_at: 0,
            cwd: None,
            native_state: None,
        }
    }

    #[test]
    fn a_row_read_before_a_commit_that_changed_it_is_not_kept() {
        let cache = SessionCache::default();
        let before = cache.generation();
        cache.note_changed("a".into(), "main".into());
        cache.committed();
        cache.keep(before, &row("a", "old"));
        assert_eq!(cache.get("a", "main"), None, "read before the commit: not kept");
        let now = cache.generation();
        cache.keep(now, &row("a", "new"));
        assert_eq!(cache.get("a", "main").and_then(|r| r.label).as_deref(), Some("new"));
    }

    #[test]
    fn a_commit_drops_the_rows_its_transaction_changed_and_no_other() {
        let cache = SessionCache::default();
        let g = cache.generation();
        cache.keep(g, &row("a", "a"));
        cache.keep(g, &row("b", "b"));
        cache.committed();
        assert!(cache.get("a", "main").is_some(), "a commit that changed no session drops nothing");
        cache.note_changed("a".into(), "main".into());
        assert!(cache.get("a", "main").is_some(), "kept until the commit");
        cache.committed();
        assert_eq!(cache.get("a", "main"), None);
        assert!(cache.get("b", "main").is_some());
    }

    #[test]
    fn the_cache_holds_at_most_its_capacity() {
        let cache = SessionCache::default();
        for i in 0..CAPACITY + 10 {
            cache.keep(cache.generation(), &row(&format!("k{i}"), "x"));
        }
        let rows = cache.lock();
        assert!(rows.len <= CAPACITY);
        assert_eq!(
            rows.len,
            rows.agents.values().map(HashMap::len).sum::<usize>(),
            "the count is the rows held"
        );
    }
}
