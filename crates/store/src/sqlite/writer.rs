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
//! Jobs run on tokio's blocking pool (one driver at a time), never on the submitting thread: a commit or a
//! 5 s busy wait must not stall an async worker thread and with it unrelated requests. Once no job has
//! come for [`QUIET`], the driver does the store's idle work ([`IdleWork`], the staging table's fold).

use super::transaction::{WriteTx, WriterMemory};
use crate::{GroupCommitCounter, GroupCommits, Result, StoreError};
use rusqlite::Connection;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Told once the batch's commit outcome is known: `None` when it committed.
type Completion = Box<dyn FnOnce(Option<&StoreError>) + Send>;
/// Runs the job's work; answers whether it succeeded, and its completion.
type Job = Box<dyn FnOnce(&WriteTx<'_>) -> (bool, Completion) + Send>;

/// At most this many jobs share one commit, so a single transaction stays short.
const MAX_BATCH: usize = 512;

/// How long an idle driver waits for the next job before it stops ([`Writer::linger`]).
const LINGER: Duration = Duration::from_micros(50);

/// Whether a job keeps the writer's memory (head rows, the last id, targets without a settled cursor)
/// true by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Memory {
    /// An append: it reads through the memory and tells it what it wrote.
    Kept,
    /// Any other write may change head rows, ids or cursors: the memory is forgotten before it runs.
    Forgotten,
}

/// What the writer does when no job has come for [`QUIET`], on its connection (outside any
/// transaction). Its second argument answers whether a job is waiting meanwhile: work done in steps
/// stops between two, so a job waits for one step, not for all of them.
pub(crate) type IdleWork = fn(&Connection, &dyn Fn() -> bool) -> Result<()>;

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
}

