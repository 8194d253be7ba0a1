//! Appending to the signal log (sequence allocation under the head row lock, dedupe, cursor updates,
//! cross-gateway routing of notices) and reading it back.

use super::{Params, PostgresStore, execute, i, query, query_one, query_opt, u, watch};
use crate::tail::HeadRow;
use crate::{AppendOutcome, AppendRequest, Head, Result, StoreError, payload};
use deadpool_postgres::GenericClient;
use futures_util::future::{join, join3};
use sessionwatch_core::policy::{fan_out, on_append, spawn_seed};
use sessionwatch_core::{
    Actor, ActorType, AppendCursors, ChangesPage, EventKind, Limit, Millis, Notice, StoredEvent,
};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use tokio_postgres::Row;

const EVENT_COLUMNS: &str = "sequence, session_key, agent_id, session_id, kind, actor_type, actor_id, run_id, \
     occurred_at, summary, payload_json, dedupe_key";

/// The durable head row a recent page from the tail is validated against: the one round trip such a
/// page costs (`bench kernel` times it bare, as the floor of `changes_since_200_recent_p50_us`).
pub(crate) const DURABLE_HEAD_ROW: &str =
    "SELECT head, floor, updated_at FROM session_state_heads WHERE session_key = $1 AND agent_id = $2";

pub(crate) fn event_from_row(r: &Row) -> Result<StoredEvent> {
    let kind: String = r.try_get(4)?;
    let actor_type: String = r.try_get(5)?;
    Ok(StoredEvent {
        sequence: u(r.try_get(0)?),
        session_key: r.try_get(1)?,
        agent_id: r.try_get(2)?,
        session_id: r.try_get(3)?,
        kind: EventKind::parse(&kind)
            .ok_or_else(|| StoreError::InvalidData(format!("unknown event kind {kind:?}")))?,
        actor: Actor {
            kind: ActorType::parse(&actor_type)
                .ok_or_else(|| StoreError::InvalidData(format!("unknown actor type {actor_type:?}")))?,
            id: r.try_get(6)?,
        },
        run_id: r.try_get(7)?,
        occurred_at: r.try_get(8)?,
        summary: r.try_get(9)?,
        payload: payload::decode(r.try_get::<_, Option<String>>(10)?.as_deref()),
        dedupe_key: r.try_get(11)?,
    })
}

const HEAD: &str = "SELECT head, floor FROM session_state_heads WHERE session_key = $1 AND agent_id = $2";
const HEAD_FOR_SHARE: &str =
    "SELECT head, floor FROM session_state_heads WHERE session_key = $1 AND agent_id = $2 FOR SHARE";

pub(crate) async fn head<C: GenericClient + Sync>(c: &C, key: &str, agent: &str) -> Result<Head> {
    read_head(c, HEAD, key, agent).await
}

/// The head under a share lock: appends to the session wait until the caller commits (and an append in
/// flight commits before the read), so a registration sees a head no append is about to pass.
pub(crate) async fn head_for_share<C: GenericClient + Sync>(c: &C, key: &str, agent: &str) -> Result<Head> {
    read_head(c, HEAD_FOR_SHARE, key, agent).await
}

/// The head row `sql` (one of [`HEAD`], [`HEAD_FOR_SHARE`]) reads; a session with none is at zero.
async fn read_head<C: GenericClient + Sync>(c: &C, sql: &str, key: &str, agent: &str) -> Result<Head> {
    let row = query_opt(c, sql, &[&key, &agent]).await?;
    Ok(row.map_or(Head::default(), |r| Head { head: u(r.get(0)), floor: u(r.get(1)) }))
}

/// An append done in a transaction it ended: committed (its event, the notices, the head row it left for
/// the tail cache, to tell once the outermost transaction committed), or rolled back (duplicate,
/// unwatched).
pub(crate) enum Staged {
    Committed { event: Arc<StoredEvent>, notices: Vec<Notice>, row: HeadRow },
    RolledBack(AppendOutcome),
}

