//! The OpenClaw-compatible tools: `session_status`, `sessions_list`, `sessions_history`,
//! `sessions_send`, `sessions_spawn`, `sessions_unwatch`.

use super::results::{
    HistoryOutput, ListOutput, SendOutput, SendStatus, SpawnOutput, StatusOutput, ToolOutput, WaitEnd,
};
use super::tool_args::{ArgNotes, SendTarget, ToolCall};
use super::{Gateway, RunResult, SessionRef, SessionSpec};
use crate::error::{ApiError, ApiResult};
use serde_json::Value;
use sessionwatch_core::AgentSessionKey;
use sessionwatch_core::RecordPolicy;
use sessionwatch_core::{Actor, Limit, NewEvent, Provenance};
use sessionwatch_kernel::RecordOutcome;
use sessionwatch_kernel::Signal;
use sessionwatch_store::{RunRow, SessionFilter, SessionRow, Store, Turn};
use std::time::Duration;

/// What [`Gateway::deliver`] wrote.
pub(super) struct Delivered {
    pub inbox_id: i64,
    /// The session's state version as the turn left it.
    pub head: u64,
    /// What became of the turn's event, when it carried one.
    pub recorded: Option<RecordOutcome>,
}

pub(crate) const TOOL_NAMES: [&str; 6] = [
    "session_status",
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "sessions_unwatch",
];

/// The tools that write (a `dryRun` of them is refused: nothing would be validated without writing).
pub(crate) const WRITING_TOOLS: [&str; 3] = ["sessions_send", "sessions_spawn", "sessions_unwatch"];

impl<S: Store> Gateway<S> {
    /// Invokes a tool as `caller` (default `main`; created on first use).
    /// Answers the result and what the arguments did not do as given (ignored, clamped).
    pub(crate) async fn invoke_tool(
        &self,
        caller: Option<&str>,
        tool: &str,
        args: &Value,
    ) -> ApiResult<(ToolOutput, ArgNotes)> {
        if !TOOL_NAMES.contains(&tool) {
            return Err(ApiError::UnknownTool(format!("unknown tool \"{tool}\"")));
        }
        let caller = self.resolve_caller(caller)?;
        // Validate arguments before anything is written (bad input changes nothing).
        let (mut call, notes) = ToolCall::parse(tool, args)?;
        if let ToolCall::Send { target, .. } = &mut call {
            *target = SendTarget::Key(self.send_target_key(&caller, target).await?);
        }
        let other = self.check_target(&caller, &call).await?;
        let (me, _) = self
            .ensure_session(&caller, SessionSpec { created_via: Some("tool"), ..SessionSpec::default() })
            .await?;
        // The row of the session a status, history or send is about, read once: another session's was
        // read by the check, the caller's own by `ensure_session`.
        let target = other.unwrap_or(me);
        let output = match call {
            ToolCall::Status { changes_since, limit, .. } => {
                self.session_status(target, changes_since, limit).await
            }
            ToolCall::List { kinds, limit, offset, active_minutes } => {
                self.sessions_list(kinds, limit, offset, active_minutes).await
            }
            ToolCall::History { limit, include_tools, .. } => {
                self.sessions_history(target, limit, include_tools).await
            }
            ToolCall::Send { message, timeout_seconds, watch, .. } => {
                self.sessions_send(&caller, target, message, timeout_seconds, watch).await
            }
            ToolCall::Spawn { task, label, agent_id, run_timeout_seconds } => {
                self.sessions_spawn(&caller, task, label, agent_id, run_timeout_seconds).await
            }
            ToolCall::Unwatch { session_key } => self.sessions_unwatch(&caller, &session_key).await,
        }?;
        Ok((output, notes))
    }

    /// Resolves the call's target and, unless it is the caller itself, checks that it exists, all before
    /// the caller is created: a rejected call writes nothing (a caller that does not exist yet included).
    /// Answers the target's row when it is another session that must exist (a status, history or send).
    async fn check_target(&self, caller: &SessionRef, call: &ToolCall) -> ApiResult<Option<SessionRow>> {
        let (key, must_exist) = match call {
            ToolCall::Status { session_key: Some(k), .. } => (k, true),
            ToolCall::History { session_key, .. }
            | ToolCall::Send { target: SendTarget::Key(session_key), .. } => (session_key, true),
            ToolCall::Send { .. } => unreachable!("resolved to a key before the check"),
            // Unwatching a session that is gone is allowed (it answers `unwatched: false`).
            ToolCall::Unwatch { session_key } => (session_key, false),
            ToolCall::Status { session_key: None, .. } | ToolCall::List { .. } | ToolCall::Spawn { .. } => {
                return Ok(None);
            }
        };
        let target = self.resolve(key, &caller.agent_id)?;
        if must_exist && target != *caller {
            return Ok(Some(self.require_session(&target).await?));
        }
        Ok(None)
    }

