//! Session rows, the small transcript and the inbox, beside the log.

use super::SqliteStore;
use super::session_cache::SessionCache;
use super::transaction::WriteTx;
use crate::rows::{MESSAGE_COLUMNS, SESSION_COLUMNS, inbox_from_row, message_from_row, session_from_row};
use crate::{
    InboxItem, NewMessage, NewSession, Result, SessionActivity, SessionFilter, SessionRow, TRANSCRIPT_CAP,
    TranscriptMessage,
};
use rusqlite::{Connection, OptionalExtension, Row, params};
use sessionwatch_core::Millis;
use std::collections::HashMap;
use std::sync::Arc;

fn session_from_row(r: &Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(session_from_row!(r, get))
}

/// A turn's statements, held by the writer's transaction ([`WriteTx::with`]): a burst of turns runs
/// each once per turn, and rusqlite's statement cache would hash each one's text every time.
const TOUCH: &str = "UPDATE sessions SET updated_at = ?3, host_id = COALESCE(?4, host_id) \
     WHERE session_key = ?1 AND agent_id = ?2";
const APPEND_MESSAGE: &str = "INSERT INTO session_messages (session_key, agent_id, session_id, role, text, \
     run_id, from_session, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
const PUSH_INBOX: &str = "INSERT INTO session_inbox (session_key, agent_id, run_id, from_session, text, \
     created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

pub(crate) fn load_session(c: &Connection, key: &str, agent: &str) -> Result<Option<SessionRow>> {
    Ok(c.prepare_cached(&format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE session_key = ?1 AND agent_id = ?2"
    ))?
    .query_row(params![key, agent], session_from_row)
    .optional()?)
}

/// Whether the session's transcript holds any message: one probe of `idx_messages_session`, as cheap as
/// a point read ([`SqliteStore::read_now`]).
pub(crate) fn has_messages(c: &Connection, key: &str, agent: &str) -> Result<bool> {
    Ok(c.prepare_cached("SELECT 1 FROM session_messages WHERE session_key = ?1 AND agent_id = ?2 LIMIT 1")?
        .query_row(params![key, agent], |_| Ok(()))
        .optional()?
        .is_some())
}

impl SqliteStore {
    pub(crate) fn ensure_session_op(
        tx: &Connection,
        new: &NewSession,
        now: Millis,
    ) -> Result<(SessionRow, bool)> {
        let inserted =
            tx.prepare_cached(
                "INSERT INTO sessions (session_key, agent_id, session_id, kind, chat_type, channel, label, \
                 spawned_by, created_via, host_id, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11) ON CONFLICT DO NOTHING",
            )?
            .execute(params![
                new.session_key,
                new.agent_id,
                new.session_id,
                new.kind,
                new.chat_type,
                new.channel,
                new.label,
                new.spawned_by,
                new.created_via,
                new.host_id,
                now
            ])? > 0;
        let row = load_session(tx, &new.session_key, &new.agent_id)?.ok_or_else(|| {
            crate::StoreError::InvalidData("session row vanished inside its transaction".into())
        })?;
        Ok((row, inserted))
    }

    pub(crate) fn get_session_sync(&self, key: &str, agent: &str) -> Result<Option<SessionRow>> {
        self.read(|c| load_session(c, key, agent))
    }

