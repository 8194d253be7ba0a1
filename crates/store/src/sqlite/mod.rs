//! The embedded SQLite store: one file, WAL, one writer connection (every write `BEGIN IMMEDIATE`) and a
//! small pool of readers.

mod answer;
mod checkpoint;
mod clean_close;
mod links;
mod lock;
mod log;
mod nodes;
mod prune;
mod runs;
mod schema;
mod session_cache;
mod sessions;
#[cfg(test)]
mod statement_tests;
mod transaction;
mod turn;
mod watch;
mod writer;

pub use checkpoint::WAL_CHECKPOINT_PAGES;
pub use lock::GatewayLock;
pub use schema::{SCHEMA_VERSION, migrate_to};

use crate::tail::TailChange;
use crate::{
    Acknowledged, AppendOutcome, AppendRequest, FinishRun, FinishRunRequest, GroupCommits, Head, InboxItem,
    LinkUpsert, Links, NewMessage, NewSession, NodeRow, PruneReport, RegisterOutcome, Result,
    RetentionPolicy, RunRow, SessionFilter, SessionRow, SessionStore, SignalLog, StoreError,
    TranscriptMessage, Turn, TurnOutcome, UpstreamLinkRow, WatchEdge, WatchedLinks,
};
use crate::{LinkVersion, SessionActivity, WatchRequest};
use rusqlite::{Connection, OpenFlags};
use sessionwatch_core::{AgentSessionKey, ChangesPage, Cursor, Limit, Millis, Notice};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use transaction::WriteTx;
use writer::Memory;

/// SQLite's `synchronous` setting for the WAL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Synchronous {
    /// Commits survive a process crash; the last commits may roll back on power loss. Never corrupts.
    Normal,
    /// fsync on every commit: commits also survive power loss.
    Full,
}

/// The default [`SqliteOptions::staged_rows`]. 16 writers over 100 sessions, 80k appends each run (four
/// runs per setting, alternated): 79–88k appends/s folding every 1,024 ids, 88–96k every 2,048, 80–102k
/// every 4,096. Later, with the checkpoint threshold at 16,000 pages (`sessionwatch bench kernel --part
/// writers`, two or three alternated runs): 2,048 → 16,384 took the sustained rate from 111–121k to
/// 131–133k appends/s, and bursts of 10k appends from 0.47–0.49 to 0.59–0.65 of the bare 16-row
/// batches (a fold writes each session's index leaf once for all its staged rows: the more rows, the
/// fewer leaves per row; a burst's rows wait for the idle fold). A page reaching all of one session's
/// staged rows scans the whole table at worst: 64, 95, 189 µs for 1,024, 2,048, 4,096 rows, and
/// about 0.8 ms for 16,384 (`python3 scripts/experiments/staged_scan.py`); pages whose rows are staged
/// are mostly recent ones, which the tail cache answers.
pub const STAGED_ROWS: u32 = 16_384;

#[derive(Clone, Debug)]
pub struct SqliteOptions {
    pub synchronous: Synchronous,
    pub busy_timeout: Duration,
    /// `PRAGMA max_page_count` for the writer (tests use it to simulate a full disk).
    pub max_page_count: Option<u64>,
    pub readers: usize,
    /// Appends are staged and folded into the log once this many ids' worth wait (`log::due_for_fold`,
    /// asked every 1,024 ids), or when the writer is idle: about the most rows a read of the staging table
    /// scans.
    pub staged_rows: u32,
    /// The WAL size, in pages, from which a commit asks for a checkpoint ([`WAL_CHECKPOINT_PAGES`]).
    pub wal_checkpoint_pages: u32,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Normal,
            busy_timeout: Duration::from_secs(5),
            max_page_count: None,
            readers: 4,
            staged_rows: STAGED_ROWS,
            wal_checkpoint_pages: WAL_CHECKPOINT_PAGES,
        }
    }
}

