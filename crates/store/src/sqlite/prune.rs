//! Retention in bounded slices: each slice is one write job that raises floors, then deletes whole
//! per-session prefixes, of at most about [`SLICE_ROWS`] rows. The writer takes the appends queued behind
//! a slice before the next one, so an append waits for one slice, never for the whole prune (measured by
//! `bench scale`: `append_p99_us_during_prune` against `append_p99_us_idle`). After every slice the log
//! holds exactly `(floor, head]` per session, so a prune stopped between two slices (a crash, a failed
//! write) leaves a consistent log that the next prune finishes.

use super::SqliteStore;
use super::transaction::WriteTx;
use super::writer::Memory;
use crate::tail::TailChange;
use crate::{PruneReport, Result, RetentionPolicy};
use rusqlite::{Connection, params};
use sessionwatch_core::Millis;
use std::collections::BTreeMap;

/// The oldest rows one slice selects; a slice deletes them and the rows below them in their sessions
/// (older ones, by sequence, which a prune by age or by id has mostly taken in an earlier slice).
const SLICE_ROWS: i64 = 1_000;

/// Where a prune stands between two slices.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Rows older than the retention age.
    Age,
    /// Rows over the row cap: those with an id up to the cap's (fixed at the first cap slice, so rows
    /// appended meanwhile are never taken; `None` until then).
    Cap(Option<i64>),
    /// Cursors not touched within the retention age (one statement: the table has no index on age).
    Cursors,
}

impl SqliteStore {
    /// Prunes to `policy` in slices, each its own write job (see the module's doc).
    pub(crate) async fn prune_in_slices(&self, policy: RetentionPolicy, now: Millis) -> Result<PruneReport> {
        let mut report = PruneReport::default();
        let mut step = Some(Step::Age);
        while let Some(current) = step {
            let (slice, next) = self
                .write_async_then(
                    Memory::Forgotten,
                    move |c| prune_slice(c, policy, now, current),
                    |(slice, _): &(PruneReport, Option<Step>)| {
                        (slice.events_by_age + slice.events_by_cap > 0).then_some(TailChange::Clear)
                    },
                )
                .await?;
            report.events_by_age += slice.events_by_age;
            report.events_by_cap += slice.events_by_cap;
            report.cursors_expired.extend(slice.cursors_expired);
            step = next;
        }
        report.cursors_expired.sort();
        Ok(report)
    }
}

/// One slice of `step`; answers what it did and the step to run next (`None`: the prune is done).
fn prune_slice(
    tx: &WriteTx<'_>,
    policy: RetentionPolicy,
    now: Millis,
    step: Step,
) -> Result<(PruneReport, Option<Step>)> {
    // Retention reads and deletes the log alone, through its indexes.
    super::log::fold(tx)?;
    let cutoff = now.saturating_sub(policy.max_age_ms);
    let mut report = PruneReport::default();
    let next = match step {
        Step::Age => {
            // The index names the access path: left to itself, SQLite may scan the log in another order.
            let rows = oldest_rows(
                tx,
                "SELECT session_key, agent_id, sequence FROM session_state_events \
                 INDEXED BY idx_events_occurred_at WHERE occurred_at < ?1 ORDER BY occurred_at LIMIT ?2",
                cutoff,
            )?;
            report.events_by_age = raise_floors_and_delete(tx, &rows, now)?;
            Some(if rows.taken < SLICE_ROWS { Step::Cap(None) } else { Step::Age })
        }
        Step::Cap(cap_id) => {
            let cap_id = match cap_id {
                Some(id) => Some(id),
                None => tx
                    .query_row(
                        "SELECT id FROM session_state_events ORDER BY id DESC LIMIT 1 OFFSET ?1",
                        [policy.max_rows as i64],
                        |r| r.get(0),
                    )
                    .ok(),
            };
            match cap_id {
                None => Some(Step::Cursors),
                Some(cap_id) => {
                    let rows = oldest_rows(
                        tx,
                        "SELECT session_key, agent_id, sequence FROM session_state_events \
                         WHERE id <= ?1 ORDER BY id LIMIT ?2",
                        cap_id,
                    )?;
                    report.events_by_cap = raise_floors_and_delete(tx, &rows, now)?;
                    Some(if rows.taken < SLICE_ROWS { Step::Cursors } else { Step::Cap(Some(cap_id)) })
                }
            }
        }
        Step::Cursors => {
            // Settling moves a pending cursor's time to its newest material event: not untouched.
            super::watch::settle_pending(tx)?;
            report.cursors_expired = tx
                .prepare(
                    "DELETE FROM session_watch_cursors WHERE updated_at < ?1 \
                     RETURNING watcher_session_key, target_session_key",
                )?
                .query_map([cutoff], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            None
        }
    };
    Ok((report, next))
}

/// The highest selected sequence of each session among a slice's rows, and how many rows were selected.
struct SliceFloors {
    floors: BTreeMap<(String, String), i64>,
    taken: i64,
}

/// Runs `sql` (bound to `bound` and [`SLICE_ROWS`]; it selects key, agent and sequence).
fn oldest_rows(tx: &Connection, sql: &str, bound: i64) -> Result<SliceFloors> {
    let mut out = SliceFloors { floors: BTreeMap::new(), taken: 0 };
    let mut stmt = tx.prepare_cached(sql)?;
    let mut rows = stmt.query(params![bound, SLICE_ROWS])?;
    while let Some(r) = rows.next()? {
        let (key, agent, sequence): (String, String, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
        out.taken += 1;
        let floor = out.floors.entry((key, agent)).or_insert(sequence);
        *floor = (*floor).max(sequence);
    }
    Ok(out)
}

/// Floors first (only upwards), then the rows at or below them: retained history stays exactly
/// `(floor, head]` per session. Each floor is a sequence in the log, so the session has a head at least
/// that high; the stored head is raised to the floor, since the rows it may be derived from go. The
/// pending cursors on those sessions get their derived M written first: it is read from the history
/// about to go.
fn raise_floors_and_delete(tx: &Connection, slice: &SliceFloors, now: Millis) -> Result<u64> {
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
    for ((key, agent), floor) in &slice.floors {
        super::watch::settle_pending_on(tx, key)?;
        raise.execute(params![key, agent, floor, now])?;
        deleted += delete.execute(params![key, agent, floor])? as u64;
    }
    Ok(deleted)
}