impl PostgresStore {
    pub(crate) async fn append_pg(&self, req: AppendRequest, now: Millis) -> Result<AppendOutcome> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        Ok(match self.append_in(tx, &req, now).await? {
            Staged::Committed { event, notices, row } => {
                self.inner.tail.committed(event.clone(), row);
                AppendOutcome::Recorded { event, notices }
            }
            Staged::RolledBack(outcome) => outcome,
        })
    }

    /// The append in `tx` (a transaction of its own, or a savepoint of the caller's), which it ends.
    pub(crate) async fn append_in(
        &self,
        tx: deadpool_postgres::Transaction<'_>,
        req: &AppendRequest,
        now: Millis,
    ) -> Result<Staged> {
        let e = &req.event;
        // Round trip 1 (pipelined; PostgreSQL runs them in this order): lock the session's head row
        // (creating it at 0 if new), so every append to this session waits here and sequences are
        // allocated, and committed, in order; then the dedupe and watched reads. A new row that turns out
        // not to be needed (duplicate, unwatched) goes away with the rollback. The floor cannot move
        // before the commit: a prune waits for this row lock.
        let head_params: Params<'_> = &[&e.session_key, &e.agent_id, &now];
        let lock_head = query_one(
            &tx,
            "INSERT INTO session_state_heads (session_key, agent_id, head, floor, updated_at) \
             VALUES ($1, $2, 0, 0, $3) \
             ON CONFLICT (session_key, agent_id) DO UPDATE SET head = session_state_heads.head \
             RETURNING head, floor",
            head_params,
        );
        let deduped = async {
            let Some(dedupe) = &e.dedupe_key else { return Ok(None) };
            let sql = format!(
                "SELECT {EVENT_COLUMNS} FROM session_state_events \
                 WHERE session_key = $1 AND agent_id = $2 AND dedupe_key = $3"
            );
            query_opt(&tx, &sql, &[&e.session_key, &e.agent_id, dedupe]).await
        };
        let watched = async {
            if req.policy.only_if_watched { watch::is_watched(&tx, &e.session_key).await } else { Ok(true) }
        };
        let (head_row, deduped, watched) = join3(lock_head, deduped, watched).await;
        let head_row = head_row?;
        let (head, floor): (i64, i64) = (head_row.get(0), head_row.get(1));
        if let Some(row) = deduped? {
            let event = event_from_row(&row)?;
            tx.rollback().await?;
            return Ok(Staged::RolledBack(AppendOutcome::Duplicate(Box::new(event))));
        }
        if !watched? {
            tx.rollback().await?;
            return Ok(Staged::RolledBack(AppendOutcome::Unwatched));
        }
        let sequence = head + 1;
        let stored = e.stored(sequence as u64, now);
        let payload_json = payload::encode(&stored.payload);
        let params: Params<'_> = &[
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
        // Round trip 2 (pipelined): the head moves and the event is written.
        let (moved, inserted) = join(
            execute(
                &tx,
                "UPDATE session_state_heads SET head = $3, updated_at = $4 WHERE session_key = $1 AND agent_id = $2",
                &[&e.session_key, &e.agent_id, &sequence, &now],
            ),
            execute(
                &tx,
                "INSERT INTO session_state_events (session_key, agent_id, sequence, session_id, kind, actor_type, \
                 actor_id, run_id, occurred_at, summary, payload_json, dedupe_key) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                params,
            ),
        )
        .await;
        moved?;
        inserted?;

        let notices = move_cursors(&tx, req, sequence as u64, now).await?;
        let notices = match &req.host_id {
            Some(me) if !notices.is_empty() => self.route_notices(&tx, me, notices).await?,
            _ => notices,
        };
        tx.commit().await?;
        let row = HeadRow::moved_by_every_append(sequence as u64, u(floor), now);
        Ok(Staged::Committed { event: Arc::new(stored), notices, row })
    }

    /// Inside the append transaction: notices of watchers hosted by another gateway are pushed to it
    /// (NOTIFY, delivered at commit; the payload is only the watcher key) and dropped from the answer.
    /// A watcher no gateway hosts yet is claimed for `me`; one without a session row stays local.
    pub(crate) async fn route_notices<C: GenericClient + Sync>(
        &self,
        tx: &C,
        me: &str,
        notices: Vec<Notice>,
    ) -> Result<Vec<Notice>> {
        let mut local = vec![];
        let mut pushed = BTreeSet::new();
        let hosts = watcher_hosts(tx, &notices, me).await?;
        for notice in notices {
            let watcher = notice.watcher.as_str();
            match hosts.get(watcher) {
                Some(host) if host != me => {
                    if pushed.insert((host.clone(), watcher.to_string())) {
                        execute(tx, "SELECT pg_notify($1, $2)", &[&self.channel_for_host(host), &watcher])
                            .await?;
                    }
                }
                _ => local.push(notice),
            }
        }
        Ok(local)
    }

    pub(crate) async fn changes_since_pg(
        &self,
        key: &str,
        agent: &str,
        since: u64,
        limit: Limit,
    ) -> Result<ChangesPage> {
        let mut client = self.client().await?;
        // A recent window of a session this gateway wrote: one read of the durable head row decides
        // whether the tail still holds exactly the log's tail.
        if self.inner.tail.holds(key, agent) {
            let row = query_opt(&client, DURABLE_HEAD_ROW, &[&key, &agent]).await?;
            if let Some(r) = row {
                let durable = HeadRow::moved_by_every_append(u(r.get(0)), u(r.get(1)), r.get(2));
                if let Some(page) = self.inner.tail.page(key, agent, since, limit, durable, None) {
                    return Ok(page);
                }
            }
        }
        // One snapshot so the head, floor and rows agree.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let h = head(&tx, key, agent).await?;
        let rows = query(
            &tx,
            &format!(
                "SELECT {EVENT_COLUMNS} FROM session_state_events \
                 WHERE session_key = $1 AND agent_id = $2 AND sequence > $3 ORDER BY sequence LIMIT $4"
            ),
            &[&key, &agent, &i(since), &(limit.get() as i64 + 1)],
        )
        .await?;
        tx.commit().await?;
        let rows = rows.iter().map(|r| event_from_row(r).map(Arc::new)).collect::<Result<Vec<_>>>()?;
        Ok(ChangesPage::assemble(rows, limit, since, h.head, h.floor))
    }

    pub(crate) async fn state_versions_pg(
        &self,
        sessions: Vec<(String, String)>,
    ) -> Result<HashMap<(String, String), u64>> {
        let mut out = HashMap::new();
        if sessions.is_empty() {
            return Ok(out);
        }
        let client = self.client().await?;
        for chunk in sessions.chunks(1000) {
            let keys: Vec<&str> = chunk.iter().map(|(k, _)| k.as_str()).collect();
            let agents: Vec<&str> = chunk.iter().map(|(_, a)| a.as_str()).collect();
            let rows = query(
                &client,
                "SELECT h.session_key, h.agent_id, h.head FROM session_state_heads h \
                 JOIN unnest($1::text[], $2::text[]) AS q(session_key, agent_id) \
                 ON h.session_key = q.session_key AND h.agent_id = q.agent_id",
                &[&keys, &agents],
            )
            .await?;
            for r in rows {
                out.insert((r.get(0), r.get(1)), u(r.get(2)));
            }
        }
        Ok(out)
    }
}