    pub(crate) fn list_sessions_sync(&self, filter: &SessionFilter) -> Result<Vec<SessionRow>> {
        self.read(|c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE updated_at >= ?1 AND (?2 IS NULL OR agent_id = ?2) \
                 AND (NOT ?3 OR (cwd <> '' AND native_state IS NOT 'idle')) \
                 ORDER BY updated_at DESC, session_key"
            ))?;
            let rows = stmt
                .query_map(params![filter.updated_since.unwrap_or(i64::MIN), filter.agent_id, filter.native_active], session_from_row)?;
            let mut out = vec![];
            let mut skipped = 0u32;
            for row in rows {
                let row = row?;
                if filter.kinds.as_ref().is_some_and(|k| !k.contains(&row.kind)) {
                    continue;
                }
                if skipped < filter.offset {
                    skipped += 1;
                    continue;
                }
                out.push(row);
                if out.len() >= filter.limit as usize {
                    break;
                }
            }
            Ok(out)
        })
    }

    pub(crate) fn update_goal_op(
        tx: &Connection,
        key: &str,
        agent: &str,
        objective: Option<&str>,
        status: Option<&str>,
        now: Millis,
    ) -> Result<Option<SessionRow>> {
        let Some(before) = load_session(tx, key, agent)? else { return Ok(None) };
        tx.prepare_cached(
            "UPDATE sessions SET goal_objective = ?3, goal_status = ?4, updated_at = ?5 \
             WHERE session_key = ?1 AND agent_id = ?2",
        )?
        .execute(params![key, agent, objective, status, now])?;
        Ok(Some(before))
    }

    pub(crate) fn reset_session_op(
        tx: &Connection,
        key: &str,
        agent: &str,
        new_id: &str,
        now: Millis,
    ) -> Result<bool> {
        let n = tx.execute(
            "UPDATE sessions SET session_id = ?3, updated_at = ?4 WHERE session_key = ?1 AND agent_id = ?2",
            params![key, agent, new_id, now],
        )?;
        tx.execute(
            "DELETE FROM session_inbox WHERE session_key = ?1 AND agent_id = ?2",
            params![key, agent],
        )?;
        Ok(n > 0)
    }

    pub(crate) fn set_native_state_op(
        tx: &Connection,
        key: &str,
        agent: &str,
        cwd: Option<&str>,
        state: Option<&str>,
    ) -> Result<bool> {
        let n = tx
            .prepare_cached(
                "UPDATE sessions SET cwd = COALESCE(?3, cwd), native_state = COALESCE(?4, native_state) \
                 WHERE session_key = ?1 AND agent_id = ?2",
            )?
            .execute(params![key, agent, cwd, state])?;
        Ok(n > 0)
    }

    /// Moves the session's `updated_at` (and its host, when given); a kept row is patched, not dropped
    /// (`session_cache`). Nothing is written when a touch of the same transaction already set it to
    /// `now` or later (and named the same host), and a later time naming no new host is held and written
    /// once before the commit ([`WriteTx::hold_touch`]): a burst of turns shares a transaction, and each
    /// touch's `UPDATE` rewrote the row and its `idx_sessions_updated` entry (21.7k instructions each,
    /// half the turns of `bench gateway --part inbound` still writing one after the skip).
    pub(crate) fn touch_session_op(
        tx: &WriteTx<'_>,
        sessions: &Arc<SessionCache>,
        key: &str,
        agent: &str,
        host: Option<&str>,
        now: Millis,
    ) -> Result<()> {
        if tx.touch_is_written(key, agent, now, host) {
            return Ok(());
        }
        if tx.hold_touch(key, agent, now, host, sessions) {
            return Ok(());
        }
        let mark = sessions.mark();
        let changed = write_touch(tx, key, agent, now, host)?;
        sessions.touched(mark, key, agent, now, host);
        if changed > 0 {
            tx.wrote_touch(key, agent, now, host);
        }
        Ok(())
    }

    pub(crate) fn append_message_op(
        tx: &WriteTx<'_>,
        lengths: &TranscriptLengths,
        key: &str,
        agent: &str,
        m: &NewMessage,
        now: Millis,
    ) -> Result<i64> {
        // The id from the connection, not `RETURNING`: SQLite gathers returned rows in a temporary B-tree.
        tx.with(APPEND_MESSAGE, |st| {
            Ok(st.execute(params![
                key,
                agent,
                m.session_id,
                m.role,
                m.text,
                m.run_id,
                m.from_session,
                now
            ])?)
        })?;
        let id = tx.last_insert_rowid();
        let count = || -> Result<i64> {
            Ok(tx
                .prepare_cached(
                    "SELECT COUNT(*) FROM session_messages WHERE session_key = ?1 AND agent_id = ?2",
                )?
                .query_row(params![key, agent], |r| r.get(0))?)
        };
        if lengths.appended(key, agent, count)? > TRANSCRIPT_CAP + TRIM_SLACK {
            let removed = tx
                .prepare_cached(
                    "DELETE FROM session_messages WHERE session_key = ?1 AND agent_id = ?2 AND id <= \
                     (SELECT id FROM session_messages WHERE session_key = ?1 AND agent_id = ?2 \
                      ORDER BY id DESC LIMIT 1 OFFSET ?3)",
                )?
                .execute(params![key, agent, TRANSCRIPT_CAP])?;
            lengths.trimmed(key, agent, removed > 0);
        }
        Ok(id)
    }

    pub(crate) fn messages_sync(&self, key: &str, agent: &str, limit: u32) -> Result<Vec<TranscriptMessage>> {
        self.read(|c| {
            let mut out: Vec<TranscriptMessage> = c
                .prepare_cached(&format!(
                    "SELECT {MESSAGE_COLUMNS} FROM session_messages \
                     WHERE session_key = ?1 AND agent_id = ?2 ORDER BY id DESC LIMIT ?3"
                ))?
                // Never past the cap, whatever the trim's slack keeps for now.
                .query_map(params![key, agent, (limit as i64).min(TRANSCRIPT_CAP)], |r| {
                    Ok(message_from_row!(r, get))
                })?
                .collect::<rusqlite::Result<_>>()?;
            out.reverse();
            Ok(out)
        })
    }

    pub(crate) fn push_inbox_op(tx: &WriteTx<'_>, key: &str, agent: &str, item: &InboxItem) -> Result<i64> {
        // The id from the connection, not `RETURNING` (see `append_message_op`).
        tx.with(PUSH_INBOX, |st| {
            Ok(st.execute(params![key, agent, item.run_id, item.from_session, item.text, item.created_at])?)
        })?;
        Ok(tx.last_insert_rowid())
    }

    pub(crate) fn pending_inbox_op(c: &Connection, key: &str, agent: &str) -> Result<Vec<InboxItem>> {
        Ok(c.prepare_cached(
            "SELECT id, run_id, from_session, text, created_at FROM session_inbox \
             WHERE session_key = ?1 AND agent_id = ?2 ORDER BY id",
        )?
        .query_map(params![key, agent], inbox_item)?
        .collect::<rusqlite::Result<_>>()?)
    }

    pub(crate) fn session_activity_op(
        c: &Connection,
        sessions: &[(String, String)],
    ) -> Result<HashMap<(String, String), SessionActivity>> {
        let mut out: HashMap<(String, String), SessionActivity> = HashMap::new();
        let mut latest = c.prepare_cached(
            "SELECT status FROM session_runs WHERE session_key = ?1 AND agent_id = ?2 \
             ORDER BY created_at DESC, rowid DESC LIMIT 1",
        )?;
        for (key, agent) in sessions {
            if let Some(status) =
                latest.query_row(params![key, agent], |r| r.get::<_, Option<String>>(0)).optional()?
            {
                out.entry((key.clone(), agent.clone())).or_default().latest_run = Some(status);
            }
        }
        // A child's row names its parent by key alone (`idx_sessions_spawned_by`).
        let mut children = c.prepare_cached(
            "SELECT session_key FROM sessions WHERE spawned_by = ?1 AND spawned_by IS NOT NULL",
        )?;
        for s in sessions {
            let keys = children.query_map([&s.0], |r| r.get::<_, String>(0))?;
            let keys = keys.collect::<rusqlite::Result<Vec<_>>>()?;
            if !keys.is_empty() {
                out.entry(s.clone()).or_default().children.extend(keys);
            }
        }
        for a in out.values_mut() {
            a.children.sort();
        }
        Ok(out)
    }

    /// Read, then deleted when there is anything (the writer's transaction holds them meanwhile): a
    /// `DELETE … RETURNING` built a temporary B-tree and a statement journal on every drain, most of
    /// which find the inbox empty and now write nothing.
    pub(crate) fn take_inbox_op(tx: &Connection, key: &str, agent: &str) -> Result<Vec<InboxItem>> {
        let items = SqliteStore::pending_inbox_op(tx, key, agent)?;
        if !items.is_empty() {
            tx.prepare_cached("DELETE FROM session_inbox WHERE session_key = ?1 AND agent_id = ?2")?
                .execute(params![key, agent])?;
        }
        Ok(items)
    }
}