impl Writer {
    pub fn new(conn: Connection, idle: IdleWork) -> Writer {
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

    /// Queues `f`; `done` receives its result after the commit that contains it. Answers whether the
    /// write is a lone one: nothing was queued or running, so it will be answered after one lone commit.
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
        let lone = {
            let mut pending = self.lock_pending();
            let lone = pending.is_empty() && !self.in_batch.load(Ordering::Acquire);
            pending.push(job);
            if self.driver_waiting.load(Ordering::Relaxed) {
                self.job_came.notify_one();
            }
            lone
        };
        self.schedule();
        lone
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
        // Jobs ran since the idle work last did.
        let mut idle_due = false;
        loop {
            idle_due |= self.drive() && on_pool;
            if self.linger() {
                continue;
            }
            if idle_due {
                if self.wait_for_job() {
                    continue;
                }
                self.idle_work();
                idle_due = false;
            }
            self.scheduled.store(false, Ordering::Release);
            // A job queued after `drive` saw the queue empty, but before the flag dropped, found the flag
            // still set and started no driver: take it over (unless another driver already did).
            if self.lock_pending().is_empty() || self.scheduled.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    }

    /// Waits up to the quiet time for a job, parked (the driver is a blocking-pool thread; a submit wakes
    /// it). Answers whether one came.
    fn wait_for_job(&self) -> bool {
        let pending = self.lock_pending();
        self.driver_waiting.store(true, Ordering::Relaxed);
        let (pending, _) = self
            .job_came
            .wait_timeout_while(pending, self.quiet, |p| p.is_empty())
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
    fn idle_work(&self) {
        let guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(Held { conn, .. }) = guard.as_ref()
            && let Err(e) = (self.idle)(conn, &|| !self.lock_pending().is_empty())
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
            let Batch { outcome, completions, rolled_back } = run_batch(conn, memory, jobs, more);
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
            // Completions run before the connection is released, so whatever they do after a commit
            // (the tail cache) happens in commit order.
            self.in_batch.store(false, Ordering::Release);
            drop(guard);
            if self.lock_pending().is_empty() {
                return ran;
            }
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
}

/// Runs `jobs` in as few `BEGIN IMMEDIATE` transactions as their failures allow, and commits the last.
/// Before committing it takes the jobs queued meanwhile (`more(room)`, at most `room` of them), up to
/// [`MAX_BATCH`] in all: their callers would otherwise wait for this commit and then for their own.
/// With 16 writers that doubles the appends per commit (8 to 16), and a commit's pages are mostly the
/// same whatever it carries (the staging table's edge, head rows, the file header).
fn run_batch(
    conn: &Connection,
    memory: &RefCell<WriterMemory>,
    jobs: Vec<Job>,
    mut more: impl FnMut(usize) -> Vec<Job>,
) -> Batch {
    let mut completions = Vec::with_capacity(jobs.len());
    let mut rolled_back = Vec::new();
    let mut open = None;
    let mut taken = jobs.len();
    let mut queue = jobs;
    while !queue.is_empty() {
        if let Err(e) = run_jobs(conn, memory, queue, &mut open, &mut completions, &mut rolled_back) {
            return Batch { outcome: Err(StoreError::classify(e)), completions, rolled_back };
        }
        queue = more(MAX_BATCH.saturating_sub(taken));
        taken += queue.len();
    }
    // The held head moves and touches go before the commit (a failure fails the batch, as the commit's).
    if let Some(tx) = &open
        && let Err(e) = tx.write_held()
    {
        return Batch { outcome: Err(e), completions, rolled_back };
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
    Batch { outcome, completions, rolled_back }
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
mod tests {
    use super::Writer;
    use crate::{Result, StoreError};
    use rusqlite::Connection;
    use std::sync::Arc;
    use std::sync::mpsc::{Receiver, channel};

    fn writer() -> Arc<Writer> {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER NOT NULL)").unwrap();
        Arc::new(Writer::new(conn, |_, _| Ok(())))
    }

    /// Submits a job that inserts `x`, then fails if `fail`; answers where its result arrives.
    fn insert(w: &Arc<Writer>, x: i64, fail: bool) -> Receiver<Result<()>> {
        let (tx, rx) = channel();
        w.submit(
            super::Memory::Forgotten,
            move |c| {
                c.execute("INSERT INTO t VALUES (?1)", [x])?;
                if fail { Err(StoreError::InvalidData(format!("job {x} fails"))) } else { Ok(()) }
            },
            move |r| tx.send(r).unwrap(),
        );
        rx
    }

    fn rows(w: &Arc<Writer>) -> Vec<i64> {
        let (tx, rx) = channel();
        w.submit(
            super::Memory::Forgotten,
            |c| {
                let mut st = c.prepare("SELECT x FROM t ORDER BY x")?;
                Ok(st.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<Vec<i64>>>()?)
            },
            move |r| tx.send(r).unwrap(),
        );
        rx.recv().unwrap().unwrap()
    }

    /// The idle work runs once no job has come for its quiet time, not between the jobs of a steady
    /// stream (here a long quiet time, so that a busy test machine's stalls cannot pass for one).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_work_waits_for_a_quiet_writer() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::{Duration, Instant};
        static IDLE_RUNS: AtomicUsize = AtomicUsize::new(0);
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER NOT NULL)").unwrap();
        let quiet = Duration::from_millis(300);
        let idle: super::IdleWork = |_, _| {
            IDLE_RUNS.fetch_add(1, Ordering::SeqCst);
            Ok(())
        };
        let w = Arc::new(Writer::with_quiet(conn, idle, quiet));
        let runs = || IDLE_RUNS.load(Ordering::SeqCst);
        let settled = |want: usize| async move {
            let until = Instant::now() + Duration::from_secs(10);
            while runs() != want && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            runs()
        };
        let write = |x: i64| {
            let rx = insert(&w, x, false);
            tokio::task::spawn_blocking(move || rx.recv().unwrap())
        };
        write(1).await.unwrap().unwrap();
        assert_eq!(settled(1).await, 1, "after a write, once quiet");
        // A job every 10 ms for 600 ms and more: no idle work in between.
        for x in 2..62 {
            write(x).await.unwrap().unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(runs(), 1, "no idle work between steady writes");
        assert_eq!(settled(2).await, 2, "once the stream stops");
        tokio::time::sleep(quiet * 3).await;
        assert_eq!(runs(), 2, "planned once per quiet spell");
    }

    /// A job alone in its batch that fails after writing leaves nothing.
    #[test]
    fn a_lone_job_that_fails_leaves_nothing() {
        let w = writer(); // no runtime: each submit is driven at once, alone
        assert!(insert(&w, 1, false).recv().unwrap().is_ok());
        assert!(insert(&w, 2, true).recv().unwrap().is_err());
        assert_eq!(rows(&w), vec![1]);
        assert_eq!(w.group_commits().writes, 2, "the failed job's transaction was not committed");
    }

    /// Submits `jobs` (value, fails, fails before writing) so that they share one batch; answers
    /// whether each was recorded.
    fn batch(w: &Arc<Writer>, jobs: &[(i64, bool, bool)]) -> Vec<bool> {
        let held = w.hold(); // the driver waits here, so all the jobs share one batch
        let results: Vec<_> = jobs
            .iter()
            .map(|&(x, fail, before_writing)| if before_writing { refuse(w, x) } else { insert(w, x, fail) })
            .collect();
        drop(held);
        results.iter().map(|r| r.recv().unwrap().is_ok()).collect()
    }

    /// A job that reads, then fails without writing.
    fn refuse(w: &Arc<Writer>, x: i64) -> Receiver<Result<()>> {
        let (tx, rx) = channel();
        w.submit(
            super::Memory::Forgotten,
            move |c| {
                c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?;
                Err(StoreError::InvalidData(format!("job {x} refused")))
            },
            move |r| tx.send(r).unwrap(),
        );
        rx
    }

    /// Jobs share a batch without savepoints: one that fails before it writes leaves its neighbours
    /// committed, in one transaction.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_that_fails_before_writing_leaves_its_neighbours_committed() {
        let w = writer();
        assert_eq!(
            batch(&w, &[(1, false, false), (2, true, true), (3, false, false)]),
            vec![true, false, true]
        );
        assert_eq!(w.group_commits().commits, 1, "one batch, one commit");
        assert_eq!(tokio::task::block_in_place(|| rows(&w)), vec![1, 3]);
    }

    /// A job that fails half-done takes the jobs of its transaction with it, each told it was not
    /// recorded; the rest of the batch commits in a new transaction.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_that_fails_after_writing_takes_its_transaction_with_it() {
        let w = writer();
        let recorded =
            batch(&w, &[(1, false, false), (2, true, false), (3, false, false), (4, false, false)]);
        assert_eq!(recorded, vec![false, false, true, true]);
        assert_eq!(w.group_commits(), crate::GroupCommits { commits: 1, writes: 2 });
        assert_eq!(tokio::task::block_in_place(|| rows(&w)), vec![3, 4], "nothing of 1 or 2");
    }

    /// A job queued while a batch runs joins that batch's commit instead of waiting for the next one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_queued_while_its_batch_runs_shares_the_commit() {
        let w = writer();
        let (tx, rx) = channel::<Result<()>>();
        let (inner, tx2) = (w.clone(), tx.clone());
        w.submit(
            super::Memory::Forgotten,
            move |c| {
                c.execute("INSERT INTO t VALUES (1)", [])?;
                inner.submit(
                    super::Memory::Forgotten,
                    |c| Ok(c.execute("INSERT INTO t VALUES (2)", []).map(|_| ())?),
                    move |r| tx2.send(r).unwrap(),
                );
                Ok(())
            },
            move |r| tx.send(r).unwrap(),
        );
        assert!(rx.recv().unwrap().is_ok() && rx.recv().unwrap().is_ok());
        assert_eq!(w.group_commits(), crate::GroupCommits { commits: 1, writes: 2 }, "one commit for both");
        assert_eq!(tokio::task::block_in_place(|| rows(&w)), vec![1, 2]);
    }

    /// A write is lone when nothing is queued or running (its caller then polls for the answer).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_is_lone_only_when_nothing_is_queued_or_running() {
        let w = writer();
        let submit = |w: &Arc<Writer>| {
            let (tx, rx) = channel();
            (
                w.submit(
                    super::Memory::Forgotten,
                    |c| Ok(c.execute("INSERT INTO t VALUES (1)", [])?),
                    move |r| tx.send(r).unwrap(),
                ),
                rx,
            )
        };
        let held = w.hold(); // the driver waits here with the first job still queued
        let (first, first_done) = submit(&w);
        let (second, second_done) = submit(&w);
        assert_eq!((first, second), (true, false), "the second queued behind the first");
        drop(held);
        assert!(first_done.recv().unwrap().is_ok() && second_done.recv().unwrap().is_ok());
        while w.in_batch.load(std::sync::atomic::Ordering::Acquire) {
            std::thread::yield_now(); // the batch's answers come just before it ends
        }
        assert!(submit(&w).0, "idle again");
    }
}
