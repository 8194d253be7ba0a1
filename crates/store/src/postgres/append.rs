//! The single path of an append (a dedupe key, "only if watched", a spawn's seeding, a batch that failed,
//! a turn's event): the decisions that must come before the sequence is taken, then the append, its
//! cursors and its pushes to other gateways, in two pipelined round trips.
//!
//! 1. the transaction's opening statement (`BEGIN` on generic plans, or a turn's `SAVEPOINT`), the
//!    session's head row lock, the dedupe read, the watched read, and for a fan-out the lock of the
//!    cursors on the session (with several gateways, each with the gateway hosting its watcher);
//! 2. after the fan-out in memory ([`fan_out`]): the head move, the event, the moved positions, one
//!    `pg_notify` statement for the watchers hosted elsewhere, and the closing statement (`COMMIT` or
//!    `RELEASE`).
//!
//! PostgreSQL runs a connection's statements in the order they were sent, so each group keeps the order
//! a round trip each would have (the head row is locked before the cursors, as every append locks
//! them); every statement of a group is prepared before the group is sent (one prepared on first use
//! would be executed after the ones sent behind it). When a statement before the closing one fails, the
//! transaction is aborted and the closing statement cannot commit it (`COMMIT` of an aborted transaction
//! rolls back; `RELEASE` fails), so an error answered before the close means nothing was written. A
//! watcher that no gateway hosts yet is claimed one round trip at a time (once per watcher), between the
//! two groups; a spawn seeds its cursors there the same way.
//!
//! The watched turn of `bench kernel --database`'s cross-gateway notice took eight round trips this way
//! before (`BEGIN`; the head row lock with the reads; the head move with the event; the cursor lock;
//! the positions; the hosts; `pg_notify`; `COMMIT`).

use super::log::{EVENT_COLUMNS, event_from_row};
use super::{Params, PostgresStore, execute, query, query_one, query_opt, watch};
use crate::tail::HeadRow;
use crate::{AppendOutcome, AppendRequest, Result, StoreError, payload};
use deadpool_postgres::GenericClient;
use futures_util::future::{join, join4, join5, try_join_all};
use sessionwatch_core::policy::{fan_out, on_append, spawn_seed};
use sessionwatch_core::{AppendCursors, Cursor, Millis, Notice, StoredEvent};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// How an append's transaction is opened, closed and undone: a transaction of its own, or a savepoint
/// inside its caller's.
pub(crate) struct Bracket {
    pub open: &'static str,
    pub close: &'static str,
    /// Undoes everything since `open` and leaves the connection where it was before it.
    pub undo: &'static str,
}

impl Bracket {
    pub(crate) const TRANSACTION: Bracket =
        Bracket { open: super::batch::BEGIN_WITH_GENERIC_PLANS, close: "COMMIT", undo: "ROLLBACK" };
}

/// An append its bracket closed: committed (its event, the notices this gateway delivers, the head row
/// it left for the tail cache, to tell once the outermost transaction committed), or undone (duplicate,
/// unwatched).
pub(crate) enum Staged {
    Committed { event: Arc<StoredEvent>, notices: Vec<Notice>, row: HeadRow },
    RolledBack(AppendOutcome),
}

/// Locks the session's head row (creating it at 0 if new; a new row that turns out not to be needed goes
/// away with the undo): every append to the session waits here, so sequences are allocated, and
/// committed, in order. The floor cannot move before the close: a prune waits for this lock.
const LOCK_HEAD: &str = "INSERT INTO session_state_heads (session_key, agent_id, head, floor, updated_at) \
     VALUES ($1, $2, 0, 0, $3) \
     ON CONFLICT (session_key, agent_id) DO UPDATE SET head = session_state_heads.head \
     RETURNING head, floor";

const MOVE_HEAD: &str =
    "UPDATE session_state_heads SET head = $3, updated_at = $4 WHERE session_key = $1 AND agent_id = $2";

const INSERT_EVENT: &str = "INSERT INTO session_state_events (session_key, agent_id, sequence, session_id, kind, \
     actor_type, actor_id, run_id, occurred_at, summary, payload_json, dedupe_key) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

