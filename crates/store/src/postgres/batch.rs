//! Group commit of appends on PostgreSQL: concurrent appends share one transaction, and its statements
//! are pipelined, so a burst costs a few round trips and one commit (one WAL flush) instead of eight
//! round trips and a flush per event.
//!
//! One driver at a time takes every append queued so far (up to [`MAX_BATCH`]), sorted by session so
//! every gateway locks head rows in the same order, and runs them in one transaction. An append that
//! finds no driver running runs on its caller's task as a batch of one (a lone writer's append then
//! costs no hand-off to a driver task and back); appends queued meanwhile go to a driver after it.
//! A batch:
//!
//! 1. one round trip: `BEGIN`, one statement that takes every event's sequence under its head row lock
//!    and inserts the events, and one `SELECT … FOR UPDATE` of the cursors on the notified targets
//!    (pipelined after the appends, so it reads after the head rows are locked, as a single append does;
//!    with several gateways each cursor comes with the gateway hosting its watcher);
//! 2. in memory: [`fan_out`] per event in sequence order over the locked cursors (a cursor one event of
//!    the batch made pending is pending for the next); with several gateways the notices of watchers
//!    hosted elsewhere become pushes, as a single append's do (a watcher no gateway hosts yet is claimed
//!    here, a round trip each);
//! 3. one round trip: the moved positions, one `pg_notify` statement for the pushes and `COMMIT`,
//!    pipelined (prepared first, so they run in that order). Only then does any caller hear "recorded".
//!
//! If anything fails before `COMMIT`, nothing was committed (a write that fails in the last round trip
//! aborts the transaction, and the `COMMIT` behind it rolls it back) and each append is run again alone
//! ([`PostgresStore::append_pg`]), so one bad append, a deadlock with another gateway or a dedupe race
//! costs a retry, not its neighbours' events. If `COMMIT` itself fails the outcome is unknown: every
//! caller hears the error (as a single append's caller would), none is retried.
//!
//! Appends that need a decision before their sequence is taken (a dedupe key, "only if watched") or that
//! seed cursors (a spawn) take the single path.

use super::append::{Hosts, InTransaction, PUSH, prepare_all, push};
use super::{PostgresStore, watch};
use crate::tail::HeadRow;
use crate::{AppendOutcome, AppendRequest, GroupCommitCounter, GroupCommits, Result, StoreError, payload};
use deadpool_postgres::Object;
use futures_util::future::{join, join_all, join3};
use sessionwatch_core::policy::fan_out;
use sessionwatch_core::{Cursor, EventKind, Millis, Notice, StoredEvent};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;
use tokio_postgres::types::ToSql;

/// At most this many appends share one transaction, so its locks are held briefly.
const MAX_BATCH: usize = 256;

/// One append: the next sequence under the head row lock (the row created if new), and the event.
/// Cheaper than [`APPEND_MANY`] for the lone append of a sequential writer. Answers as it does.
const APPEND_ONE: &str = "WITH h AS ( \
       INSERT INTO session_state_heads AS t (session_key, agent_id, head, floor, updated_at) \
       VALUES ($1, $2, 1, 0, $3) \
       ON CONFLICT (session_key, agent_id) DO UPDATE SET head = t.head + 1, updated_at = $3 \
       RETURNING head, floor, updated_at), \
     e AS ( \
       INSERT INTO session_state_events (session_key, agent_id, sequence, session_id, kind, actor_type, \
         actor_id, run_id, occurred_at, summary, payload_json) \
       SELECT $1, $2, h.head, $4::text, $5::text, $6::text, $7::text, $8::text, $9::bigint, $10::text, \
         $11::text FROM h) \
     SELECT head, floor, updated_at FROM h";

