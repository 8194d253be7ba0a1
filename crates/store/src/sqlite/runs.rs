//! Runs and their terminal outcomes: the first write of the current owner wins.

use super::SqliteStore;
use crate::rows::RUN_COLUMNS;
use crate::{FinishRun, FinishRunRequest, Result, RunRow};
use rusqlite::{Connection, OptionalExtension, params};
use sessionwatch_core::Millis;

fn load_run(c: &Connection, run_id: &str) -> Result<Option<RunRow>> {
    Ok(c.prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM session_runs WHERE run_id = ?1"))?
        .query_row([run_id], |r| {
            Ok(RunRow {
                run_id: r.get(0)?,
                session_key: r.get(1)?,
                agent_id: r.get(2)?,
                session_id: r.get(3)?,
                requester: r.get(4)?,
                is_child: r.get::<_, i64>(5)? != 0,
                status: r.get(6)?,
                reply: r.get(7)?,
                superseded: r.get::<_, i64>(8)? != 0,
                created_at: r.get(9)?,
                finished_at: r.get(10)?,
            })
        })
        .optional()?)
}

impl SqliteStore {
    pub(crate) fn create_run_op(tx: &Connection, run: &RunRow) -> Result<()> {
        tx.execute(
            "UPDATE session_runs SET superseded = 1 \
             WHERE session_key = ?1 AND agent_id = ?2 AND finished_at IS NULL",
            params![run.session_key, run.agent_id],
        )?;
        tx.execute(
            &format!("INSERT INTO session_runs ({RUN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, NULL, 0, ?7, NULL)"),
            params![
                run.run_id,
                run.session_key,
                run.agent_id,
                run.session_id,
                run.requester,
                run.is_child as i64,
                run.created_at
            ],
        )?;
        Ok(())
    }

    pub(crate) fn get_run_sync(&self, run_id: &str) -> Result<Option<RunRow>> {
        self.read(|c| load_run(c, run_id))
    }

    pub(crate) fn finish_run_op(
        tx: &Connection,
        request: &FinishRunRequest,
        now: Millis,
    ) -> Result<FinishRun> {
        let FinishRunRequest { run_id, status, reply, session_id } = request;
        let Some(run) = load_run(tx, run_id)? else { return Ok(FinishRun::Unknown) };
        if run.finished_at.is_some() {
            return Ok(FinishRun::AlreadyFinished(run));
        }
        let current: Option<String> = tx
            .query_row(
                "SELECT session_id FROM sessions WHERE session_key = ?1 AND agent_id = ?2",
                params![run.session_key, run.agent_id],
                |r| r.get(0),
            )
            .optional()?;
        if !run.may_be_finished_by(current.as_deref(), session_id.as_deref()) {
            return Ok(FinishRun::NotOwner(run));
        }
        tx.execute(
            "UPDATE session_runs SET status = ?2, reply = ?3, finished_at = ?4 WHERE run_id = ?1",
            params![run_id, status, reply, now],
        )?;
        Ok(FinishRun::Finished(load_run(tx, run_id)?.unwrap_or(run)))
    }
}
