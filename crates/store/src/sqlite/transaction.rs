//! The writer's open transaction as its jobs see it: the connection, plus what the jobs of one
//! transaction share.
//!
//! - The statements they ran, held until the transaction ends instead of going back to rusqlite's
//!   statement cache after every use: that cache's lookup and return (the SQL text trimmed, hashed twice,
//!   an `Arc<str>` key built) cost ~7 % of the writer's time with 16 writers, where a batch of 16 appends
//!   runs each statement 16 times.
//! - What the writer remembers of the database across its transactions ([`WriterMemory`]): the head row
//!   of each session it appended to and the last event id it wrote, so an append reads neither (a
//!   statement each, 6 % of the writer's time each with 16 writers), and the targets it found without a
//!   settled cursor, so a notifying append to them does not look again (2 %).
//! - The head rows its appends moved: a session's first move is written at once, a later one in the same
//!   transaction only before the commit, or before a job that may read head rows
//!   ([`WriteTx::write_held`]): a burst of turns to one session moved its row once a turn.
//! - The sessions its turns touched, and to what time: a burst of turns to one session shares a
//!   transaction, and each turn's touch after the first is a no-op when it moves `updated_at` no later
//!   ([`WriteTx::touch_is_written`]); a later time is held, as a later head move is, and written once
//!   before the commit or a job that may read session rows ([`WriteTx::hold_touch`]).

use super::log::MOVE_HEAD;
use super::session_cache::SessionCache;
use super::sessions::write_touch;
use crate::Result;
use crate::tail::HeadRow;
use foldhash::{HashMap, HashSet};
use rusqlite::{CachedStatement, Connection, Statement, params};
use sessionwatch_core::Millis;
use std::cell::{Cell, RefCell};
use std::ops::Deref;
use std::sync::Arc;

/// At most this many head rows, and as many targets, are remembered; past it that part starts again.
const REMEMBERED: usize = 4096;

/// A value per session, keyed by agent, then session key: looked up by `&str`, the keys allocated only
/// when a session comes in.
struct BySession<V> {
    agents: HashMap<String, HashMap<String, V>>,
    /// Sessions held in all.
    len: usize,
}

impl<V> Default for BySession<V> {
    fn default() -> Self {
        BySession { agents: HashMap::default(), len: 0 }
    }
}

impl<V> BySession<V> {
    fn get(&self, key: &str, agent: &str) -> Option<&V> {
        self.agents.get(agent)?.get(key)
    }

    fn get_mut(&mut self, key: &str, agent: &str) -> Option<&mut V> {
        self.agents.get_mut(agent)?.get_mut(key)
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Sets the session's value; answers whether the session was new.
    fn insert(&mut self, key: &str, agent: &str, value: V) -> bool {
        if let Some(held) = self.get_mut(key, agent) {
            *held = value;
            return false;
        }
        self.agents.entry(agent.to_string()).or_default().insert(key.to_string(), value);
        self.len += 1;
        true
    }

    fn values_mut(&mut self) -> impl Iterator<Item = ((&str, &str), &mut V)> {
        self.agents.iter_mut().flat_map(|(agent, sessions)| {
            sessions.iter_mut().map(move |(key, v)| ((key.as_str(), agent.as_str()), v))
        })
    }

    fn clear(&mut self) {
        self.agents.clear();
        self.len = 0;
    }
}

/// The head rows, the last event id and the targets without a settled cursor as the writer's own appends
/// left them. True only while nothing else writes them, so it is forgotten whenever something else may
/// have: the data version is not the one our last commit recorded (checked as each transaction begins,
/// while we hold the write lock, so nobody can commit during it), a transaction rolled back, or a write
/// other than an append runs on the writer (retention, deletion, …: [`WriteTx::forget`]).
#[derive(Default)]
pub(crate) struct WriterMemory {
    /// The data version (`SQLITE_FCNTL_DATA_VERSION`) as our last commit left it ([`Self::committed`]):
    /// any commit moves it, another connection's and this one's, so it is read again after ours.
    data_version: Option<u32>,
    /// Each session's head row.
    heads: BySession<HeadRow>,
    /// 0: unknown.
    last_id: i64,
    /// Targets on which no cursor was settled: a material event moves none of their cursors.
    no_settled_cursors: HashSet<String>,
}

impl WriterMemory {
    /// Our transaction on `conn`, begun through [`WriteTx::new`], just committed: the data version it
    /// left is the one the next transaction must find for the memory to stay. Only such a transaction may
    /// record it: one that did not check the version as it began (the idle fold's, a bench fixture's)
    /// could record over another connection's commit. Those only cost the memory. `PRAGMA data_version`
    /// ignores this connection's own commits but is a statement to run: 0.3 µs of a transaction's time
    /// against a function call.
    pub fn committed(&mut self, conn: &Connection) {
        self.data_version = data_version(conn).ok();
    }

