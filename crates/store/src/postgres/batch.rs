//! Group commit of appends on PostgreSQL: concurrent appends share one transaction, and its statements
//! are pipelined, so a burst costs a few round trips and one commit (one WAL flush) instead of eight
//! round trips and a flush per event.
//!
//! One driver at a time takes every append queued so far (up to [`MAX_BATCH`]), sorted by session so
//! every gateway locks head rows in the same order, and runs them in one transaction:
//!
//! 1. one round trip: `BEGIN`, per append one statement that takes the next sequence under the head row
//!    lock and inserts the event, and per notified target one `SELECT … FOR UPDATE` of its cursors
//!    (pipelined after the appends, so it reads after the head rows are locked, as a single append does);
//! 2. in memory: [`fan_out`] per event in sequence order over the locked cursors (a cursor one event of
//!    the batch made pending is pending for the next);
//! 3. one round trip when cursors moved: their positions; then, with several gateways, the notices of
//!    watchers hosted elsewhere are routed as a single append routes them;
//! 4. `COMMIT`. Only then does any caller hear "recorded".
//!
//! If anything fails before `COMMIT` was sent, nothing was committed and each append is run again alone
//! ([`PostgresStore::append_pg`]), so one bad append, a deadlock with another gateway or a dedupe race
//! costs a retry, not its neighbours' events. If `COMMIT` itself fails the outcome is unknown: every
//! caller hears the error (as a single append's caller would), none is retried.
//!
//! Appends that need a decision before their sequence is taken (a dedupe key, "only if watched") or that
//! seed cursors (a spawn) take the single path.

use super::{PostgresStore, watch};
use deadpool_postgres::Object;
use crate::tail::HeadRow;
use crate::{AppendOutcome, AppendRequest, Result, StoreError, payload};
use futures_util::future::{join, join_all};
use sessionwatch_core::policy::fan_out;
use sessionwatch_core::{Cursor, EventKind, Millis, Notice, StoredEvent};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use tokio::sync::oneshot;
use tokio_postgres::types::ToSql;

/// At most this many appends share one transaction, so its locks are held briefly.
const MAX_BATCH: usize = 256;

/// Takes the next sequence under the head row lock (creating the row) and inserts the event: one
/// statement, so an append is one pipelined round trip.
const APPEND: &str = "WITH h AS ( \
       INSERT INTO session_state_heads (session_key, agent_id, head, floor, updated_at) \
       VALUES ($1, $2, 1, 0, $3) \
       ON CONFLICT (session_key, agent_id) DO UPDATE SET head = session_state_heads.head + 1, updated_at = $3 \
       RETURNING head, floor), \
     e AS ( \
       INSERT INTO session_state_events (session_key, agent_id, sequence, session_id, kind, actor_type, \
         actor_id, run_id, occurred_at, summary, payload_json) \
       SELECT $1, $2, h.head, $4::text, $5::text, $6::text, $7::text, $8::text, $9::bigint, $10::text, $11::text \
       FROM h) \
     SELECT head, floor FROM h";

/// Whether `req` may share a group commit (see the module doc for the others).
pub(crate) fn batchable(req: &AppendRequest) -> bool {
    req.event.dedupe_key.is_none() && !req.policy.only_if_watched && req.event.kind != EventKind::ChildSpawned
}

struct Job {
    req: AppendRequest,
    now: Millis,
    done: oneshot::Sender<Result<AppendOutcome>>,
}

#[derive(Default)]
pub(crate) struct AppendQueue {
    pending: Mutex<Vec<Job>>,
    /// A driver has been started and has not yet seen an empty queue.
    scheduled: AtomicBool,
}

impl AppendQueue {
    fn lock(&self) -> MutexGuard<'_, Vec<Job>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Why a batch did not commit.
enum BatchError {
    /// Before `COMMIT` was sent: nothing was committed, each append may run again alone.
    NotCommitted(StoreError),
    /// `COMMIT` failed: whether it took effect is unknown.
    Commit(StoreError),
}

/// What one append of a committed batch answers.
struct Appended {
    event: StoredEvent,
    row: HeadRow,
    notices: Vec<Notice>,
}

impl PostgresStore {
    /// Appends `req` in the next group commit; answers after that commit.
    pub(crate) async fn append_batched(&self, req: AppendRequest, now: Millis) -> Result<AppendOutcome> {
        let (done, answer) = oneshot::channel();
        self.inner.appends.lock().push(Job { req, now, done });
        self.schedule_appends();
        answer.await.unwrap_or_else(|_| Err(StoreError::Task("the append was not executed".into())))
    }