struct Inner {
    path: PathBuf,
    writer: Arc<writer::Writer>,
    /// How write callers wait for the writer's answer.
    answers: answer::Answers,
    readers: Mutex<Vec<Connection>>,
    /// Readers that never wait (busy timeout 0), for the point reads done on the caller's thread
    /// ([`SqliteStore::read_now`]).
    probes: Mutex<Vec<Connection>>,
    options: SqliteOptions,
    /// Shared with write completions, which must not hold the store itself: a completion runs while
    /// the writer connection is held, and dropping the last handle there would close it in place.
    tail: Arc<crate::tail::Tail>,
    /// Session rows read since the writes that changed them ([`session_cache`]).
    sessions: Arc<session_cache::SessionCache>,
    transcript_lengths: Arc<sessions::TranscriptLengths>,
    /// Runs the WAL checkpoints the writer's commits ask for; stopped when the store closes.
    _checkpointer: checkpoint::Checkpointer,
    /// The writer's commits so far (from 1), counted by its WAL hook.
    commits: Arc<AtomicU64>,
    /// Records the clean close once every connection above is closed.
    _clean_close: clean_close::CleanClose,
    /// Last: released once the store is closed. Held ([`Inner::exclusive`]): no other process writes
    /// the file, so every commit is the writer's and is counted; the session cache and the tail's
    /// unread pages rely on it.
    lock: Option<GatewayLock>,
}

impl Inner {
    /// Opened with [`SqliteStore::open_locked`]: the file's only writer.
    fn exclusive(&self) -> bool {
        self.lock.is_some()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Scheduled writer drivers hold the writer, not the store: close its connection now.
        self.writer.close();
    }
}

/// Cheap to clone: clones share the connections.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

impl SqliteStore {
    /// Opens (or creates) the database at `path`. A file that exists but is not a healthy sessionwatch
    /// database is refused with a clear error and left untouched. Without the gateway lock, another
    /// process may write the file meanwhile: nothing is served from memory that it could have changed.
    pub fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteStore> {
        SqliteStore::open_with(path.as_ref().to_path_buf(), options, None)
    }

    /// Opens the database `lock` is for, holding the lock until the store is closed: the only writer of
    /// the file, it keeps session rows between writes and answers recent pages unchanged since their
    /// last check without reading (what `serve`, `mcp` and `db` open).
    pub fn open_locked(lock: GatewayLock, options: SqliteOptions) -> Result<SqliteStore> {
        SqliteStore::open_with(lock.database().to_path_buf(), options, Some(lock))
    }

