//! One turn delivered into a session, written in one job of the writer (one transaction): its event, its
//! run, the session's host, its inbox item and transcript message.

use super::session_cache::SessionCache;
use super::sessions::TranscriptLengths;
use super::transaction::WriteTx;
use super::{SqliteStore, log};
use crate::tail::HeadRow;
use crate::{AppendOutcome, Head, Result, Turn, TurnOutcome};
use sessionwatch_core::Millis;
use std::sync::Arc;

impl SqliteStore {
    /// The append goes first and alone may fail without failing the turn: it reads everything it needs
    /// before its first write, so a refusal (a corrupt cursor row, a constraint) leaves no row behind
    /// and the rest of the turn commits without the event (recording is best effort). An append that
    /// fails after writing (a full disk, an I/O error) fails the turn: the writer rolls its transaction
    /// back and every job in it hears "not recorded". No savepoint: one made every page the turn's
    /// append touched, already written by an earlier job of the batch, be copied to a sub-journal first.
    /// Answers the turn and, when the event was recorded, the head row it left for the tail cache.
    pub(crate) fn record_turn_op(
        tx: &WriteTx<'_>,
        lengths: &TranscriptLengths,
        sessions: &Arc<SessionCache>,
        mut turn: Turn,
        now: Millis,
        fold_every: i64,
    ) -> Result<(TurnOutcome, Option<HeadRow>)> {
        let (event, row) = match turn.event.take() {
            None => (None, None),
            Some(req) => {
                let changes = tx.total_changes();
                match SqliteStore::append_op(tx, req, now, fold_every) {
                    Ok((outcome, row)) => (Some(Ok(outcome)), row),
                    Err(e) if tx.total_changes() == changes && !tx.is_autocommit() => {
                        tx.forget();
                        (Some(Err(e)), None)
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let (key, agent) = (turn.session_key.as_str(), turn.agent_id.as_str());
        if let Some(run) = &turn.run {
            SqliteStore::create_run_op(tx, run)?;
        }
        if turn.touch {
            SqliteStore::touch_session_op(tx, sessions, key, agent, turn.host_id.as_deref(), now)?;
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
            // A move of this transaction may not be written yet: the writer's memory has it.
            _ => match tx.head(key, agent) {
                Some(row) => Head { head: row.head, floor: row.floor },
                None => log::head(tx, key, agent)?,
            },
        };
        Ok((TurnOutcome { inbox_id, message_id, event, head }, row))
    }
}