    /// `sessions_send` by label (the session carrying it) or by agent id (that agent's main session).
    async fn send_target_key(&self, caller: &SessionRef, target: &SendTarget) -> ApiResult<String> {
        match target {
            SendTarget::Key(k) => Ok(k.clone()),
            SendTarget::Agent(agent) => Ok(AgentSessionKey::build(agent, &self.config.main_key)),
            SendTarget::Label(label) => {
                let filter = SessionFilter { limit: 10_000, ..SessionFilter::default() };
                let rows = self.store.list_sessions(filter).await?;
                let mut matching = rows.iter().filter(|r| r.label.as_deref() == Some(label.as_str()));
                let found = matching
                    .clone()
                    .find(|r| r.agent_id == caller.agent_id)
                    .or_else(|| matching.next())
                    .ok_or_else(|| ApiError::NotFound(format!("no session is labelled \"{label}\"")))?;
                Ok(found.session_key.clone())
            }
        }
    }

    async fn session_status(
        &self,
        session: SessionRow,
        changes_since: Option<u64>,
        limit: Limit,
    ) -> ApiResult<ToolOutput> {
        let (key, agent) = (&session.session_key, &session.agent_id);
        let (state_version, changes) = match changes_since {
            // The head read with the page, so the two agree.
            Some(since) => {
                let page = self.kernel.changes_since(key, agent, since, limit).await?;
                (page.head, Some(page))
            }
            None => (self.kernel.head(key, agent).await?.head, None),
        };
        Ok(ToolOutput::Status(Box::new(StatusOutput { session, state_version, changes })))
    }

    async fn sessions_list(
        &self,
        kinds: Option<Vec<String>>,
        limit: u32,
        offset: u32,
        active_minutes: Option<i64>,
    ) -> ApiResult<ToolOutput> {
        // One more than asked tells whether there is more.
        let filter = SessionFilter {
            kinds,
            updated_since: active_minutes.map(|m| self.now() - m * 60_000),
            offset,
            limit: limit + 1,
            ..SessionFilter::default()
        };
        let mut rows = self.store.list_sessions(filter).await?;
        let has_more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let ids: Vec<(String, String)> =
            rows.iter().map(|r| (r.session_key.clone(), r.agent_id.clone())).collect();
        let (versions, activity) =
            tokio::join!(self.kernel.state_versions(ids.clone()), self.store.session_activity(ids));
        let (versions, mut activity) = (versions?, activity?);
        let members = rows
            .iter()
            .filter(|r| r.kind == sessionwatch_core::SessionKind::Workspace.as_str())
            .map(|r| (r.session_key.clone(), self.workspace_members(&r.session_key)))
            .collect();
        let sessions = rows
            .into_iter()
            .map(|r| {
                let id = (r.session_key.clone(), r.agent_id.clone());
                let v = versions.get(&id).copied().unwrap_or(0);
                let a = activity.remove(&id).unwrap_or_default();
                (r, v, a)
            })
            .collect();
        Ok(ToolOutput::List(ListOutput { sessions, members, has_more, limit }))
    }

    async fn sessions_history(
        &self,
        row: SessionRow,
        limit: u32,
        include_tools: bool,
    ) -> ApiResult<ToolOutput> {
        let store = &self.store;
        let (messages, pending) = tokio::join!(
            store.messages(row.session_key.clone(), row.agent_id.clone(), 500),
            store.pending_inbox(row.session_key.clone(), row.agent_id.clone())
        );
        let (messages, pending) = (messages?, pending?);
        let mut shown: Vec<_> = messages.into_iter().filter(|m| include_tools || m.role != "tool").collect();
        let dropped = shown.len().saturating_sub(limit as usize);
        shown.drain(..dropped);
        Ok(ToolOutput::History(HistoryOutput {
            session_key: row.session_key,
            messages: shown,
            dropped,
            pending,
        }))
    }

    async fn sessions_send(
        &self,
        caller: &SessionRef,
        row: SessionRow,
        message: String,
        timeout_seconds: u64,
        watch: Option<bool>,
    ) -> ApiResult<ToolOutput> {
        let target = SessionRef { key: row.session_key.clone(), agent_id: row.agent_id.clone() };
        let run = self.run_row(&row, &caller.key, false);
        let run_id = run.run_id.clone();
        let waiter = (timeout_seconds > 0).then(|| self.wait_for_run(&run_id));
        let mut turn = self.turn(&target, &row.session_id, &message, Some(&run_id), Some(&caller.key));
        turn.run = Some(run);
        let inbox_id = self.deliver(turn).await?.inbox_id;
        // Dispatched: only now may the sender watch the session that received it.
        let watched = match watch {
            Some(true) => Some(
                self.kernel
                    .register_watch(&caller.key, &row.session_key, Provenance::Explicit)
                    .await
                    .is_watching(),
            ),
            Some(false) => Some(false),
            None => None,
        };
        let status = match waiter {
            None => SendStatus::Accepted { inbox_id },
            Some(rx) => match tokio::time::timeout(Duration::from_secs(timeout_seconds), rx).await {
                Ok(Ok(RunResult { status, reply })) => {
                    let end = match status.as_str() {
                        "ok" => WaitEnd::Ok,
                        "timeout" => WaitEnd::Timeout,
                        _ => WaitEnd::Error,
                    };
                    SendStatus::Waited { end, reply }
                }
                Ok(Err(_)) => SendStatus::Waited { end: WaitEnd::Error, reply: None },
                Err(_) => SendStatus::Waited { end: WaitEnd::Timeout, reply: None },
            },
        };
        Ok(ToolOutput::Send(SendOutput { run_id, session_key: row.session_key, status, watched }))
    }

