//! WAL checkpoints, mostly on a thread of their own.
//!
//! SQLite's automatic checkpoint runs inside the commit that takes the WAL past its threshold, on the
//! writer: that commit copies the whole WAL back into the database file and syncs it, and every write
//! queued behind it waits (a sixth of the writer's time under load, and its slowest commits). Here the
//! writer's WAL hook asks this thread for a `PASSIVE` checkpoint instead, which copies the bulk of the WAL
//! on a connection of its own while the writer goes on committing (a passive checkpoint never waits for,
//! or blocks, the writer or a reader).
//!
//! That alone never lets the WAL restart: the writer restarts it only once every frame has been copied
//! back, and under steady writes the thread is always a few frames behind (measured: the WAL grew by
//! 100 MB/s). So once the thread's pass is done, the next commit past the threshold finishes the job
//! itself, inline like SQLite's own, copying just the frames written during the pass; the WAL then
//! restarts at the next write transaction. The WAL stays as bounded as with SQLite's automatic checkpoint.
//!
//! Every write queued meanwhile waits for that inline pass, so the thread leaves it little to do
//! ([`catch_up`]): it copies in passes while each leaves fewer frames behind, then syncs the WAL. Measured
//! on 80k appends from 16 writers: the writer's inline passes took 126–155 ms in all (5 ms each) after one
//! passive pass, 64–81 ms after the catch-up.

use rusqlite::Connection;
use rusqlite::hooks::Wal;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// The default WAL size (in pages) from which a commit asks for a checkpoint
/// (`SqliteOptions::wal_checkpoint_pages`): 16 times SQLite's default, 64 MB of 4 KiB pages. A page
/// rewritten by many commits (a head row, the newest index pages) is copied back once per threshold's
/// worth of WAL, and each restart of the WAL costs the writer an inline pass with its syncs, which every
/// write queued meanwhile waits for. 16 writers over 100 sessions, sustained (`sessionwatch bench kernel
/// --part writers`, `append_16_writers_sustained_per_s`, alternated with staged folds of 16,384 rows):
/// 122–123k appends/s at 4,000 pages, 131–133k at 16,000; the inbound turns' p99 fell with it
/// (docs/performance.md).
pub const WAL_CHECKPOINT_PAGES: u32 = 16_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    /// No checkpoint asked for since the writer's last.
    Idle,
    /// Asked for; the thread has not taken it yet.
    Requested,
    Running,
    /// The thread's pass ended (copied what it could or failed): the writer's next commit past the
    /// threshold copies the rest.
    Done,
}

struct State {
    pass: Pass,
    /// The store is closing: the thread stops.
    closing: bool,
}

struct Signal {
    state: Mutex<State>,
    changed: Condvar,
}

impl Signal {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The writer's WAL hook: called after each commit with the WAL's size in pages; `committed` first. It
/// must answer `Ok` whatever happens here, or SQLite reports the commit (which is durable) as failed.
fn wal_hook(
    signal: Arc<Signal>,
    threshold: u32,
    mut committed: impl FnMut() + Send + 'static,
) -> impl FnMut(&mut Wal, std::ffi::c_int) -> rusqlite::Result<()> + Send + 'static {
    move |wal, pages| {
        committed();
        if u32::try_from(pages).unwrap_or(0) < threshold {
            return Ok(());
        }
        let finish = {
            let mut state = signal.lock();
            match state.pass {
                Pass::Idle => {
                    state.pass = Pass::Requested;
                    signal.changed.notify_one();
                    false
                }
                Pass::Requested | Pass::Running => false,
                Pass::Done => {
                    state.pass = Pass::Idle;
                    true
                }
            }
        };
        if finish && let Err(e) = wal.checkpoint() {
            tracing::warn!(error = %e, "WAL checkpoint failed; tried again on a later commit");
        }
        Ok(())
    }
}

/// The checkpoint thread; stopped (and joined) when dropped.
pub(crate) struct Checkpointer {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread on `conn`, a read-write connection configured like the writer's (the
    /// checkpoint syncs as its `synchronous` setting says).
    pub fn start(conn: Connection) -> std::io::Result<Checkpointer> {
        let signal = Arc::new(Signal {
            state: Mutex::new(State { pass: Pass::Idle, closing: false }),
            changed: Condvar::new(),
        });
        let s = signal.clone();
        let thread = std::thread::Builder::new()
            .name("sessionwatch-checkpoint".into())
            .spawn(move || run(&conn, &s))?;
        Ok(Checkpointer { signal, thread: Some(thread) })
    }

    /// Makes `writer`'s commits that leave the WAL at `threshold` pages or more ask this thread for
    /// checkpoints (and finish them) instead of running SQLite's automatic checkpoint. `committed` runs
    /// after every commit (SQLite has one WAL hook a connection), before the commit's statement returns.
    pub fn attach(
        &self,
        writer: &mut Connection,
        threshold: u32,
        committed: impl FnMut() + Send + 'static,
    ) -> rusqlite::Result<()> {
        writer.wal_hook(Some(wal_hook(self.signal.clone(), threshold, committed)))
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.signal.lock().closing = true;
        self.signal.changed.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(conn: &Connection, signal: &Signal) {
    loop {
        {
            let mut state = signal.lock();
            while state.pass != Pass::Requested && !state.closing {
                state = signal.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            if state.closing {
                return;
            }
            state.pass = Pass::Running;
        }
        catch_up(conn);
        signal.lock().pass = Pass::Done;
    }
}

/// At most this many passive passes per checkpoint asked for.
const PASSES: usize = 4;

/// Copies the WAL back in passive passes while each leaves less behind than the one before, then syncs
/// the WAL, so that the writer's own pass (which restarts the WAL, and which every queued write waits
/// for) has only the last few frames to sync and copy.
fn catch_up(conn: &Connection) {
    let mut behind = i64::MAX;
    for _ in 0..PASSES {
        // (busy, frames in the WAL, frames copied back)
        let pass = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        });
        match pass {
            Ok((frames, copied)) if frames - copied < behind => behind = frames - copied,
            Ok(_) => break,
            Err(e) => {
                tracing::warn!(error = %e, "WAL checkpoint failed; the writer tries again");
                return;
            }
        }
    }
    if let Some(path) = conn.path() {
        // A sync through another descriptor of the same file: it only moves written frames to disk sooner.
        let _ = std::fs::File::open(format!("{path}-wal")).and_then(|f| f.sync_data());
    }
}
