//! The rows both backends read alike: a table's columns (one constant, in its struct's field order) and a
//! macro that reads the struct from such a row with the backend's fallible getter (`get` on SQLite,
//! `try_get` on PostgreSQL), so the two backends cannot disagree on a column's place.

/// `$ty` from a row whose columns are the listed fields, in that order.
macro_rules! from_row {
    ($r:expr, $get:ident, $ty:ident { $($field:ident),* $(,)? }) => {{
        let mut column = 0usize;
        $crate::$ty {
            $($field: {
                column += 1;
                $r.$get(column - 1)?
            }),*
        }
    }};
}
pub(crate) use from_row;

/// The columns of `session_runs` a [`crate::RunRow`] is read from, in its field order.
pub(crate) const RUN_COLUMNS: &str = "run_id, session_key, agent_id, session_id, requester, is_child, status, reply, \
     superseded, created_at, finished_at";

/// The columns of `session_watch_cursors` a `Cursor` is read from, from L to its time.
pub(crate) const CURSOR_COLUMNS: &str =
    "last_seen_sequence, notified_sequence, material_sequence, provenance, watcher_store_path, updated_at";
/// [`CURSOR_COLUMNS`] qualified by the cursor table's alias `c`.
pub(crate) const EDGE_CURSOR_COLUMNS: &str = "c.last_seen_sequence, c.notified_sequence, c.material_sequence, c.provenance, c.watcher_store_path, c.updated_at";

/// The columns of `sessions` a [`crate::SessionRow`] is read from ([`session_from_row!`]).
pub(crate) const SESSION_COLUMNS: &str = "session_key, agent_id, session_id, kind, chat_type, channel, label, \
     spawned_by, created_via, goal_objective, goal_status, host_id, created_at, updated_at, cwd, native_state";

/// A [`crate::SessionRow`] from a row of [`SESSION_COLUMNS`].
macro_rules! session_from_row {
    ($r:expr, $get:ident) => {
        $crate::rows::from_row!(
            $r,
            $get,
            SessionRow {
                session_key,
                agent_id,
                session_id,
                kind,
                chat_type,
                channel,
                label,
                spawned_by,
                created_via,
                goal_objective,
                goal_status,
                host_id,
                created_at,
                updated_at,
                cwd,
                native_state,
            }
        )
    };
}
pub(crate) use session_from_row;

/// The columns of `session_messages` a [`crate::TranscriptMessage`] is read from.
pub(crate) const MESSAGE_COLUMNS: &str = "id, session_id, role, text, run_id, from_session, created_at";

/// A [`crate::TranscriptMessage`] from a row of [`MESSAGE_COLUMNS`].
macro_rules! message_from_row {
    ($r:expr, $get:ident) => {
        $crate::rows::from_row!(
            $r,
            $get,
            TranscriptMessage { id, session_id, role, text, run_id, from_session, created_at }
        )
    };
}
pub(crate) use message_from_row;

/// A [`crate::InboxItem`] from a row of `id, run_id, from_session, text, created_at`.
macro_rules! inbox_from_row {
    ($r:expr, $get:ident) => {
        $crate::rows::from_row!($r, $get, InboxItem { id, run_id, from_session, text, created_at })
    };
}
pub(crate) use inbox_from_row;

/// The columns of `session_upstream_links` an [`crate::UpstreamLinkRow`] is read from
/// ([`link_from_row!`]).
pub(crate) const LINK_COLUMNS: &str = "session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind, \
     upstream_ref_json, last_marker_json, last_scanned_at, missing_streak, created_at, updated_at";

/// [`LINK_COLUMNS`] of the table aliased `l`.
pub(crate) fn link_columns_of_l() -> String {
    LINK_COLUMNS.split(", ").map(|c| format!("l.{c}")).collect::<Vec<_>>().join(", ")
}

/// An [`crate::UpstreamLinkRow`] from a row of [`LINK_COLUMNS`] (the missing streak is stored as a
/// 64-bit integer).
macro_rules! link_from_row {
    ($r:expr, $get:ident) => {
        $crate::UpstreamLinkRow {
            session_key: $r.$get(0)?,
            agent_id: $r.$get(1)?,
            catalog_id: $r.$get(2)?,
            host_id: $r.$get(3)?,
            thread_id: $r.$get(4)?,
            upstream_kind: $r.$get(5)?,
            reference_json: $r.$get(6)?,
            marker_json: $r.$get(7)?,
            last_scanned_at: $r.$get(8)?,
            missing_streak: $r.$get::<_, i64>(9)?.clamp(0, u32::MAX as i64) as u32,
            created_at: $r.$get(10)?,
            updated_at: $r.$get(11)?,
        }
    };
}
pub(crate) use link_from_row;
