//! Appending to the signal log and reading it back.

use super::transaction::WriteTx;
use super::{SqliteStore, watch};
use crate::tail::HeadRow;
use crate::{AppendOutcome, AppendRequest, Head, Result, StoreError, payload};
use rusqlite::{Connection, OptionalExtension, Row, params};
use sessionwatch_core::policy::{fan_out, on_append, spawn_seed};
use sessionwatch_core::{
    Actor, ActorType, AppendCursors, ChangesPage, Cursor, EventKind, Limit, Millis, NewEvent, Notice,
    RecordPolicy, StoredEvent,
};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock};

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

/// A session's durable head row; every append moves it (a session never appended to has none, and
/// reads as all zeros). A small table: the rows of many sessions share a leaf, so a commit of appends to
/// several sessions dirties a page or two of it, where the log's per-session index took one each.
const HEAD_ROW: &str = "SELECT head, floor, updated_at, head_id, head_at FROM session_state_heads \
     WHERE session_key = ?1 AND agent_id = ?2";

/// The largest id in the log and the staging table: an append's is one more.
/// Staged ids are all above logged ones: the log is read only when nothing is staged.
const LAST_ID: &str = "SELECT COALESCE((SELECT MAX(id) FROM session_state_events_staged), \
     (SELECT MAX(id) FROM session_state_events), 0)";

/// The event an append's dedupe key already names, in the log or staged (its text built once).
static DEDUPED: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {EVENT_COLUMNS} FROM session_state_events \
         WHERE session_key = ?1 AND agent_id = ?2 AND dedupe_key = ?3 UNION ALL \
         SELECT {EVENT_COLUMNS} FROM session_state_events_staged \
         WHERE session_key = ?1 AND agent_id = ?2 AND dedupe_key = ?3"
    )
});

/// Copies the staged rows with ids up to `last` into the log, in id order (the log's right edge grows,
/// its leaves fill whole); the caller deletes them from the staging table.
fn copy_staged_through(tx: &Connection, last: i64) -> Result<()> {
    tx.prepare_cached(&format!(
        "INSERT INTO session_state_events (id, {EVENT_COLUMNS}) \
         SELECT id, {EVENT_COLUMNS} FROM session_state_events_staged WHERE id <= ?1 ORDER BY id"
    ))?
    .execute([last])?;
    Ok(())
}

/// Moves every staged row into the log. The `DELETE` without a `WHERE` empties the table at once.
pub(crate) fn fold(tx: &Connection) -> Result<()> {
    copy_staged_through(tx, i64::MAX)?;
    tx.prepare_cached("DELETE FROM session_state_events_staged")?.execute([])?;
    Ok(())
}

/// Moves the oldest staged rows, those of the `ids` ids from the first staged one, into the log.
/// Folding the oldest keeps what reads rely on: every staged id is above every logged one, and each
/// session's staged sequences above its logged ones. Answers how many rows it moved.
fn fold_oldest(tx: &Connection, ids: i64) -> Result<usize> {
    let Some(first) = tx.prepare_cached(OLDEST_STAGED)?.query_row([], |r| r.get::<_, Option<i64>>(0))? else {
        return Ok(0);
    };
    let last = first.saturating_add(ids - 1);
    copy_staged_through(tx, last)?;
    Ok(tx.prepare_cached("DELETE FROM session_state_events_staged WHERE id <= ?1")?.execute([last])?)
}

/// The fewest staged rows the writer folds when it is idle ([`fold_when_idle`]).
const IDLE_FOLD_ROWS: i64 = 256;

/// The ids an idle fold moves per transaction ([`fold_when_idle`]): a job that comes meanwhile waits for
/// one such step (a few milliseconds), not for a whole staging table's.
const IDLE_FOLD_STEP: i64 = 2048;

