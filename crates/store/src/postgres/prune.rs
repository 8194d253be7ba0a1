//! Retention: raise floors, then delete whole per-session prefixes, in one transaction, by one gateway
//! at a time (a transaction advisory lock; a gateway that finds it taken skips this round).

use super::schema::LOCK_PRUNE;
use super::{PostgresStore, execute, query, query_opt};
use crate::{PruneReport, Result, RetentionPolicy};
use sessionwatch_core::Millis;

impl PostgresStore {
    pub(crate) async fn prune_pg(&self, policy: RetentionPolicy, now: Millis) -> Result<PruneReport> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let mut report = PruneReport::default();
        let locked: bool = tx
            .query_one("SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema()))", &[&LOCK_PRUNE])
            .await?
            .get(0);
        if !locked {
            tracing::debug!("another gateway is pruning; skipped");
            tx.rollback().await?;
            return Ok(report);
        }
        // The derived M of pending cursors is written before the history it is derived from goes.
        super::watch::settle_pending(&tx).await?;
        let cutoff = now.saturating_sub(policy.max_age_ms);
        let by_age = floors(
            &tx,
            "SELECT session_key, agent_id, MAX(sequence) FROM session_state_events \
             WHERE occurred_at < $1 GROUP BY session_key, agent_id ORDER BY session_key, agent_id",
            cutoff,
        )
        .await?;
        report.events_by_age = raise_floors_and_delete(&tx, &by_age, now).await?;

        let max_rows = policy.max_rows.min(i64::MAX as u64) as i64;
        let cap_id = query_opt(
            &tx,
            "SELECT id FROM session_state_events ORDER BY id DESC LIMIT 1 OFFSET $1",
            &[&max_rows],
        )
        .await?
        .map(|r| r.get::<_, i64>(0));
        if let Some(cap_id) = cap_id {
            let by_cap = floors(
                &tx,
                "SELECT session_key, agent_id, MAX(sequence) FROM session_state_events \
                 WHERE id <= $1 GROUP BY session_key, agent_id ORDER BY session_key, agent_id",
                cap_id,
            )
            .await?;
            report.events_by_cap = raise_floors_and_delete(&tx, &by_cap, now).await?;
        }
        report.cursors_expired = query(
            &tx,
            "DELETE FROM session_watch_cursors WHERE updated_at < $1 \
             RETURNING watcher_session_key, target_session_key",
            &[&cutoff],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
        report.cursors_expired.sort();
        tx.commit().await?;
        Ok(report)
    }
}

async fn floors(
    tx: &deadpool_postgres::Transaction<'_>,
    sql: &str,
    arg: i64,
) -> Result<Vec<(String, String, i64)>> {
    Ok(query(tx, sql, &[&arg]).await?.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect())
}

/// Floors first (only on existing heads, only upwards; under the head row lock appends take), then the
/// rows at or below them: retained history stays exactly `(floor, head]` per session.
async fn raise_floors_and_delete(
    tx: &deadpool_postgres::Transaction<'_>,
    floors: &[(String, String, i64)],
    now: Millis,
) -> Result<u64> {
    let mut deleted = 0;
    for (key, agent, floor) in floors {
        execute(
            tx,
            "UPDATE session_state_heads SET floor = $3, updated_at = $4 \
             WHERE session_key = $1 AND agent_id = $2 AND floor < $3",
            &[key, agent, floor, &now],
        )
        .await?;
        deleted += execute(
            tx,
            "DELETE FROM session_state_events WHERE session_key = $1 AND agent_id = $2 AND sequence <= $3",
            &[key, agent, floor],
        )
        .await?;
    }
    Ok(deleted)
}