/// The touch's `UPDATE` (its held statement: found by its text's address, so every touch goes through
/// here). Answers the rows changed.
pub(crate) fn write_touch(
    tx: &WriteTx<'_>,
    key: &str,
    agent: &str,
    updated_at: Millis,
    host: Option<&str>,
) -> Result<usize> {
    tx.with(TOUCH, |st| Ok(st.execute(params![key, agent, updated_at, host])?))
}

/// A transcript is trimmed back to [`TRANSCRIPT_CAP`] once it is this far past it, not on every append:
/// finding the cut-off walks the cap's length of the index, which cost a sixth of an inbound turn when
/// done each time. Reads never show more than the cap.
const TRIM_SLACK: i64 = 64;

/// The length of each recently written transcript, so an append knows when to trim without counting.
/// Only a hint: a rolled-back append or another process writing the same file makes it drift, which
/// moves the next trim (exact whenever it runs) a little earlier or later. Bounded: cleared when full.
#[derive(Default)]
pub(crate) struct TranscriptLengths(std::sync::Mutex<std::collections::HashMap<(String, String), i64>>);

const TRANSCRIPT_LENGTHS_HELD: usize = 4096;

impl TranscriptLengths {
    /// One more message: answers the transcript's length, counted (`count`) the first time.
    fn appended(&self, key: &str, agent: &str, count: impl FnOnce() -> Result<i64>) -> Result<i64> {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let id = (key.to_string(), agent.to_string());
        if let Some(n) = held.get_mut(&id) {
            *n += 1;
            return Ok(*n);
        }
        let n = count()?;
        if held.len() >= TRANSCRIPT_LENGTHS_HELD {
            held.clear();
        }
        held.insert(id, n);
        Ok(n)
    }

