//! Every cursor and notice policy a store applies inside its transactions, decided here once.
//!
//! Each function takes the rows a store read and answers the cursors to write back and the notices to
//! deliver; the store only reads and writes (SQLite on its writer thread, PostgreSQL over the network),
//! so neither backend decides anything itself and both behave the same by construction. A sans-IO "plan"
//! rather than a transaction trait with callbacks: the SQLite writer is synchronous and PostgreSQL is
//! asynchronous, and a plan needs neither.

use crate::Millis;
use crate::cursor::{Cursor, MaterialDecision, Provenance, check_watch_address, is_self_caused, on_material};
use crate::event::EventKind;
use crate::key::AgentSessionKey;
use crate::notice::Notice;

/// Who learns of an appended event besides the registered cursors, and whether it is written when
/// nobody watches its session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordPolicy {
    /// Watchers the producer names (the spawner of a child): a `child_spawned` event seeds their
    /// cursors at its sequence.
    pub producer_watchers: Vec<String>,
    /// Write nothing unless some cursor targets the session.
    pub only_if_watched: bool,
}

/// Where a human turn was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HumanTurnSource {
    /// A turn of a session this gateway hosts, reported over the host API.
    Gateway,
    /// A turn typed into another tool's session that was adopted here, seen by its hook or by the file
    /// monitor (local or on a node).
    Adopted,
}

impl RecordPolicy {
    /// Written whether watched or not; no producer watchers.
    pub fn always() -> RecordPolicy {
        RecordPolicy::default()
    }

    /// A child spawned by `parent`: the parent watches it from this event on.
    pub fn spawned_by(parent: impl Into<String>) -> RecordPolicy {
        RecordPolicy { producer_watchers: vec![parent.into()], only_if_watched: false }
    }

    /// The one rule for recording a human turn.
    ///
    /// - A gateway session with a parent (a sub-agent) always records it and names the parent, whose
    ///   spawn cursor then notices it.
    /// - A gateway session without a parent records it only when some cursor watches the session: an
    ///   unwatched human turn writes nothing (most turns of most sessions).
    /// - An adopted session always records it, watched or not: its hook and its file monitor both see
    ///   the same turn (one dedupe key), and the monitor may classify it only after a watch was
    ///   registered; recording it at once puts it before that watch's seed, so it never notifies about
    ///   a turn older than the watch.
    pub fn human_turn(source: HumanTurnSource, parent: Option<&str>) -> RecordPolicy {
        match (source, parent) {
            (HumanTurnSource::Gateway, Some(parent)) => RecordPolicy::spawned_by(parent),
            (HumanTurnSource::Gateway, None) => {
                RecordPolicy { producer_watchers: vec![], only_if_watched: true }
            }
            (HumanTurnSource::Adopted, _) => RecordPolicy::always(),
        }
    }
}

/// What an append at `sequence` does to the cursors on its session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppendCursors {
    /// Nothing: the event is not material.
    Untouched,
    /// A spawn: read each named watcher's cursor on the session and write what [`spawn_seed`] answers,
    /// so the producer's watchers learn only of later changes (but keep what they have not seen).
    Seed(Vec<String>),
    /// Read every cursor held on the session and pass them to [`fan_out`].
    FanOut,
}

/// Decides what an appended event of `kind` on `target` does to cursors.
pub fn on_append(kind: EventKind, target: &str, policy: &RecordPolicy) -> AppendCursors {
    if kind == EventKind::ChildSpawned {
        let watchers = policy
            .producer_watchers
            .iter()
            .filter(|w| check_watch_address(w, target).is_ok())
            .cloned()
            .collect();
        AppendCursors::Seed(watchers)
    } else if kind.notifies() {
        AppendCursors::FanOut
    } else {
        AppendCursors::Untouched
    }
}

/// The cursor a spawn at `sequence` leaves for one of the producer's watchers, whose cursor was
/// `existing`: seeded at the spawn (`L = N = M = sequence`, explicit), so earlier history never notifies.
/// A respawn never hides a change the watcher has not seen: a notice still pending on a cursor of the
/// same store stays pending at its `changesSince L`, and M moves to the spawn, so the drain that delivers
/// it acknowledges through the spawn.
pub fn spawn_seed(existing: Option<&Cursor>, sequence: u64, watcher_store: &str, now: Millis) -> Cursor {
    match existing {
        Some(c) if c.is_pending() && c.store_matches(watcher_store) => Cursor {
            material: c.material.max(sequence),
            provenance: Provenance::Explicit,
            updated_at: now,
            ..c.clone()
        },
        _ => Cursor::seeded(sequence, Provenance::Explicit, watcher_store, now),
    }
}

/// Cursors to write back and notices to deliver.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FanOut {
    /// The cursors that moved, as (watcher, cursor).
    pub moved: Vec<(String, Cursor)>,
    pub notices: Vec<Notice>,
}

/// A material event at `sequence` on `target`, caused by `actor_id`, against every cursor held on the
/// target. A producer's watcher without a cursor is not watching, so only cursor holders count.
///
/// Fan-out is paid per burst, not per event: only a cursor that had nothing pending moves (it becomes
/// pending, N frozen at this event) and answers a notice. A cursor whose notice is already pending is
/// neither written nor notified again: its M is derived from the log when it is next read
/// ([`settle_material`]), and its notice, byte-identical, is already queued (the kernel reminds a
/// watcher holding one with a coalesced wake). So a burst of changes to a target with many watchers
/// writes each cursor once, on the transition to pending, and a store need not even read the pending
/// ones (SQLite does not; PostgreSQL locks them, to order the append with a concurrent claim).
pub fn fan_out(
    target: &str,
    actor_id: Option<&str>,
    sequence: u64,
    watcher_store: &str,
    now: Millis,
    cursors: Vec<(String, Cursor)>,
) -> FanOut {
    let mut out = FanOut::default();
    for (watcher, existing) in cursors {
        if existing.is_pending() {
            continue; // not written again; its notice is already queued (see the doc above)
        }
        let decision = on_material(Some(&existing), &watcher, target, actor_id, sequence, watcher_store, now);
        if let MaterialDecision::Notify(cursor) = decision {
            if let Some(notice) = notice_at(&watcher, target, cursor.last_seen, &cursor) {
                out.notices.push(notice);
            }
            out.moved.push((watcher, cursor));
        }
    }
    out
}