/// The writer's idle work: if at least [`IDLE_FOLD_ROWS`] rows are staged, folds them, oldest first, in
/// transactions of [`IDLE_FOLD_STEP`] ids, and stops between two once `job_waiting` says a job came (the
/// rest is folded when the writer is next idle), or after a step short of its ids' worth (staged ids
/// are consecutive but for deleted sessions' rows: the table is then empty or nearly). Otherwise an
/// append finds `SqliteOptions::staged_rows` ids' worth staged ([`due_for_fold`]), folds them all and
/// waits for the copy.
/// A burst's rows are mostly folded after it; fewer rows wait, so idle moments are not each spent on a
/// commit. `asked`: an append on a caller's thread found a fold due and left it here (whatever is staged
/// is folded, at least one step's worth whether a job waits or not).
pub(crate) fn fold_when_idle(conn: &Connection, asked: bool, job_waiting: &dyn Fn() -> bool) -> Result<()> {
    let staged: i64 = conn
        .prepare_cached("SELECT count(*) FROM (SELECT 1 FROM session_state_events_staged LIMIT ?1)")?
        .query_row([IDLE_FOLD_ROWS], |r| r.get(0))?;
    if staged < IDLE_FOLD_ROWS && !asked {
        return Ok(());
    }
    // An asked fold does its first step even with a job waiting: else an append whose turn came just as
    // the fold did would leave it to the next due append, a staging round later.
    let mut first_step_asked = asked;
    while std::mem::take(&mut first_step_asked) || !job_waiting() {
        let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
        let moved = fold_oldest(&tx, IDLE_FOLD_STEP)?;
        tx.commit()?;
        if moved < IDLE_FOLD_STEP as usize {
            break;
        }
    }
    Ok(())
}

/// How many ids apart an append asks whether the staging table is due for a fold ([`due_for_fold`]):
/// often enough that the table never holds much more than `SqliteOptions::staged_rows`, rarely enough that
/// the probe costs nothing.
const FOLD_CHECK_IDS: i64 = 1024;

/// The oldest staged id: one step down the staging table's rowid tree.
const OLDEST_STAGED: &str = "SELECT MIN(id) FROM session_state_events_staged";

/// Whether the append of `id` folds the staging table: at every [`FOLD_CHECK_IDS`]th id (or `fold_every`th,
/// if fewer), when the oldest staged row is `fold_every` ids old or more. Not at every multiple of
/// `fold_every` whatever is staged: after a burst the idle fold empties the table, and the next burst
/// would otherwise fold inline wherever its ids crossed a multiple, stalling every write queued behind
/// the copy (12 % of the writer's samples in a profile of `bench kernel --part writers`).
fn due_for_fold(tx: &WriteTx<'_>, id: i64, fold_every: i64) -> Result<bool> {
    if id % FOLD_CHECK_IDS.min(fold_every) != 0 {
        return Ok(false);
    }
    let oldest = tx.with(OLDEST_STAGED, |st| Ok(st.query_row([], |r| r.get::<_, Option<i64>>(0))?))?;
    Ok(oldest.is_some_and(|oldest| id - oldest + 1 >= fold_every))
}

/// An append's fold, under a savepoint: a fold that fails (a disk with room for an append but not for
/// the copy) leaves the append recorded and the rows staged, for the next fold. Only a failure that took
/// the whole transaction with it fails the append.
fn fold_or_keep_staged(tx: &Connection) -> Result<()> {
    tx.prepare_cached("SAVEPOINT fold")?.execute([])?;
    if let Err(e) = fold(tx) {
        tx.prepare_cached("ROLLBACK TO fold")?.execute([])?;
        tracing::warn!(error = %e, "folding the staged appends into the log failed; they stay staged");
    }
    tx.prepare_cached("RELEASE fold")?.execute([])?;
    Ok(())
}

pub(crate) fn last_id(conn: &Connection) -> Result<i64> {
    Ok(conn.prepare_cached(LAST_ID)?.query_row([], |r| r.get(0))?)
}

pub(crate) fn head(conn: &Connection, key: &str, agent: &str) -> Result<Head> {
    let row = head_row(conn, key, agent)?;
    Ok(Head { head: row.head, floor: row.floor })
}

pub(crate) fn head_row(conn: &Connection, key: &str, agent: &str) -> Result<HeadRow> {
    head_row_with(&mut *conn.prepare_cached(HEAD_ROW)?, key, agent)
}

/// [`head_row`] through `HEAD_ROW` prepared by the caller.
fn head_row_with(st: &mut rusqlite::Statement<'_>, key: &str, agent: &str) -> Result<HeadRow> {
    let row = st
        .query_row(params![key, agent], |r| {
            Ok(HeadRow {
                head: r.get::<_, i64>(0)? as u64,
                floor: r.get::<_, i64>(1)? as u64,
                updated_at: r.get(2)?,
                head_id: r.get(3)?,
                head_at: r.get(4)?,
            })
        })
        .optional()?;
    Ok(row.unwrap_or_default())
}

