//! The single writer connection with group commit.
//!
//! Each write is a job run inside its own savepoint. Whoever holds the writer runs every job queued so
//! far in one `BEGIN IMMEDIATE` transaction and commits once; only then does any job's caller hear its
//! result, so nobody is told "recorded" before the commit that made it durable. A job that fails rolls
//! back to its savepoint without disturbing the others in the batch.
//!
//! Jobs run on tokio's blocking pool (one driver at a time), never on the submitting thread: a commit or a
//! 5 s busy wait must not stall an async worker thread and with it unrelated requests.

use crate::{GroupCommits, Result, StoreError};
use rusqlite::Connection;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Told once the batch's commit outcome is known: `None` when it committed.
type Completion = Box<dyn FnOnce(Option<&StoreError>) + Send>;
type Job = Box<dyn FnOnce(&Connection) -> Completion + Send>;

/// At most this many jobs share one commit, so a single transaction stays short.
const MAX_BATCH: usize = 512;

/// How long an idle driver waits for the next job before it stops ([`Writer::linger`]).
const LINGER: Duration = Duration::from_micros(50);

pub(crate) struct Writer {
    /// `None` once the store is closed.
    conn: Mutex<Option<Connection>>,
    pending: Mutex<Vec<Job>>,
    /// A driver has been started and has not yet seen an empty queue.
    scheduled: AtomicBool,
    /// Transactions committed, and the jobs they carried.
    commits: AtomicU64,
    committed_jobs: AtomicU64,
}

impl Writer {
    pub fn new(conn: Connection) -> Writer {
        Writer {
            conn: Mutex::new(Some(conn)),
            pending: Mutex::new(Vec::new()),
            scheduled: AtomicBool::new(false),
            commits: AtomicU64::new(0),
            committed_jobs: AtomicU64::new(0),
        }
    }

    pub fn group_commits(&self) -> GroupCommits {
        GroupCommits {
            commits: self.commits.load(Ordering::Relaxed),
            writes: self.committed_jobs.load(Ordering::Relaxed),
        }
    }

