//! Reading the signal log back (appends: [`super::append`], [`super::batch`]).

use super::{PostgresStore, i, query, query_opt, u};
use crate::tail::HeadRow;
use crate::{Head, Result, StoreError, payload};
use deadpool_postgres::GenericClient;
use sessionwatch_core::{Actor, ActorType, ChangesPage, EventKind, Limit, StoredEvent};
use std::collections::HashMap;
use std::sync::Arc;
use tokio_postgres::Row;

pub(crate) const EVENT_COLUMNS: &str = "sequence, session_key, agent_id, session_id, kind, actor_type, actor_id, run_id, \
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

impl PostgresStore {
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