    pub fn forget(&mut self) {
        self.heads.clear();
        self.last_id = 0;
        self.no_settled_cursors.clear();
    }
}

/// The main database's data version: it moves with every commit to it, by any connection, as seen from
/// `conn` (read inside a transaction, or right after this connection's own commit).
fn data_version(conn: &Connection) -> rusqlite::Result<u32> {
    let mut version = 0;
    conn.file_control(Some(rusqlite::MAIN_DB), rusqlite::FileControl::DataVersion(&mut version))?;
    Ok(version)
}

/// What a touch of this transaction left in a session row: its `updated_at`, and the host it named last.
struct Touch {
    updated_at: Millis,
    host_id: Option<String>,
    /// While `updated_at` is held, not yet written ([`WriteTx::hold_touch`]): the session rows kept in
    /// memory, patched once it is.
    held: Option<Arc<SessionCache>>,
}

pub(crate) struct WriteTx<'c> {
    conn: &'c Connection,
    /// By the address of their SQL text: the hot statements are `'static` strings.
    held: RefCell<Vec<(&'static str, CachedStatement<'c>)>>,
    memory: &'c RefCell<WriterMemory>,
    /// agent → session → what this transaction's touches wrote to its row, or hold for it. Per
    /// transaction: one rolled back takes its `WriteTx` with it.
    touched: RefCell<BySession<Touch>>,
    /// agent → session → the head rows this transaction's appends moved: `None` once written, `Some`
    /// while a later move waits for [`WriteTx::write_held`].
    moved_heads: RefCell<BySession<Option<HeadRow>>>,
    /// An append due to fold the staging table leaves the fold to the writer's idle work
    /// ([`WriteTx::defer_fold`]).
    defers_folds: bool,
    fold_deferred: Cell<bool>,
}