/// One event of a target, newest first, as [`settle_material`] reads them: sequence, kind, actor id,
/// and when it was recorded.
pub type LoggedEvent = (u64, EventKind, Option<String>, Millis);

/// The cursor as the L/N/M machine has it: a pending cursor's stored M stops moving (appends do not
/// write it, see [`fan_out`]), so its M is the newest material event on the target after the stored M
/// that `watcher` did not cause, and its `updated_at` that event's time. `newer` are the target's events
/// after the stored M, newest first (read lazily: the first that counts ends the read). Answers `None`
/// when nothing changes: not pending, no such event, or a legacy cursor (no store: appends never move
/// it).
pub fn settle_material(
    cursor: &Cursor,
    watcher: &str,
    newer: impl IntoIterator<Item = LoggedEvent>,
) -> Option<Cursor> {
    if !needs_settling(cursor) {
        return None;
    }
    let (sequence, _, _, at) = newer.into_iter().find(|(seq, kind, actor, _)| {
        *seq > cursor.material && kind.notifies() && !is_self_caused(actor.as_deref(), watcher)
    })?;
    Some(Cursor { material: sequence, updated_at: cursor.updated_at.max(at), ..cursor.clone() })
}

/// Whether [`settle_material`] could change the cursor (so a store reads the log for it).
pub fn needs_settling(cursor: &Cursor) -> bool {
    cursor.is_pending() && cursor.store_path.is_some()
}

/// The kinds [`settle_material`] looks for, as stored (`kind` column values).
pub fn material_kinds() -> Vec<&'static str> {
    EventKind::ALL.into_iter().filter(|k| k.notifies()).map(EventKind::as_str).collect()
}

/// The notice of a cursor at `changesSince since`, when both addresses are valid agent keys.
fn notice_at(watcher: &str, target: &str, since: u64, cursor: &Cursor) -> Option<Notice> {
    let (w, t) = (AgentSessionKey::parse(watcher)?, AgentSessionKey::parse(target)?);
    Some(Notice { watcher: w, target: t, since, queue_only: cursor.queue_only() })
}

/// The notice a stored cursor has pending, if any: it must be pending (`M > L`), belong to
/// `watcher_store`, and both stored keys must be exactly the agent keys they parse to (a row written by
/// hand or by an older version with another spelling is ignored). Text at `changesSince L`.
pub fn pending_notice(watcher: &str, target: &str, cursor: &Cursor, watcher_store: &str) -> Option<Notice> {
    if !cursor.is_pending() || !cursor.store_matches(watcher_store) {
        return None;
    }
    let notice = notice_at(watcher, target, cursor.last_seen, cursor)?;
    (notice.watcher.as_str() == watcher && notice.target.as_str() == target).then_some(notice)
}

/// What acknowledging drained notices did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acknowledged {
    /// The notices claimed, at the cursor's `changesSince` as it was: deliver exactly these.
    pub delivered: Vec<Notice>,
}

/// Claims drained notices of `watcher` ([`Cursor::claim`]): `rows` are its cursors on the drained
/// targets as read (and settled) inside the transaction (`None`: no cursor). Answers the cursors to write
/// back, each acknowledged through the present, and what was delivered. A cursor of another store, or
/// with nothing pending, claims nothing.
pub fn acknowledge(
    watcher: &AgentSessionKey,
    rows: Vec<(AgentSessionKey, Option<Cursor>)>,
    watcher_store: &str,
    now: Millis,
) -> (Vec<(AgentSessionKey, Cursor)>, Acknowledged) {
    let mut writes = vec![];
    let mut out = Acknowledged::default();
    for (target, cursor) in rows {
        let Some(mut cursor) = cursor.filter(|c| c.store_matches(watcher_store)) else { continue };
        let Some(since) = cursor.claim(now) else { continue };
        out.delivered.push(Notice {
            watcher: watcher.clone(),
            target: target.clone(),
            since,
            queue_only: cursor.queue_only(),
        });
        writes.push((target, cursor));
    }
    (writes, out)
}

/// The start-up sweep over stored cursors (watcher, target, cursor): every pending one of
/// `watcher_store` re-opens its notice ([`Cursor::sweep`]). Answers the cursors to write back, as
/// (watcher, target, cursor), and the notices.
pub fn sweep(
    rows: Vec<(String, String, Cursor)>,
    watcher_store: &str,
    now: Millis,
) -> (Vec<(String, String, Cursor)>, Vec<Notice>) {
    let mut writes = vec![];
    let mut notices = vec![];
    for (watcher, target, mut cursor) in rows {
        if pending_notice(&watcher, &target, &cursor, watcher_store).is_none() {
            continue;
        }
        let Some(since) = cursor.sweep(now) else { continue };
        if let Some(notice) = notice_at(&watcher, &target, since, &cursor) {
            notices.push(notice);
        }
        writes.push((watcher, target, cursor));
    }
    (writes, notices)
}

#[cfg(test)]
mod tests;
