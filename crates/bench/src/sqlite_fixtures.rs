//! Big SQLite fixtures fast, and the bare-SQLite baselines.
//!
//! The loader writes with batched SQL on a connection of its own, keeping the store's invariants: each
//! session's sequences continue from its head row and stay contiguous, ids continue after the largest
//! one (staged rows folded first), head rows end at the last sequence. A store open on the same file
//! meanwhile sees the commits: its writer forgets what it remembered when another connection commits,
//! and a page read validates against the durable head row. Fill only sessions the store has not read
//! through yet. The measured operations go through the real code paths; only the fixtures are written
//! here.

use rusqlite::{Connection, OpenFlags, TransactionBehavior, params};
use sessionwatch_core::AgentSessionKey;
use sessionwatch_core::Millis;
use sessionwatch_store::{SqliteOptions, SqliteStore, sqlite::configure};
use std::path::Path;
use std::time::{Duration, Instant};

pub type Result<T> = std::result::Result<T, String>;

fn sql(e: rusqlite::Error) -> String {
    format!("sqlite: {e}")
}

/// The columns of the log (and of its staging table).
const EVENT_COLUMNS: &str = "sequence, session_key, agent_id, session_id, kind, actor_type, actor_id, run_id, \
     occurred_at, summary, payload_json, dedupe_key";

/// The row an appended human message writes, into `table`: (key, agent, sequence, occurred_at, id).
fn insert_row(table: &str) -> String {
    format!(
        "INSERT INTO {table} (session_key, agent_id, sequence, session_id, kind, actor_type, actor_id, \
         run_id, occurred_at, summary, payload_json, dedupe_key, id) VALUES (?1, ?2, ?3, NULL, \
         'human_direct_message', 'human', NULL, NULL, ?4, 'human message via bench', NULL, NULL, ?5)"
    )
}

/// Moves a session's head row to its newest event, as an append does: (key, agent, head, now, id, at).
const MOVE_HEAD: &str = "INSERT INTO session_state_heads \
     (session_key, agent_id, head, floor, updated_at, head_id, head_at) VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6) \
     ON CONFLICT (session_key, agent_id) DO UPDATE SET head = ?3, updated_at = ?4, head_id = ?5, head_at = ?6";

/// Rows per transaction of a big fill: the WAL stays small and checkpoints keep up.
const ROWS_PER_COMMIT: u64 = 200_000;

/// A connection of the bench's own to a store's database file.
pub struct Loader {
    conn: Connection,
}

impl Loader {
    /// Opens the database at `path` (created and migrated by opening a store on it first, if new) with
    /// the store's pragmas.
    pub fn open(path: &Path) -> Result<Loader> {
        if !path.exists() {
            // Creates and migrates the file; closed (and checkpointed) when dropped.
            drop(SqliteStore::open(path, SqliteOptions::default()).map_err(|e| e.to_string())?);
        }
        Ok(Loader { conn: open_configured(path)? })
    }

    /// The database's size in bytes (its pages, after a checkpoint of the WAL into it).
    pub fn database_bytes(&self) -> Result<u64> {
        self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").map_err(sql)?;
        let pages: i64 = self.conn.query_row("PRAGMA page_count", [], |r| r.get(0)).map_err(sql)?;
        let size: i64 = self.conn.query_row("PRAGMA page_size", [], |r| r.get(0)).map_err(sql)?;
        Ok((pages * size) as u64)
    }

