//! Retention in bounded slices, each one write job: the writer takes the appends queued behind a slice
//! before the next one, so an append waits for one slice, never for the whole prune (`bench scale`:
//! `append_p99_us_during_prune` against `append_p99_us_idle`). A slice's rows adapt to what the last one
//! took ([`SliceSize`]): its cost is mostly per session (a floor raised, cursors settled), and how many
//! sessions a few hundred rows span depends on the log. What to delete is
//! planned on a reader. By age: per session, the highest old sequence, deleted session by session. By the
//! row cap: the rows up to the cap's id, deleted oldest first as id ranges, which keeps a slice on few
//! pages (a session's rows are spread over the whole log; deleting 256 of them by session touched 256
//! leaves: 5 ms a slice, against 1,000 rows in 4 ms by id). After every slice the log holds exactly
//! `(floor, head]` per session, so a prune stopped between two slices (a crash, a failed write) leaves a
//! consistent log that the next prune finishes.

use super::SqliteStore;
use super::writer::Memory;
use crate::tail::TailChange;
use crate::{PruneReport, Result, RetentionPolicy};
use rusqlite::{Connection, OptionalExtension, params};
use sessionwatch_core::Millis;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How many rows the next slice deletes at most: aimed at [`SliceSize::AIM`] of writer time, from what the
/// last slice took for its rows, never fewer than [`SliceSize::MIN`] (a prune always moves) nor more than
/// [`SliceSize::MAX`].
#[derive(Clone, Copy, Debug, PartialEq)]
struct SliceSize(i64);

impl SliceSize {
    /// An append queued behind a slice waits for it: about an idle append's p99 (`bench scale --part
    /// prune`, 1M rows over 100 sessions: aiming at 200 µs, the appends' p99 was 5.5× idle and the prune
    /// took 46 s; at 100 µs, 0.9× and 94 s; at 50 µs, 1.3× and 250 s: the slices' fixed cost). Once
    /// folds and WAL restarts were batched (16,384 rows, 16,000 pages) the idle p99 fell from 105–132 µs
    /// to 44–47 µs, and at 100 µs the p99 during the prune was 284–306 µs, 6.1–6.9× idle; at 70 µs,
    /// 226–229 µs, 3.4–4.1×, the prune 36–38 s against 35–37 s (two runs each, one sitting). On a
    /// faster machine (idle p99 31–55 µs) 70 µs read 4.5–6.2× (five runs, median 5.3); 45 µs, 2.9 /
    /// 3.7 / 4.1× (p99 during the prune 154–162 µs against 204–237), the prune 24.3–24.6 s against
    /// 19–22 s; 30 µs, 3.9× and 29 s.
    const AIM: Duration = Duration::from_micros(45);
    const MIN: i64 = 8;
    const MAX: i64 = 1024;
    const FIRST: SliceSize = SliceSize(64);

    /// The size after a slice of `self` rows took `took`: scaled toward the aim, at most doubled at once
    /// (one fast slice is no promise about the next).
    fn next(self, took: Duration) -> SliceSize {
        let took_ns = took.as_nanos().max(1) as f64;
        let scaled = self.0 as f64 * Self::AIM.as_nanos() as f64 / took_ns;
        SliceSize((scaled as i64).clamp(Self::MIN, (self.0 * 2).min(Self::MAX)))
    }
}

/// A session's floor retention asks for: its rows at or below `floor` go.
type Floor = (String, String, i64);

impl SqliteStore {
    /// Prunes to `policy` in slices (see the module's doc).
    pub(crate) async fn prune_in_slices(&self, policy: RetentionPolicy, now: Millis) -> Result<PruneReport> {
        let cutoff = now.saturating_sub(policy.max_age_ms);
        let mut report = PruneReport::default();
        // The plans read the log alone: staged rows are folded into it first.
        self.write_async(|c| super::log::fold(c)).await?;
        let by_age = self.blocking(move |s| s.read(|c| floors_by_age(c, cutoff))).await?;
        report.events_by_age = self.delete_below(by_age, now).await?;
        // The cap counts what the age left.
        let cap_id = self.blocking(move |s| s.read(|c| cap_id(c, policy.max_rows))).await?;
        if let Some(cap_id) = cap_id {
            report.events_by_cap = self.delete_up_to(cap_id, now).await?;
        }
        report.cursors_expired = self.write_async(move |c| expire_cursors(c, cutoff)).await?;
        report.cursors_expired.sort();
        Ok(report)
    }