    /// After a trim: the transcript holds the cap if the trim removed anything; if not, the hint was
    /// wrong (the session was deleted, say) and the next append counts again.
    fn trimmed(&self, key: &str, agent: &str, removed: bool) {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let id = (key.to_string(), agent.to_string());
        if removed {
            held.insert(id, TRANSCRIPT_CAP);
        } else {
            held.remove(&id);
        }
    }
}

/// An inbox row read as `id, run_id, from_session, text, created_at`.
fn inbox_item(r: &rusqlite::Row<'_>) -> rusqlite::Result<InboxItem> {
    Ok(inbox_from_row!(r, get))
}

#[cfg(test)]
mod tests {
    use super::super::schema;
    use super::super::transaction::{WriteTx, WriterMemory};
    use super::*;
    use std::cell::RefCell;

    /// A burst of turns to one session shares a transaction: its first touch writes the row, a later time
    /// (naming no new host) is held and written once before the commit, and one that would move
    /// `updated_at` back changes nothing.
    #[test]
    fn a_transaction_writes_a_sessions_first_touch_and_holds_a_later_one_for_the_commit() {
        let mut conn = Connection::open_in_memory().unwrap();
        schema::migrate(&mut conn).unwrap();
        conn.execute(
            "INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at, updated_at) \
             VALUES ('k', 'main', 's', 'main', 1, 1)",
            [],
        )
        .unwrap();
        let (memory, sessions) = (RefCell::new(WriterMemory::default()), Arc::new(SessionCache::default()));
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let tx = WriteTx::new(&conn, &memory).unwrap();
        let writes = |now: Millis, host: Option<&str>| {
            let before = tx.total_changes();
            SqliteStore::touch_session_op(&tx, &sessions, "k", "main", host, now).unwrap();
            tx.total_changes() - before
        };
        let stored = || -> (Millis, Option<String>) {
            tx.query_row("SELECT updated_at, host_id FROM sessions WHERE session_key = 'k'", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap()
        };
        let flushed = || {
            let before = tx.total_changes();
            tx.write_held().unwrap();
            tx.total_changes() - before
        };
        assert_eq!(writes(5, None), 1, "the transaction's first touch");
        assert_eq!(writes(5, None), 0, "the same time again");
        assert_eq!(writes(4, None), 0, "an earlier time: updated_at stays the later one");
        assert_eq!(writes(6, None), 0, "a later time is held");
        assert_eq!(stored(), (5, None));
        assert_eq!(flushed(), 1, "written before the commit");
        assert_eq!(stored(), (6, None));
        assert_eq!(flushed(), 0, "once");
        assert_eq!(writes(6, Some("gw")), 1, "a host this transaction did not name: written at once");
        assert_eq!(writes(6, Some("gw")), 0);
        assert_eq!(writes(9, None), 0, "no host given: held, the host named stays");
        tx.forget();
        assert_eq!(writes(8, None), 0, "a held touch outlives forgetting: 8 is earlier than the held 9");
        assert_eq!(flushed(), 1);
        assert_eq!(stored(), (9, Some("gw".into())));
        tx.forget();
        assert_eq!(writes(9, None), 1, "nothing held: forgotten, the next touch writes again");
        drop(tx);
        conn.execute_batch("COMMIT").unwrap();

        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let tx = WriteTx::new(&conn, &memory).unwrap();
        let before = tx.total_changes();
        SqliteStore::touch_session_op(&tx, &sessions, "k", "main", None, 7).unwrap();
        assert_eq!(tx.total_changes() - before, 1, "a new transaction touches again");
    }
}