/// One `pg_notify` a (channel, watcher) pair: delivered at commit; the payload is only the watcher key.
pub(crate) const PUSH: &str = "SELECT pg_notify(c, w) FROM unnest($1::text[], $2::text[]) AS t(c, w)";

/// The hosts of watchers, by watcher key.
pub(crate) type Hosts = HashMap<String, String>;

/// Prepares (or finds cached) every statement of a pipelined group before any of it is sent: the helpers
/// ([`query`], [`execute`]) then find each in the cache and send it when first polled, in order.
pub(crate) async fn prepare_all<C: GenericClient + Sync>(c: &C, sqls: &[&str]) -> Result<()> {
    try_join_all(sqls.iter().map(|sql| c.prepare_cached(sql))).await?;
    Ok(())
}

/// What the fan-out leaves for round trip 2 to write.
#[derive(Default)]
struct Closing {
    /// The cursors the fan-out moved, on the event's session.
    moved: Vec<(String, Cursor)>,
    /// (channel, watcher) of each watcher hosted elsewhere.
    pushes: BTreeSet<(String, String)>,
}

impl PostgresStore {
    /// `req` alone in a transaction of its own.
    pub(crate) async fn append_pg(&self, req: AppendRequest, now: Millis) -> Result<AppendOutcome> {
        let conn = InTransaction(Some(self.client().await?));
        let staged = self.append_in(conn.client(), &Bracket::TRANSACTION, &req, now).await;
        // The connection goes back to the pool only once it is known to be outside a transaction.
        if staged.is_ok() || conn.client().batch_execute(Bracket::TRANSACTION.undo).await.is_ok() {
            conn.release();
        }
        Ok(match staged? {
            Staged::Committed { event, notices, row } => {
                self.inner.tail.committed(event.clone(), row);
                AppendOutcome::Recorded { event, notices }
            }
            Staged::RolledBack(outcome) => outcome,
        })
    }