/// Stages an appended event (the log's columns and its id).
const STAGE: &str = "INSERT INTO session_state_events_staged (session_key, agent_id, sequence, session_id, \
     kind, actor_type, actor_id, run_id, occurred_at, summary, payload_json, dedupe_key, id) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";

/// Moves a session's head row to the event just staged (its floor stays): [`WriteTx::move_head`].
/// Parameters: session key, agent, head, now, head event id, head event time.
pub(crate) const MOVE_HEAD: &str = "INSERT INTO session_state_heads \
     (session_key, agent_id, head, floor, updated_at, head_id, head_at) VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6) \
     ON CONFLICT (session_key, agent_id) DO UPDATE SET head = ?3, updated_at = ?4, head_id = ?5, head_at = ?6";

/// What an append does to the cursors on its session (spawn seeding, or the fan-out of a material event),
/// as core decides from the cursors it reads: the cursors to write and the notices they cause.
struct CursorMoves {
    moved: Vec<(String, Cursor)>,
    notices: Vec<Notice>,
    /// A spawn seeded its producer's watchers (the target may have settled cursors now).
    seeded: bool,
}

/// Reads what [`CursorMoves`] needs; writes nothing.
fn cursor_moves(
    tx: &WriteTx<'_>,
    e: &NewEvent,
    sequence: u64,
    policy: &RecordPolicy,
    watcher_store: &str,
    now: Millis,
) -> Result<CursorMoves> {
    let target = &e.session_key;
    Ok(match on_append(e.kind, target, policy) {
        AppendCursors::Untouched => CursorMoves { moved: vec![], notices: vec![], seeded: false },
        AppendCursors::Seed(watchers) => {
            let mut moved = Vec::with_capacity(watchers.len());
            for watcher in watchers {
                let existing = watch::load_cursor(tx, &watcher, target)?;
                let seeded = spawn_seed(existing.as_ref(), sequence, watcher_store, now);
                moved.push((watcher, seeded));
            }
            CursorMoves { moved, notices: vec![], seeded: true }
        }
        AppendCursors::FanOut => {
            // A target found without a settled cursor (none, or all pending) is not looked at again
            // until a write other than an append may have settled or added one.
            let cursors = if tx.has_no_settled_cursors(target) {
                vec![]
            } else {
                let cursors = watch::settled_cursors_on(tx, target)?;
                if cursors.is_empty() {
                    tx.found_no_settled_cursors(target);
                }
                cursors
            };
            let out = fan_out(target, e.actor.id.as_deref(), sequence, watcher_store, now, cursors);
            CursorMoves { moved: out.moved, notices: out.notices, seeded: false }
        }
    })
}

