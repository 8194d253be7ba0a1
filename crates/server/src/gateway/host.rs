//! The host API for channel adapters and agent runtimes: sessions, inbound turns, begin-turn,
//! transcript messages, goals, compactions, reset, delete and run results.

use super::results::{
    CompactedOutput, DrainedOutput, GoalOutput, InboundOutput, MessageAdded, ResetOutput, RunResultOutput,
    SessionCreated,
};
use super::{Gateway, RunResult, SessionRef, SessionSpec};
use crate::config::GroupScope;
use crate::error::{ApiError, ApiResult};
use sessionwatch_core::{
    Actor, ActorType, GoalChange, NewEvent, Provenance, RunStatus, SessionKind, classify_session_kind,
};
use sessionwatch_core::{HumanTurnSource, RecordPolicy};
use sessionwatch_kernel::{RecordOutcome, Signal};
use sessionwatch_store::{FinishRun, FinishRunRequest, NewMessage, Store};
use std::sync::Arc;
use std::time::Duration;

/// `POST /v1/sessions/{key}/inbound`.
#[derive(Clone, Debug)]
pub(crate) struct InboundTurn {
    pub text: String,
    pub channel: String,
    pub actor: Actor,
    pub chat_type: Option<String>,
    pub run_id: Option<String>,
}

impl<S: Store> Gateway<S> {
    /// Resolves a host-API key (agent from the key, else `agentId`, else `main`).
    pub(crate) fn resolve_host_key(&self, raw: &str, agent_id: Option<&str>) -> ApiResult<SessionRef> {
        self.resolve_with(raw, || agent_id.map(str::to_string).unwrap_or_else(|| Self::caller_agent(raw)))
    }

    /// `POST /v1/sessions`.
    pub(crate) async fn create_session(
        &self,
        session_key: &str,
        agent_id: Option<&str>,
        spec: SessionSpec<'_>,
    ) -> ApiResult<SessionCreated> {
        let r = self.resolve_host_key(session_key, agent_id)?;
        let (row, created) = self.ensure_session(&r, spec).await?;
        Ok(SessionCreated { session: row, created })
    }

    pub(crate) async fn inbound(&self, raw_key: &str, turn: InboundTurn) -> ApiResult<InboundOutput> {
        let r = self.resolve_host_key(raw_key, None)?;
        let (row, _) = self
            .ensure_session(
                &r,
                SessionSpec {
                    chat_type: turn.chat_type.as_deref(),
                    channel: Some(&turn.channel),
                    created_via: Some("inbound"),
                    creator: Some(turn.actor.clone()),
                    ..SessionSpec::default()
                },
            )
            .await?;
        let from = (turn.actor.kind == ActorType::Agent).then(|| turn.actor.id.clone()).flatten();
        let human = turn.actor.kind == ActorType::Human;
        let mut write = self.turn(&r, &row.session_id, &turn.text, turn.run_id.as_deref(), from.as_deref());
        write.touch = true;
        write.host_id = self.kernel.config().host_id.clone();
        if human {
            let event = NewEvent::human_message(&r.key, &r.agent_id, &turn.channel, turn.actor.id.clone())
                .with_session_id(Some(row.session_id.clone()))
                .with_run_id(turn.run_id.clone());
            let policy = RecordPolicy::human_turn(HumanTurnSource::Gateway, row.spawned_by.as_deref());
            write.event = Some(self.kernel.append_request(event, policy));
        }
        let delivered = self.deliver(write).await?;
        self.kernel.served(&r.key).await;
        let event = match delivered.recorded {
            Some(RecordOutcome::Recorded(e)) => Some(e),
            _ => None,
        };
        // The main session watches its groups after their first human turn (queue only, no wake). The
        // key's kind is worked out last: most turns are told apart by the cheaper checks.
        if human
            && self.config.group_scope == GroupScope::PerGroup
            && row.spawned_by.is_none()
            && classify_session_kind(&r.key, row.chat_type.as_deref(), &self.config.main_key)
                == SessionKind::Group
        {
            let home = self.home_key(&r.agent_id);
            self.kernel.register_watch(&home, &r.key, Provenance::AmbientGroup).await;
        }
        let state_version = delivered.head;
        Ok(InboundOutput { session_key: r.key, session_id: row.session_id, state_version, event })
    }