/// Every append of the batch in one statement (one execution however many events): the events, as
/// parallel arrays in batch order, take their sessions' next sequences under the head row locks (each
/// head row created if new and moved once, by its number of events, in session order), and are
/// inserted in batch order. Answers, in batch order, each event's sequence, its session's floor and the
/// head row's `updated_at` after the batch.
const APPEND_MANY: &str = "WITH j AS ( \
       SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], \
         $7::text[], $8::text[], $9::bigint[], $10::text[], $11::text[]) WITH ORDINALITY \
         AS j(session_key, agent_id, now, session_id, kind, actor_type, actor_id, run_id, occurred_at, \
         summary, payload_json, ord)), \
     n AS (SELECT session_key, agent_id, count(*) AS n, max(now) AS now FROM j GROUP BY session_key, agent_id), \
     h AS ( \
       INSERT INTO session_state_heads AS t (session_key, agent_id, head, floor, updated_at) \
       SELECT session_key, agent_id, n, 0, now FROM n ORDER BY session_key COLLATE \"C\", agent_id COLLATE \"C\" \
       ON CONFLICT (session_key, agent_id) \
       DO UPDATE SET head = t.head + excluded.head, updated_at = excluded.updated_at \
       RETURNING session_key, agent_id, head, floor, updated_at), \
     s AS ( \
       SELECT j.*, h.head - n.n + row_number() OVER (PARTITION BY j.session_key, j.agent_id ORDER BY j.ord) \
         AS sequence, h.floor, h.updated_at \
       FROM j JOIN n USING (session_key, agent_id) JOIN h USING (session_key, agent_id)), \
     e AS ( \
       INSERT INTO session_state_events (session_key, agent_id, sequence, session_id, kind, actor_type, \
         actor_id, run_id, occurred_at, summary, payload_json) \
       SELECT session_key, agent_id, sequence, session_id, kind, actor_type, actor_id, run_id, occurred_at, \
         summary, payload_json FROM s ORDER BY ord) \
     SELECT sequence, floor, updated_at FROM s ORDER BY ord";

/// A batch's `BEGIN`, and its statements run on their prepared generic plans. PostgreSQL otherwise plans
/// every execution of [`APPEND_ONE`] afresh (its "custom" plans looked no dearer than the generic one),
/// about 50 µs of a lone append's 580: a sequential writer measured 0.83–0.86 of the bare commit loop
/// that way, 0.88–0.95 on generic plans (`bench kernel --database postgres://…`, four runs alternated).
/// `SET LOCAL` ends with the transaction, so the pool's other queries keep the default.
pub(crate) const BEGIN_WITH_GENERIC_PLANS: &str = "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan";

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
    state: Mutex<QueueState>,
    /// Batches committed, and the appends they carried.
    commits: GroupCommitCounter,
}

/// One driver at a time (measured: a second one running its batch beside the first gained nothing, a
/// fourth lost a third, its smaller batches waiting on each other's head rows).
#[derive(Default)]
struct QueueState {
    jobs: Vec<Job>,
    /// A driver is running; it runs batches until it finds the queue empty.
    driving: bool,
}

impl QueueState {
    /// With nothing queued, the driver stops (answers `true`); otherwise it keeps driving.
    fn stop_if_empty(&mut self) -> bool {
        let empty = self.jobs.is_empty();
        if empty {
            self.driving = false;
        }
        empty
    }
}