impl SqliteStore {
    /// Appends to the staging table, folding it into the log once it holds `fold_every` ids' worth
    /// ([`due_for_fold`]); a recorded event comes with its session's head row after the append (for the
    /// tail cache).
    pub(crate) fn append_op(
        tx: &WriteTx<'_>,
        req: AppendRequest,
        now: Millis,
        fold_every: i64,
    ) -> Result<(AppendOutcome, Option<HeadRow>)> {
        let AppendRequest { event: e, policy, watcher_store, .. } = req;
        if let Some(dedupe) = &e.dedupe_key {
            let existing = tx.with(DEDUPED.as_str(), |st| {
                Ok(st.query_row(params![e.session_key, e.agent_id, dedupe], event_from_row).optional()?)
            })?;
            if let Some(existing) = existing {
                return Ok((AppendOutcome::Duplicate(Box::new(existing)), None));
            }
        }
        if policy.only_if_watched && !watch::is_watched(tx, &e.session_key)? {
            return Ok((AppendOutcome::Unwatched, None));
        }
        let before = match tx.head(&e.session_key, &e.agent_id) {
            Some(row) => row,
            None => tx.with(HEAD_ROW, |st| head_row_with(st, &e.session_key, &e.agent_id))?,
        };
        let last_id = match tx.last_id() {
            Some(id) => id,
            None => last_id(tx)?,
        };
        let (sequence, id) = ((before.head + 1) as i64, last_id + 1);
        let cursors = cursor_moves(tx, &e, sequence as u64, &policy, &watcher_store, now)?;
        // Every read is done: what fails from here is a write (a full disk, an I/O error).
        let stored = e.into_stored(sequence as u64, now);
        tx.with(STAGE, |st| {
            st.execute(params![
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
            .map_err(StoreError::classify)
        })?;
        tx.wrote(id);
        let row = HeadRow {
            head: sequence as u64,
            updated_at: now,
            head_id: id,
            head_at: stored.occurred_at,
            ..before
        };
        tx.move_head(&stored.session_key, &stored.agent_id, row)?;
        if due_for_fold(tx, id, fold_every)? && !tx.defer_fold() {
            fold_or_keep_staged(tx)?;
        }
        for (watcher, cursor) in &cursors.moved {
            watch::save_cursor(tx, watcher, &stored.session_key, cursor)?;
        }
        if cursors.seeded {
            tx.wrote_cursors_on(&stored.session_key);
        }
        let notices = cursors.notices;
        Ok((AppendOutcome::Recorded { event: Arc::new(stored), notices }, Some(row)))
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
        if self.inner.exclusive() {
            let commits = self.inner.commits.load(Ordering::Acquire);
            if let Some(page) = self.inner.tail.page_unchanged(key, agent, since, limit, commits) {
                return Some(page);
            }
        }
        self.read_now(|c| self.tail_page(c, key, agent, since, limit)).flatten()
    }

    /// The page from the tail cache if it holds the session and the durable head row, read on `c`, still
    /// says what its entry says (so another process's writes are never hidden). An exclusive store
    /// notes the commit count taken before the read with the entry ([`crate::tail::Tail::page_unchanged`]).
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
        // Taken before the read transaction begins, so the row read is at least as new as this count.
        let checked_at = self.inner.exclusive().then(|| self.inner.commits.load(Ordering::Acquire));
        Ok(tail.page(key, agent, since, limit, head_row(c, key, agent)?, checked_at))
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
                let wanted = limit.get() as usize + 1;
                let mut rows = log_page(c, key, agent, since, wanted)?;
                // The staged rows are the session's newest: read them only if the page reaches past the log.
                let last = rows.last().map_or(since, |e| e.sequence);
                if rows.len() < wanted && last < row.head {
                    let mut staged = staged_after(c, key, agent, row, last)?;
                    staged.truncate(wanted - rows.len());
                    rows.extend(staged);
                }
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
static LOG_PAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {EVENT_COLUMNS} FROM session_state_events \
         WHERE session_key = ?1 AND agent_id = ?2 AND sequence > ?3 ORDER BY sequence LIMIT ?4"
    )
});

/// A session's staged rows, newest first from its head event (`?3`, its id) down: the staging table has
/// no per-session index, and a session's rows are in id order, so the scan starts at the head row's id
/// and its caller stops it once it has what it needs.
static STAGED_NEWEST_FIRST: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {EVENT_COLUMNS} FROM session_state_events_staged \
         WHERE id <= ?3 AND session_key = ?1 AND agent_id = ?2 ORDER BY id DESC"
    )
});

/// The session's events after `after` that are staged, oldest first: those up to the head, which are
/// all staged when the log ends at or before `after`. Scans from the head event down, no further
/// than the first of them.
fn staged_after(
    c: &Connection,
    key: &str,
    agent: &str,
    head: HeadRow,
    after: u64,
) -> Result<Vec<Arc<StoredEvent>>> {
    let mut stmt = c.prepare_cached(&STAGED_NEWEST_FIRST)?;
    let mut rows = stmt.query(params![key, agent, head.head_id])?;
    let mut out = Vec::with_capacity(head.head.saturating_sub(after).min(256) as usize);
    while let Some(r) = rows.next()? {
        let event = event_from_row(r)?;
        if event.sequence <= after {
            break;
        }
        let first = event.sequence == after + 1;
        out.push(Arc::new(event));
        if first {
            break;
        }
    }
    out.reverse();
    Ok(out)
}

