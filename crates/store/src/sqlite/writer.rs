//! The single writer connection with group commit.
//!
//! Whoever holds the writer runs every job queued so far in one `BEGIN IMMEDIATE` transaction and commits
//! once; only then does any job's caller hear its result, so nobody is told "recorded" before the commit
//! that made it durable.
//!
//! Jobs run without savepoints: a savepoint per job cost a fifth of the 16-writer rate (each page it
//! touched first was copied to a sub-journal, freed again at `RELEASE`). A job that fails having changed
//! no row (SQLite undoes a failed statement's own changes) leaves its neighbours as they were. One that
//! fails after changing rows, or whose failure made SQLite roll the transaction back (a full disk), takes
//! the transaction with it: every job in it so far is answered "not recorded", and the rest of the batch
//! starts a new transaction. Such failures are I/O errors, not a request's own faults: those are found
//! before a job's first write.
//!
//! Batches run on tokio's blocking pool (one driver at a time), not on the submitting thread: a batch, a
//! fold or a 5 s busy wait must not stall an async worker thread and with it unrelated requests. The one
//! exception is an append submitted while the writer is free ([`Writer::run_on_callers_thread`]): bounded
//! work, begun only if it can begin at once, its fold (if due) left to the idle work. Once no write has
//! come for [`QUIET`], a driver does the store's idle work ([`IdleWork`], the staging table's fold).

use super::transaction::{WriteTx, WriterMemory};
use crate::{GroupCommitCounter, GroupCommits, Result, StoreError};
use rusqlite::Connection;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// Told once the batch's commit outcome is known: `None` when it committed.
type Completion = Box<dyn FnOnce(Option<&StoreError>) + Send>;
/// Runs the job's work; answers whether it succeeded, and its completion.
type Job = Box<dyn FnOnce(&WriteTx<'_>) -> (bool, Completion) + Send>;

/// At most this many jobs share one commit, so a single transaction stays short.
const MAX_BATCH: usize = 512;

/// How long an idle driver waits for the next job before it stops ([`Writer::linger`]).
const LINGER: Duration = Duration::from_micros(50);

/// How long after a driver's batch an append still goes to the pool rather than run on its caller's
/// thread ([`Writer::run_on_callers_thread`]): concurrent writers' appends are batched there, and one run
/// aside splits their batches and stalls an async worker with its commit; other writes (a prune's slices)
/// keep the driver awake for the appends between them. The writer's quiet time: at 1 ms, a prune's
/// slices (about 2.7 ms apart) found the driver parked, and the appends queued behind them waited for its
/// wake-up (`bench scale --part prune`: appends' p90 during the prune 150–169 µs against 32 µs on the pool
/// alone; at 5 ms 32–46 µs). Asking only whether the last batch carried one write let the gateway's
/// inbound turns from 16 clients run aside: 0.28–0.33 of the bare handler against 0.33–0.39.
const POOL_RECENTLY: Duration = QUIET;

/// Whether a job keeps the writer's memory (head rows, the last id, targets without a settled cursor)
/// true by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Memory {
    /// An append: it reads through the memory and tells it what it wrote.
    Kept,
    /// Any other write may change head rows, ids or cursors: the memory is forgotten before it runs.
    Forgotten,
}

/// What the writer does when no job has come for [`QUIET`] (at once when an append left it a fold), on
/// its connection (outside any transaction). Its second argument says whether an append left it a fold
/// ([`WriteTx::defer_fold`]); its third answers whether a job is waiting meanwhile: work done in steps
/// stops between two, so a job waits for one step, not for all of them.
pub(crate) type IdleWork = fn(&Connection, bool, &dyn Fn() -> bool) -> Result<()>;

/// How long the writer must have had no job before it does its idle work, its driver parked meanwhile:
/// long enough that a writer under steady load (16 producers) does not do it between batches, where a
/// fold costs a commit of its own while an append that folds inline shares its batch's (idle work after
/// the 50 µs linger instead: 122k against 118k appends/s, medians of 12 rounds). A tokio timer task
/// instead of the parked driver cost the short concurrent benches about a tenth.
const QUIET: Duration = Duration::from_millis(5);

/// The writer's connection and what it remembers between transactions.
pub(crate) struct Held {
    conn: Connection,
    memory: RefCell<WriterMemory>,
}

