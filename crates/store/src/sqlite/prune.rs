//! Retention: raise floors, then delete whole per-session prefixes, in one transaction.

use super::SqliteStore;
use crate::{PruneReport, Result, RetentionPolicy};
use rusqlite::{Connection, params};
use sessionwatch_core::Millis;

impl SqliteStore {
    pub(crate) fn prune_op(tx: &Connection, policy: RetentionPolicy, now: Millis) -> Result<PruneReport> {
        let mut report = PruneReport::default();
        // Retention reads and deletes the log alone, through its indexes.
        super::log::fold(tx)?;
        super::watch::settle_pending(tx)?;
        let cutoff = now.saturating_sub(policy.max_age_ms);
        // Both reads name their access path: left to itself, SQLite scans the whole log in session order
        // to save the GROUP BY's sort, looking each row up (42 ms on 62k rows against 0.3 ms through
        // the range, when few rows are old).
        let by_age: Vec<(String, String, i64)> = tx
            .prepare(
                "SELECT session_key, agent_id, MAX(sequence) FROM session_state_events \
                 INDEXED BY idx_events_occurred_at WHERE occurred_at < ?1 GROUP BY session_key, agent_id",
            )?
            .query_map([cutoff], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        report.events_by_age = raise_floors_and_delete(tx, &by_age, now)?;

        let cap_id: Option<i64> = tx
            .query_row(
                "SELECT id FROM session_state_events ORDER BY id DESC LIMIT 1 OFFSET ?1",
                [policy.max_rows as i64],
                |r| r.get(0),
            )
            .ok();
        if let Some(cap_id) = cap_id {
            let by_cap: Vec<(String, String, i64)> = tx
                .prepare(
                    "SELECT session_key, agent_id, MAX(sequence) FROM session_state_events NOT INDEXED \
                     WHERE id <= ?1 GROUP BY session_key, agent_id",
                )?
                .query_map([cap_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<rusqlite::Result<_>>()?;
            report.events_by_cap = raise_floors_and_delete(tx, &by_cap, now)?;
        }
        report.cursors_expired = tx
            .prepare(
                "DELETE FROM session_watch_cursors WHERE updated_at < ?1 \
                 RETURNING watcher_session_key, target_session_key",
            )?
            .query_map([cutoff], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        report.cursors_expired.sort();
        Ok(report)
    }
}

/// Floors first (only upwards), then the rows at or below them: retained history stays exactly
/// `(floor, head]` per session. Each floor is a sequence in the log, so the session has a head at least
/// that high; the stored head is raised to the floor, since the rows it may be derived from go.
fn raise_floors_and_delete(tx: &Connection, floors: &[(String, String, i64)], now: Millis) -> Result<u64> {
    let mut deleted = 0;
    let mut raise = tx.prepare_cached(
        "INSERT INTO session_state_heads (session_key, agent_id, head, floor, updated_at) \
         VALUES (?1, ?2, ?3, ?3, ?4) \
         ON CONFLICT (session_key, agent_id) DO UPDATE SET head = MAX(head, ?3), floor = ?3, updated_at = ?4 \
         WHERE floor < ?3",
    )?;
    let mut delete = tx.prepare_cached(
        "DELETE FROM session_state_events WHERE session_key = ?1 AND agent_id = ?2 AND sequence <= ?3",
    )?;
    for (key, agent, floor) in floors {
        raise.execute(params![key, agent, floor, now])?;
        deleted += delete.execute(params![key, agent, floor])? as u64;
    }
    Ok(deleted)
}
