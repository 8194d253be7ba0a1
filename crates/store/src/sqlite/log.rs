//! Appending to the signal log and reading it back.

use super::{SqliteStore, watch};
use crate::tail::HeadRow;
use crate::{AppendOutcome, AppendRequest, Head, Result, StoreError, payload};
use rusqlite::{Connection, OptionalExtension, Row, params};
use sessionwatch_core::policy::{fan_out, on_append};
use sessionwatch_core::{
    Actor, ActorType, AppendCursors, ChangesPage, EventKind, Limit, Millis, StoredEvent,
};
use std::collections::HashMap;
use std::sync::Arc;

const EVENT_COLUMNS: &str = "sequence, session_key, agent_id, session_id, kind, actor_type, actor_id, run_id, \
     occurred_at, summary, payload_json, dedupe_key";

pub(crate) fn event_from_row(r: &Row<'_>) -> rusqlite::Result<StoredEvent> {
    let bad =
        |what: String| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, what.into());
    // Kind and actor type are matched in place, without allocating.
    let kind = r.get_ref(4)?.as_str()?;
    let kind = EventKind::parse(kind).ok_or_else(|| bad(format!("unknown event kind {kind:?}")))?;
    let actor_type = r.get_ref(5)?.as_str()?;
    let actor_type =
        ActorType::parse(actor_type).ok_or_else(|| bad(format!("unknown actor type {actor_type:?}")))?;
    Ok(StoredEvent {
        sequence: r.get::<_, i64>(0)? as u64,
        session_key: r.get(1)?,
        agent_id: r.get(2)?,
        session_id: r.get(3)?,
        kind,
        actor: Actor { kind: actor_type, id: r.get(6)? },
        run_id: r.get(7)?,
        occurred_at: r.get(8)?,
        summary: r.get(9)?,
        payload: payload::decode(r.get_ref(10)?.as_str_or_null()?),
        dedupe_key: r.get(11)?,
    })
}