pub(crate) struct Writer {
    /// `None` once the store is closed.
    conn: Mutex<Option<Held>>,
    pending: Mutex<Vec<Job>>,
    /// A driver has been started and has not yet seen an empty queue.
    scheduled: AtomicBool,
    /// Transactions committed, and the jobs they carried.
    commits: GroupCommitCounter,
    /// A batch is running (from taking its jobs until they are answered).
    in_batch: AtomicBool,
    idle: IdleWork,
    /// [`QUIET`], but in tests.
    quiet: Duration,
    /// The driver waits on `job_came` for a job before its idle work: set and read under `pending`'s
    /// lock, so a submit that finds it unset has no sleeper to wake (and makes no system call).
    driver_waiting: AtomicBool,
    job_came: Condvar,
    /// A driver is running batches or lingering for the next job: an append goes to it, not to the
    /// caller's thread.
    driving: AtomicBool,
    /// [`POOL_RECENTLY`] after a driver last ended a batch, in microseconds since `epoch`: until then,
    /// writes come from concurrent writers, whose batches an append on its caller's thread would split.
    pool_recently_until_us: AtomicU64,
    epoch: Instant,
    /// Writes have run since the idle work last did.
    idle_due: AtomicBool,
    /// An append on a caller's thread left its fold to the idle work, which does it without waiting for
    /// the quiet time.
    fold_wanted: AtomicBool,
    /// Appends run on callers' threads so far: each one restarts the quiet time.
    appends_on_callers: AtomicU64,
    /// The connection's busy timeout, given back after an append on a caller's thread began without one.
    busy_timeout: Duration,
}

impl Writer {
    pub fn new(conn: Connection, idle: IdleWork) -> Writer {
        let busy_ms = conn.pragma_query_value(None, "busy_timeout", |r| r.get::<_, i64>(0)).unwrap_or(0);
        Writer {
            conn: Mutex::new(Some(Held { conn, memory: RefCell::default() })),
            pending: Mutex::new(Vec::new()),
            scheduled: AtomicBool::new(false),
            commits: GroupCommitCounter::default(),
            in_batch: AtomicBool::new(false),
            idle,
            quiet: QUIET,
            driver_waiting: AtomicBool::new(false),
            job_came: Condvar::new(),
            driving: AtomicBool::new(false),
            pool_recently_until_us: AtomicU64::new(0),
            epoch: Instant::now(),
            idle_due: AtomicBool::new(false),
            fold_wanted: AtomicBool::new(false),
            appends_on_callers: AtomicU64::new(0),
            busy_timeout: Duration::from_millis(busy_ms.max(0) as u64),
        }
    }

    /// A writer whose idle work waits for `quiet` instead of [`QUIET`].
    #[cfg(test)]
    fn with_quiet(conn: Connection, idle: IdleWork, quiet: Duration) -> Writer {
        Writer { quiet, ..Writer::new(conn, idle) }
    }

    pub fn group_commits(&self) -> GroupCommits {
        self.commits.get()
    }

