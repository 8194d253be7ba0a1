//! The JSON of the host API's answers.

use super::{event, inbox_item, system_event};
use crate::gateway::results::{
    CompactedOutput, DrainedOutput, GoalOutput, InboundOutput, MessageAdded, ResetOutput, RunResultOutput,
    SessionCreated,
};
use serde_json::{Value, json};

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