    /// Deletes the rows up to `cap_id`, oldest first, a slice per write job; answers the rows deleted.
    async fn delete_up_to(&self, cap_id: i64, now: Millis) -> Result<u64> {
        let (mut deleted, mut size) = (0, SliceSize::FIRST);
        loop {
            let ((n, done), took) = self
                .write_async_then(
                    Memory::Forgotten,
                    move |c| timed(|| delete_oldest(c, cap_id, size.0, now)),
                    |((n, _), _): &((u64, bool), Duration)| (*n > 0).then_some(TailChange::Clear),
                )
                .await?;
            deleted += n;
            if done {
                return Ok(deleted);
            }
            size = size.next(took);
        }
    }

    /// Deletes every session's rows at or below its floor, a slice per write job; answers the rows deleted.
    async fn delete_below(&self, floors: Vec<Floor>, now: Millis) -> Result<u64> {
        let (mut deleted, mut size) = (0, SliceSize::FIRST);
        let mut left: VecDeque<Floor> = floors.into();
        while !left.is_empty() {
            let ((n, rest), took) = self
                .write_async_then(
                    Memory::Forgotten,
                    move |c| timed(|| delete_slice(c, left, size.0, now)),
                    |((n, _), _): &((u64, VecDeque<Floor>), Duration)| (*n > 0).then_some(TailChange::Clear),
                )
                .await?;
            deleted += n;
            left = rest;
            size = size.next(took);
        }
        Ok(deleted)
    }
}

