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

/// The stored head row of session (?1, ?2), tagged 1. It is written only when retention raises the floor
/// (then its head is at least the floor), never by an append, so an append writes one B-tree fewer.
macro_rules! stored_head_sql {
    () => {
        "SELECT head, floor, updated_at, 1 FROM session_state_heads WHERE session_key = ?1 AND agent_id = ?2"
    };
}
/// A session's durable head row, derived: the head is the larger of the stored head and the log's last
/// sequence; a session never appended to reads as all zeros. One row per source, tagged: 0 the log's
/// last event, 1 the stored row.
const HEAD_ROW: &str = concat!(
    "SELECT sequence, id, occurred_at, 0 FROM (SELECT sequence, id, occurred_at FROM session_state_events \
     WHERE session_key = ?1 AND agent_id = ?2 ORDER BY sequence DESC LIMIT 1) UNION ALL ",
    stored_head_sql!()
);
/// What an append numbers from: the head as [`HEAD_ROW`] has it, without the last event's id and time
/// (the append replaces them; reading its time costs a seek into the table, the sequence is in the
/// index), and, tagged 2, the largest global id (the append's is one more).
const HEAD_AND_LAST_ID: &str = concat!(
    "SELECT sequence, 0, 0, 0 FROM (SELECT sequence FROM session_state_events \
     WHERE session_key = ?1 AND agent_id = ?2 ORDER BY sequence DESC LIMIT 1) UNION ALL ",
    stored_head_sql!(),
    " UNION ALL SELECT COALESCE(MAX(id), 0), 0, 0, 2 FROM session_state_events"
);

/// Runs `sql` (tagged rows as [`HEAD_ROW`]'s) for the session: its head row and the tag-2 value (0 if none).
fn derived_head_row(conn: &Connection, sql: &str, key: &str, agent: &str) -> Result<(HeadRow, i64)> {
    let mut row = HeadRow::default();
    let (mut stored_head, mut extra) = (0, 0);
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params![key, agent])?;
    while let Some(r) = rows.next()? {
        let (a, b, c): (i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
        match r.get::<_, i64>(3)? {
            0 => (row.head, row.head_id, row.head_at) = (a as u64, b, c),
            1 => (stored_head, row.floor, row.updated_at) = (a as u64, b as u64, c),
            _ => extra = a,
        }
    }
    row.head = row.head.max(stored_head);
    Ok((row, extra))
}

pub(crate) fn head(conn: &Connection, key: &str, agent: &str) -> Result<Head> {
    let row = head_row(conn, key, agent)?;
    Ok(Head { head: row.head, floor: row.floor })
}

fn head_row(conn: &Connection, key: &str, agent: &str) -> Result<HeadRow> {
    Ok(derived_head_row(conn, HEAD_ROW, key, agent)?.0)
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
        let (before, last_id) = derived_head_row(tx, HEAD_AND_LAST_ID, &e.session_key, &e.agent_id)?;
        let (sequence, id) = ((before.head + 1) as i64, last_id + 1);
        let stored = e.stored(sequence as u64, now);
        tx.prepare_cached(
            "INSERT INTO session_state_events (session_key, agent_id, sequence, session_id, kind, actor_type, \
             actor_id, run_id, occurred_at, summary, payload_json, dedupe_key, id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
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
            id,
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
        let row = HeadRow { head: sequence, head_id: id, head_at: stored.occurred_at, ..before };
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
            for (key, agent) in sessions {
                let head = head(c, key, agent)?.head;
                if head > 0 {
                    out.insert((key.clone(), agent.clone()), head);
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

    /// An append rolled back with its batch (another job in it failed half-done) leaves no hole in the
    /// numbering.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_append_rolled_back_with_its_batch_leaves_no_hole() {
        use crate::{AppendOutcome, StoreError};
        let (store, _dir) = store_with(1).await;
        let human = || AppendRequest::new(NewEvent::human_message(KEY, "main", "telegram", None), "s");
        let held = store.inner.writer.hold();
        let (appended, failed, ()) = tokio::join!(
            store.append(human(), 2_000),
            store.write_async(|c| -> crate::Result<()> {
                c.execute("INSERT INTO sessionwatch_meta (key, value) VALUES ('test', 'x')", [])?;
                Err(StoreError::InvalidData("fails after writing".into()))
            }),
            async move {
                tokio::task::yield_now().await; // both are queued by now
                drop(held);
            }
        );
        assert!(appended.is_err(), "rolled back with the failed job: {appended:?}");
        assert!(failed.is_err());
        match store.append(human(), 3_000).await.unwrap() {
            AppendOutcome::Recorded { event, .. } => assert_eq!(event.sequence, 2),
            other => panic!("{other:?}"),
        }
    }

    /// A session whose state was deleted starts again from 1, with nothing else appended in between.
    #[tokio::test]
    async fn a_deleted_session_numbers_from_one_again() {
        use crate::AppendOutcome;
        let (store, _dir) = store_with(3).await;
        store.delete_session_state(KEY.into(), "main".into()).await.unwrap();
        let req = AppendRequest::new(NewEvent::human_message(KEY, "main", "telegram", None), "s");
        match store.append(req, 2_000).await.unwrap() {
            AppendOutcome::Recorded { event, .. } => assert_eq!(event.sequence, 1),
            other => panic!("{other:?}"),
        }
    }

    /// After retention moved a session's floor, the appends that follow fill a tail entry that answers
    /// recent windows again.
    #[tokio::test]
    async fn after_pruning_recent_windows_are_answered_from_the_tail_again() {
        use crate::RetentionPolicy;
        let (store, _dir) = store_with(5).await;
        let policy = RetentionPolicy { max_rows: 2, ..RetentionPolicy::default() };
        store.prune(policy, 2_000).await.unwrap();
        let req = AppendRequest::new(NewEvent::human_message(KEY, "main", "telegram", None), "s");
        store.append(req, 3_000).await.unwrap();
        let limit = Limit::new(200).unwrap();
        let page = store.tail_page_now(KEY, "main", 5, limit).expect("served from the tail");
        assert_eq!(page, store.changes_since_sync(KEY, "main", 5, limit).unwrap());
        assert_eq!(page.events.iter().map(|e| e.sequence).collect::<Vec<_>>(), vec![6]);
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