    fn open_with(path: PathBuf, options: SqliteOptions, lock: Option<GatewayLock>) -> Result<SqliteStore> {
        let exists = path.exists();
        // Taken away before anything else: a crash from here on leaves no record of a clean close.
        let closed_clean = exists && clean_close::take(&path);
        if exists {
            check_header(&path)?;
        } else {
            create_private(&path)?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut writer = Connection::open_with_flags(&path, flags)?;
        if exists {
            // Validate before `configure`, which switches the file to WAL (a write): a refused file
            // must be left exactly as it was.
            validate_existing(&writer, &path, &options, closed_clean)?;
        }
        configure(&writer, &options).map_err(|e| corrupt(&path, e.to_string()))?;
        schema::migrate(&mut writer)?;
        if let Some(pages) = options.max_page_count {
            writer.pragma_update(None, "max_page_count", pages as i64)?;
        }
        // The writer's commits no longer checkpoint: they ask the checkpoint thread to.
        let checkpoint_conn = Connection::open_with_flags(&path, flags)?;
        configure(&checkpoint_conn, &options)?;
        let checkpointer = checkpoint::Checkpointer::start(checkpoint_conn)?;
        let sessions = Arc::new(session_cache::SessionCache::default());
        if lock.is_some() {
            sessions.attach(&mut writer)?;
        }
        let commits = Arc::new(AtomicU64::new(1));
        let (dropped, counted) = (sessions.clone(), commits.clone());
        checkpointer.attach(&mut writer, options.wal_checkpoint_pages.max(1), move || {
            dropped.committed();
            counted.fetch_add(1, Ordering::Release);
        })?;
        let mut readers = Vec::with_capacity(options.readers);
        for _ in 0..options.readers {
            readers.push(open_reader(&path, &options)?);
        }
        let mut probes = Vec::with_capacity(PROBES);
        for _ in 0..PROBES {
            let probe = open_reader(&path, &options)?;
            probe.busy_timeout(std::time::Duration::ZERO)?;
            probes.push(probe);
        }
        let clean_close = clean_close::CleanClose::new(&path);
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                writer: Arc::new(writer::Writer::new(writer, log::fold_when_idle)),
                answers: answer::Answers::default(),
                readers: Mutex::new(readers),
                probes: Mutex::new(probes),
                options,
                tail: Default::default(),
                sessions,
                transcript_lengths: Default::default(),
                _checkpointer: checkpointer,
                commits,
                _clean_close: clean_close,
                lock,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` in the next group commit; answers after that commit.
    async fn write_async<T: Send + 'static>(
        &self,
        f: impl FnOnce(&WriteTx<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.write_async_then(Memory::Forgotten, f, |_| None).await
    }

    /// As `write_async`; what `change` decides from a committed result is done to the tail cache just
    /// after the caller hears, still on the writer and in commit order. The caller goes on meanwhile: a
    /// page read in between finds the entry behind the durable head row and scans.
    async fn write_async_then<T: Send + 'static>(
        &self,
        memory: Memory,
        f: impl FnOnce(&WriteTx<'_>) -> Result<T> + Send + 'static,
        change: impl FnOnce(&T) -> Option<TailChange> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tail = self.inner.tail.clone();
        let lone = self.inner.writer.submit(memory, f, move |r| {
            let change = r.as_ref().ok().and_then(change);
            let _ = tx.send(r);
            if let Some(change) = change {
                tail.apply(change);
            }
        });
        self.inner.answers.wait(rx, lone).await
    }

    /// Runs blocking store work on tokio's blocking pool, never on an async worker thread, so a slow
    /// query or a busy wait does not stall unrelated requests (inline when there is no runtime).
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&SqliteStore) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let this = self.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => rt
                .spawn_blocking(move || f(&this))
                .await
                .unwrap_or_else(|e| Err(StoreError::Task(format!("a read did not finish: {e}")))),
            Err(_) => f(&this),
        }
    }

    /// Runs `f` on a reader connection (a fresh one if the pool is empty).
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.inner.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match conn {
            Some(c) => c,
            None => open_reader(&self.inner.path, &self.inner.options)?,
        };
        let out = f(&conn);
        // The pool grows to the peak number of concurrent readers instead of reopening connections.
        self.inner.readers.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
        out
    }

    /// A point read by primary key on the calling thread, without the hop to the blocking pool (which
    /// costs more than such a read): on a reader that never waits (busy timeout 0), so it cannot stall
    /// an async worker thread. `None` (no probe free, the database busy or locked, any error) sends the
    /// caller to the blocking path, which waits, retries and reports errors.
    pub(crate) fn read_now<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Option<T> {
        let probe = self.inner.probes.lock().unwrap_or_else(|p| p.into_inner()).pop()?;
        let out = f(&probe);
        self.inner.probes.lock().unwrap_or_else(|p| p.into_inner()).push(probe);
        out.ok()
    }

    /// `PRAGMA integrity_check` (used by the crash tests and `sessionwatch` maintenance).
    pub fn integrity_check(&self) -> Result<String> {
        self.read(|c| Ok(c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?))
    }
}

/// A database created by an older version may be readable by others: ours, once it passed the checks.
fn restrict_to_owner(db: &Path) {
    #[cfg(unix)]
    for suffix in ["", "-wal", "-shm"] {
        use std::os::unix::fs::PermissionsExt;
        let mut name = db.as_os_str().to_os_string();
        name.push(suffix);
        let file = Path::new(&name);
        if let Ok(m) = std::fs::metadata(file)
            && m.permissions().mode() & 0o077 != 0
        {
            // Best effort: a file we may use but not chmod (another owner's) is still served.
            let owner_only = std::fs::Permissions::from_mode(m.permissions().mode() & 0o700);
            if let Err(e) = std::fs::set_permissions(file, owner_only) {
                tracing::warn!(file = %file.display(), error = %e, "cannot make the database file owner-only");
            }
        }
    }
}

/// Never-waiting readers kept for tail pages (more callers at once take the blocking path).
const PROBES: usize = 2;

/// No connection maps the file. A reader's read transaction that begins after another connection's
/// commit (the writer's, nearly every time under load) drops SQLite's whole mapping and faults it back
/// in, each `munmap` a TLB shootdown across the CPUs: `bench gateway`, inbound turns 8.7–9.1k/s mapped,
/// 10.3–11.2k/s not. The writer read every page it touched through the mapping, which SQLite does not
/// cache, so each touch looked the page up in the WAL index again (`walFindFrame`, 7 % of the run):
/// 16 writers, 62–72k appends/s mapped against 72–76k not.
const MMAP_BYTES: i64 = 0;

fn open_reader(path: &Path, options: &SqliteOptions) -> Result<Connection> {
    let r = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    r.busy_timeout(options.busy_timeout)?;
    r.pragma_update(None, "mmap_size", MMAP_BYTES)?;
    keep_plans(&r)?;
    r.set_prepared_statement_cache_capacity(64);
    Ok(r)
}

/// The database at `path` is refused, for `reason`.
fn corrupt(path: &Path, reason: String) -> StoreError {
    StoreError::Corrupt { path: path.display().to_string(), reason }
}

/// An existing file is refused unless it starts with SQLite's header (an empty file is most likely a
/// truncated one).
fn check_header(path: &Path) -> Result<()> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    if f.metadata()?.len() == 0 {
        return Err(corrupt(
            path,
            "the file is empty (truncated?); move it away to start a new database".into(),
        ));
    }
    let mut header = [0u8; 16];
    if f.read_exact(&mut header).is_err() || &header != SQLITE_HEADER {
        return Err(corrupt(path, "the file does not start with the SQLite header".into()));
    }
    Ok(())
}

/// A new database file, owner-only from the first byte (SQLite gives the WAL and shared-memory files
/// the mode of the database file), in a directory created if missing.
fn create_private(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    lock::private_options().write(true).create_new(true).open(path)?;
    Ok(())
}

/// Checks an existing database on `writer` before anything writes to it: its pages (unless we closed it
/// cleanly last time, which needs no page check) and its schema; then keeps it owner-only.
fn validate_existing(
    writer: &Connection,
    path: &Path,
    options: &SqliteOptions,
    closed_clean: bool,
) -> Result<()> {
    writer.busy_timeout(options.busy_timeout)?;
    if !closed_clean {
        let check: String = writer
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(|e| corrupt(path, format!("integrity check failed: {e}")))?;
        if check != "ok" {
            return Err(corrupt(path, format!("integrity check failed: {check}")));
        }
    }
    schema::check_compatible(writer)?;
    restrict_to_owner(path);
    Ok(())
}

/// Sets on `conn` the pragmas every connection of a [`SqliteStore`] runs with (busy timeout, WAL,
/// `synchronous`, foreign keys, mmap, journals in memory, stable plans): for a tool that opens the store's
/// file itself, such as the bench's bare baseline, which must run on the same settings as the store it is
/// compared with.
pub fn configure(conn: &Connection, options: &SqliteOptions) -> rusqlite::Result<()> {
    conn.busy_timeout(options.busy_timeout)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(rusqlite::Error::InvalidParameterName(format!("journal_mode stayed {mode}")));
    }
    let sync = match options.synchronous {
        Synchronous::Normal => "NORMAL",
        Synchronous::Full => "FULL",
    };
    conn.pragma_update(None, "synchronous", sync)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "mmap_size", MMAP_BYTES)?;
    // Statement journals and sub-journals in memory: past 64 KiB SQLite spills them to a temporary file,
    // and a fold (a multi-row statement under a savepoint, in a batch that already wrote the pages it
    // touches) copied each such page there first, a `pwrite` each, within a fold that takes a quarter of
    // the writer's time with 16 writers (`pwrite` calls −21 %, CPU −5 %, docs/performance.md). A fold
    // touches a few hundred pages at most; a sort still spills to a file of its own.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    keep_plans(conn)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// The query planner stability guarantee: a cached statement keeps its plan whatever values are bound.
/// The bundled SQLite is built with STAT4, under which a statement whose parameter meets an indexed
/// column (every `changesSince` range, every lookup by key) is compiled again on the first step after
/// each new binding, in case the value changes the best plan — which needs `ANALYZE` statistics we never
/// gather. Measured: every `changesSince` page was compiling its statement anew.
fn keep_plans(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).map(|_| ())
}

// Reads run on the blocking pool on a reader connection (WAL readers never wait for the writer). Writes
// go through the group-committing writer, which also runs on the blocking pool.
impl SignalLog for SqliteStore {
    async fn append(&self, req: AppendRequest, now: Millis) -> Result<AppendOutcome> {
        let fold_every = i64::from(self.inner.options.staged_rows.max(1));
        let (outcome, _) = self
            .write_async_then(
                Memory::Kept,
                move |c| SqliteStore::append_op(c, req, now, fold_every),
                |(outcome, row)| match (outcome, row) {
                    (AppendOutcome::Recorded { event, .. }, Some(row)) => {
                        Some(TailChange::Committed(event.clone(), *row))
                    }
                    _ => None,
                },
            )
            .await?;
        Ok(outcome)
    }

    async fn register_watch(&self, req: WatchRequest, now: Millis) -> Result<RegisterOutcome> {
        self.write_async(move |c| SqliteStore::register_watch_op(c, &req, now)).await
    }

    async fn unwatch(&self, watcher: String, target: String) -> Result<bool> {
        self.write_async(move |c| SqliteStore::unwatch_op(c, &watcher, &target)).await
    }

    async fn acknowledge(
        &self,
        watcher: AgentSessionKey,
        targets: Vec<AgentSessionKey>,
        watcher_store: String,
        now: Millis,
    ) -> Result<Acknowledged> {
        self.write_async(move |c| SqliteStore::acknowledge_op(c, &watcher, &targets, &watcher_store, now))
            .await
    }

    async fn sweep(&self, watcher_store: String, now: Millis) -> Result<Vec<Notice>> {
        self.write_async(move |c| SqliteStore::sweep_op(c, &watcher_store, None, now)).await
    }

    async fn sweep_for_host(
        &self,
        watcher_store: String,
        host_id: Option<String>,
        now: Millis,
    ) -> Result<Vec<Notice>> {
        self.write_async(move |c| SqliteStore::sweep_op(c, &watcher_store, host_id.as_deref(), now)).await
    }

    async fn pending_notices_for_host(
        &self,
        watcher_store: String,
        host_id: Option<String>,
        watcher: Option<String>,
    ) -> Result<Vec<Notice>> {
        self.blocking(move |s| s.pending_notices_sync(&watcher_store, host_id.as_deref(), watcher.as_deref()))
            .await
    }

    async fn changes_since(
        &self,
        session_key: String,
        agent_id: String,
        since: u64,
        limit: Limit,
    ) -> Result<ChangesPage> {
        if let Some(page) = self.tail_page_now(&session_key, &agent_id, since, limit) {
            return Ok(page);
        }
        self.blocking(move |s| s.changes_since_sync(&session_key, &agent_id, since, limit)).await
    }

    async fn head(&self, session_key: String, agent_id: String) -> Result<Head> {
        if let Some(head) = self.read_now(|c| log::head(c, &session_key, &agent_id)) {
            return Ok(head);
        }
        self.blocking(move |s| s.read(|c| log::head(c, &session_key, &agent_id))).await
    }

    fn group_commits(&self) -> GroupCommits {
        self.inner.writer.group_commits()
    }

    async fn state_versions(
        &self,
        sessions: Vec<(String, String)>,
    ) -> Result<HashMap<(String, String), u64>> {
        self.blocking(move |s| s.state_versions_sync(&sessions)).await
    }

    async fn prune(&self, policy: RetentionPolicy, now: Millis) -> Result<PruneReport> {
        self.prune_in_slices(policy, now).await
    }

    async fn cursor(&self, watcher: String, target: String) -> Result<Option<Cursor>> {
        self.blocking(move |s| {
            s.read(|c| {
                watch::load_cursor(c, &watcher, &target)?
                    .map(|cur| watch::settle(c, &watcher, &target, cur))
                    .transpose()
            })
        })
        .await
    }

    async fn cursors_of_watcher(&self, watcher: String) -> Result<Vec<(String, Cursor)>> {
        self.blocking(move |s| s.cursors_of_watcher_sync(&watcher)).await
    }

    async fn watch_edges(&self, keys: Vec<String>, limit: u32) -> Result<Vec<WatchEdge>> {
        self.blocking(move |s| s.watch_edges_sync(&keys, limit)).await
    }

    async fn clear_watcher(&self, watcher: String) -> Result<Vec<String>> {
        self.write_async(move |c| SqliteStore::clear_watcher_op(c, &watcher)).await
    }

    async fn delete_session_state(&self, session_key: String, agent_id: String) -> Result<()> {
        let (key, agent) = (session_key.clone(), agent_id.clone());
        self.write_async_then(
            Memory::Forgotten,
            move |c| SqliteStore::delete_session_state_op(c, &session_key, &agent_id),
            move |_| Some(TailChange::Forget { key, agent }),
        )
        .await
    }
}

impl SessionStore for SqliteStore {
    async fn ensure_session(&self, new: NewSession, now: Millis) -> Result<(SessionRow, bool)> {
        self.write_async(move |c| SqliteStore::ensure_session_op(c, &new, now)).await
    }

    async fn get_session(&self, key: String, agent: String) -> Result<Option<SessionRow>> {
        let cache = self.inner.exclusive().then_some(&self.inner.sessions);
        if let Some(row) = cache.and_then(|c| c.get(&key, &agent)) {
            return Ok(Some(row));
        }
        // Taken before the read: a row older than a commit that changed it is not kept.
        let generation = cache.map(|c| c.generation());
        let row = match self.read_now(|c| sessions::load_session(c, &key, &agent)) {
            Some(row) => row,
            None => self.blocking(move |s| s.get_session_sync(&key, &agent)).await?,
        };
        if let (Some(cache), Some(generation), Some(row)) = (cache, generation, &row) {
            cache.keep(generation, row);
        }
        Ok(row)
    }

    async fn list_sessions(&self, filter: SessionFilter) -> Result<Vec<SessionRow>> {
        self.blocking(move |s| s.list_sessions_sync(&filter)).await
    }

    async fn update_goal(
        &self,
        key: String,
        agent: String,
        objective: Option<String>,
        status: Option<String>,
        now: Millis,
    ) -> Result<Option<SessionRow>> {
        self.write_async(move |c| {
            SqliteStore::update_goal_op(c, &key, &agent, objective.as_deref(), status.as_deref(), now)
        })
        .await
    }

    async fn reset_session(&self, key: String, agent: String, new_id: String, now: Millis) -> Result<bool> {
        let (k, a) = (key.clone(), agent.clone());
        self.write_async_then(
            Memory::Forgotten,
            move |c| SqliteStore::reset_session_op(c, &key, &agent, &new_id, now),
            move |_| Some(TailChange::Forget { key: k, agent: a }),
        )
        .await
    }

    async fn set_native_state(
        &self,
        key: String,
        agent: String,
        cwd: Option<String>,
        state: Option<String>,
    ) -> Result<bool> {
        self.write_async(move |c| {
            SqliteStore::set_native_state_op(c, &key, &agent, cwd.as_deref(), state.as_deref())
        })
        .await
    }

    async fn touch_session(
        &self,
        key: String,
        agent: String,
        host: Option<String>,
        now: Millis,
    ) -> Result<()> {
        let sessions = self.inner.sessions.clone();
        self.write_async(move |c| {
            SqliteStore::touch_session_op(c, &sessions, &key, &agent, host.as_deref(), now)
        })
        .await
    }

    async fn append_message(
        &self,
        key: String,
        agent: String,
        message: NewMessage,
        now: Millis,
    ) -> Result<i64> {
        let lengths = self.inner.transcript_lengths.clone();
        self.write_async(move |c| SqliteStore::append_message_op(c, &lengths, &key, &agent, &message, now))
            .await
    }

    async fn messages(&self, key: String, agent: String, limit: u32) -> Result<Vec<TranscriptMessage>> {
        // Every typed prompt a hook forwards reads the session's transcript for our own texts, and a CLI
        // session's is usually empty: one index probe on the calling thread says so without the hop to
        // the blocking pool; a transcript with rows is read there.
        if self.read_now(|c| sessions::has_messages(c, &key, &agent)) == Some(false) {
            return Ok(vec![]);
        }
        self.blocking(move |s| s.messages_sync(&key, &agent, limit)).await
    }

    async fn push_inbox(&self, key: String, agent: String, item: InboxItem) -> Result<i64> {
        self.write_async(move |c| SqliteStore::push_inbox_op(c, &key, &agent, &item)).await
    }

    async fn pending_inbox(&self, key: String, agent: String) -> Result<Vec<InboxItem>> {
        self.blocking(move |s| s.read(|c| SqliteStore::pending_inbox_op(c, &key, &agent))).await
    }

    async fn session_activity(
        &self,
        sessions: Vec<(String, String)>,
    ) -> Result<HashMap<(String, String), SessionActivity>> {
        self.blocking(move |s| s.read(|c| SqliteStore::session_activity_op(c, &sessions))).await
    }

    async fn take_inbox(&self, key: String, agent: String) -> Result<Vec<InboxItem>> {
        self.write_async(move |c| SqliteStore::take_inbox_op(c, &key, &agent)).await
    }

    async fn create_run(&self, run: RunRow) -> Result<()> {
        self.write_async(move |c| SqliteStore::create_run_op(c, &run)).await
    }

    async fn get_run(&self, run_id: String) -> Result<Option<RunRow>> {
        self.blocking(move |s| s.get_run_sync(&run_id)).await
    }

    async fn finish_run(&self, request: FinishRunRequest, now: Millis) -> Result<FinishRun> {
        self.write_async(move |c| SqliteStore::finish_run_op(c, &request, now)).await
    }

    async fn record_turn(&self, turn: Turn, now: Millis) -> Result<TurnOutcome> {
        let fold_every = i64::from(self.inner.options.staged_rows.max(1));
        let (lengths, sessions) = (self.inner.transcript_lengths.clone(), self.inner.sessions.clone());
        // `Kept`: besides its append, a turn writes sessions, runs, the inbox and the transcript, none of
        // which the writer's memory holds.
        let (outcome, _) = self
            .write_async_then(
                Memory::Kept,
                move |c| SqliteStore::record_turn_op(c, &lengths, &sessions, turn, now, fold_every),
                |(outcome, row)| match (&outcome.event, row) {
                    (Some(Ok(AppendOutcome::Recorded { event, .. })), Some(row)) => {
                        Some(TailChange::Committed(event.clone(), *row))
                    }
                    _ => None,
                },
            )
            .await?;
        Ok(outcome)
    }
}

impl Links for SqliteStore {
    async fn upsert_link(&self, link: UpstreamLinkRow) -> Result<LinkUpsert> {
        self.write_async(move |c| SqliteStore::upsert_link_op(c, &link)).await
    }

    async fn get_link(&self, key: String, agent: String) -> Result<Option<UpstreamLinkRow>> {
        // A point read by primary key, on every hook call of a CLI session: no hop to the blocking pool.
        if let Some(link) = self.get_link_now(&key, &agent) {
            return Ok(link);
        }
        self.blocking(move |s| s.get_link_sync(&key, &agent)).await
    }

    async fn watched_links(&self) -> Result<Vec<UpstreamLinkRow>> {
        self.blocking(move |s| s.watched_links_sync()).await
    }

    async fn watched_links_since(&self, known: Option<i64>) -> Result<WatchedLinks> {
        // Nothing changed is the common answer, one row by key: read on this thread, without the hop to
        // the blocking pool that reading the links takes.
        if let Some(known) = known
            && self.read_now(links::watched_links_version) == Some(known)
        {
            return Ok(WatchedLinks::Unchanged);
        }
        self.blocking(move |s| s.watched_links_since_sync(known)).await
    }

    async fn links_of_host(&self, host_id: String) -> Result<Vec<UpstreamLinkRow>> {
        self.blocking(move |s| s.links_of_host_sync(&host_id)).await
    }

    async fn delete_link(&self, key: String, agent: String) -> Result<bool> {
        self.write_async(move |c| SqliteStore::delete_link_op(c, &key, &agent)).await
    }

    async fn advance_link_marker(&self, link: LinkVersion, marker: String, now: Millis) -> Result<bool> {
        self.write_async(move |c| SqliteStore::advance_link_marker_op(c, &link, &marker, now)).await
    }

    async fn set_link_missing_streak(&self, link: LinkVersion, streak: u32) -> Result<bool> {
        self.write_async(move |c| SqliteStore::set_link_missing_streak_op(c, &link, streak)).await
    }

    async fn create_node(&self, name: String, token_sha256: String, now: Millis) -> Result<bool> {
        self.write_async(move |c| SqliteStore::create_node_op(c, &name, &token_sha256, now)).await
    }

    async fn revoke_node(&self, name: String) -> Result<bool> {
        self.write_async(move |c| SqliteStore::revoke_node_op(c, &name)).await
    }

    async fn touch_node(&self, name: String, now: Millis) -> Result<bool> {
        self.write_async(move |c| SqliteStore::touch_node_op(c, &name, now)).await
    }

    async fn node_by_token(&self, token_sha256: String) -> Result<Option<NodeRow>> {
        self.blocking(move |s| s.node_by_token_sync(&token_sha256)).await
    }

    async fn list_nodes(&self) -> Result<Vec<NodeRow>> {
        self.blocking(move |s| s.list_nodes_sync()).await
    }
}