    /// Appends `per_session` human-message rows to each of `sessions` (key, agent), round-robin (so ids
    /// interleave the sessions as a live log's do), straight into the log, continuing each session's
    /// sequence and the global ids, and moves each session's head row; commits every
    /// [`ROWS_PER_COMMIT`] rows, calling `progress` with the rows written so far.
    pub fn fill_events(
        &mut self,
        sessions: &[(String, String)],
        per_session: u64,
        occurred_at: Millis,
        progress: &dyn Fn(u64),
    ) -> Result<()> {
        let mut heads = Vec::with_capacity(sessions.len());
        let mut id = {
            let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            fold_staged(&tx)?;
            for (k, a) in sessions {
                heads.push((head_of(&tx, k, a)?, 0i64));
            }
            let id = last_id(&tx)?;
            tx.commit().map_err(sql)?;
            id
        };
        let insert = insert_row("session_state_events");
        let (mut round, mut written) = (0u64, 0u64);
        while round < per_session {
            let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            let mut in_tx = 0u64;
            {
                let mut st = tx.prepare_cached(&insert).map_err(sql)?;
                while round < per_session && in_tx < ROWS_PER_COMMIT {
                    for (j, (k, a)) in sessions.iter().enumerate() {
                        id += 1;
                        heads[j] = (heads[j].0 + 1, id);
                        st.execute(params![k, a, heads[j].0 as i64, occurred_at, id]).map_err(sql)?;
                    }
                    in_tx += sessions.len() as u64;
                    round += 1;
                }
                let mut head = tx.prepare_cached(MOVE_HEAD).map_err(sql)?;
                for ((k, a), (h, id)) in sessions.iter().zip(&heads) {
                    if *id > 0 {
                        head.execute(params![k, a, *h as i64, occurred_at, id, occurred_at]).map_err(sql)?;
                    }
                }
            }
            tx.commit().map_err(sql)?;
            written += in_tx;
            progress(written);
        }
        Ok(())
    }

    /// Writes explicit cursors `(watcher, target, L, N, M)` bound to `store_path`, and a session row for
    /// every watcher, committing every [`ROWS_PER_COMMIT`] cursors.
    pub fn fill_cursors(
        &mut self,
        cursors: impl IntoIterator<Item = (String, String, u64, u64, u64)>,
        store_path: &str,
        now: Millis,
        progress: &dyn Fn(u64),
    ) -> Result<()> {
        self.write_in_batches(cursors, progress, |tx, (w, t, l, n, m)| {
            tx.prepare_cached(INSERT_CURSOR)
                .and_then(|mut s| s.execute(params![w, t, l as i64, n as i64, m as i64, store_path, now]))
                .map_err(sql)?;
            insert_session(tx, &w, now)
        })
    }

    /// Writes a session row (agent `bench`, kind `other`) for each of `keys`.
    pub fn fill_sessions(
        &mut self,
        keys: impl IntoIterator<Item = String>,
        now: Millis,
        progress: &dyn Fn(u64),
    ) -> Result<()> {
        self.write_in_batches(keys, progress, |tx, key| insert_session(tx, &key, now))
    }

    /// Writes each of `rows` with `write`, committing every [`ROWS_PER_COMMIT`] rows and calling
    /// `progress` with the rows written so far.
    fn write_in_batches<T>(
        &mut self,
        rows: impl IntoIterator<Item = T>,
        progress: &dyn Fn(u64),
        mut write: impl FnMut(&Connection, T) -> Result<()>,
    ) -> Result<()> {
        let mut rows = rows.into_iter().peekable();
        let mut written = 0u64;
        while rows.peek().is_some() {
            let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            for row in rows.by_ref().take(ROWS_PER_COMMIT as usize) {
                write(&tx, row)?;
                written += 1;
            }
            tx.commit().map_err(sql)?;
            progress(written);
        }
        Ok(())
    }
}

/// An explicit cursor: (watcher, target, L, N, M, store path, now).
const INSERT_CURSOR: &str = "INSERT OR REPLACE INTO session_watch_cursors (watcher_session_key, \
     target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, \
     watcher_store_path, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, 'explicit', ?6, ?7)";

/// A session row (agent `bench`, kind `other`) for `key`, unless it exists.
fn insert_session(tx: &Connection, key: &str, now: Millis) -> Result<()> {
    tx.prepare_cached(INSERT_SESSION).and_then(|mut s| s.execute(params![key, now])).map_err(sql)?;
    Ok(())
}