fn log_page(
    c: &Connection,
    key: &str,
    agent: &str,
    since: u64,
    limit: usize,
) -> Result<Vec<Arc<StoredEvent>>> {
    Ok(c.prepare_cached(&LOG_PAGE)?
        .query_map(params![key, agent, since.min(i64::MAX as u64) as i64, limit as i64], |r| {
            event_from_row(r).map(Arc::new)
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?)
}

#[cfg(test)]
mod tests {
    use super::LOG_PAGE;
    use crate::{AppendOutcome, AppendRequest, SignalLog, SqliteOptions, SqliteStore};
    use rusqlite::Connection;
    use sessionwatch_core::{Limit, NewEvent};
    use tempfile::TempDir;

    const KEY: &str = "agent:main:a";

    /// Returns once the tail holds every append answered so far: an append's caller hears just before
    /// the writer puts its event in the tail, and the writer does so before it runs the next write.
    async fn tail_filled(store: &SqliteStore) {
        store.write_async(|_| Ok(())).await.unwrap();
    }

    /// A human message to [`KEY`].
    fn human() -> AppendRequest {
        AppendRequest::new(NewEvent::human_message(KEY, "main", "telegram", None), "s")
    }

    /// Appends [`human`], which must be recorded: answers its sequence.
    async fn human_sequence(store: &SqliteStore, now: i64) -> u64 {
        match store.append(human(), now).await.unwrap() {
            AppendOutcome::Recorded { event, .. } => event.sequence,
            other => panic!("{other:?}"),
        }
    }

    /// A fresh store with `events` human messages appended to [`KEY`].
    async fn store_with(events: i64) -> (SqliteStore, TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("state.db"), SqliteOptions::default()).unwrap();
        for i in 0..events {
            human_sequence(&store, 1_000 + i).await;
        }
        (store, dir)
    }

    /// An idle fold moves the oldest staged rows a step at a time, and stops between two steps once a
    /// job is waiting: that job waits for one step, not for the whole staging table; the next idle
    /// moment folds the rest.
    #[test]
    fn an_idle_fold_goes_a_step_at_a_time_and_stops_for_a_waiting_job() {
        const STAGED: i64 = 5_000;
        let (_dir, conn) = staged(STAGED);
        let count = |table: &str| count(&conn, table);
        let asked = std::cell::Cell::new(0);
        let job_after_one_step = || {
            asked.set(asked.get() + 1);
            asked.get() > 1
        };
        super::fold_when_idle(&conn, false, &job_after_one_step).unwrap();
        let step = super::IDLE_FOLD_STEP;
        assert_eq!(count("session_state_events"), (step, 1, step), "one step, the oldest rows");
        assert_eq!(count("session_state_events_staged"), (STAGED - step, step + 1, STAGED), "the rest stays");
        super::fold_when_idle(&conn, false, &|| false).unwrap();
        assert_eq!(count("session_state_events"), (STAGED, 1, STAGED), "the next idle moment folds the rest");
        assert_eq!(count("session_state_events_staged").0, 0);
    }

    /// A fold an append left to the idle work (`asked`) is done even below the idle fold's least rows,
    /// and its first step even with a job waiting.
    #[test]
    fn an_asked_fold_takes_its_first_step_whatever() {
        let (_dir, conn) = staged(100);
        super::fold_when_idle(&conn, false, &|| false).unwrap();
        assert_eq!(count(&conn, "session_state_events").0, 0, "fewer than the idle fold's least rows");
        super::fold_when_idle(&conn, true, &|| true).unwrap();
        assert_eq!(count(&conn, "session_state_events"), (100, 1, 100), "asked: folded, a job waiting");
    }

    /// A migrated database with ids 1..=n staged for one session.
    fn staged(n: i64) -> (tempfile::TempDir, rusqlite::Connection) {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = rusqlite::Connection::open(dir.path().join("state.db")).unwrap();
        crate::sqlite::schema::migrate(&mut conn).unwrap();
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1) \
             INSERT INTO session_state_events_staged \
               (id, session_key, agent_id, sequence, kind, actor_type, occurred_at, summary) \
             SELECT i, ?2, 'main', i, 'human_direct_message', 'human', 1000 + i, 'human message' FROM n",
            rusqlite::params![n, KEY],
        )
        .unwrap();
        (dir, conn)
    }

    /// A table's rows: how many, the least id and the greatest (0 when empty).
    fn count(conn: &rusqlite::Connection, table: &str) -> (i64, i64, i64) {
        conn.query_row(&format!("SELECT COUNT(*), MIN(id), MAX(id) FROM {table}"), [], |r| {
            Ok((
                r.get(0)?,
                r.get::<_, Option<i64>>(1)?.unwrap_or(0),
                r.get::<_, Option<i64>>(2)?.unwrap_or(0),
            ))
        })
        .unwrap()
    }

    /// The tail page read on the caller's thread: served for a session this store wrote, `None` (the
    /// blocking path) for one it holds nothing of; and its readers never wait for a lock.
    #[tokio::test]
    async fn a_recent_window_is_answered_on_the_calling_thread_by_readers_that_never_wait() {
        let (store, _dir) = store_with(3).await;
        tail_filled(&store).await;
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
        use crate::StoreError;
        let (store, _dir) = store_with(1).await;
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
        assert_eq!(human_sequence(&store, 3_000).await, 2, "no hole");
    }

    /// The writer remembers the head an append moved; when a later failure in the same transaction rolls
    /// that append back (here a job that keeps the memory, as an append failing half-done does), the
    /// memory goes with it and the next append numbers on from the log, leaving no hole.
    #[tokio::test]
    async fn a_rolled_back_append_is_not_remembered() {
        use crate::StoreError;
        use crate::sqlite::{transaction::WriteTx, writer::Memory};
        let (store, _dir) = store_with(1).await;
        let held = store.inner.writer.hold();
        let appended = store.append(human(), 2_000);
        let (tx, failed) = tokio::sync::oneshot::channel();
        let fail_after_writing = |c: &WriteTx<'_>| -> crate::Result<()> {
            c.execute("INSERT INTO sessionwatch_meta (key, value) VALUES ('test', 'x')", [])?;
            Err(StoreError::InvalidData("fails after writing".into()))
        };
        let writer = store.inner.writer.clone();
        let (appended, ()) = tokio::join!(appended, async move {
            tokio::task::yield_now().await; // the append is queued by now
            writer.submit(Memory::Kept, fail_after_writing, move |r| drop(tx.send(r)));
            drop(held);
        });
        assert!(appended.is_err(), "rolled back with the failed job: {appended:?}");
        assert!(failed.await.unwrap().is_err());
        assert_eq!(human_sequence(&store, 3_000).await, 2, "no hole");
    }

    /// A batch's appends to one session write its head row at the first and hold the later moves until
    /// the commit; a write job of another kind queued in the same batch (retention, a deletion) reads the
    /// row through SQL, so it finds every move before it written; and the row committed is the last.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn held_head_moves_are_written_before_a_job_that_reads_them_and_before_the_commit() {
        let (store, _dir) = store_with(1).await;
        let head_in_sql = |c: &Connection| -> crate::Result<i64> {
            Ok(c.query_row(
                "SELECT head FROM session_state_heads WHERE session_key = ?1 AND agent_id = 'main'",
                [KEY],
                |r| r.get(0),
            )?)
        };
        let held = store.inner.writer.hold();
        let (a, b, read, c, ()) = tokio::join!(
            store.append(human(), 2_000),
            store.append(human(), 2_001),
            store.write_async(move |c| head_in_sql(c)),
            store.append(human(), 2_002),
            async move {
                tokio::task::yield_now().await; // all four are queued by now
                drop(held);
            }
        );
        for appended in [a, b, c] {
            assert!(matches!(appended, Ok(AppendOutcome::Recorded { .. })), "{appended:?}");
        }
        assert_eq!(read.unwrap(), 3, "the two appends before it, written before it ran");
        let committed = store.write_async(move |c| head_in_sql(c)).await.unwrap();
        assert_eq!(committed, 4, "the last append's move, written before the commit");
        assert_eq!(human_sequence(&store, 3_000).await, 5);
    }

    /// A session whose state was deleted starts again from 1, with nothing else appended in between.
    #[tokio::test]
    async fn a_deleted_session_numbers_from_one_again() {
        let (store, _dir) = store_with(3).await;
        store.delete_session_state(KEY.into(), "main".into()).await.unwrap();
        assert_eq!(human_sequence(&store, 2_000).await, 1);
    }

    /// After retention moved a session's floor, the appends that follow fill a tail entry that answers
    /// recent windows again.
    #[tokio::test]
    async fn after_pruning_recent_windows_are_answered_from_the_tail_again() {
        use crate::RetentionPolicy;
        let (store, _dir) = store_with(5).await;
        let policy = RetentionPolicy { max_rows: 2, ..RetentionPolicy::default() };
        store.prune(policy, 2_000).await.unwrap();
        assert_eq!(human_sequence(&store, 3_000).await, 6);
        tail_filled(&store).await;
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
                let st = c.prepare_cached(&LOG_PAGE)?;
                Ok((st.get_status(Run), st.get_status(RePrepare)))
            })
            .unwrap();
        assert_eq!(runs, 5, "the pages were read with this statement");
        assert_eq!(recompiled, 0);
    }
}