    fn lock_pending(&self) -> MutexGuard<'_, Vec<Job>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `f` (or runs it at once, an append while the writer is free); `done` receives its result
    /// after the commit that contains it. Answers whether the write is a lone one: nothing was queued or
    /// running, so it is answered after one lone commit.
    pub fn submit<T: Send + 'static>(
        self: &Arc<Self>,
        memory: Memory,
        f: impl FnOnce(&WriteTx<'_>) -> Result<T> + Send + 'static,
        done: impl FnOnce(Result<T>) + Send + 'static,
    ) -> bool {
        let job: Job = Box::new(move |tx: &WriteTx<'_>| {
            let result = match memory {
                Memory::Kept => f(tx),
                // It may read head or session rows through SQL: the held moves and touches are written first. If they
                // cannot be, the transaction must not commit without them: rolled back, every job in it
                // is answered "not recorded" (`run_jobs` sees the connection back in autocommit).
                Memory::Forgotten => match tx.write_held() {
                    Ok(()) => {
                        tx.forget();
                        f(tx)
                    }
                    Err(e) => {
                        let _ = tx.execute_batch("ROLLBACK");
                        Err(e)
                    }
                },
            };
            let succeeded = result.is_ok();
            // The job's own error wins; a job that succeeded fails with its batch.
            let completion: Completion = Box::new(move |batch_error: Option<&StoreError>| {
                done(match (result, batch_error) {
                    (Err(e), _) => Err(e),
                    (Ok(v), None) => Ok(v),
                    (Ok(_), Some(e)) => Err(e.copy()),
                })
            });
            (succeeded, completion)
        });
        let job = match memory {
            Memory::Kept => match self.run_on_callers_thread(job) {
                Ok(()) => return true,
                Err(job) => job,
            },
            Memory::Forgotten => job,
        };
        let lone = {
            let mut pending = self.lock_pending();
            let lone = pending.is_empty() && !self.in_batch.load(Ordering::Acquire);
            pending.push(job);
            self.wake_waiting_driver(&pending);
            lone
        };
        self.schedule();
        lone
    }

    /// Runs an append (one event, a turn's rows: bounded work) on the caller's thread when the writer is
    /// free: no driver running batches or lingering for one, none for [`POOL_RECENTLY`] (concurrent
    /// writers' batches are not split), nothing queued, the connection not held (by the idle work, say).
    /// Handing it to a pool thread and back costs two thread wake-ups, more than a lone commit; on a
    /// virtual machine whose host also runs other machines' vCPUs, each waits for the host to run a
    /// sleeping vCPU again (sequential appends: 0.4–0.5 of the bare commit loop in minutes when the host
    /// took a fifth of the vCPUs' time, docs/performance.md). Gives the job back if the writer is not
    /// free, or if its transaction cannot begin at once (another process writing: no busy wait on an
    /// async worker). Its fold, if due, is left to the idle work, which is asked for at once.
    fn run_on_callers_thread(self: &Arc<Self>, job: Job) -> std::result::Result<(), Job> {
        if self.driving.load(Ordering::Acquire)
            || self.micros() < self.pool_recently_until_us.load(Ordering::Acquire)
            || tokio::runtime::Handle::try_current().is_err()
        {
            return Err(job);
        }
        let guard = match self.conn.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(job),
        };
        let Some(Held { conn, memory }) = guard.as_ref() else {
            return Err(job); // closed: queued, it is dropped unrun like the rest
        };
        {
            let pending = self.lock_pending();
            if !pending.is_empty() {
                return Err(job);
            }
            self.in_batch.store(true, Ordering::Release);
        }
        let begun = conn
            .busy_timeout(Duration::ZERO)
            .and_then(|()| run(conn, "BEGIN IMMEDIATE"))
            .and_then(|()| WriteTx::new(conn, memory));
        let _ = conn.busy_timeout(self.busy_timeout);
        let tx = match begun.map(WriteTx::deferring_folds) {
            Ok(tx) => tx,
            Err(_) => {
                if !conn.is_autocommit() {
                    let _ = run(conn, "ROLLBACK");
                }
                self.in_batch.store(false, Ordering::Release);
                return Err(job);
            }
        };
        let batch = run_batch(conn, memory, Some(tx), vec![job], |_| Vec::new());
        let fold_deferred = batch.fold_deferred;
        self.answer(conn, memory, batch);
        self.in_batch.store(false, Ordering::Release);
        drop(guard); // after the answers, as a driver's batch
        self.appends_on_callers.fetch_add(1, Ordering::Release);
        if fold_deferred {
            self.fold_wanted.store(true, Ordering::Release);
            self.wake_waiting_driver(&self.lock_pending());
        }
        self.idle_due.store(true, Ordering::Release);
        self.schedule();
        Ok(())
    }

    /// Wakes the driver if it waits for a job or a deferred fold; `_pending` is the queue's lock, held
    /// (under it the driver says it waits, so one that does not is not waiting).
    fn wake_waiting_driver(&self, _pending: &MutexGuard<'_, Vec<Job>>) {
        if self.driver_waiting.load(Ordering::Relaxed) {
            self.job_came.notify_one();
        }
    }

    /// Starts a driver unless one is already running; it keeps committing batches until the queue is empty.
    fn schedule(self: &Arc<Self>) {
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let driver = Driver(Some(self.clone()));
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(move || driver.run(true))),
            // Not on a runtime (a plain thread): that thread may block.
            Err(_) => driver.run(false),
        }
    }

    /// Drives until the queue stays empty. `on_pool`: a blocking-pool thread, which may park for the
    /// idle work; the thread of a caller without a runtime does none.
    fn drive_scheduled(&self, on_pool: bool) {
        loop {
            self.driving.store(true, Ordering::Release);
            // A driver started for the idle work alone (after an append on a caller's thread) does not
            // linger: the caller's next append would come to it instead of running where it is.
            let ran = self.drive();
            if ran && on_pool {
                self.idle_due.store(true, Ordering::Release);
            }
            if ran && self.linger() {
                continue;
            }
            self.driving.store(false, Ordering::Release);
            if on_pool && self.idle_due.load(Ordering::Acquire) {
                if self.wait_for_quiet() {
                    continue;
                }
                self.idle_due.store(false, Ordering::Release);
                self.idle_work(self.fold_wanted.swap(false, Ordering::AcqRel));
            }
            self.scheduled.store(false, Ordering::Release);
            // A job queued (or idle work made due) after `drive` saw the queue empty, but before the flag
            // dropped, found the flag still set and started no driver: take it over (unless another
            // driver already did).
            let nothing_left = self.lock_pending().is_empty() && !self.idle_due.load(Ordering::Acquire);
            if nothing_left || self.scheduled.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    }

    /// Waits, parked, until neither a job nor an append on a caller's thread has come for the quiet time,
    /// or until a deferred fold asks for the idle work at once. Answers whether a job came.
    fn wait_for_quiet(&self) -> bool {
        loop {
            let seen = self.appends_on_callers.load(Ordering::Acquire);
            if self.wait_for_job() {
                return true;
            }
            if self.fold_wanted.load(Ordering::Acquire)
                || self.appends_on_callers.load(Ordering::Acquire) == seen
            {
                return false;
            }
        }
    }

    /// Waits up to the quiet time for a job (or for a deferred fold), parked (the driver is a
    /// blocking-pool thread; a submit wakes it). Answers whether a job came.
    fn wait_for_job(&self) -> bool {
        let pending = self.lock_pending();
        self.driver_waiting.store(true, Ordering::Relaxed);
        let (pending, _) = self
            .job_came
            .wait_timeout_while(pending, self.quiet, |p| {
                p.is_empty() && !self.fold_wanted.load(Ordering::Acquire)
            })
            .unwrap_or_else(|p| p.into_inner());
        self.driver_waiting.store(false, Ordering::Relaxed);
        !pending.is_empty()
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

    /// Runs the idle work on the connection (unless closed): a job submitted meanwhile waits for its
    /// current step, as it waits for a batch. The memory stays: the idle work (a fold) changes no head
    /// row, id or cursor.
    fn idle_work(&self, fold_asked: bool) {
        let guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(Held { conn, .. }) = guard.as_ref()
            && let Err(e) = (self.idle)(conn, fold_asked, &|| !self.lock_pending().is_empty())
        {
            tracing::warn!(error = %e, "the writer's idle work failed");
        }
    }

    /// Runs queued jobs until the queue is empty, waiting for the connection while an exclusive write
    /// holds it.
    fn drive(&self) -> bool {
        let mut ran = false;
        loop {
            let guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            let Some(Held { conn, memory }) = guard.as_ref() else {
                // Closed: the queued jobs are dropped unrun and their callers hear "not executed".
                self.lock_pending().clear();
                return ran;
            };
            let jobs: Vec<Job> = {
                let mut pending = self.lock_pending();
                let n = pending.len().min(MAX_BATCH);
                self.in_batch.store(n > 0, Ordering::Release);
                pending.drain(..n).collect()
            };
            if jobs.is_empty() {
                return ran;
            }
            ran = true;
            let more = |room: usize| -> Vec<Job> {
                let mut pending = self.lock_pending();
                let n = pending.len().min(room);
                pending.drain(..n).collect()
            };
            let batch = run_batch(conn, memory, None, jobs, more);
            // Answered before the connection is released, so whatever the completions do after a
            // commit (the tail cache) happens in commit order.
            self.answer(conn, memory, batch);
            self.in_batch.store(false, Ordering::Release);
            let until = self.micros() + POOL_RECENTLY.as_micros() as u64;
            self.pool_recently_until_us.store(until, Ordering::Release);
            drop(guard);
            if self.lock_pending().is_empty() {
                return ran;
            }
        }
    }

    fn micros(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// Tells the batch's callers what came of their writes (rolling back a transaction that failed).
    fn answer(&self, conn: &Connection, memory: &RefCell<WriterMemory>, batch: Batch) {
        let Batch { outcome, completions, rolled_back, .. } = batch;
        let failed = match outcome {
            Ok(()) => {
                if !completions.is_empty() {
                    self.commits.committed(completions.len());
                }
                None
            }
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                memory.borrow_mut().forget();
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
    }

    /// Closes the connection once the running batch (if any) has committed. A driver still scheduled then
    /// drops its jobs; closing here, not when the last driver lets go, makes the store's close (and the
    /// WAL checkpoint that comes with it) happen when the store is dropped.
    pub fn close(&self) {
        drop(self.conn.lock().unwrap_or_else(|p| p.into_inner()).take());
    }

    /// Runs `f` on the connection, holding it (tests: to look at what the jobs prepared on it).
    #[cfg(test)]
    pub fn with_connection<R>(&self, f: impl FnOnce(&Connection) -> R) -> R {
        f(&self.hold().as_ref().expect("the store is open").conn)
    }

    /// Holds the connection: queued jobs wait, so jobs submitted meanwhile share the next batch.
    #[cfg(test)]
    pub fn hold(&self) -> MutexGuard<'_, Option<Held>> {
        self.conn.lock().unwrap()
    }
}

/// A scheduled driver. If its runtime drops it unrun (shutting down), the next submit starts a new one
/// instead of finding the writer marked as driven forever.
struct Driver(Option<Arc<Writer>>);

impl Driver {
    fn run(mut self, on_pool: bool) {
        if let Some(writer) = self.0.take() {
            writer.drive_scheduled(on_pool);
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

/// What a batch's transactions came to.
struct Batch {
    /// `Err` if the last transaction could not begin or commit.
    outcome: Result<()>,
    /// The jobs of the last transaction, committed if `outcome` is `Ok`.
    completions: Vec<Completion>,
    /// The jobs of transactions rolled back because one of their jobs failed half-done.
    rolled_back: Vec<Completion>,
    /// An append of the last transaction left its fold to the idle work.
    fold_deferred: bool,
}

/// Runs `jobs` in as few `BEGIN IMMEDIATE` transactions as their failures allow, and commits the last.
/// Before committing it takes the jobs queued meanwhile (`more(room)`, at most `room` of them), up to
/// [`MAX_BATCH`] in all: their callers would otherwise wait for this commit and then for their own.
/// With 16 writers that doubles the appends per commit (8 to 16), and a commit's pages are mostly the
/// same whatever it carries (the staging table's edge, head rows, the file header).
/// `open`: a transaction already begun for them.
fn run_batch<'c>(
    conn: &'c Connection,
    memory: &'c RefCell<WriterMemory>,
    mut open: Option<WriteTx<'c>>,
    jobs: Vec<Job>,
    mut more: impl FnMut(usize) -> Vec<Job>,
) -> Batch {
    let mut completions = Vec::with_capacity(jobs.len());
    let mut rolled_back = Vec::new();
    let mut taken = jobs.len();
    let mut queue = jobs;
    while !queue.is_empty() {
        if let Err(e) = run_jobs(conn, memory, queue, &mut open, &mut completions, &mut rolled_back) {
            return Batch {
                outcome: Err(StoreError::classify(e)),
                completions,
                rolled_back,
                fold_deferred: false,
            };
        }
        queue = more(MAX_BATCH.saturating_sub(taken));
        taken += queue.len();
    }
    let fold_deferred = open.as_ref().is_some_and(|tx| tx.fold_deferred());
    // The held head moves and touches go before the commit (a failure fails the batch, as the commit's).
    if let Some(tx) = &open
        && let Err(e) = tx.write_held()
    {
        return Batch { outcome: Err(e), completions, rolled_back, fold_deferred };
    }
    // Taking the transaction returns its held statements to the connection's cache.
    let outcome = if open.take().is_some() {
        let committed = run(conn, "COMMIT").map_err(StoreError::classify);
        if committed.is_ok() {
            memory.borrow_mut().committed(conn);
        }
        committed
    } else {
        Ok(())
    };
    Batch { outcome, completions, rolled_back, fold_deferred }
}

/// Runs `jobs` in the open transaction (beginning one if none is), moving the completions of a
/// transaction that a job's failure rolled back to `rolled_back`. A failed `BEGIN` is returned, the
/// rest of the jobs dropped unrun (their callers see "not executed").
fn run_jobs<'c>(
    conn: &'c Connection,
    memory: &'c RefCell<WriterMemory>,
    jobs: Vec<Job>,
    open: &mut Option<WriteTx<'c>>,
    completions: &mut Vec<Completion>,
    rolled_back: &mut Vec<Completion>,
) -> rusqlite::Result<()> {
    for job in jobs {
        let tx = match open {
            Some(tx) => tx,
            None => {
                run(conn, "BEGIN IMMEDIATE")?;
                open.insert(WriteTx::new(conn, memory)?)
            }
        };
        let before = conn.total_changes();
        let (succeeded, completion) = job(tx);
        let half_done = !succeeded && conn.total_changes() != before;
        if half_done || conn.is_autocommit() {
            *open = None;
            if !conn.is_autocommit() {
                let _ = run(conn, "ROLLBACK");
            }
            memory.borrow_mut().forget(); // it may hold what the rolled-back jobs wrote
            rolled_back.append(completions);
            rolled_back.push(completion); // its own error is what its caller hears
        } else {
            completions.push(completion);
        }
    }
    Ok(())
}

/// One transaction-control statement, prepared once per connection (they run several times per write).
fn run(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

#[cfg(test)]
mod tests;
