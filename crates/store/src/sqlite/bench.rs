//! Helpers for benchmarks (and tests) that need big fixtures fast, plus the bare-SQLite baseline.
//!
//! The fill helpers write directly with batched SQL in one transaction while keeping the store's
//! invariants (contiguous per-session sequences). They exist so a benchmark can build a 50,000-row
//! log or 100,000 cursors in a moment; the operations being measured go through the real code paths.

use super::{SqliteOptions, SqliteStore, configure, log, schema};
use crate::Result;
use rusqlite::{Connection, OpenFlags, TransactionBehavior, params};
use sessionwatch_core::Millis;
use std::path::Path;
use std::time::{Duration, Instant};

/// Inserts the bench's human-message row into `table`: (key, agent, sequence, occurred_at, id).
fn insert_row(table: &str) -> String {
    format!(
        "INSERT INTO {table} (session_key, agent_id, sequence, session_id, kind, actor_type, actor_id, \
         run_id, occurred_at, summary, payload_json, dedupe_key, id) VALUES (?1, ?2, ?3, NULL, \
         'human_direct_message', 'human', NULL, NULL, ?4, 'human message via bench', NULL, NULL, ?5)"
    )
}

impl SqliteStore {
    /// Appends `per_session` human-message rows to each of `sessions` (key, agent), round-robin, in one
    /// transaction, straight into the log (the staging table folded first, so ids stay in log order),
    /// continuing each session's sequence and global ids, and moves each session's head row.
    pub fn bench_fill_events(
        &self,
        sessions: &[(String, String)],
        per_session: u64,
        occurred_at: Millis,
    ) -> Result<()> {
        self.write(|tx| {
            log::fold(tx)?;
            let mut heads = Vec::with_capacity(sessions.len());
            for (k, a) in sessions {
                heads.push((log::head(tx, k, a)?.head, 0));
            }
            let mut id = log::last_id(tx)?;
            let mut insert = tx.prepare_cached(&insert_row("session_state_events"))?;
            for _ in 0..per_session {
                for (j, (k, a)) in sessions.iter().enumerate() {
                    id += 1;
                    heads[j] = (heads[j].0 + 1, id);
                    insert.execute(params![k, a, heads[j].0 as i64, occurred_at, id])?;
                }
            }
            let mut head = tx.prepare_cached(log::MOVE_HEAD)?;
            for ((k, a), (h, id)) in sessions.iter().zip(heads) {
                if id > 0 {
                    head.execute(params![k, a, h as i64, occurred_at, id, occurred_at])?;
                }
            }
            Ok(())
        })
    }

    /// Writes explicit cursors `(watcher, target, L, N, M)` bound to `store_path`, and a session row for
    /// every watcher, in one transaction.
    pub fn bench_fill_cursors(
        &self,
        cursors: &[(String, String, u64, u64, u64)],
        store_path: &str,
        now: Millis,
    ) -> Result<()> {
        self.write(|tx| {
            let mut cursor = tx.prepare_cached(
                "INSERT OR REPLACE INTO session_watch_cursors (watcher_session_key, target_session_key, \
                 last_seen_sequence, notified_sequence, material_sequence, provenance, watcher_store_path, \
                 updated_at) VALUES (?1, ?2, ?3, ?4, ?5, 'explicit', ?6, ?7)",
            )?;
            let mut session = tx.prepare_cached(
                "INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at, updated_at) \
                 VALUES (?1, 'bench', ?1, 'other', ?2, ?2) ON CONFLICT DO NOTHING",
            )?;
            for (w, t, l, n, m) in cursors {
                cursor.execute(params![w, t, *l as i64, *n as i64, *m as i64, store_path, now])?;
                session.execute(params![w, now])?;
            }
            Ok(())
        })
    }
}

/// A bare connection to the database at `path` (created if new) with the store's schema and pragmas.
fn open_raw(path: &Path, options: &SqliteOptions) -> Result<Connection> {
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    configure(&conn, options)?;
    schema::migrate(&mut conn)?;
    Ok(conn)
}

/// The bare-SQLite baseline: the database at `path` (created if new) with the store's schema and pragmas
/// (WAL, `synchronous`, busy timeout), then `rows` × (`BEGIN IMMEDIATE`; one `INSERT` of the same row an
/// appended human message writes, into the staging table, and the update of its head row that goes
/// with it (`log::MOVE_HEAD`); `COMMIT`) with a cached prepared statement, the bare log's sequence
/// continuing after `first` (so blocks of a run can share one database). Answers the elapsed time.
pub fn raw_commit_loop(path: &Path, first: u64, rows: u64, options: &SqliteOptions) -> Result<Duration> {
    let mut conn = open_raw(path, options)?;
    // Where an append writes its row. The loop's rows are the only ones: its ids are its sequences.
    let insert = insert_row("session_state_events_staged");
    let start = Instant::now();
    for i in first..first + rows {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (key, sequence, at) = ("agent:main:subagent:raw", (i + 1) as i64, 1_750_000_000_000i64);
        tx.prepare_cached(&insert)?.execute(params![key, "main", sequence, at, sequence])?;
        tx.prepare_cached(log::MOVE_HEAD)?.execute(params![key, "main", sequence, at, sequence, at])?;
        tx.commit()?;
    }
    Ok(start.elapsed())
}

/// The bare baseline of concurrent writers: the same rows and head-row updates as [`raw_commit_loop`],
/// spread round-robin over `sessions` sessions, committed `per_tx` rows per transaction on one connection
/// (what 16 writers sharing group commits could at best do). `first` continues the ids of earlier
/// blocks. Answers the elapsed time.
pub fn raw_batched_loop(
    path: &Path,
    first: u64,
    rows: u64,
    per_tx: u64,
    sessions: u64,
    options: &SqliteOptions,
) -> Result<Duration> {
    let mut conn = open_raw(path, options)?;
    let insert = insert_row("session_state_events_staged");
    let keys: Vec<String> = (0..sessions).map(|s| format!("agent:main:subagent:raw-{s}")).collect();
    let at = 1_750_000_000_000i64;
    let start = Instant::now();
    let mut i = first;
    while i < first + rows {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        for _ in 0..per_tx.min(first + rows - i) {
            let (key, sequence) = (&keys[(i % sessions) as usize], (i / sessions + 1) as i64);
            tx.prepare_cached(&insert)?.execute(params![key, "main", sequence, at, (i + 1) as i64])?;
            tx.prepare_cached(log::MOVE_HEAD)?.execute(params![
                key,
                "main",
                sequence,
                at,
                (i + 1) as i64,
                at
            ])?;
            i += 1;
        }
        tx.commit()?;
    }
    Ok(start.elapsed())
}