    /// Begins a turn: drains (and acknowledges) the system-event queue and takes the inbox.
    pub(crate) async fn begin_turn(&self, raw_key: &str) -> ApiResult<DrainedOutput> {
        let r = self.resolve_host_key(raw_key, None)?;
        self.require_session(&r).await?;
        self.kernel.host_session(&r.key, &r.agent_id).await;
        // The inbox first: if taking it fails, the call fails before any notice is claimed, so nothing
        // is lost (draining never fails; a store error there delivers and leaves the cursors pending).
        let inbox = self.store.take_inbox(r.key.clone(), r.agent_id.clone()).await?;
        let system_events = self.kernel.drain(&r.key).await;
        Ok(DrainedOutput { session_key: r.key, system_events, inbox: Some(inbox) })
    }

    pub(crate) async fn add_message(
        &self,
        raw_key: &str,
        role: &str,
        text: &str,
        run_id: Option<&str>,
    ) -> ApiResult<MessageAdded> {
        let r = self.resolve_host_key(raw_key, None)?;
        let row = self.require_session(&r).await?;
        let id = self
            .store
            .append_message(
                r.key.clone(),
                r.agent_id.clone(),
                NewMessage {
                    session_id: row.session_id.clone(),
                    role: role.to_string(),
                    text: text.to_string(),
                    run_id: run_id.map(str::to_string),
                    from_session: None,
                },
                self.now(),
            )
            .await?;
        self.kernel.publish(Signal::Message {
            session: r.key.clone(),
            id,
            role: role.to_string(),
            run_id: run_id.map(str::to_string),
        });
        Ok(MessageAdded { session_key: r.key, id })
    }

