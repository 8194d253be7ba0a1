//! One turn delivered into a session, written in one transaction: its run, its event, the session's
//! host, its inbox item and transcript message.

use super::append::{Bracket, Staged};
use super::log::head;
use super::{PostgresStore, runs, sessions};
use crate::{AppendOutcome, Result, Turn, TurnOutcome};
use sessionwatch_core::Millis;

/// The turn's event, in a savepoint of the turn's transaction.
const TURN_EVENT: Bracket = Bracket {
    open: "SAVEPOINT turn_event",
    close: "RELEASE SAVEPOINT turn_event",
    undo: "ROLLBACK TO SAVEPOINT turn_event; RELEASE SAVEPOINT turn_event",
};

impl PostgresStore {
    /// The append comes first, under a savepoint: it locks the session's head row before the session row
    /// (the order every append keeps), and its failure rolls back only itself.
    pub(crate) async fn record_turn_pg(&self, turn: Turn, now: Millis) -> Result<TurnOutcome> {
        let (key, agent) = (&turn.session_key, &turn.agent_id);
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let (event, committed) = match &turn.event {
            None => (None, None),
            Some(req) => match self.append_in(&tx, &TURN_EVENT, req, now).await {
                Ok(Staged::Committed { event, notices, row }) => {
                    (Some(Ok(AppendOutcome::Recorded { event: event.clone(), notices })), Some((event, row)))
                }
                Ok(Staged::RolledBack(outcome)) => (Some(Ok(outcome)), None),
                Err(e) => {
                    tx.batch_execute(TURN_EVENT.undo).await?;
                    (Some(Err(e)), None)
                }
            },
        };
        if let Some(run) = &turn.run {
            runs::create_run(&tx, run).await?;
        }
        if turn.touch {
            sessions::touch_session(&tx, key, agent, turn.host_id.as_deref(), now).await?;
        }
        let inbox_id = sessions::push_inbox(&tx, key, agent, &turn.inbox_item(now)).await?;
        let message_id = sessions::append_message(&tx, key, agent, &turn.message(), now).await?;
        let head = head(&tx, key, agent).await?;
        tx.commit().await?;
        if let Some((event, row)) = committed {
            self.inner.tail.committed(event, row);
        }
        Ok(TurnOutcome { inbox_id, message_id, event, head })
    }
}
