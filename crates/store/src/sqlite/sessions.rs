//! Session rows beside the log.

use super::SqliteStore;
use crate::{NewSession, Result, SessionRow};
use rusqlite::{OptionalExtension, Row, params};
use sessionwatch_core::Millis;

pub(crate) const SESSION_COLUMNS: &str = "session_key, agent_id, session_id, kind, chat_type, channel, label, \
     spawned_by, created_via, goal_objective, goal_status, created_at, updated_at";

pub(crate) fn session_from_row(r: &Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        session_key: r.get(0)?,
        agent_id: r.get(1)?,
        session_id: r.get(2)?,
        kind: r.get(3)?,
        chat_type: r.get(4)?,
        channel: r.get(5)?,
        label: r.get(6)?,
        spawned_by: r.get(7)?,
        created_via: r.get(8)?,
        goal_objective: r.get(9)?,
        goal_status: r.get(10)?,
        created_at: r.get(11)?,
        updated_at: r.get(12)?,
    })
}

impl SqliteStore {
    pub(crate) fn ensure_session_sync(&self, new: &NewSession, now: Millis) -> Result<(SessionRow, bool)> {
        self.write(|tx| {
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO sessions (session_key, agent_id, session_id, kind, chat_type, channel, label, \
                     spawned_by, created_via, created_at, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10) ON CONFLICT DO NOTHING",
                )?
                .execute(params![
                    new.session_key,
                    new.agent_id,
                    new.session_id,
                    new.kind,
                    new.chat_type,
                    new.channel,
                    new.label,
                    new.spawned_by,
                    new.created_via,
                    now
                ])?
                > 0;
            let row = tx
                .prepare_cached(&format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions WHERE session_key = ?1 AND agent_id = ?2"
                ))?
                .query_row(params![new.session_key, new.agent_id], session_from_row)
                .optional()?
                .expect("the row was just inserted or existed");
            Ok((row, inserted))
        })
    }
}