    /// The append of `req` on `c` inside `bracket`, which it opens and closes (or undoes, for a duplicate
    /// or an unwatched target). On an error the caller undoes the bracket.
    pub(crate) async fn append_in<C: GenericClient + Sync>(
        &self,
        c: &C,
        bracket: &Bracket,
        req: &AppendRequest,
        now: Millis,
    ) -> Result<Staged> {
        let e = &req.event;
        let cursors = on_append(e.kind, &e.session_key, &req.policy);
        let read = open_and_read(c, bracket, req, now, matches!(cursors, AppendCursors::FanOut)).await?;
        if let Some(row) = read.deduped {
            let event = event_from_row(&row)?;
            c.batch_execute(bracket.undo).await?;
            return Ok(Staged::RolledBack(AppendOutcome::Duplicate(Box::new(event))));
        }
        if !read.watched {
            c.batch_execute(bracket.undo).await?;
            return Ok(Staged::RolledBack(AppendOutcome::Unwatched));
        }
        let sequence = read.head + 1;
        let (notices, closing) = self.move_cursors(c, req, cursors, read.locked, sequence, now).await?;

        // Round trip 2: the head moves, the event is written, then the cursors, the pushes, the close.
        let stored = e.stored(sequence as u64, now);
        let payload_json = payload::encode(&stored.payload);
        let event_params: Params<'_> = &[
            &stored.session_key,
            &stored.agent_id,
            &sequence,
            &stored.session_id,
            &stored.kind.as_str(),
            &stored.actor.kind.as_str(),
            &stored.actor.id,
            &stored.run_id,
            &stored.occurred_at,
            &stored.summary,
            &payload_json,
            &stored.dedupe_key,
        ];
        prepare_all(c, &[MOVE_HEAD, INSERT_EVENT, watch::SAVE_POSITIONS, PUSH]).await?;
        let (moved, inserted, positions, pushed, closed) = join5(
            execute(c, MOVE_HEAD, &[&e.session_key, &e.agent_id, &sequence, &now]),
            execute(c, INSERT_EVENT, event_params),
            watch::save_positions(c, &e.session_key, &closing.moved),
            push(c, &closing.pushes),
            c.batch_execute(bracket.close),
        )
        .await;
        moved?;
        inserted?;
        positions?;
        pushed?;
        closed?;
        let row = HeadRow::moved_by_every_append(sequence as u64, super::u(read.floor), now);
        Ok(Staged::Committed { event: Arc::new(stored), notices, row })
    }

    /// In memory, between the round trips: what the event at `sequence` does to the cursors `locked` on
    /// its session ([`on_append`]'s `cursors`); answers the notices delivered here and what round trip 2
    /// writes. A spawn seeds its cursors here, and a watcher nobody hosts yet is claimed, a round trip each.
    async fn move_cursors<C: GenericClient + Sync>(
        &self,
        c: &C,
        req: &AppendRequest,
        cursors: AppendCursors,
        locked: Vec<watch::HostedCursor>,
        sequence: i64,
        now: Millis,
    ) -> Result<(Vec<Notice>, Closing)> {
        let e = &req.event;
        let mut closing = Closing::default();
        match cursors {
            AppendCursors::Untouched => Ok((vec![], closing)),
            AppendCursors::Seed(watchers) => {
                for watcher in &watchers {
                    let existing = watch::load_cursor(c, watcher, &e.session_key, true).await?;
                    let seeded = spawn_seed(existing.as_ref(), sequence as u64, &req.watcher_store, now);
                    watch::save_cursor(c, watcher, &e.session_key, &seeded).await?;
                }
                Ok((vec![], closing))
            }
            AppendCursors::FanOut => {
                let mut hosts = Hosts::new();
                let mut held = Vec::with_capacity(locked.len());
                for (_, (watcher, cursor), host) in locked {
                    if let Some(host) = host {
                        hosts.insert(watcher.clone(), host);
                    }
                    held.push((watcher, cursor));
                }
                let actor = e.actor.id.as_deref();
                let out = fan_out(&e.session_key, actor, sequence as u64, &req.watcher_store, now, held);
                closing.moved = out.moved;
                let notices = match &req.host_id {
                    Some(me) if !out.notices.is_empty() => {
                        self.split_notices(c, me, out.notices, &mut hosts, &mut closing.pushes).await?
                    }
                    _ => out.notices,
                };
                Ok((notices, closing))
            }
        }
    }

    /// Inside an append's transaction: the notices of watchers hosted by another gateway become pushes to
    /// it (added to `pushes`, for the caller to send before its commit) and leave the answer. A watcher
    /// missing from `hosts` (no gateway hosts it yet) is claimed for `me`; one without a session row stays
    /// local.
    pub(crate) async fn split_notices<C: GenericClient + Sync>(
        &self,
        c: &C,
        me: &str,
        notices: Vec<Notice>,
        hosts: &mut Hosts,
        pushes: &mut BTreeSet<(String, String)>,
    ) -> Result<Vec<Notice>> {
        let mut local = vec![];
        for notice in notices {
            let watcher = notice.watcher.as_str();
            if !hosts.contains_key(watcher)
                && let Some(host) = watcher_host(c, watcher, me).await?
            {
                hosts.insert(watcher.to_string(), host);
            }
            match hosts.get(watcher) {
                Some(host) if host != me => {
                    pushes.insert((self.channel_for_host(host), watcher.to_string()));
                }
                _ => local.push(notice),
            }
        }
        Ok(local)
    }
}

/// What round trip 1 read: the head row (locked), the event a dedupe key already names, whether the
/// session is watched, and its cursors (locked; with several gateways, each with its watcher's host) when
/// the event may move them.
struct Read {
    head: i64,
    floor: i64,
    deduped: Option<tokio_postgres::Row>,
    watched: bool,
    locked: Vec<watch::HostedCursor>,
}