const INSERT_SESSION: &str = "INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at, \
     updated_at) VALUES (?1, 'bench', ?1, 'other', ?2, ?2) ON CONFLICT DO NOTHING";

/// Moves every staged append into the log (ids in order), as the store's fold does.
fn fold_staged(tx: &Connection) -> Result<()> {
    tx.execute(
        &format!(
            "INSERT INTO session_state_events (id, {EVENT_COLUMNS}) \
             SELECT id, {EVENT_COLUMNS} FROM session_state_events_staged ORDER BY id"
        ),
        [],
    )
    .map_err(sql)?;
    tx.execute("DELETE FROM session_state_events_staged", []).map_err(sql)?;
    Ok(())
}

/// A session's head (zero for a session never appended to).
fn head_of(tx: &Connection, key: &str, agent: &str) -> Result<u64> {
    let row = tx.query_row(
        "SELECT head FROM session_state_heads WHERE session_key = ?1 AND agent_id = ?2",
        params![key, agent],
        |r| r.get::<_, i64>(0),
    );
    match row {
        Ok(h) => Ok(h as u64),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(0),
        Err(e) => Err(sql(e)),
    }
}

fn last_id(tx: &Connection) -> Result<i64> {
    tx.query_row(
        "SELECT COALESCE((SELECT MAX(id) FROM session_state_events_staged), \
         (SELECT MAX(id) FROM session_state_events), 0)",
        [],
        |r| r.get(0),
    )
    .map_err(sql)
}

fn open_configured(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql)?;
    configure(&conn, &SqliteOptions::default()).map_err(sql)?;
    Ok(conn)
}

/// A bare connection to the database at `path` (created with the store's schema if new) with the store's
/// pragmas.
fn open_raw(path: &Path) -> Result<Connection> {
    Ok(Loader::open(path)?.conn)
}

/// The bare-SQLite baseline: `rows` × (`BEGIN IMMEDIATE`; one `INSERT` of the same row an appended human
/// message writes, into the staging table, and the update of its head row that goes with it; `COMMIT`)
/// with cached prepared statements on a connection with the store's schema and pragmas, the bare log's
/// sequence continuing after `first` (so blocks of a run can share one database). Answers the elapsed
/// time.
pub fn raw_commit_loop(path: &Path, first: u64, rows: u64) -> Result<Duration> {
    raw_batched_loop(path, first, rows, 1, 1)
}

/// The bare baseline of concurrent writers: the rows and head-row updates of [`raw_commit_loop`], spread
/// round-robin over `sessions` sessions, committed `per_tx` rows per transaction on one connection (what
/// 16 writers sharing group commits could at best do). `first` continues the ids of earlier blocks; the
/// loop's rows are the only ones in the file. Answers the elapsed time.
pub fn raw_batched_loop(path: &Path, first: u64, rows: u64, per_tx: u64, sessions: u64) -> Result<Duration> {
    let mut conn = open_raw(path)?;
    let insert = insert_row("session_state_events_staged");
    let keys: Vec<String> =
        (0..sessions).map(|s| AgentSessionKey::build_subagent("main", &format!("raw-{s}"))).collect();
    let at = 1_750_000_000_000i64;
    let start = Instant::now();
    let mut i = first;
    while i < first + rows {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
        for _ in 0..per_tx.min(first + rows - i) {
            let (key, sequence, id) =
                (&keys[(i % sessions) as usize], (i / sessions + 1) as i64, (i + 1) as i64);
            tx.prepare_cached(&insert)
                .and_then(|mut s| s.execute(params![key, "main", sequence, at, id]))
                .map_err(sql)?;
            tx.prepare_cached(MOVE_HEAD)
                .and_then(|mut s| s.execute(params![key, "main", sequence, at, id, at]))
                .map_err(sql)?;
            i += 1;
        }
        tx.commit().map_err(sql)?;
    }
    Ok(start.elapsed())
}