impl AppendQueue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `job` behind the running driver, or, when there is none (so the queue is empty), answers
    /// it for the caller to run as a batch of one, the caller now driving ([`AppendQueue::hand_off`]).
    fn push(&self, job: Job) -> Option<Job> {
        let mut state = self.lock();
        if std::mem::replace(&mut state.driving, true) {
            state.jobs.push(job);
            return None;
        }
        Some(job)
    }

    /// A caller that ran its own append is done driving: answers whether appends queued meanwhile need
    /// a driver (still marked as driving), or stops.
    fn hand_off(&self) -> bool {
        !self.lock().stop_if_empty()
    }

    /// The next batch, or `None` (and the driver stops) when the queue is empty.
    fn next_batch(&self) -> Option<Vec<Job>> {
        let mut state = self.lock();
        if state.stop_if_empty() {
            return None;
        }
        let n = state.jobs.len().min(MAX_BATCH);
        Some(state.jobs.drain(..n).collect())
    }

    pub fn group_commits(&self) -> GroupCommits {
        self.commits.get()
    }

    /// The driver stopped before it found the queue empty (its task was dropped).
    fn driver_lost(&self) {
        self.lock().driving = false;
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
        if let Some(job) = self.inner.appends.push(Job { req, now, done }) {
            // No other append in flight: commit this one here, a batch of one, without a hop to a driver
            // task and back. Whoever queued meanwhile goes to a driver once it is done, or cancelled.
            let _lead = Lead(self);
            self.run_batch(vec![job]).await;
        }
        answer.await.unwrap_or_else(|_| Err(StoreError::Task("the append was not executed".into())))
    }

    async fn drive_appends(&self) {
        while let Some(jobs) = self.inner.appends.next_batch() {
            self.run_batch(jobs).await;
            // The callers just answered append again at once: let them queue before the next batch is
            // taken, so it holds them instead of leaving them to the one after.
            tokio::task::yield_now().await;
        }
    }

    async fn run_batch(&self, mut jobs: Vec<Job>) {
        // One lock order for every gateway's batches: by session (stable, so a session's appends keep
        // their submission order).
        jobs.sort_by(|a, b| {
            (&a.req.event.session_key, &a.req.event.agent_id)
                .cmp(&(&b.req.event.session_key, &b.req.event.agent_id))
        });
        match self.commit_batch(&jobs).await {
            Ok(appended) => {
                self.inner.appends.commits.committed(jobs.len());
                for (job, a) in jobs.into_iter().zip(appended) {
                    let event = Arc::new(a.event);
                    self.inner.tail.committed(event.clone(), a.row);
                    let _ = job.done.send(Ok(AppendOutcome::Recorded { event, notices: a.notices }));
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
            Ok((appended, closing)) => match close(tx.client(), closing).await {
                Ok(()) => {
                    tx.release();
                    return Ok(appended);
                }
                Err(e) => Err(e),
            },
            Err(e) => Err(BatchError::NotCommitted(e)),
        };
        // The connection goes back to the pool only if it is known to be out of the transaction; otherwise
        // dropping `tx` discards it.
        if tx.client().batch_execute("ROLLBACK").await.is_ok() {
            tx.release();
        }
        outcome
    }

    /// Everything of the batch's transaction up to (not including) the writes that close it.
    async fn stage(&self, client: &Object, jobs: &[Job]) -> Result<(Vec<Appended>, BatchCursors)> {
        let lone = jobs.len() == 1;
        // With several gateways each cursor comes with its watcher's host, for the pushes.
        let hosted = jobs.iter().any(|j| j.req.host_id.is_some());
        let append = client.prepare_cached(if lone { APPEND_ONE } else { APPEND_MANY }).await?;
        let lock = client.prepare_cached(&watch::lock_cursors_sql(hosted)).await?;
        // The targets whose cursors the batch's events may move, each once.
        let mut targets: Vec<&str> = jobs
            .iter()
            .filter(|j| j.req.event.kind.notifies())
            .map(|j| j.req.event.session_key.as_str())
            .collect();
        targets.dedup(); // sorted by session already

        // Round trip 1: BEGIN, the appends, the cursor locks (pipelined; the locks are taken after the
        // head rows, as a single append takes them).
        let columns = Columns::of(jobs);
        let (begun, (heads, locked)) = join(
            client.batch_execute(BEGIN_WITH_GENERIC_PLANS),
            join(client.query(&append, &columns.params(lone)), client.query(&lock, &[&targets])),
        )
        .await;
        begun?;
        let heads = heads?;
        if heads.len() != jobs.len() {
            return Err(StoreError::InvalidData(format!(
                "{} appends answered {} rows",
                jobs.len(),
                heads.len()
            )));
        }
        let mut cursors = BatchCursors::default();
        for (target, cursor, host) in watch::hosted_cursors_from_rows(&locked?)? {
            if let Some(host) = host {
                cursors.hosts.insert(cursor.0.clone(), host);
            }
            cursors.held.entry(target).or_default().push(cursor);
        }

        // In memory: each event's fan-out, in sequence order; with several gateways, the notices of
        // watchers hosted elsewhere become pushes instead of answers.
        let mut appended = Vec::with_capacity(jobs.len());
        for ((job, head), stored) in jobs.iter().zip(heads).zip(columns.stored) {
            let sequence = super::u(head.try_get(0)?);
            let row = HeadRow::moved_by_every_append(sequence, super::u(head.try_get(1)?), head.try_get(2)?);
            let mut notices = cursors.fan_out(job, sequence);
            if let Some(me) = &job.req.host_id
                && !notices.is_empty()
            {
                notices =
                    self.split_notices(client, me, notices, &mut cursors.hosts, &mut cursors.pushes).await?;
            }
            appended.push(Appended { event: StoredEvent { sequence, ..stored }, row, notices });
        }
        Ok((appended, cursors))
    }
}

/// Round trip 2: the moved positions (every target at once), the pushes and `COMMIT`, pipelined. A write
/// that fails before `COMMIT` aborts the transaction, which the `COMMIT` then rolls back: not committed.
async fn close(client: &Object, closing: BatchCursors) -> std::result::Result<(), BatchError> {
    prepare_all(client, &[watch::SAVE_POSITIONS, PUSH]).await.map_err(BatchError::NotCommitted)?;
    let saves =
        join_all(closing.moved.iter().map(|(target, moved)| watch::save_positions(client, target, moved)));
    let (saved, pushed, committed) =
        join3(saves, push(client, &closing.pushes), client.batch_execute("COMMIT")).await;
    for s in saved {
        s.map_err(BatchError::NotCommitted)?;
    }
    pushed.map_err(BatchError::NotCommitted)?;
    committed.map_err(|e| BatchError::Commit(e.into()))
}

/// The cursors on a batch's notified targets, as its events move them, and what closes the batch.
#[derive(Default)]
struct BatchCursors {
    /// By target, as locked, then as moved by the events so far.
    held: HashMap<String, Vec<(String, Cursor)>>,
    /// By target, the cursors to write back: each once, as the last event that moved it left it.
    moved: HashMap<String, Vec<(String, Cursor)>>,
    /// The gateways hosting the watchers (with several gateways), claims made by the batch included.
    hosts: Hosts,
    /// (channel, watcher) of each watcher hosted elsewhere that a notice goes to.
    pushes: BTreeSet<(String, String)>,
}

impl BatchCursors {
    /// The fan-out of `job`'s event at `sequence` over the cursors as the batch's earlier events left
    /// them (one made pending by an earlier event is pending for this one); answers its notices.
    fn fan_out(&mut self, job: &Job, sequence: u64) -> Vec<Notice> {
        let e = &job.req.event;
        let Some(held) = self.held.get_mut(e.session_key.as_str()) else {
            return vec![];
        };
        let out = fan_out(
            &e.session_key,
            e.actor.id.as_deref(),
            sequence,
            &job.req.watcher_store,
            job.now,
            held.clone(),
        );
        if out.moved.is_empty() {
            return out.notices;
        }
        let writes = self.moved.entry(e.session_key.clone()).or_default();
        for (watcher, cursor) in out.moved {
            set(held, &watcher, cursor.clone());
            set(writes, &watcher, cursor);
        }
        out.notices
    }
}

/// Sets `watcher`'s cursor in `cursors`, adding it if missing.
fn set(cursors: &mut Vec<(String, Cursor)>, watcher: &str, cursor: Cursor) {
    match cursors.iter_mut().find(|(w, _)| w == watcher) {
        Some(slot) => slot.1 = cursor,
        None => cursors.push((watcher.to_string(), cursor)),
    }
}

/// The batch's events as they are stored (their sequences still to be taken), and as the parallel
/// arrays [`APPEND_MANY`] reads.
struct Columns {
    stored: Vec<StoredEvent>,
    session_key: Vec<String>,
    agent_id: Vec<String>,
    now: Vec<Millis>,
    session_id: Vec<Option<String>>,
    kind: Vec<&'static str>,
    actor_type: Vec<&'static str>,
    actor_id: Vec<Option<String>>,
    run_id: Vec<Option<String>>,
    occurred_at: Vec<Millis>,
    summary: Vec<String>,
    payload_json: Vec<Option<String>>,
}

impl Columns {
    fn of(jobs: &[Job]) -> Columns {
        let stored: Vec<StoredEvent> = jobs.iter().map(|j| j.req.event.stored(0, j.now)).collect();
        Columns {
            session_key: stored.iter().map(|e| e.session_key.clone()).collect(),
            agent_id: stored.iter().map(|e| e.agent_id.clone()).collect(),
            now: jobs.iter().map(|j| j.now).collect(),
            session_id: stored.iter().map(|e| e.session_id.clone()).collect(),
            kind: stored.iter().map(|e| e.kind.as_str()).collect(),
            actor_type: stored.iter().map(|e| e.actor.kind.as_str()).collect(),
            actor_id: stored.iter().map(|e| e.actor.id.clone()).collect(),
            run_id: stored.iter().map(|e| e.run_id.clone()).collect(),
            occurred_at: stored.iter().map(|e| e.occurred_at).collect(),
            summary: stored.iter().map(|e| e.summary.clone()).collect(),
            payload_json: stored.iter().map(|e| payload::encode(&e.payload)).collect(),
            stored,
        }
    }

    /// The parameters of [`APPEND_MANY`], or of [`APPEND_ONE`] for a `lone` event.
    fn params(&self, lone: bool) -> [&(dyn ToSql + Sync); 11] {
        if lone {
            return [
                &self.session_key[0],
                &self.agent_id[0],
                &self.now[0],
                &self.session_id[0],
                &self.kind[0],
                &self.actor_type[0],
                &self.actor_id[0],
                &self.run_id[0],
                &self.occurred_at[0],
                &self.summary[0],
                &self.payload_json[0],
            ];
        }
        [
            &self.session_key,
            &self.agent_id,
            &self.now,
            &self.session_id,
            &self.kind,
            &self.actor_type,
            &self.actor_id,
            &self.run_id,
            &self.occurred_at,
            &self.summary,
            &self.payload_json,
        ]
    }
}

/// The running driver. If its task is dropped before it found the queue empty (the runtime shut down),
/// the queue is marked undriven, so the next append starts a new one.
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
            self.store.inner.appends.driver_lost();
        }
    }
}