    /// A new run of `row`'s current incarnation on behalf of `requester` (not yet written).
    fn run_row(&self, row: &SessionRow, requester: &str, is_child: bool) -> RunRow {
        RunRow {
            run_id: uuid::Uuid::new_v4().to_string(),
            session_key: row.session_key.clone(),
            agent_id: row.agent_id.clone(),
            session_id: row.session_id.clone(),
            requester: Some(requester.to_string()),
            is_child,
            status: None,
            reply: None,
            superseded: false,
            created_at: self.now(),
            finished_at: None,
        }
    }

    /// Records run `run_id` of `row`'s current incarnation, requested by `requester`.
    pub(super) async fn create_run(
        &self,
        run_id: &str,
        row: &SessionRow,
        requester: &str,
        is_child: bool,
    ) -> ApiResult<()> {
        let run = RunRow { run_id: run_id.to_string(), ..self.run_row(row, requester, is_child) };
        self.store.create_run(run).await?;
        Ok(())
    }

    /// A turn putting `text` into the session's inbox and transcript, and nothing else yet.
    pub(super) fn turn(
        &self,
        target: &SessionRef,
        session_id: &str,
        text: &str,
        run_id: Option<&str>,
        from: Option<&str>,
    ) -> Turn {
        Turn {
            session_key: target.key.clone(),
            agent_id: target.agent_id.clone(),
            session_id: session_id.to_string(),
            text: text.to_string(),
            run_id: run_id.map(str::to_string),
            from_session: from.map(str::to_string),
            run: None,
            event: None,
            touch: false,
            host_id: None,
        }
    }

    /// Writes `turn` in one store transaction, tells the stream of its transcript message, then has the
    /// kernel take up its event (notices queued, the change signalled).
    pub(super) async fn deliver(&self, turn: Turn) -> ApiResult<Delivered> {
        let now = self.now();
        let (key, run_id) = (turn.session_key.clone(), turn.run_id.clone());
        let kind = turn.event.as_ref().map(|req| req.event.kind);
        let written = self.store.record_turn(turn, now).await?;
        self.kernel.publish(Signal::Message {
            session: key.clone(),
            id: written.message_id,
            role: "user".into(),
            run_id,
        });
        let recorded = match (kind, written.event) {
            (Some(kind), Some(result)) => Some(self.kernel.recorded(kind, key, result, now)),
            _ => None,
        };
        Ok(Delivered { inbox_id: written.inbox_id, head: written.head.head, recorded })
    }

    async fn sessions_spawn(
        &self,
        caller: &SessionRef,
        task: String,
        label: Option<String>,
        agent_id: Option<String>,
        run_timeout_seconds: Option<u64>,
    ) -> ApiResult<ToolOutput> {
        let agent = agent_id.unwrap_or_else(|| caller.agent_id.clone());
        let child = SessionRef {
            key: AgentSessionKey::build_subagent(&agent, &uuid::Uuid::new_v4().to_string()),
            agent_id: agent.clone(),
        };
        let (row, _) = self
            .ensure_session(
                &child,
                SessionSpec {
                    label: label.as_deref(),
                    spawned_by: Some(&caller.key),
                    created_via: Some("spawn"),
                    creator: Some(Actor::agent(caller.key.clone())),
                    ..SessionSpec::default()
                },
            )
            .await?;
        let run_id = uuid::Uuid::new_v4().to_string();
        self.create_run(&run_id, &row, &caller.key, true).await?;
        let spawned = NewEvent::child_spawned(&row.session_key, &row.agent_id, &caller.key, &run_id)
            .with_session_id(Some(row.session_id.clone()));
        self.kernel.record(spawned, RecordPolicy::spawned_by(caller.key.clone())).await;
        self.deliver(self.turn(&child, &row.session_id, &task, Some(&run_id), Some(&caller.key))).await?;
        if let Some(secs) = run_timeout_seconds.filter(|s| *s > 0) {
            self.schedule_run_timeout(run_id.clone(), secs);
        }
        Ok(ToolOutput::Spawn(SpawnOutput { run_id, child_session_key: row.session_key }))
    }

    async fn sessions_unwatch(&self, caller: &SessionRef, key: &str) -> ApiResult<ToolOutput> {
        let target = self.resolve(key, &caller.agent_id)?;
        let unwatched = self.kernel.unwatch(&caller.key, &target.key).await;
        Ok(ToolOutput::Unwatch { unwatched })
    }
}