/// The gateway hosting `watcher`; claims it for `me` when it has a session row and no host yet.
/// The hosts of the notices' watchers: one read for all of them; only a watcher no gateway hosts yet
/// takes the per-watcher claim below.
async fn watcher_hosts<C: GenericClient + Sync>(
    tx: &C,
    notices: &[Notice],
    me: &str,
) -> Result<HashMap<String, String>> {
    let keys: Vec<&str> = notices.iter().map(|n| n.watcher.as_str()).collect();
    let mut hosts: HashMap<String, String> = HashMap::new();
    for r in query(
        tx,
        "SELECT DISTINCT ON (session_key) session_key, host_id FROM sessions \
         WHERE session_key = ANY($1) AND host_id IS NOT NULL ORDER BY session_key, agent_id",
        &[&keys],
    )
    .await?
    {
        hosts.insert(r.try_get(0)?, r.try_get(1)?);
    }
    for key in keys {
        if !hosts.contains_key(key)
            && let Some(host) = watcher_host(tx, key, me).await?
        {
            hosts.insert(key.to_string(), host);
        }
    }
    Ok(hosts)
}

async fn watcher_host<C: GenericClient + Sync>(tx: &C, watcher: &str, me: &str) -> Result<Option<String>> {
    let claimed = query(
        tx,
        "UPDATE sessions SET host_id = $2 WHERE session_key = $1 AND host_id IS NULL RETURNING host_id",
        &[&watcher, &me],
    )
    .await?;
    if let Some(r) = claimed.first() {
        return Ok(r.get(0));
    }
    // A fresh statement snapshot: sees a claim another gateway committed while we waited for the row.
    Ok(query_opt(
        tx,
        "SELECT host_id FROM sessions WHERE session_key = $1 AND host_id IS NOT NULL ORDER BY agent_id LIMIT 1",
        &[&watcher],
    )
    .await?
    .and_then(|r| r.get(0)))
}

/// Inside the append transaction: what the event at `sequence` does to the cursors on its session
/// ([`on_append`]); answers the notices.
async fn move_cursors(
    tx: &deadpool_postgres::Transaction<'_>,
    req: &AppendRequest,
    sequence: u64,
    now: Millis,
) -> Result<Vec<Notice>> {
    let e = &req.event;
    Ok(match on_append(e.kind, &e.session_key, &req.policy) {
        AppendCursors::Untouched => vec![],
        AppendCursors::Seed(watchers) => {
            for watcher in &watchers {
                let existing = watch::load_cursor(tx, watcher, &e.session_key, true).await?;
                let seeded = spawn_seed(existing.as_ref(), sequence, &req.watcher_store, now);
                watch::save_cursor(tx, watcher, &e.session_key, &seeded).await?;
            }
            vec![]
        }
        AppendCursors::FanOut => {
            // Lock every cursor on the target at once (in watcher order), decide, write the moved ones back
            // at once: one round trip each however many watchers there are. The pending ones are locked
            // too, though nothing is written to them: a concurrent claim (which derives M from the log)
            // must see this event or wait for it.
            let cursors = watch::lock_cursors_on(tx, &e.session_key).await?;
            let out =
                fan_out(&e.session_key, e.actor.id.as_deref(), sequence, &req.watcher_store, now, cursors);
            watch::save_positions(tx, &e.session_key, &out.moved).await?;
            out.notices
        }
    })
}
