//! JSON wire shapes. Domain types are not `Serialize`; this module projects them.

use serde_json::{Map, Value, json};
use sessionwatch_core::{ChangesPage, Payload, QueuedEvent, StoredEvent};
use sessionwatch_store::{InboxItem, SessionRow, TranscriptMessage};

/// One event of `stateChanges.events`: only the documented fields; the payload keeps only
/// `outcome`, `channel` and `turns`.
pub fn event(e: &StoredEvent) -> Value {
    let mut m = Map::new();
    m.insert("sequence".into(), e.sequence.into());
    m.insert("kind".into(), e.kind.as_str().into());
    m.insert("actorType".into(), e.actor.kind.as_str().into());
    m.insert("occurredAt".into(), e.occurred_at.into());
    m.insert("summary".into(), e.summary.clone().into());
    if let Some(a) = &e.actor.id {
        m.insert("actorId".into(), a.clone().into());
    }
    if let Some(r) = &e.run_id {
        m.insert("runId".into(), r.clone().into());
    }
    if let Some(p) = payload(&e.payload) {
        m.insert("payload".into(), p);
    }
    Value::Object(m)
}

fn payload(p: &Payload) -> Option<Value> {
    if p.is_empty() {
        return None;
    }
    let mut m = Map::new();
    if let Some(o) = p.outcome {
        m.insert("outcome".into(), o.as_str().into());
    }
    if let Some(c) = &p.channel {
        m.insert("channel".into(), c.clone().into());
    }
    if let Some(t) = p.turns {
        m.insert("turns".into(), t.into());
    }
    Some(Value::Object(m))
}

pub fn state_changes(page: &ChangesPage) -> Value {
    json!({
        "events": page.events.iter().map(event).collect::<Vec<_>>(),
        "truncated": page.truncated,
        "earliestAvailableSequence": page.earliest_available_sequence,
        "historyGap": page.history_gap,
    })
}

pub fn session_list_row(s: &SessionRow, state_version: u64) -> Value {
    let mut m = Map::new();
    m.insert("key".into(), s.session_key.clone().into());
    m.insert("kind".into(), s.kind.clone().into());
    m.insert("channel".into(), s.channel.clone().map_or(Value::Null, Value::from));
    if let Some(label) = &s.label {
        m.insert("displayName".into(), label.clone().into());
    }
    m.insert("updatedAt".into(), s.updated_at.into());
    m.insert("sessionId".into(), s.session_id.clone().into());
    if state_version > 0 {
        m.insert("stateVersion".into(), state_version.into());
    }
    // OpenClaw's row fields: sessions here are never archived or pinned.
    m.insert("agentId".into(), s.agent_id.clone().into());
    m.insert("archived".into(), false.into());
    m.insert("pinned".into(), false.into());
    if let Some(parent) = &s.spawned_by {
        m.insert("parentSessionKey".into(), parent.clone().into());
    }
    Value::Object(m)
}

pub fn message(m: &TranscriptMessage) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), m.role.clone().into());
    o.insert("text".into(), m.text.clone().into());
    o.insert("createdAt".into(), m.created_at.into());
    if let Some(r) = &m.run_id {
        o.insert("runId".into(), r.clone().into());
    }
    if let Some(f) = &m.from_session {
        o.insert("fromSessionKey".into(), f.clone().into());
    }
    Value::Object(o)
}

pub fn system_event(e: &QueuedEvent) -> Value {
    json!({ "text": e.text, "contextKey": e.context_key })
}

pub fn inbox_item(i: &InboxItem) -> Value {
    let mut o = Map::new();
    o.insert("text".into(), i.text.clone().into());
    o.insert("createdAt".into(), i.created_at.into());
    if let Some(r) = &i.run_id {
        o.insert("runId".into(), r.clone().into());
    }
    if let Some(f) = &i.from_session {
        o.insert("fromSessionKey".into(), f.clone().into());
    }
    Value::Object(o)
}

/// `POST /v1/hooks`: what the hook command prints is rendered from this by the CLI.
pub fn hook_outcome(o: &crate::gateway::HookOutcome) -> Value {
    json!({
        "sessionKey": o.session_key,
        "additionalContext": o.reply.context,
        "block": o.reply.block,
        "recorded": o.recorded,
    })
}

/// `/tools/invoke` success, as OpenClaw answers it: the readable text (`statusText` when the tool has one,
/// else the details as indented JSON) and the details.
pub fn tool_result(details: &Value) -> Value {
    let text = match details.get("statusText").and_then(Value::as_str) {
        Some(t) => t.to_string(),
        None => serde_json::to_string_pretty(details).unwrap_or_default(),
    };
    json!({ "ok": true, "result": { "content": [{ "type": "text", "text": text }], "details": details } })
}

/// `POST /v1/ui/login-links`: a one-time login path (relative to the gateway's URL).
pub fn login_link(path: &str, expires_in_seconds: u64) -> Value {
    json!({ "path": path, "expiresInSeconds": expires_in_seconds })
}

/// `POST /v1/catalog/continue` with a `node`: the adopted remote session.
#[allow(clippy::too_many_arguments)]
pub fn remote_adoption(
    key: &str,
    session_id: &str,
    agent_id: &str,
    catalog: &str,
    thread: &str,
    node: &str,
    created: bool,
    adopted: bool,
    link: &str,
    baseline: &str,
) -> Value {
    json!({
        "sessionKey": key,
        "sessionId": session_id,
        "agentId": agent_id,
        "catalogId": catalog,
        "threadId": thread,
        "node": node,
        "created": created,
        "adopted": adopted,
        "linked": true,
        "link": link,
        "baseline": baseline,
    })
}

/// `GET /v1/nodes`.
pub fn nodes(nodes: &[crate::gateway::nodes::NodeStatus]) -> Value {
    let rows: Vec<Value> = nodes
        .iter()
        .map(|n| {
            json!({
                "name": n.name,
                "createdAt": n.created_at,
                "lastSeenAt": n.last_seen_at,
                "sessions": n.sessions,
                "watchedSessions": n.watched,
                "monitorLagMs": n.monitor_lag_ms,
                "catalogSize": n.catalog_size,
            })
        })
        .collect();
    json!({ "nodes": rows })
}

/// `POST /v1/nodes`: the new node's token, shown once.
pub fn node_token(name: &str, token: &str) -> Value {
    json!({ "name": name, "token": token })
}

/// `GET /v1/catalog?all=true`: the nodes' sessions, beside the local ones.
pub fn remote_catalog_entry(
    node: &str,
    e: &crate::node_protocol::RemoteEntry,
    adopted: Option<String>,
) -> Value {
    let mut v = json!({
        "catalogId": e.catalog_id,
        "threadId": e.thread_id,
        "updatedAt": e.updated_at,
        "node": node,
    });
    if let Some(k) = adopted {
        v["adopted"] = k.into();
    }
    v
}