pub(crate) fn head(conn: &Connection, key: &str, agent: &str) -> Result<Head> {
    let row = conn
        .prepare_cached(
            "SELECT head, floor FROM session_state_heads WHERE session_key = ?1 AND agent_id = ?2",
        )?
        .query_row(params![key, agent], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
        .optional()?;
    Ok(row.map_or(Head::default(), |(h, f)| Head { head: h as u64, floor: f as u64 }))
}

/// The session's durable head row; a session never appended to reads as all zeros.
fn head_row(conn: &Connection, key: &str, agent: &str) -> Result<HeadRow> {
    let row = conn
        .prepare_cached(
            "SELECT head, floor, updated_at FROM session_state_heads WHERE session_key = ?1 AND agent_id = ?2",
        )?
        .query_row(params![key, agent], |r| {
            Ok(HeadRow { head: r.get::<_, i64>(0)? as u64, floor: r.get::<_, i64>(1)? as u64, updated_at: r.get(2)? })
        })
        .optional()?;
    Ok(row.unwrap_or(HeadRow { head: 0, floor: 0, updated_at: 0 }))
}

impl SqliteStore {
    /// Appends; a recorded event comes with its session's head row after the append (for the tail cache).
    pub(crate) fn append_op(
        tx: &Connection,
        req: &AppendRequest,
        now: Millis,
    ) -> Result<(AppendOutcome, Option<HeadRow>)> {
        let e = &req.event;
        if let Some(dedupe) = &e.dedupe_key {
            let existing = tx
                .prepare_cached(&format!(
                    "SELECT {EVENT_COLUMNS} FROM session_state_events \
                     WHERE session_key = ?1 AND agent_id = ?2 AND dedupe_key = ?3"
                ))?
                .query_row(params![e.session_key, e.agent_id, dedupe], event_from_row)
                .optional()?;
            if let Some(existing) = existing {
                return Ok((AppendOutcome::Duplicate(existing), None));
            }
        }
        if req.policy.only_if_watched && !watch::is_watched(tx, &e.session_key)? {
            return Ok((AppendOutcome::Unwatched, None));
        }
        let (sequence, floor): (i64, i64) = tx
            .prepare_cached(
                "INSERT INTO session_state_heads (session_key, agent_id, head, floor, updated_at) \
                 VALUES (?1, ?2, 1, 0, ?3) \
                 ON CONFLICT (session_key, agent_id) DO UPDATE SET head = head + 1, updated_at = ?3 \
                 RETURNING head, floor",
            )?
            .query_row(params![e.session_key, e.agent_id, now], |r| Ok((r.get(0)?, r.get::<_, i64>(1)?)))
            .map_err(StoreError::classify)?;
        let stored = e.stored(sequence as u64, now);
        tx.prepare_cached(
            "INSERT INTO session_state_events (session_key, agent_id, sequence, session_id, kind, actor_type, \
             actor_id, run_id, occurred_at, summary, payload_json, dedupe_key, id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, \
             (SELECT COALESCE(MAX(id), 0) + 1 FROM session_state_events))",
        )?
        .execute(params![
            stored.session_key,
            stored.agent_id,
            sequence,
            stored.session_id,
            stored.kind.as_str(),
            stored.actor.kind.as_str(),
            stored.actor.id,
            stored.run_id,
            stored.occurred_at,
            stored.summary,
            payload::encode(&stored.payload),
            stored.dedupe_key,
        ])
        .map_err(StoreError::classify)?;

        let sequence = sequence as u64;
        let notices = match on_append(e.kind, &e.session_key, &req.policy, sequence, &req.watcher_store, now)
        {
            AppendCursors::Untouched => vec![],
            AppendCursors::Seed(seeds) => {
                for (watcher, seeded) in &seeds {
                    watch::save_cursor(tx, watcher, &e.session_key, seeded)?;
                }
                vec![]
            }
            AppendCursors::FanOut => {
                let cursors = watch::settled_cursors_on(tx, &e.session_key)?;
                let out = fan_out(
                    &e.session_key,
                    e.actor.id.as_deref(),
                    sequence,
                    &req.watcher_store,
                    now,
                    cursors,
                );
                for (watcher, cursor) in &out.moved {
                    watch::save_cursor(tx, watcher, &e.session_key, cursor)?;
                }
                out.notices
            }
        };
        let row = HeadRow { head: sequence, floor: floor as u64, updated_at: now };
        Ok((AppendOutcome::Recorded { event: stored, notices }, Some(row)))
    }

    /// A recent window answered on the calling thread ([`read_now`](SqliteStore::read_now)). `None`
    /// sends the caller to [`changes_since_sync`](Self::changes_since_sync): no probe free, the database
    /// busy, or no page from the tail.
    pub(crate) fn tail_page_now(
        &self,
        key: &str,
        agent: &str,
        since: u64,
        limit: Limit,
    ) -> Option<ChangesPage> {
        self.read_now(|c| self.tail_page(c, key, agent, since, limit)).flatten()
    }

    /// The page from the tail cache if it holds the session and the durable head row, read on `c`, still
    /// says what its entry says (so another process's writes are never hidden).
    fn tail_page(
        &self,
        c: &Connection,
        key: &str,
        agent: &str,
        since: u64,
        limit: Limit,
    ) -> Result<Option<ChangesPage>> {
        let tail = &self.inner.tail;
        if !tail.holds(key, agent) {
            return Ok(None); // a miss need not read the head row
        }
        Ok(tail.page(key, agent, since, limit, head_row(c, key, agent)?))
    }

    pub(crate) fn changes_since_sync(
        &self,
        key: &str,
        agent: &str,
        since: u64,
        limit: Limit,
    ) -> Result<ChangesPage> {
        self.read(|c| {
            if let Some(page) = self.tail_page(c, key, agent, since, limit)? {
                return Ok(page);
            }
            // One read transaction so the head, floor and rows agree.
            c.prepare_cached("BEGIN")?.execute([])?;
            let out = (|| {
                let row = head_row(c, key, agent)?;
                let rows = c
                    .prepare_cached(&page_sql())?
                    .query_map(
                        params![key, agent, since.min(i64::MAX as u64) as i64, limit.get() as i64 + 1],
                        |r| event_from_row(r).map(Arc::new),
                    )?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(ChangesPage::assemble(rows, limit, since, row.head, row.floor))
            })();
            let _ = c.prepare_cached("COMMIT").and_then(|mut s| s.execute([]));
            out
        })
    }

    pub(crate) fn state_versions_sync(
        &self,
        sessions: &[(String, String)],
    ) -> Result<HashMap<(String, String), u64>> {
        self.read(|c| {
            let mut out = HashMap::new();
            for chunk in sessions.chunks(400) {
                let placeholders = vec!["(?, ?)"; chunk.len()].join(", ");
                let sql = format!(
                    "SELECT session_key, agent_id, head FROM session_state_heads \
                     WHERE (session_key, agent_id) IN (VALUES {placeholders})"
                );
                let mut stmt = c.prepare(&sql)?;
                let args: Vec<&str> = chunk.iter().flat_map(|(k, a)| [k.as_str(), a.as_str()]).collect();
                let rows = stmt.query_map(rusqlite::params_from_iter(args), |r| {
                    Ok(((r.get::<_, String>(0)?, r.get::<_, String>(1)?), r.get::<_, i64>(2)? as u64))
                })?;
                for row in rows {
                    let (k, v) = row?;
                    out.insert(k, v);
                }
            }
            Ok(out)
        })
    }
}

/// A `changesSince` page read from the log: the events after `?3`, at most `?4`.
fn page_sql() -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM session_state_events \
         WHERE session_key = ?1 AND agent_id = ?2 AND sequence > ?3 ORDER BY sequence LIMIT ?4"
    )
}

