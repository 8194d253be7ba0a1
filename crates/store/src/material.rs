//! What a material event does to the cursors held on its target, decided once for every backend.

use sessionwatch_core::{AgentSessionKey, Cursor, MaterialDecision, Millis, Notice, on_material};

/// A material event at `sequence` on `target`, caused by `actor_id`, against every cursor held on the
/// target: answers the cursors that moved (to write back) and the notices to queue. A producer's
/// watcher without a cursor is not watching, so only cursor holders are considered.
pub(crate) fn apply_material(
    target: &str,
    actor_id: Option<&str>,
    sequence: u64,
    watcher_store: &str,
    now: Millis,
    cursors: Vec<(String, Cursor)>,
) -> (Vec<(String, Cursor)>, Vec<Notice>) {
    let mut moved = vec![];
    let mut notices = vec![];
    for (watcher, existing) in cursors {
        let decision = on_material(Some(&existing), &watcher, target, actor_id, sequence, watcher_store, now);
        if let MaterialDecision::Notify(cursor) = decision {
            if let (Some(w), Some(t)) = (AgentSessionKey::parse(&watcher), AgentSessionKey::parse(target)) {
                notices.push(Notice {
                    watcher: w,
                    target: t,
                    since: cursor.last_seen,
                    queue_only: cursor.queue_only(),
                });
            }
            moved.push((watcher, cursor));
        }
    }
    (moved, notices)
}