/// Per session, the highest sequence older than `cutoff`. The index names the access path: left to
/// itself, SQLite scans the whole log in session order to save the GROUP BY's sort (42 ms on 62k rows
/// against 0.3 ms through the range, when few rows are old).
fn floors_by_age(c: &Connection, cutoff: Millis) -> Result<Vec<Floor>> {
    Ok(c.prepare(
        "SELECT session_key, agent_id, MAX(sequence) FROM session_state_events \
         INDEXED BY idx_events_occurred_at WHERE occurred_at < ?1 GROUP BY session_key, agent_id",
    )?
    .query_map([cutoff], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
    .collect::<rusqlite::Result<_>>()?)
}

/// The id of the newest row over the newest `max_rows` (`None`: the log is within the cap).
fn cap_id(c: &Connection, max_rows: u64) -> Result<Option<i64>> {
    Ok(c.query_row(
        "SELECT id FROM session_state_events ORDER BY id DESC LIMIT 1 OFFSET ?1",
        [max_rows as i64],
        |r| r.get(0),
    )
    .optional()?)
}

/// One slice of the cap: the oldest `rows` rows up to `cap_id`. Each of their sessions gets the
/// highest of its sequences among them as its floor; the rows go as one id range. A session's sequences
/// grow with its ids (both are taken by its appends, in commit order), so the range is exactly the rows
/// at or below the floors; a session found with a row left below its floor anyway loses it by sequence.
/// Answers the rows deleted and whether the cap is reached.
fn delete_oldest(tx: &Connection, cap_id: i64, rows: i64, now: Millis) -> Result<(u64, bool)> {
    let mut floors: std::collections::BTreeMap<(String, String), i64> = Default::default();
    let (mut taken, mut last_id) = (0i64, None::<i64>);
    {
        let mut oldest = tx.prepare_cached(
            "SELECT session_key, agent_id, sequence, id FROM session_state_events WHERE id <= ?1 \
             ORDER BY id LIMIT ?2",
        )?;
        let mut found = oldest.query(params![cap_id, rows])?;
        while let Some(r) = found.next()? {
            let (key, agent, sequence, id): (String, String, i64, i64) =
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
            let floor = floors.entry((key, agent)).or_insert(sequence);
            *floor = (*floor).max(sequence);
            taken += 1;
            last_id = Some(id);
        }
    }
    let Some(last_id) = last_id else { return Ok((0, true)) };
    let mut raise = tx.prepare_cached(RAISE_FLOOR)?;
    for ((key, agent), floor) in &floors {
        super::watch::settle_pending(tx, Some(key))?;
        raise.execute(params![key, agent, floor, now])?;
    }
    let mut deleted =
        tx.prepare_cached("DELETE FROM session_state_events WHERE id <= ?1")?.execute([last_id])? as u64;
    let mut below = tx.prepare_cached(
        "DELETE FROM session_state_events WHERE session_key = ?1 AND agent_id = ?2 AND sequence <= ?3",
    )?;
    for ((key, agent), floor) in &floors {
        deleted += below.execute(params![key, agent, floor])? as u64;
    }
    Ok((deleted, taken < rows || last_id >= cap_id))
}

/// Raises a session's floor (only upwards) and its head to at least the floor.
const RAISE_FLOOR: &str = "INSERT INTO session_state_heads (session_key, agent_id, head, floor, updated_at) \
     VALUES (?1, ?2, ?3, ?3, ?4) \
     ON CONFLICT (session_key, agent_id) DO UPDATE SET head = MAX(head, ?3), floor = ?3, updated_at = ?4 \
     WHERE floor < ?3";

/// One slice: from the first session of `left` on, up to `rows` rows. Floors first (only
/// upwards), then the rows at or below them: retained history stays exactly `(floor, head]`. Each floor
/// is a sequence in the log, so the session has a head at least that high; the stored head is raised to
/// the floor, since the rows it may be derived from go. The pending cursors on the session get their
/// derived M written first: it is read from the history about to go. Answers the rows deleted and the
/// floors not reached yet.
fn delete_slice(
    tx: &Connection,
    mut left: VecDeque<Floor>,
    rows: i64,
    now: Millis,
) -> Result<(u64, VecDeque<Floor>)> {
    let mut top_of_slice = tx.prepare_cached(
        "SELECT sequence FROM session_state_events WHERE session_key = ?1 AND agent_id = ?2 \
         AND sequence <= ?3 ORDER BY sequence LIMIT 1 OFFSET ?4",
    )?;
    let mut raise = tx.prepare_cached(RAISE_FLOOR)?;
    let mut delete = tx.prepare_cached(
        "DELETE FROM session_state_events WHERE session_key = ?1 AND agent_id = ?2 AND sequence <= ?3",
    )?;
    let mut budget = rows;
    let mut deleted = 0u64;
    while budget > 0 {
        let Some((key, agent, floor)) = left.front() else { break };
        // The budget-th row still at or below the floor, or the floor itself when fewer are left.
        let top: i64 = top_of_slice
            .query_row(params![key, agent, floor, budget - 1], |r| r.get(0))
            .optional()?
            .unwrap_or(*floor);
        super::watch::settle_pending(tx, Some(key))?;
        raise.execute(params![key, agent, top, now])?;
        let n = delete.execute(params![key, agent, top])? as i64;
        deleted += n as u64;
        budget -= n.max(1);
        if top >= *floor {
            left.pop_front();
        }
    }
    Ok((deleted, left))
}

/// `job`'s result and the writer time it took.
fn timed<T>(job: impl FnOnce() -> Result<T>) -> Result<(T, Duration)> {
    let start = Instant::now();
    Ok((job()?, start.elapsed()))
}

/// Cursors not touched within the retention age (one statement: the table has no index on age),
/// after settling the pending ones.
fn expire_cursors(tx: &Connection, cutoff: Millis) -> Result<Vec<(String, String)>> {
    super::watch::settle_pending(tx, None)?;
    Ok(tx
        .prepare(
            "DELETE FROM session_watch_cursors WHERE updated_at < ?1 \
             RETURNING watcher_session_key, target_session_key",
        )?
        .query_map([cutoff], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?)
}

#[cfg(test)]
mod tests {
    use super::SliceSize;
    use std::time::Duration;

    #[test]
    fn a_slice_size_moves_toward_the_aim_within_its_bounds() {
        let aim = SliceSize::AIM;
        // Twice the aim: half the rows; a tenth of it: at most double.
        assert_eq!(SliceSize(64).next(aim * 2), SliceSize(32));
        assert_eq!(SliceSize(64).next(aim / 10), SliceSize(128));
        assert_eq!(SliceSize(64).next(aim), SliceSize(64));
        // Never below the least (a prune always moves), never above the most.
        assert_eq!(SliceSize(64).next(Duration::from_secs(1)), SliceSize(SliceSize::MIN));
        assert_eq!(SliceSize(SliceSize::MAX).next(Duration::ZERO), SliceSize(SliceSize::MAX));
    }
}
