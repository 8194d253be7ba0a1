//! The writer's batches, failures, idle work and appends on their callers' threads.

use super::Writer;
use crate::{Result, StoreError};
use rusqlite::Connection;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};

fn writer() -> Arc<Writer> {
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch("CREATE TABLE t (x INTEGER NOT NULL)").unwrap();
    Arc::new(Writer::new(conn, |_, _, _| Ok(())))
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
/// stream, whether they run on the pool or on their callers' threads (here a long quiet time, so that
/// a busy test machine's stalls cannot pass for one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_work_waits_for_a_quiet_writer() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};
    static IDLE_RUNS: AtomicUsize = AtomicUsize::new(0);
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch("CREATE TABLE t (x INTEGER NOT NULL)").unwrap();
    let quiet = Duration::from_millis(300);
    let idle: super::IdleWork = |_, _, _| {
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
    // Appends first (run on this thread, the writer free), then other writes (on the pool).
    let write = |x: i64| {
        let answer: Receiver<Result<()>> = if x < 32 {
            let (tx, rx) = channel();
            tx.send(append(&w, x).recv().unwrap().map(drop)).unwrap();
            rx
        } else {
            insert(&w, x, false)
        };
        tokio::task::spawn_blocking(move || answer.recv().unwrap())
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

/// Submits an append (`Memory::Kept`) that inserts `x`; answers where its result arrives, with the
/// thread it ran on.
fn append(w: &Arc<Writer>, x: i64) -> Receiver<Result<std::thread::ThreadId>> {
    let (tx, rx) = channel();
    w.submit(
        super::Memory::Kept,
        move |c| {
            c.execute("INSERT INTO t VALUES (?1)", [x])?;
            Ok(std::thread::current().id())
        },
        move |r| tx.send(r).unwrap(),
    );
    rx
}

/// An append submitted while the writer is free is committed before `submit` returns, on the
/// caller's thread; one submitted while the connection is held, or any other write, goes to a
/// driver on the blocking pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_to_a_free_writer_is_committed_on_its_callers_thread() {
    let w = writer();
    let here = std::thread::current().id();
    let answered = append(&w, 1).try_recv().expect("answered before submit returned");
    assert_eq!(answered.unwrap(), here);
    assert_eq!(w.group_commits(), crate::GroupCommits { commits: 1, writes: 1 });

    let held = w.hold();
    let queued = append(&w, 2);
    assert!(queued.try_recv().is_err(), "queued behind the held connection");
    drop(held);
    let ran_on = tokio::task::block_in_place(|| queued.recv().unwrap().unwrap());
    assert_ne!(ran_on, here, "driven on the blocking pool");

    let (tx, rx) = channel();
    w.submit(super::Memory::Forgotten, |_| Ok(std::thread::current().id()), move |r| tx.send(r).unwrap());
    assert_ne!(tokio::task::block_in_place(|| rx.recv().unwrap().unwrap()), here);
    assert_eq!(tokio::task::block_in_place(|| rows(&w)), vec![1, 2]);
}

/// An append on its caller's thread that finds a fold due leaves it to the idle work, which runs at
/// once instead of after the quiet time (under steady appends the staging table stays bounded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fold_left_by_an_append_on_its_callers_thread_is_done_at_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};
    static IDLE_RUNS: AtomicUsize = AtomicUsize::new(0);
    let conn = Connection::open_in_memory().unwrap();
    let idle: super::IdleWork = |_, fold_asked, _| {
        assert!(fold_asked, "asked for the fold");
        IDLE_RUNS.fetch_add(1, Ordering::SeqCst);
        Ok(())
    };
    let w = Arc::new(Writer::with_quiet(conn, idle, Duration::from_secs(600)));
    let (tx, rx) = channel();
    w.submit(super::Memory::Kept, |c| Ok(c.defer_fold()), move |r| tx.send(r).unwrap());
    assert!(rx.try_recv().unwrap().unwrap(), "deferred, on the caller's thread");
    let until = Instant::now() + Duration::from_secs(10);
    while IDLE_RUNS.load(Ordering::SeqCst) == 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(IDLE_RUNS.load(Ordering::SeqCst), 1, "not after the quiet time's 600 s");
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
    assert_eq!(batch(&w, &[(1, false, false), (2, true, true), (3, false, false)]), vec![true, false, true]);
    assert_eq!(w.group_commits().commits, 1, "one batch, one commit");
    assert_eq!(tokio::task::block_in_place(|| rows(&w)), vec![1, 3]);
}

/// A job that fails half-done takes the jobs of its transaction with it, each told it was not
/// recorded; the rest of the batch commits in a new transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_fails_after_writing_takes_its_transaction_with_it() {
    let w = writer();
    let recorded = batch(&w, &[(1, false, false), (2, true, false), (3, false, false), (4, false, false)]);
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