    /// Sets the goal (both `None` clears it) and records `goal_changed` when it changed.
    pub(crate) async fn set_goal(
        &self,
        raw_key: &str,
        objective: Option<String>,
        status: Option<String>,
        actor: Actor,
    ) -> ApiResult<GoalOutput> {
        let r = self.resolve_host_key(raw_key, None)?;
        self.require_session(&r).await?;
        let clearing = objective.is_none() && status.is_none();
        let before = self
            .store
            .update_goal(r.key.clone(), r.agent_id.clone(), objective.clone(), status.clone(), self.now())
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("unknown session \"{}\"", r.key)))?;
        let had_goal = before.goal_objective.is_some() || before.goal_status.is_some();
        let change = if clearing {
            had_goal.then_some(GoalChange::Cleared)
        } else if !had_goal {
            Some(GoalChange::Created)
        } else if before.goal_objective == objective && before.goal_status == status {
            None
        } else if before.goal_objective == objective {
            Some(GoalChange::StatusChanged(status.clone().unwrap_or_else(|| "none".into())))
        } else {
            Some(GoalChange::Updated)
        };
        let changed = change.is_some();
        let mut event = None;
        if let Some(change) = change {
            let e = NewEvent::goal_changed(&r.key, &r.agent_id, &change, actor)
                .with_session_id(Some(before.session_id.clone()));
            if let RecordOutcome::Recorded(ev) = self.kernel.record(e, RecordPolicy::always()).await {
                event = Some(Arc::unwrap_or_clone(ev));
            }
        }
        let state_version = self.kernel.head(&r.key, &r.agent_id).await?.head;
        Ok(GoalOutput { session_key: r.key, changed, event, state_version })
    }

    pub(crate) async fn compacted(
        &self,
        raw_key: &str,
        operation_id: &str,
        run_id: Option<String>,
    ) -> ApiResult<CompactedOutput> {
        let r = self.resolve_host_key(raw_key, None)?;
        let row = self.require_session(&r).await?;
        let e = NewEvent::compacted(&r.key, &r.agent_id, operation_id)
            .with_session_id(Some(row.session_id))
            .with_run_id(run_id);
        let outcome = self.kernel.record(e, RecordPolicy::always()).await;
        let recorded = matches!(outcome, RecordOutcome::Recorded(_));
        Ok(CompactedOutput { session_key: r.key, recorded, event: outcome.event().cloned() })
    }

    /// Reset: a new session id; the session's own watches are cleared (a committed reset clears them
    /// even if a later step fails). The key's history is kept.
    pub(crate) async fn reset(&self, raw_key: &str) -> ApiResult<ResetOutput> {
        let r = self.resolve_host_key(raw_key, None)?;
        self.require_session(&r).await?;
        let new_id = uuid::Uuid::new_v4().to_string();
        let store = &self.store;
        if !store.reset_session(r.key.clone(), r.agent_id.clone(), new_id.clone(), self.now()).await? {
            return Err(ApiError::NotFound(format!("unknown session \"{}\"", r.key)));
        }
        let cleared = match self.kernel.reset_watcher(&r.key).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, session = %r.key, "clearing watches after reset failed");
                0
            }
        };
        // Queued events of the old incarnation go with it.
        self.kernel.discard_queue(&r.key);
        Ok(ResetOutput { session_key: r.key, session_id: new_id, watches_cleared: cleared })
    }

    /// Deletes the session; answers its key.
    pub(crate) async fn delete(&self, raw_key: &str) -> ApiResult<String> {
        let r = self.resolve_host_key(raw_key, None)?;
        self.require_session(&r).await?;
        self.kernel.delete_session(&r.key, &r.agent_id).await?;
        Ok(r.key)
    }

    /// The terminal outcome of a run: the first write of its current owner wins. Child runs record
    /// `run_completed` / `run_failed` off the request path.
    pub(crate) async fn run_result(
        self: &Arc<Self>,
        run_id: &str,
        status: RunStatus,
        reply: Option<String>,
        session_id: Option<String>,
    ) -> ApiResult<RunResultOutput> {
        let store = &self.store;
        let outcome = store
            .finish_run(
                FinishRunRequest {
                    run_id: run_id.to_string(),
                    status: status.as_str().to_string(),
                    reply: reply.clone(),
                    session_id,
                },
                self.now(),
            )
            .await?;
        match outcome {
            FinishRun::Unknown => Err(ApiError::NotFound(format!("unknown run \"{run_id}\""))),
            FinishRun::NotOwner(_) => Err(ApiError::Conflict(format!(
                "run \"{run_id}\" is no longer owned by this writer (replaced run or older session incarnation)"
            ))),
            FinishRun::AlreadyFinished(run) => Ok(RunResultOutput {
                run_id: run_id.to_string(),
                accepted: false,
                status: run.status.unwrap_or_default(),
            }),
            FinishRun::Finished(run) => {
                if let Some(text) = &reply {
                    let r = SessionRef { key: run.session_key.clone(), agent_id: run.agent_id.clone() };
                    let _ = self.add_message(&r.key, "assistant", text, Some(run_id)).await;
                }
                self.finish_waiters(run_id, RunResult { status: status.as_str().to_string(), reply });
                if run.is_child {
                    let gateway = self.clone();
                    let event = NewEvent::run_terminal(&run.session_key, &run.agent_id, run_id, status)
                        .with_session_id(Some(run.session_id.clone()));
                    tokio::spawn(async move {
                        gateway.kernel.record(event, RecordPolicy::always()).await;
                    });
                }
                Ok(RunResultOutput {
                    run_id: run_id.to_string(),
                    accepted: true,
                    status: status.as_str().into(),
                })
            }
        }
    }

    /// A spawned child's run that has not finished after `secs` times out.
    pub(super) fn schedule_run_timeout(&self, run_id: String, secs: u64) {
        let Some(gateway) = self.self_arc() else { return };
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(secs)).await;
            let _ = gateway
                .run_result(&run_id, RunStatus::Failed(sessionwatch_core::RunOutcome::Timeout), None, None)
                .await;
        });
    }
}