/// A caller running its own append as a batch of one ([`PostgresStore::append_batched`]). Dropped
/// (done, or cancelled with its caller), it hands the appends queued meanwhile to a driver; only its own
/// append is lost to a cancellation, never another caller's.
struct Lead<'a>(&'a PostgresStore);

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        let store = self.0;
        if store.inner.appends.hand_off() {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn(Driver { store: store.clone(), finished: false }.run())),
                // The runtime is gone: nothing can run them; the next append starts a driver.
                Err(_) => store.inner.appends.driver_lost(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::TestSchema;
    use super::super::{PostgresOptions, PostgresStore};
    use crate::{AppendOutcome, AppendRequest, SignalLog};
    use sessionwatch_core::NewEvent;

    /// A batch runs its statements on generic plans (`SET LOCAL`): its pooled connection goes back with
    /// the server's default, for every other query that runs on it.
    #[tokio::test]
    async fn a_batch_leaves_its_connection_on_the_default_plans() {
        let Some(schema) = TestSchema::create("a_batch_leaves_its_connection_on_the_default_plans").await
        else {
            return;
        };
        let store: PostgresStore =
            schema.store_with(PostgresOptions { pool_size: 1, ..PostgresOptions::default() }).await;
        let client = store.client().await.unwrap();
        let mode = |row: tokio_postgres::Row| row.get::<_, String>(0);
        let default = mode(client.query_one("SHOW plan_cache_mode", &[]).await.unwrap());
        drop(client);
        let human = AppendRequest::new(NewEvent::human_message("agent:main:a", "main", "web", None), "s");
        assert!(matches!(store.append(human, 1_000).await.unwrap(), AppendOutcome::Recorded { .. }));
        let client = store.client().await.unwrap(); // the pool's one connection, the batch's
        assert_eq!(mode(client.query_one("SHOW plan_cache_mode", &[]).await.unwrap()), default);
    }
}