#[cfg(test)]
mod tests {
    use super::page_sql;
    use crate::{AppendRequest, SqliteOptions, SqliteStore, Store};
    use sessionwatch_core::{Limit, NewEvent};
    use tempfile::TempDir;

    const KEY: &str = "agent:main:a";

    /// A fresh store with `events` human messages appended to [`KEY`].
    async fn store_with(events: i64) -> (SqliteStore, TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("state.db"), SqliteOptions::default()).unwrap();
        for i in 0..events {
            let req = AppendRequest::new(NewEvent::human_message(KEY, "main", "telegram", None), "s");
            store.append(req, 1_000 + i).await.unwrap();
        }
        (store, dir)
    }

    /// The tail page read on the caller's thread: served for a session this store wrote, `None` (the
    /// blocking path) for one it holds nothing of; and its readers never wait for a lock.
    #[tokio::test]
    async fn a_recent_window_is_answered_on_the_calling_thread_by_readers_that_never_wait() {
        let (store, _dir) = store_with(3).await;
        let limit = Limit::new(200).unwrap();
        let page = store.tail_page_now(KEY, "main", 1, limit).expect("served from the tail");
        assert_eq!(page.events.iter().map(|e| e.sequence).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(page, store.changes_since_sync(KEY, "main", 1, limit).unwrap(), "the log's page");
        assert!(store.tail_page_now("agent:main:other", "main", 0, limit).is_none());
        for probe in store.inner.probes.lock().unwrap().iter() {
            let wait: i64 = probe.query_row("PRAGMA busy_timeout", [], |r| r.get(0)).unwrap();
            assert_eq!(wait, 0, "a probe never waits for a lock");
        }
    }

    /// Regression: under STAT4 (the bundled SQLite's build) every new binding recompiled the cached
    /// statement on its next step, so each cold `changesSince` page (and each append) paid a compile.
    #[tokio::test]
    async fn cached_statements_are_not_compiled_again_for_new_bindings() {
        use rusqlite::StatementStatus::{RePrepare, Run};
        let (store, _dir) = store_with(300).await;
        store.inner.tail.clear(); // every page below is read from the log
        let limit = Limit::new(200).unwrap();
        for since in [0, 10, 20, 30, 40] {
            store.changes_since_sync(KEY, "main", since, limit).unwrap();
        }
        let (runs, recompiled) = store
            .read(|c| {
                let st = c.prepare_cached(&page_sql())?;
                Ok((st.get_status(Run), st.get_status(RePrepare)))
            })
            .unwrap();
        assert_eq!(runs, 5, "the pages were read with this statement");
        assert_eq!(recompiled, 0);
    }
}
