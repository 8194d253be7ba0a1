//! The single writer connection with group commit.
//!
//! Each write is a job run inside its own savepoint. Whoever holds the writer runs every job queued so
//! far in one `BEGIN IMMEDIATE` transaction and commits once; only then does any job's caller hear its
//! result, so nobody is told "recorded" before the commit that made it durable. A job that fails rolls
//! back to its savepoint without disturbing the others in the batch.

use crate::{Result, StoreError};
use rusqlite::Connection;
use std::sync::{Mutex, MutexGuard};

/// Told once the batch's commit outcome is known: `None` when it committed.
type Completion = Box<dyn FnOnce(Option<&StoreError>) + Send>;
type Job = Box<dyn FnOnce(&Connection) -> Completion + Send>;

/// At most this many jobs share one commit, so a single transaction stays short.
const MAX_BATCH: usize = 512;

pub(crate) struct Writer {
    conn: Mutex<Connection>,
    pending: Mutex<Vec<Job>>,
}

impl Writer {
    pub fn new(conn: Connection) -> Writer {
        Writer { conn: Mutex::new(conn), pending: Mutex::new(Vec::new()) }
    }

    fn lock_pending(&self) -> MutexGuard<'_, Vec<Job>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `f`; `done` receives its result after the commit that contains it.
    pub fn submit<T: Send + 'static>(
        &self,
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
        self.drive();
    }

    /// Runs queued jobs while the writer is free. A holder re-checks the queue after releasing the
    /// connection, so a job queued while someone else held it is never stranded.
    pub fn drive(&self) {
        loop {
            let Ok(conn) = self.conn.try_lock() else { return };
            let jobs: Vec<Job> = {
                let mut pending = self.lock_pending();
                let n = pending.len().min(MAX_BATCH);
                pending.drain(..n).collect()
            };
            if jobs.is_empty() {
                drop(conn);
                if self.lock_pending().is_empty() {
                    return;
                }
                continue;
            }
            let mut completions = Vec::with_capacity(jobs.len());
            let mut rolled_back: Vec<Completion> = Vec::new();
            let outcome = match run(&conn, "BEGIN IMMEDIATE") {
                Err(e) => Err(StoreError::classify(e)),
                Ok(()) => {
                    let mut began = Ok(());
                    for job in jobs.into_iter() {
                        if began.is_err() {
                            break; // dropped unrun: the callers see "not executed"
                        }
                        completions.push(job(&conn));
                        if conn.is_autocommit() {
                            // SQLite rolled the whole transaction back (e.g. the disk is full): every
                            // job in it so far is lost; the rest start a new transaction.
                            rolled_back.append(&mut completions);
                            began = run(&conn, "BEGIN IMMEDIATE");
                        }
                    }
                    match began {
                        Ok(()) => run(&conn, "COMMIT").map_err(StoreError::classify),
                        Err(e) => Err(StoreError::classify(e)),
                    }
                }
            };
            let failed = match outcome {
                Ok(()) => None,
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    Some(e)
                }
            };
            drop(conn);
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
            if self.lock_pending().is_empty() {
                return;
            }
        }
    }

    /// Runs `f` alone in its own transaction, blocking (maintenance, migrations, bench fixtures).
    pub fn exclusive<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let out = {
            let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            run(&conn, "BEGIN IMMEDIATE").map_err(StoreError::classify)?;
            match f(&conn) {
                Ok(v) => match run(&conn, "COMMIT") {
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
        };
        self.drive();
        out
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