impl<'c> WriteTx<'c> {
    /// For a transaction just begun on `conn`: forgets `memory` unless the data version is the one our
    /// last commit recorded (another connection has committed since, or something unrecorded did).
    pub fn new(conn: &'c Connection, memory: &'c RefCell<WriterMemory>) -> rusqlite::Result<WriteTx<'c>> {
        let version = data_version(conn)?;
        let mut m = memory.borrow_mut();
        if m.data_version != Some(version) {
            m.forget();
            m.data_version = None; // until our commit says what it is
        }
        drop(m);
        Ok(WriteTx {
            conn,
            held: RefCell::default(),
            memory,
            touched: RefCell::default(),
            moved_heads: RefCell::default(),
            defers_folds: false,
            fold_deferred: Cell::new(false),
        })
    }

    /// This transaction runs on a caller's thread (an async worker), which a fold's copy of the staging
    /// table must not stall: its appends leave their folds to the writer's idle work.
    pub fn deferring_folds(self) -> WriteTx<'c> {
        WriteTx { defers_folds: true, ..self }
    }

    /// Called by an append due to fold the staging table: answers whether the fold is left to the
    /// writer's idle work (and notes that it is), instead of done in this transaction.
    pub fn defer_fold(&self) -> bool {
        self.fold_deferred.set(self.defers_folds);
        self.defers_folds
    }

    /// An append left its fold to the writer's idle work.
    pub fn fold_deferred(&self) -> bool {
        self.fold_deferred.get()
    }

    /// Runs `f` on the statement for `sql`, prepared (or taken from rusqlite's cache) once per
    /// transaction. `f` must not ask for another statement.
    pub fn with<R>(&self, sql: &'static str, f: impl FnOnce(&mut Statement<'c>) -> Result<R>) -> Result<R> {
        let mut held = self.held.borrow_mut();
        let at = match held.iter().position(|(s, _)| std::ptr::eq(*s, sql)) {
            Some(at) => at,
            None => {
                held.push((sql, self.conn.prepare_cached(sql)?));
                held.len() - 1
            }
        };
        f(&mut held[at].1)
    }

    /// The last event id the writer wrote, if it remembers one.
    pub fn last_id(&self) -> Option<i64> {
        Some(self.memory.borrow().last_id).filter(|&id| id > 0)
    }

    pub fn wrote(&self, id: i64) {
        self.memory.borrow_mut().last_id = id;
    }

    /// The session's head row as the writer's appends left it, if remembered (a move not yet written
    /// included).
    pub fn head(&self, key: &str, agent: &str) -> Option<HeadRow> {
        let pending = self.moved_heads.borrow().get(key, agent).copied().flatten();
        pending.or_else(|| self.memory.borrow().heads.get(key, agent).copied())
    }

    /// Moves the session's head row to `row` (an append's): written now if it is the transaction's first
    /// move of that row, else held for [`write_held`](Self::write_held), which the writer
    /// runs before the commit and before any other kind of job. Remembered either way.
    pub fn move_head(&self, key: &str, agent: &str, row: HeadRow) -> Result<()> {
        let held =
            self.moved_heads.borrow_mut().get_mut(key, agent).map(|pending| *pending = Some(row)).is_some();
        if !held {
            self.write_head(key, agent, &row)?;
            self.moved_heads.borrow_mut().insert(key, agent, None);
        }
        self.remember_head(key, agent, row);
        Ok(())
    }

    /// Writes the head moves held since each session's first, and the touches held since each session's
    /// first: a job that reads head or session rows, or the commit, comes next. A failure leaves them
    /// unwritten, so the transaction must not commit.
    pub fn write_held(&self) -> Result<()> {
        for ((key, agent), pending) in self.moved_heads.borrow_mut().values_mut() {
            if let Some(row) = pending.take() {
                self.write_head(key, agent, &row)?;
            }
        }
        for ((key, agent), touch) in self.touched.borrow_mut().values_mut() {
            if let Some(cache) = &touch.held {
                let mark = cache.mark();
                write_touch(self, key, agent, touch.updated_at, None)?;
                cache.touched(mark, key, agent, touch.updated_at, None);
                touch.held = None;
            }
        }
        Ok(())
    }

    fn write_head(&self, key: &str, agent: &str, row: &HeadRow) -> Result<()> {
        self.with(MOVE_HEAD, |st| {
            Ok(st.execute(params![key, agent, row.head as i64, row.updated_at, row.head_id, row.head_at])?)
        })?;
        Ok(())
    }

    /// Remembers the head row an append just moved.
    fn remember_head(&self, key: &str, agent: &str, row: HeadRow) {
        let mut m = self.memory.borrow_mut();
        if m.heads.get(key, agent).is_none() && m.heads.len() >= REMEMBERED {
            m.heads.clear();
        }
        m.heads.insert(key, agent, row);
    }

    /// Whether `target` is known to have no settled cursor.
    pub fn has_no_settled_cursors(&self, target: &str) -> bool {
        self.memory.borrow().no_settled_cursors.contains(target)
    }

    /// Remembers that `target` has no settled cursor (an append just read none).
    pub fn found_no_settled_cursors(&self, target: &str) {
        let mut m = self.memory.borrow_mut();
        if m.no_settled_cursors.len() >= REMEMBERED {
            m.no_settled_cursors.clear();
        }
        m.no_settled_cursors.insert(target.to_string());
    }

    /// An append seeded cursors on `target`: whether any is settled is not known any more (a fan-out only
    /// makes settled cursors pending).
    pub fn wrote_cursors_on(&self, target: &str) {
        self.memory.borrow_mut().no_settled_cursors.remove(target);
    }

    /// Whether a touch of this transaction already left the session's row at `updated_at` or later, and
    /// (when `host_id` is given) naming that host: a touch to it would change nothing, or move
    /// `updated_at` back.
    pub fn touch_is_written(
        &self,
        key: &str,
        agent: &str,
        updated_at: Millis,
        host_id: Option<&str>,
    ) -> bool {
        let touched = self.touched.borrow();
        let Some(touch) = touched.get(key, agent) else { return false };
        touch.updated_at >= updated_at && host_id.is_none_or(|h| touch.host_id.as_deref() == Some(h))
    }

    /// A touch's `UPDATE` set the session's `updated_at` (and its host, when given).
    pub fn wrote_touch(&self, key: &str, agent: &str, updated_at: Millis, host_id: Option<&str>) {
        let mut touched = self.touched.borrow_mut();
        // No host given: the one named before stays.
        let host_id = host_id.map(str::to_string).or_else(|| touched.get(key, agent)?.host_id.clone());
        touched.insert(key, agent, Touch { updated_at, host_id, held: None });
    }

    /// Holds a touch of a session row this transaction already touched, naming no new host (`host_id`
    /// absent or the one it named): written once, with the latest time, by [`write_held`](Self::write_held),
    /// and patched into `cache` then. Answers false (nothing held) otherwise: the touch is written at once.
    pub fn hold_touch(
        &self,
        key: &str,
        agent: &str,
        updated_at: Millis,
        host_id: Option<&str>,
        cache: &Arc<SessionCache>,
    ) -> bool {
        let mut touched = self.touched.borrow_mut();
        let Some(touch) = touched.get_mut(key, agent) else { return false };
        if host_id.is_some_and(|h| touch.host_id.as_deref() != Some(h)) {
            return false;
        }
        touch.updated_at = touch.updated_at.max(updated_at);
        touch.held.get_or_insert_with(|| cache.clone());
        true
    }

    /// Forgets what the writer remembers: what runs next may change head rows or ids some other way
    /// (and session rows: this transaction's touches are forgotten too, but for the held ones, which
    /// must still be written; a job that may change session rows writes them first).
    pub fn forget(&self) {
        self.memory.borrow_mut().forget();
        let mut touched = self.touched.borrow_mut();
        if touched.values_mut().all(|(_, t)| t.held.is_none()) {
            touched.clear();
        }
    }
}

