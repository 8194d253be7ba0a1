//! One turn delivered into a session, written in one job of the writer (one transaction): its run, its
//! event, the session's host, its inbox item and transcript message.

use super::sessions::TranscriptLengths;
use super::transaction::WriteTx;
use super::{SqliteStore, log};
use crate::tail::HeadRow;
use crate::{AppendOutcome, Head, Result, Turn, TurnOutcome};
use sessionwatch_core::Millis;

impl SqliteStore {
    /// The append runs under a savepoint: its failure rolls back only itself (and the writer's memory of
    /// it), and the rest of the turn commits. Answers the turn and, when the event was recorded, the head
    /// row it left for the tail cache.
    pub(crate) fn record_turn_op(
        tx: &WriteTx<'_>,
        lengths: &TranscriptLengths,
        mut turn: Turn,
        now: Millis,
        fold_every: i64,
    ) -> Result<(TurnOutcome, Option<HeadRow>)> {
        // The savepoint's statements are prepared once (`execute_batch` parsed them on every turn).
        let savepoint = |sql: &'static str| tx.with(sql, |st| Ok(st.execute([])?));
        let (event, row) = match turn.event.take() {
            None => (None, None),
            Some(req) => {
                savepoint("SAVEPOINT turn_event")?;
                match SqliteStore::append_op(tx, req, now, fold_every) {
                    Ok((outcome, row)) => {
                        savepoint("RELEASE turn_event")?;
                        (Some(Ok(outcome)), row)
                    }
                    Err(e) => {
                        savepoint("ROLLBACK TO turn_event")?;
                        savepoint("RELEASE turn_event")?;
                        tx.forget();
                        (Some(Err(e)), None)
                    }
                }
            }
        };
        let (key, agent) = (turn.session_key.as_str(), turn.agent_id.as_str());
        if let Some(run) = &turn.run {
            SqliteStore::create_run_op(tx, run)?;
        }
        if turn.touch {
            SqliteStore::touch_session_op(tx, key, agent, turn.host_id.as_deref(), now)?;
        }
        let inbox_id = SqliteStore::push_inbox_op(tx, key, agent, &turn.inbox_item(now))?;
        let message_id = SqliteStore::append_message_op(tx, lengths, key, agent, &turn.message(), now)?;
        // A recorded event left the session's head row, which the rest of the turn does not move.
        let head = match (&event, row) {
            (Some(Ok(AppendOutcome::Recorded { event, .. })), Some(row))
                if event.session_key == key && event.agent_id == agent =>
            {
                Head { head: row.head, floor: row.floor }
            }
            _ => log::head(tx, key, agent)?,
        };
        Ok((TurnOutcome { inbox_id, message_id, event, head }, row))
    }
}
