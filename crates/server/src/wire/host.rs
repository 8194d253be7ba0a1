//! The JSON of the host API's answers.

use super::{event, inbox_item, system_event};
use crate::gateway::listing::{Listing, WatchAnswer};
use crate::gateway::results::{
    CompactedOutput, DrainedOutput, GoalOutput, InboundOutput, MessageAdded, ResetOutput, RunResultOutput,
    SessionCreated,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sessionwatch_kernel::WatchOutcome;

pub fn session_created(o: &SessionCreated) -> Value {
    let s = &o.session;
    json!({ "sessionKey": s.session_key, "sessionId": s.session_id, "kind": s.kind, "created": o.created })
}

pub fn inbound(o: &InboundOutput) -> Value {
    let mut v =
        json!({ "sessionKey": o.session_key, "sessionId": o.session_id, "stateVersion": o.state_version });
    if let Some(e) = &o.event {
        v["event"] = event(e);
    }
    v
}

/// `{sessionKey, systemEvents: [{text, contextKey}], inbox?: [...]}`.
pub fn drained(o: &DrainedOutput) -> Value {
    let mut v = json!({
        "sessionKey": o.session_key,
        "systemEvents": o.system_events.iter().map(system_event).collect::<Vec<_>>(),
    });
    if let Some(inbox) = &o.inbox {
        v["inbox"] = inbox.iter().map(inbox_item).collect::<Vec<_>>().into();
    }
    v
}

pub fn message_added(o: &MessageAdded) -> Value {
    json!({ "sessionKey": o.session_key, "id": o.id })
}

pub fn goal(o: &GoalOutput) -> Value {
    let mut v = json!({ "sessionKey": o.session_key, "changed": o.changed, "stateVersion": o.state_version });
    if let Some(e) = &o.event {
        v["event"] = event(e);
    }
    v
}

pub fn compacted(o: &CompactedOutput) -> Value {
    let mut v = json!({ "sessionKey": o.session_key, "recorded": o.recorded });
    if let Some(e) = &o.event {
        v["event"] = event(e);
    }
    v
}

pub fn reset(o: &ResetOutput) -> Value {
    json!({ "sessionKey": o.session_key, "sessionId": o.session_id, "watchesCleared": o.watches_cleared })
}

pub fn deleted(session_key: &str) -> Value {
    json!({ "sessionKey": session_key, "deleted": true })
}

pub fn run_result(o: &RunResultOutput) -> Value {
    json!({ "runId": o.run_id, "accepted": o.accepted, "status": o.status })
}

/// `GET /v1/sessions`: every session the gateway knows, by name (no message content).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionListingJson {
    pub sessions: Vec<ListedSessionJson>,
    /// More sessions exist than one listing answers.
    pub has_more: bool,
}

/// One session of [`SessionListingJson`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedSessionJson {
    pub session_key: String,
    pub agent_id: String,
    /// `claude`, `codex`, `opencode`, `pi`, or `gateway` for a session of the host API.
    pub source: String,
    /// The native session id (an adopted session's last key segment), else the gateway's session id.
    pub native_id: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub node: Option<String>,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cwd: Option<String>,
    /// `running`, `waiting` (for its user), `idle`; a gateway session's latest run may also say
    /// `done`, `failed`, `timeout` or `cancelled`.
    pub state: String,
    pub state_version: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parent_session_key: Option<String>,
    pub updated_at: i64,
}

pub fn session_listing(l: &Listing) -> SessionListingJson {
    SessionListingJson {
        sessions: l
            .sessions
            .iter()
            .map(|s| ListedSessionJson {
                session_key: s.row.session_key.clone(),
                agent_id: s.row.agent_id.clone(),
                source: s.source.clone(),
                native_id: s.native_id.clone(),
                node: s.node.clone(),
                kind: s.row.kind.clone(),
                label: s.row.label.clone(),
                cwd: s.row.cwd.clone(),
                state: s.state.clone(),
                state_version: s.state_version,
                parent_session_key: s.row.spawned_by.clone(),
                updated_at: s.row.updated_at,
            })
            .collect(),
        has_more: l.has_more,
    }
}

/// `PUT /v1/sessions/{target}/watchers/{watcher}`: `outcome` is `watching` (a new watch, from
/// `fromStateVersion`), `already-watching`, `upgraded` (an ambient watch became explicit) or `refused`
/// (with `reason`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchJson {
    pub watcher: String,
    pub target: String,
    pub outcome: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub from_state_version: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
}

pub fn watch(a: &WatchAnswer) -> WatchJson {
    let (outcome, from, reason) = match &a.outcome {
        WatchOutcome::Seeded { at } => ("watching", Some(*at), None),
        WatchOutcome::Kept => ("already-watching", None, None),
        WatchOutcome::Upgraded => ("upgraded", None, None),
        WatchOutcome::Refused(r) => ("refused", None, Some(r.as_str().to_string())),
        WatchOutcome::Failed(e) => ("failed", None, Some(e.clone())),
    };
    WatchJson {
        watcher: a.watcher.clone(),
        target: a.target.clone(),
        outcome: outcome.into(),
        from_state_version: from,
        reason,
    }
}