impl Deref for WriteTx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_is_prepared_once_per_transaction_and_the_last_id_starts_unknown() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        let memory = RefCell::default();
        let tx = WriteTx::new(&conn, &memory).unwrap();
        const INSERT: &str = "INSERT INTO t VALUES (?1)";
        for x in 0..3 {
            tx.with(INSERT, |st| Ok(st.execute([x])?)).unwrap();
        }
        assert_eq!(tx.held.borrow().len(), 1, "one statement held for three runs");
        assert_eq!(tx.last_id(), None);
        tx.wrote(7);
        assert_eq!(tx.last_id(), Some(7));
        let n: i64 = tx.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 3);
    }

    /// A session's first head move in a transaction is written at once, a later one only by
    /// `write_held`; until then `head` answers the held one.
    #[test]
    fn a_later_head_move_is_held_until_written_and_answered_meanwhile() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::sqlite::schema::migrate(&mut conn).unwrap();
        let memory = RefCell::default();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let tx = WriteTx::new(&conn, &memory).unwrap();
        let in_sql = || -> i64 {
            tx.query_row("SELECT head FROM session_state_heads WHERE session_key = 'k'", [], |r| r.get(0))
                .unwrap()
        };
        let row = |head: u64| HeadRow { head, head_id: head as i64, updated_at: 5, ..HeadRow::default() };
        let writes = |head: u64| {
            let before = tx.total_changes();
            tx.move_head("k", "main", row(head)).unwrap();
            tx.total_changes() - before
        };
        assert_eq!(writes(1), 1, "the first move: written");
        assert_eq!((writes(2), writes(3)), (0, 0), "later ones: held");
        assert_eq!((in_sql(), tx.head("k", "main")), (1, Some(row(3))));
        tx.forget();
        assert_eq!(tx.head("k", "main"), Some(row(3)), "a held move outlives the forgotten memory");
        tx.write_held().unwrap();
        assert_eq!(in_sql(), 3);
        let before = tx.total_changes();
        tx.write_held().unwrap();
        assert_eq!(tx.total_changes(), before, "nothing held any more");
    }

    /// The memory outlives a transaction, and is forgotten once another connection has committed.
    #[test]
    fn the_memory_lasts_until_another_connection_commits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let (ours, theirs) = (Connection::open(&path).unwrap(), Connection::open(&path).unwrap());
        ours.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x INTEGER)").unwrap();
        let memory = RefCell::default();
        let row = HeadRow { head: 3, head_id: 9, ..HeadRow::default() };
        let transaction = |f: &dyn Fn(&WriteTx<'_>)| {
            ours.execute_batch("BEGIN IMMEDIATE").unwrap();
            f(&WriteTx::new(&ours, &memory).unwrap());
            ours.execute_batch("COMMIT").unwrap();
            memory.borrow_mut().committed(&ours); // as the writer does after each commit
        };
        transaction(&|tx| {
            tx.execute("INSERT INTO t VALUES (1)", []).unwrap();
            tx.remember_head("k", "main", row);
            tx.wrote(9);
        });
        transaction(&|tx| assert_eq!((tx.head("k", "main"), tx.last_id()), (Some(row), Some(9))));
        theirs.execute("INSERT INTO t VALUES (2)", []).unwrap();
        transaction(&|tx| assert_eq!((tx.head("k", "main"), tx.last_id()), (None, None), "forgotten"));
    }
}