    /// Starts a driver unless one is running; it commits batches until the queue is empty.
    fn schedule_appends(&self) {
        if self.inner.appends.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        tokio::spawn(Driver { store: self.clone(), finished: false }.run());
    }

    async fn drive_appends(&self) {
        let queue = &self.inner.appends;
        loop {
            loop {
                let jobs: Vec<Job> = {
                    let mut pending = queue.lock();
                    let n = pending.len().min(MAX_BATCH);
                    pending.drain(..n).collect()
                };
                if jobs.is_empty() {
                    break;
                }
                self.run_batch(jobs).await;
            }
            queue.scheduled.store(false, Ordering::Release);
            // A job queued after the queue looked empty, but before the flag dropped, started no
            // driver: take it over (unless another driver already did).
            if queue.lock().is_empty() || queue.scheduled.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    }

    async fn run_batch(&self, mut jobs: Vec<Job>) {
        // One lock order for every gateway's batches: by session (stable, so a session's appends keep
        // their submission order).
        jobs.sort_by(|a, b| {
            (&a.req.event.session_key, &a.req.event.agent_id).cmp(&(&b.req.event.session_key, &b.req.event.agent_id))
        });
        match self.commit_batch(&jobs).await {
            Ok(appended) => {
                for (job, a) in jobs.into_iter().zip(appended) {
                    self.inner.tail.committed(&a.event, a.row);
                    let _ = job.done.send(Ok(AppendOutcome::Recorded { event: a.event, notices: a.notices }));
                }
            }
            Err(BatchError::NotCommitted(e)) => {
                if jobs.len() > 1 {
                    tracing::debug!(error = %e, appends = jobs.len(), "a batch did not commit; appending one by one");
                }
                for job in jobs {
                    let _ = job.done.send(self.append_pg(job.req, job.now).await);
                }
            }
            Err(BatchError::Commit(e)) => {
                for job in jobs {
                    let _ = job.done.send(Err(e.copy()));
                }
            }
        }
    }

    /// Runs `jobs` (sorted by session) in one transaction; answers their outcomes in the same order.
    async fn commit_batch(&self, jobs: &[Job]) -> std::result::Result<Vec<Appended>, BatchError> {
        let tx = InTransaction(Some(self.client().await.map_err(BatchError::NotCommitted)?));
        let outcome = match self.stage(tx.client(), jobs).await {
            Ok(appended) => match tx.client().batch_execute("COMMIT").await {
                Ok(()) => {
                    tx.release();
                    return Ok(appended);
                }
                Err(e) => Err(BatchError::Commit(e.into())),
            },
            Err(e) => Err(BatchError::NotCommitted(e)),
        };
        // Whatever state the failure left the connection in, it does not go back to the pool (dropping
        // `tx` discards it).
        let _ = tx.client().batch_execute("ROLLBACK").await;
        outcome
    }

    /// Everything of the batch's transaction up to (not including) `COMMIT`.
    async fn stage(&self, client: &Object, jobs: &[Job]) -> Result<Vec<Appended>> {
        let append = client.prepare_cached(APPEND).await?;
        let lock = client.prepare_cached(&watch::lock_cursors_sql()).await?;
        // The targets whose cursors the batch's events may move, each once.
        let mut targets: Vec<&str> =
            jobs.iter().filter(|j| j.req.event.kind.notifies()).map(|j| j.req.event.session_key.as_str()).collect();
        targets.dedup(); // sorted by session already

        // Round trip 1: BEGIN, the appends, the cursor locks (pipelined, answered in order).
        let columns: Vec<EventColumns<'_>> = jobs.iter().map(EventColumns::of).collect();
        let append_params: Vec<_> = columns.iter().map(EventColumns::params).collect();
        let lock_params: Vec<[&(dyn ToSql + Sync); 1]> = targets.iter().map(|t| [t as _]).collect();
        let appends = join_all(append_params.iter().map(|p| client.query_one(&append, p)));
        let locks = join_all(lock_params.iter().map(|p| client.query(&lock, p)));
        let (begun, (heads, locked)) = join(client.batch_execute("BEGIN"), join(appends, locks)).await;
        begun?;
        let mut cursors: HashMap<&str, Vec<(String, Cursor)>> = HashMap::with_capacity(targets.len());
        for (target, rows) in targets.iter().zip(locked) {
            cursors.insert(target, watch::cursors_from_rows(&rows?)?);
        }

        // In memory: each event's fan-out, in sequence order.
        let mut moved: HashMap<&str, Vec<(String, Cursor)>> = HashMap::new();
        let mut appended = Vec::with_capacity(jobs.len());
        for ((job, head), columns) in jobs.iter().zip(heads).zip(&columns) {
            let head = head?;
            let (sequence, floor) = (super::u(head.try_get(0)?), super::u(head.try_get(1)?));
            let e = &job.req.event;
            let event = StoredEvent { sequence, ..columns.stored.clone() };
            let mut notices = vec![];
            if let Some(held) = cursors.get_mut(e.session_key.as_str()) {
                let out = fan_out(
                    &e.session_key,
                    e.actor.id.as_deref(),
                    sequence,
                    &job.req.watcher_store,
                    job.now,
                    held.clone(),
                );
                for (watcher, cursor) in out.moved {
                    if let Some(slot) = held.iter_mut().find(|(w, _)| *w == watcher) {
                        slot.1 = cursor.clone();
                    }
                    let writes = moved.entry(e.session_key.as_str()).or_default();
                    match writes.iter_mut().find(|(w, _)| *w == watcher) {
                        Some(slot) => slot.1 = cursor,
                        None => writes.push((watcher, cursor)),
                    }
                }
                notices = out.notices;
            }
            appended.push(Appended { event, row: HeadRow { head: sequence, floor, updated_at: job.now }, notices });
        }

        // Round trip 2 (only if a cursor moved): their positions, every target at once.
        if !moved.is_empty() {
            let saves = join_all(moved.iter().map(|(target, cursors)| watch::save_positions(client, target, cursors)));
            for saved in saves.await {
                saved?;
            }
        }
        // With several gateways: notices of watchers hosted elsewhere are pushed, not answered.
        for (job, a) in jobs.iter().zip(appended.iter_mut()) {
            if let Some(me) = &job.req.host_id
                && !a.notices.is_empty()
            {
                a.notices = self.route_notices(client, me, std::mem::take(&mut a.notices)).await?;
            }
        }
        Ok(appended)
    }
}

/// An event as it is stored (its sequence still to be taken), with the values the wire needs converted.
struct EventColumns<'a> {
    now: &'a Millis,
    stored: StoredEvent,
    kind: &'static str,
    actor_type: &'static str,
    payload_json: Option<String>,
}

impl<'a> EventColumns<'a> {
    fn of(job: &'a Job) -> EventColumns<'a> {
        let stored = job.req.event.stored(0, job.now);
        EventColumns {
            now: &job.now,
            kind: stored.kind.as_str(),
            actor_type: stored.actor.kind.as_str(),
            payload_json: payload::encode(&stored.payload),
            stored,
        }
    }

    /// The parameters of [`APPEND`].
    fn params(&self) -> [&(dyn ToSql + Sync); 11] {
        let e = &self.stored;
        [
            &e.session_key,
            &e.agent_id,
            self.now,
            &e.session_id,
            &self.kind,
            &self.actor_type,
            &e.actor.id,
            &e.run_id,
            &e.occurred_at,
            &e.summary,
            &self.payload_json,
        ]
    }
}

/// A scheduled driver. If its task is dropped before the queue was seen empty (the runtime shut down),
/// the next append starts a new one instead of finding the queue marked as driven forever.
struct Driver {
    store: PostgresStore,
    finished: bool,
}

impl Driver {
    async fn run(mut self) {
        self.store.drive_appends().await;
        self.finished = true;
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.finished {
            self.store.inner.appends.scheduled.store(false, Ordering::Release);
        }
    }
}

/// A pooled connection inside the batch's transaction. Dropped before the transaction ended (the task
/// was cancelled), the connection leaves the pool instead of serving its next caller inside it.
struct InTransaction(Option<Object>);

impl InTransaction {
    fn client(&self) -> &Object {
        self.0.as_ref().expect("present until dropped or discarded")
    }

    /// The transaction ended: the connection may serve others.
    fn release(mut self) {
        self.0.take();
    }
}

impl Drop for InTransaction {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(Object::take(client));
        }
    }
}
