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
//!
//! A touch (a turn's `updated_at`, and the host that served it) is the one write that is patched into
//! the kept row instead of dropping it: every inbound turn touches its session, and the next turn read
//! the row again (5 % of the runtime workers' samples in `bench gateway`'s inbound block; with the patch,
//! 1.4 %). Its trigger's note becomes a patch only once its `UPDATE` succeeded, and a transaction that
//! rolls back turns its patches back into drops.

use crate::SessionRow;
use foldhash::{HashMap, HashMapExt};
use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;
use sessionwatch_core::Millis;
use std::sync::{Arc, Mutex, MutexGuard};

/// At most this many rows are kept (about 0.5 KB each); a full cache starts over.
const CAPACITY: usize = 4096;

/// The SQL function the triggers call with a changed row's key.
const CHANGED_FN: &str = "sessionwatch_session_changed";

/// A changed row's session key and agent.
type Key = (String, String);

/// What the writer's open transaction did to a kept row, applied once it commits.
#[derive(Debug, PartialEq)]
enum Note {
    /// Changed in any way: dropped.
    Changed(Key),
    /// Touched: `updated_at` set, and `host_id` when one is given (`touch_session_op`'s `UPDATE`).
    Touched { key: Key, updated_at: Millis, host_id: Option<String> },
}

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
    fn patch(&mut self, key: &str, agent: &str, updated_at: Millis, host_id: Option<&str>) {
        if let Some(row) = self.agents.get_mut(agent).and_then(|sessions| sessions.get_mut(key)) {
            row.updated_at = updated_at;
            if let Some(host) = host_id {
                row.host_id = Some(host.to_string());
            }
        }
    }

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
    /// What the writer's open transaction did to rows: applied once it commits.
    notes: Mutex<Vec<Note>>,
}

impl SessionCache {
    fn lock(&self) -> MutexGuard<'_, Rows> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_notes(&self) -> MutexGuard<'_, Vec<Note>> {
        self.notes.lock().unwrap_or_else(|p| p.into_inner())
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
        self.lock_notes().push(Note::Changed((key, agent)));
    }

    /// Where the next note goes: taken by a touch before its `UPDATE`.
    pub(crate) fn mark(&self) -> usize {
        self.lock_notes().len()
    }

    /// A touch's `UPDATE` of `(key, agent)` succeeded: what its trigger noted since `mark` (the row, as
    /// it was and as it is) becomes one patch. Anything else noted since stays a drop.
    pub(crate) fn touched(
        &self,
        mark: usize,
        key: &str,
        agent: &str,
        updated_at: Millis,
        host_id: Option<&str>,
    ) {
        let mut notes = self.lock_notes();
        let only_this_row = notes.get(mark..).is_some_and(|since| {
            !since.is_empty()
                && since.iter().all(|n| matches!(n, Note::Changed((k, a)) if k == key && a == agent))
        });
        if only_this_row {
            notes.truncate(mark);
            let key = (key.to_string(), agent.to_string());
            notes.push(Note::Touched { key, updated_at, host_id: host_id.map(str::to_string) });
        }
    }

    /// Called by the writer's rollback hook: nothing the transaction did happened, so none of its
    /// touches may be patched in; they are dropped (harmless) with the next commit.
    fn rolled_back(&self) {
        for note in self.lock_notes().iter_mut() {
            if let Note::Touched { key, .. } = note {
                *note = Note::Changed(std::mem::take(key));
            }
        }
    }

    /// Called by the writer's WAL hook after each commit: drops the rows the transaction changed, patches
    /// those it touched, in the order it did so (and drops those of transactions rolled back since the
    /// last commit, which changed nothing: harmless).
    pub(crate) fn committed(&self) {
        let notes = std::mem::take(&mut *self.lock_notes());
        if notes.is_empty() {
            return;
        }
        let mut rows = self.lock();
        rows.generation += 1;
        for note in &notes {
            match note {
                Note::Changed((key, agent)) => rows.remove(key, agent),
                Note::Touched { key: (key, agent), updated_at, host_id } => {
                    rows.patch(key, agent, *updated_at, host_id.as_deref())
                }
            }
        }
    }

    /// Installs the function and the temporary triggers on the writer's connection (after the schema
    /// is migrated: the triggers name the `sessions` table).
    pub(crate) fn attach(self: &Arc<Self>, writer: &mut Connection) -> rusqlite::Result<()> {
        let cache = self.clone();
        writer.rollback_hook(Some(move || cache.rolled_back()))?;
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

    /// A touch's `UPDATE` as its trigger notes it: the row as it was and as it is.
    fn touch(cache: &SessionCache, key: &str, updated_at: Millis, host: Option<&str>) {
        let mark = cache.mark();
        cache.note_changed(key.into(), "main".into());
        cache.note_changed(key.into(), "main".into());
        cache.touched(mark, key, "main", updated_at, host);
    }

    #[test]
    fn a_committed_touch_patches_the_kept_row_instead_of_dropping_it() {
        let cache = SessionCache::default();
        let before = cache.generation();
        cache.keep(before, &row("a", "a"));
        touch(&cache, "a", 7, None);
        cache.committed();
        let kept = cache.get("a", "main").expect("still kept");
        assert_eq!((kept.updated_at, kept.host_id.as_deref(), kept.label.as_deref()), (7, None, Some("a")));
        touch(&cache, "a", 8, Some("gw"));
        cache.committed();
        let kept = cache.get("a", "main").expect("still kept");
        assert_eq!((kept.updated_at, kept.host_id.as_deref()), (8, Some("gw")));
        cache.keep(before, &row("a", "read before the touches"));
        assert_eq!(
            cache.get("a", "main").map(|r| r.updated_at),
            Some(8),
            "a read older than a touch is not kept"
        );
    }

    #[test]
    fn a_touch_rolled_back_or_mixed_with_other_changes_drops_the_row() {
        let cache = SessionCache::default();
        cache.keep(cache.generation(), &row("a", "a"));
        touch(&cache, "a", 7, Some("gw"));
        cache.rolled_back();
        cache.committed();
        assert_eq!(cache.get("a", "main"), None, "rolled back: nothing of the touch may be patched in");

        cache.keep(cache.generation(), &row("a", "a"));
        let mark = cache.mark();
        cache.note_changed("b".into(), "main".into());
        cache.touched(mark, "a", "main", 9, None);
        cache.committed();
        assert!(cache.get("a", "main").is_some(), "what was noted since the mark was another row's change");

        let mark = cache.mark();
        cache.touched(mark, "a", "main", 9, None);
        assert!(cache.lock_notes().is_empty(), "a touch that updated no row notes nothing");

        touch(&cache, "a", 10, None);
        cache.note_changed("a".into(), "main".into());
        cache.committed();
        assert_eq!(cache.get("a", "main"), None, "a change after the touch drops the row");
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
