//! Runs and their terminal outcomes: the first write of the current owner wins (under the run's row
//! lock, so two gateways finishing one run at once agree on the winner).

use super::{PostgresStore, execute, query_opt};
use crate::rows::RUN_COLUMNS;
use crate::{FinishRun, FinishRunRequest, Result, RunRow};
use deadpool_postgres::GenericClient;
use sessionwatch_core::Millis;

pub(crate) async fn load_run<C: GenericClient + Sync>(
    c: &C,
    run_id: &str,
    for_update: bool,
) -> Result<Option<RunRow>> {
    let lock = if for_update { " FOR UPDATE" } else { "" };
    let Some(r) =
        query_opt(c, &format!("SELECT {RUN_COLUMNS} FROM session_runs WHERE run_id = $1{lock}"), &[&run_id])
            .await?
    else {
        return Ok(None);
    };
    Ok(Some(RunRow {
        run_id: r.try_get(0)?,
        session_key: r.try_get(1)?,
        agent_id: r.try_get(2)?,
        session_id: r.try_get(3)?,
        requester: r.try_get(4)?,
        is_child: r.try_get(5)?,
        status: r.try_get(6)?,
        reply: r.try_get(7)?,
        superseded: r.try_get(8)?,
        created_at: r.try_get(9)?,
        finished_at: r.try_get(10)?,
    }))
}

/// Starts `run` inside the caller's transaction; unfinished earlier runs of its session are superseded.
pub(crate) async fn create_run<C: GenericClient + Sync>(tx: &C, run: &RunRow) -> Result<()> {
    execute(
        tx,
        "UPDATE session_runs SET superseded = TRUE \
         WHERE session_key = $1 AND agent_id = $2 AND finished_at IS NULL",
        &[&run.session_key, &run.agent_id],
    )
    .await?;
    execute(
        tx,
        &format!(
            "INSERT INTO session_runs ({RUN_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, NULL, NULL, FALSE, $7, NULL)"
        ),
        &[
            &run.run_id,
            &run.session_key,
            &run.agent_id,
            &run.session_id,
            &run.requester,
            &run.is_child,
            &run.created_at,
        ],
    )
    .await?;
    Ok(())
}

impl PostgresStore {
    pub(crate) async fn finish_run_pg(&self, request: &FinishRunRequest, now: Millis) -> Result<FinishRun> {
        let FinishRunRequest { run_id, status, reply, session_id } = request;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(run) = load_run(&tx, run_id, true).await? else { return Ok(FinishRun::Unknown) };
        if run.finished_at.is_some() {
            return Ok(FinishRun::AlreadyFinished(run));
        }
        let current: Option<String> = query_opt(
            &tx,
            "SELECT session_id FROM sessions WHERE session_key = $1 AND agent_id = $2",
            &[&run.session_key, &run.agent_id],
        )
        .await?
        .map(|r| r.get(0));
        if !run.may_be_finished_by(current.as_deref(), session_id.as_deref()) {
            return Ok(FinishRun::NotOwner(run));
        }
        execute(
            &tx,
            "UPDATE session_runs SET status = $2, reply = $3, finished_at = $4 WHERE run_id = $1",
            &[&run_id, &status, &reply, &now],
        )
        .await?;
        let finished = load_run(&tx, run_id, false).await?.unwrap_or(run);
        tx.commit().await?;
        Ok(FinishRun::Finished(finished))
    }
}
