//! JSON wire shapes. Domain types are not `Serialize`; this module projects them.

use crate::gateway::upstream::{Adopted, CatalogListing};
pub use crate::host_protocol::{EventJson, SystemEventJson};
use serde_json::{Value, json};

mod error;
mod host;
mod literal;
mod rendered;
mod tools;

pub(crate) use error::{
    HostAnswer, error_body, error_detail, error_kind, error_response, host_error, host_json,
};

pub(crate) use host::*;

pub use rendered::RenderedEvent;
pub(crate) use tools::ToolJson;
pub use tools::{SpawnJson, StateChangesJson};

fn to_value(v: impl serde::Serialize) -> Value {
    serde_json::to_value(v).expect("wire types always serialize")
}

/// What registering a watch did (`sessionwatch db watch`).
pub fn watch_outcome(o: &sessionwatch_kernel::WatchOutcome) -> Value {
    use sessionwatch_kernel::WatchOutcome::*;
    let (outcome, detail) = match o {
        Seeded { at } => ("seeded", json!(at)),
        Kept => ("kept", Value::Null),
        Upgraded => ("upgraded", Value::Null),
        Refused(reason) => ("refused", reason.as_str().into()),
        Failed(why) => ("failed", why.clone().into()),
    };
    let mut v = json!({ "watched": o.is_watching(), "outcome": outcome });
    match o {
        Seeded { .. } => v["at"] = detail,
        Refused(_) | Failed(_) => v["reason"] = detail,
        Kept | Upgraded => {}
    }
    v
}

/// `POST /v1/hooks`: what the hook command prints is rendered from this by the CLI.
pub(crate) fn hook_answer(o: &crate::gateway::HookOutcome) -> crate::hook_protocol::HookAnswer {
    crate::hook_protocol::HookAnswer {
        additional_context: o.reply.context.clone(),
        block: o.reply.block.clone(),
        recorded: o.recorded,
        session_key: o.session_key.clone(),
    }
}

/// A tool's success answer as `/tools/invoke` sends it ([`tool_result`]), written once into a buffer
/// sized for it. axum's `Json` starts a `BytesMut` at 128 bytes and grows it through every one of the
/// serializer's small writes; a `session_status` page of changes is several kilobytes, written twice
/// (the text and the details).
pub(crate) fn tool_result_response(result: &ToolJson) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut body = Vec::with_capacity(result.answer_size_hint());
    serde_json::to_writer(&mut body, &tool_result(result)).expect("tool results always serialize");
    ([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `/tools/invoke` success, as OpenClaw answers it: the readable text ([`ToolJson::text_json`]) and the
/// details. Serialized straight from the typed result (no intermediate `Value` tree: building one cost
/// more than the rest of a `session_status` answer); a status text, which the answer carries twice, is
/// escaped once ([`StatusText`]).
fn tool_result(result: &ToolJson) -> impl serde::Serialize + '_ {
    #[derive(serde::Serialize)]
    struct Envelope<'a> {
        ok: bool,
        result: ToolResult<'a>,
    }
    #[derive(serde::Serialize)]
    struct ToolResult<'a> {
        content: [TextContent<'a>; 1],
        details: &'a ToolJson,
    }
    #[derive(serde::Serialize)]
    struct TextContent<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        text: std::borrow::Cow<'a, serde_json::value::RawValue>,
    }
    Envelope {
        ok: true,
        result: ToolResult {
            content: [TextContent { kind: "text", text: result.text_json() }],
            details: result,
        },
    }
}

/// `POST /v1/ui/login-links`: a one-time login path (relative to the gateway's URL).
pub(crate) fn login_link(path: &str, expires_in_seconds: u64) -> crate::host_protocol::LoginLinkJson {
    crate::host_protocol::LoginLinkJson { expires_in_seconds, path: path.to_string() }
}

/// `POST /v1/catalog/continue`: the adopted session (with `node` and `baseline` for a remote one).
pub(crate) fn adoption(a: &Adopted) -> Value {
    let mut v = json!({
        "sessionKey": a.session_key,
        "sessionId": a.session_id,
        "agentId": a.agent_id,
        "catalogId": a.catalog.as_str(),
        "threadId": a.thread_id,
        "created": a.created,
        "adopted": a.adopted,
        "linked": true,
        "link": a.link,
    });
    if let Some(r) = &a.remote {
        v["node"] = r.node.clone().into();
        v["baseline"] = r.baseline.into();
    }
    v
}

/// A native session of this machine (`GET /v1/catalog`, `sessionwatch catalog --json`), with the key of
/// its adopted session when linked.
pub fn catalog_entry(e: &sessionwatch_upstream::CatalogEntry, adopted: Option<&str>) -> Value {
    let mut v = json!({
        "catalogId": e.catalog_id.as_str(),
        "threadId": e.thread_id,
        "title": e.title,
        "cwd": e.cwd,
        "updatedAt": e.updated_at_ms,
        "location": e.location,
    });
    if let Some(k) = adopted {
        v["adopted"] = k.into();
    }
    v
}

/// `GET /v1/catalog`: the local sessions, then (with `all=true`) the nodes'.
pub(crate) fn catalog(c: &CatalogListing) -> crate::host_protocol::CatalogJson {
    let mut sessions: Vec<Value> =
        c.local.iter().map(|(e, adopted)| catalog_entry(e, adopted.as_deref())).collect();
    sessions
        .extend(c.remote.iter().map(|(node, e, adopted)| remote_catalog_entry(node, e, adopted.as_deref())));
    crate::host_protocol::CatalogJson { sessions }
}

/// `GET /v1/nodes`.
pub(crate) fn nodes(nodes: &[crate::gateway::nodes::NodeStatus]) -> Value {
    let rows: Vec<Value> = nodes
        .iter()
        .map(|n| {
            json!({
                "name": n.node.name,
                "createdAt": n.node.created_at,
                "lastSeenAt": n.node.last_seen_at,
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
pub(crate) fn node_token(name: &str, token: &str) -> crate::host_protocol::NodeTokenJson {
    crate::host_protocol::NodeTokenJson { name: name.to_string(), token: token.to_string() }
}

/// `GET /v1/catalog?all=true`: the nodes' sessions, beside the local ones.
fn remote_catalog_entry(node: &str, e: &crate::node_protocol::RemoteEntry, adopted: Option<&str>) -> Value {
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