/// Round trip 1: the opening statement, then the head row lock, then the reads that decide, then the
/// cursors the event may move (`lock_cursors`; locked after the head row, as every append locks them).
/// The opening statement is sent first, before anything can fail, so the caller's undo always has a
/// bracket to undo.
async fn open_and_read<C: GenericClient + Sync>(
    c: &C,
    bracket: &Bracket,
    req: &AppendRequest,
    now: Millis,
    lock_cursors: bool,
) -> Result<Read> {
    let e = &req.event;
    let deduped_sql = format!(
        "SELECT {EVENT_COLUMNS} FROM session_state_events \
         WHERE session_key = $1 AND agent_id = $2 AND dedupe_key = $3"
    );
    let lock_sql = watch::lock_cursors_sql(req.host_id.is_some());
    let targets = vec![e.session_key.as_str()];
    let reads = async {
        prepare_all(c, &[LOCK_HEAD, &deduped_sql, watch::IS_WATCHED, &lock_sql]).await?;
        let head_params: Params<'_> = &[&e.session_key, &e.agent_id, &now];
        let deduped = async {
            let Some(dedupe) = &e.dedupe_key else { return Ok(None) };
            query_opt(c, &deduped_sql, &[&e.session_key, &e.agent_id, dedupe]).await
        };
        let watched = async {
            if req.policy.only_if_watched { watch::is_watched(c, &e.session_key).await } else { Ok(true) }
        };
        let locked = async { if lock_cursors { query(c, &lock_sql, &[&targets]).await } else { Ok(vec![]) } };
        let (head_row, deduped, watched, locked) =
            join4(query_one(c, LOCK_HEAD, head_params), deduped, watched, locked).await;
        Ok::<_, StoreError>((head_row?, deduped?, watched?, locked?))
    };
    let (opened, reads) = join(c.batch_execute(bracket.open), reads).await;
    opened?;
    let (head_row, deduped, watched, locked) = reads?;
    Ok(Read {
        head: head_row.try_get(0)?,
        floor: head_row.try_get(1)?,
        deduped,
        watched,
        locked: watch::hosted_cursors_from_rows(&locked)?,
    })
}

/// Sends `pushes` (channel, watcher): one statement, none when empty.
pub(crate) async fn push<C: GenericClient + Sync>(c: &C, pushes: &BTreeSet<(String, String)>) -> Result<()> {
    if pushes.is_empty() {
        return Ok(());
    }
    let (channels, watchers): (Vec<&str>, Vec<&str>) =
        pushes.iter().map(|(c, w)| (c.as_str(), w.as_str())).unzip();
    execute(c, PUSH, &[&channels, &watchers]).await?;
    Ok(())
}

/// Claims `watcher` for `me` when it has a session row and no host yet; answers its host.
async fn watcher_host<C: GenericClient + Sync>(c: &C, watcher: &str, me: &str) -> Result<Option<String>> {
    let claimed = query(
        c,
        "UPDATE sessions SET host_id = $2 WHERE session_key = $1 AND host_id IS NULL RETURNING host_id",
        &[&watcher, &me],
    )
    .await?;
    if let Some(r) = claimed.first() {
        return Ok(r.try_get(0)?);
    }
    // A fresh statement snapshot: sees a claim another gateway committed while we waited for the row.
    Ok(query_opt(
        c,
        "SELECT host_id FROM sessions WHERE session_key = $1 AND host_id IS NOT NULL ORDER BY agent_id LIMIT 1",
        &[&watcher],
    )
    .await?
    .and_then(|r| r.get(0)))
}

/// A pooled connection inside a transaction begun by hand. Dropped before the transaction ended (the
/// task was cancelled), the connection leaves the pool instead of serving its next caller inside it.
pub(crate) struct InTransaction(pub(crate) Option<deadpool_postgres::Object>);

impl InTransaction {
    pub(crate) fn client(&self) -> &deadpool_postgres::Object {
        self.0.as_ref().expect("present until dropped or discarded")
    }

    /// The transaction ended: the connection may serve others.
    pub(crate) fn release(mut self) {
        self.0.take();
    }
}

impl Drop for InTransaction {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}