    fn lock_pending(&self) -> MutexGuard<'_, Vec<Job>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `f`; `done` receives its result after the commit that contains it.
    pub fn submit<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
        done: impl FnOnce(Result<T>) + Send + 'static,
    ) {
        let job: Job = Box::new(move |conn: &Connection| {
            let result = run_in_savepoint(conn, f);
            // The job's own error wins; a job that succeeded fails with its batch.
            Box::new(move |batch_error: Option<&StoreError>| {
                done(match (result, batch_error) {
                    (Err(e), _) => Err(e),
                    (Ok(v), None) => Ok(v),
                    (Ok(_), Some(e)) => Err(e.copy()),
                })
            })
        });
        self.lock_pending().push(job);
        self.schedule();
    }

    /// Starts a driver unless one is already running; it keeps committing batches until the queue is empty.
    fn schedule(self: &Arc<Self>) {
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let driver = Driver(Some(self.clone()));
        let run = move || driver.run();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(run)),
            // Not on a runtime (a plain thread): that thread may block.
            Err(_) => run(),
        }
    }

    fn drive_scheduled(&self) {
        loop {
            self.drive();
            if self.linger() {
                continue;
            }
            self.scheduled.store(false, Ordering::Release);
            // A job queued after `drive` saw the queue empty, but before the flag dropped, found the flag
            // still set and started no driver: take it over (unless another driver already did).
            if self.lock_pending().is_empty() || self.scheduled.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    }

    /// Waits briefly for another job before the driver stops: a caller that was just answered usually
    /// submits its next write within microseconds, and catching it here saves waking a blocking-pool
    /// thread for it (two context switches, more than the write itself costs). Answers whether a job came.
    fn linger(&self) -> bool {
        let until = Instant::now() + LINGER;
        while Instant::now() < until {
            if !self.lock_pending().is_empty() {
                return true;
            }
            std::thread::yield_now();
        }
        false
    }

    /// Runs queued jobs until the queue is empty, waiting for the connection while an exclusive write
    /// holds it.
    fn drive(&self) {
        loop {
            let guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            let Some(conn) = guard.as_ref() else {
                // Closed: the queued jobs are dropped unrun and their callers hear "not executed".
                self.lock_pending().clear();
                return;
            };
            let jobs: Vec<Job> = {
                let mut pending = self.lock_pending();
                let n = pending.len().min(MAX_BATCH);
                pending.drain(..n).collect()
            };
            if jobs.is_empty() {
                return;
            }
            let mut completions = Vec::with_capacity(jobs.len());
            let mut rolled_back: Vec<Completion> = Vec::new();
            let outcome = match run(conn, "BEGIN IMMEDIATE") {
                Err(e) => Err(StoreError::classify(e)),
                Ok(()) => {
                    let mut began = Ok(());
                    for job in jobs.into_iter() {
                        if began.is_err() {
                            break; // dropped unrun: the callers see "not executed"
                        }
                        completions.push(job(conn));
                        if conn.is_autocommit() {
                            // SQLite rolled the whole transaction back (e.g. the disk is full): every
                            // job in it so far is lost; the rest start a new transaction.
                            rolled_back.append(&mut completions);
                            began = run(conn, "BEGIN IMMEDIATE");
                        }
                    }
                    match began {
                        Ok(()) => run(conn, "COMMIT").map_err(StoreError::classify),
                        Err(e) => Err(StoreError::classify(e)),
                    }
                }
            };
            let failed = match outcome {
                Ok(()) => {
                    self.committed_jobs.fetch_add(completions.len() as u64, Ordering::Relaxed);
                    self.commits.fetch_add(1, Ordering::Relaxed);
                    None
                }
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    Some(e)
                }
            };
            if let Some(e) = &failed
                && completions.is_empty()
            {
                // The jobs were dropped unrun: their callers see a closed channel, i.e. not recorded.
                tracing::warn!(error = %e, "a write transaction could not start");
            }
            let lost = StoreError::Task("rolled back with another write of its batch; not recorded".into());
            for c in rolled_back {
                c(Some(&lost));
            }
            for c in completions {
                c(failed.as_ref());
            }
            // Completions run before the connection is released, so whatever they do after a commit
            // (the tail cache) happens in commit order.
            drop(guard);
            if self.lock_pending().is_empty() {
                return;
            }
        }
    }

    /// Closes the connection once the running batch (if any) has committed. A driver still scheduled then
    /// drops its jobs; closing here, not when the last driver lets go, makes the store's close (and the
    /// WAL checkpoint that comes with it) happen when the store is dropped.
    pub fn close(&self) {
        drop(self.conn.lock().unwrap_or_else(|p| p.into_inner()).take());
    }

    /// Runs `f` alone in its own transaction, blocking (bench fixtures).
    #[cfg(feature = "bench")]
    pub fn exclusive<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let conn = guard.as_ref().ok_or_else(|| StoreError::Task("the store is closed".into()))?;
        run(conn, "BEGIN IMMEDIATE").map_err(StoreError::classify)?;
        match f(conn) {
            Ok(v) => match run(conn, "COMMIT") {
                Ok(()) => Ok(v),
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    Err(StoreError::classify(e))
                }
            },
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }
}

/// A scheduled driver. If its runtime drops it unrun (shutting down), the next submit starts a new one
/// instead of finding the writer marked as driven forever.
struct Driver(Option<Arc<Writer>>);

impl Driver {
    fn run(mut self) {
        if let Some(writer) = self.0.take() {
            writer.drive_scheduled();
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(writer) = &self.0 {
            writer.scheduled.store(false, Ordering::Release);
        }
    }
}

fn run_in_savepoint<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    run(conn, "SAVEPOINT job").map_err(StoreError::classify)?;
    let result = f(conn);
    let closed = match &result {
        Ok(_) => run(conn, "RELEASE job"),
        Err(_) => run(conn, "ROLLBACK TO job").and_then(|()| run(conn, "RELEASE job")),
    };
    match (result, closed) {
        (Ok(v), Ok(())) => Ok(v),
        (Ok(_), Err(e)) => Err(StoreError::classify(e)),
        (Err(e), _) => Err(e),
    }
}

/// One transaction-control statement, prepared once per connection (they run several times per write).
fn run(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}
