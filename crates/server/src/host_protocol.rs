//! The host API (`/v1/sessions…`, `/v1/runs…`, `/v1/catalog/continue`, `/v1/nodes`, `/v1/ui/login-links`)
//! as types, defined once for both ends: the handlers (`host_api.rs`, `http_nodes.rs`) decode each request
//! body into its type ([`crate::request_body::Body`]) and `wire/host.rs` answers with the response
//! types; the CLI (`src/cli/client.rs`, `demo.rs`, `upstream.rs`) sends the same request types and reads
//! the answers it acts on with them.
//!
//! A request field the handler requires is a plain `String`: absent or `null` is refused as `is
//! required`, as before. Answers list their fields in alphabetical order, the order their JSON objects
//! always had, so the bytes on the wire are those of before. An `Option` field is left out of the JSON when
//! it is `None` (`#[skip_serializing_none]` on each type that has one), as in `wire/tools.rs` and
//! `hook_protocol.rs`; a field that must read `null` instead says `#[serialize_always]`.

use crate::request_body::optional_object;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;
use sessionwatch_store::PayloadJson;

/// `POST /tools/invoke` as our own clients send it (the CLI, `demo`, `doctor`, the MCP server in front of
/// a gateway). The handler reads OpenClaw's envelope, which is more lenient (`tool` or `name`, `args`
/// absent or `[]`, `agentId`, …): `tool_invoke::tool_envelope`.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall<A> {
    pub tool: String,
    pub args: A,
    /// The calling session (default: the main session).
    pub session_key: Option<String>,
}

/// Any refused call: `{"ok": false, "error": {"type", "message"}}` (`wire::error_body`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBodyJson {
    pub error: ErrorJson,
    pub ok: bool,
}

/// What went wrong: `type` is `invalid_argument`, `not_found`, `unauthorized`, … (`ApiError::kind`), or
/// OpenClaw's error types on `/tools/invoke`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorJson {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
}

/// Who acts (`actor` of an inbound turn or a goal, `creator` of a session): `type` is `human`, `agent`
/// (with `id`, the acting session key) or `system`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActorJson {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: Option<String>,
    pub label: Option<String>,
}

/// `POST /v1/sessions`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateSessionRequest {
    pub session_key: String,
    pub agent_id: Option<String>,
    pub chat_type: Option<String>,
    pub channel: Option<String>,
    pub label: Option<String>,
    pub created_via: Option<String>,
    #[serde(default, deserialize_with = "optional_object")]
    pub creator: Option<ActorJson>,
    /// `draft`: created quietly (no creation notice), as `incognito: true`.
    pub visibility: Option<String>,
    pub incognito: Option<bool>,
}

/// `POST /v1/sessions/{key}/inbound`: a turn that arrived on a channel (a human's unless `actor` says).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InboundRequest {
    pub text: String,
    pub channel: Option<String>,
    #[serde(default, deserialize_with = "optional_object")]
    pub actor: Option<ActorJson>,
    pub chat_type: Option<String>,
    pub run_id: Option<String>,
}

/// A body that must hold no field (`POST /v1/sessions/{key}/turns`, `/v1/monitor/tick`); an empty body
/// reads as this.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoFields {}

/// `POST /v1/sessions/{key}/messages`: `role` is `assistant`, `user`, `tool` or `system`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddMessageRequest {
    pub role: String,
    pub text: String,
    pub run_id: Option<String>,
}

/// `PUT /v1/sessions/{key}/goal` (objective and/or status), and `DELETE` (only `actor`).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetGoalRequest {
    pub objective: Option<String>,
    pub status: Option<String>,
    #[serde(default, deserialize_with = "optional_object")]
    pub actor: Option<ActorJson>,
}

/// `DELETE /v1/sessions/{key}/goal`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ClearGoalRequest {
    #[serde(default, deserialize_with = "optional_object")]
    pub actor: Option<ActorJson>,
}

/// `POST /v1/sessions/{key}/compactions`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactionRequest {
    pub operation_id: String,
    pub run_id: Option<String>,
}

/// `POST /v1/runs/{runId}/result`: `status` is `ok`, `error`, `timeout` or `cancelled`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunResultRequest {
    pub status: String,
    pub reply: Option<String>,
    pub session_id: Option<String>,
}

/// `POST /v1/catalog/continue`: adopt one native session (on `node`, if given).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CatalogContinueRequest {
    pub catalog_id: String,
    pub thread_id: String,
    pub agent_id: Option<String>,
    pub node: Option<String>,
}

/// `GET /v1/catalog` (and `sessionwatch catalog --json`): adoptable native sessions, each as
/// `wire::catalog_entry` projects it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatalogJson {
    pub sessions: Vec<serde_json::Value>,
}

/// `POST /v1/nodes`: issue a token for a new remote node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssueNodeRequest {
    pub name: String,
}

/// The answer to [`IssueNodeRequest`]: the token, shown once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeTokenJson {
    pub name: String,
    pub token: String,
}

/// `POST /v1/sessions`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionCreatedJson {
    pub created: bool,
    pub kind: String,
    pub session_id: String,
    pub session_key: String,
}

/// `POST /v1/sessions/{key}/inbound`: `event` when a human turn was recorded.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InboundJson {
    pub event: Option<EventJson>,
    pub session_id: String,
    pub session_key: String,
    pub state_version: u64,
}

/// A turn's drained notices (`POST …/turns`, `…/notices`); a turn also takes the inbox.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainedJson {
    pub inbox: Option<Vec<InboxItemJson>>,
    pub session_key: String,
    pub system_events: Vec<SystemEventJson>,
}

/// One message of a session's inbox.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxItemJson {
    pub created_at: i64,
    pub from_session_key: Option<String>,
    pub run_id: Option<String>,
    pub text: String,
}

/// `POST /v1/sessions/{key}/messages`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MessageAddedJson {
    pub id: i64,
    pub session_key: String,
}

/// `PUT` / `DELETE /v1/sessions/{key}/goal`: `event` when `changed`.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GoalJson {
    pub changed: bool,
    pub event: Option<EventJson>,
    pub session_key: String,
    pub state_version: u64,
}

/// `POST /v1/sessions/{key}/compactions`.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CompactedJson {
    pub event: Option<EventJson>,
    pub recorded: bool,
    pub session_key: String,
}

/// `POST /v1/sessions/{key}/reset`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResetJson {
    pub session_id: String,
    pub session_key: String,
    pub watches_cleared: u64,
}

/// `DELETE /v1/sessions/{key}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeletedJson {
    pub deleted: bool,
    pub session_key: String,
}

/// `POST /v1/runs/{runId}/result`: `accepted` is false when the run had finished already.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunResultJson {
    pub accepted: bool,
    pub run_id: String,
    pub status: String,
}

/// `POST /v1/ui/login-links`: a one-time login path, relative to the gateway's URL.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginLinkJson {
    pub expires_in_seconds: u64,
    pub path: String,
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
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedSessionJson {
    pub session_key: String,
    pub agent_id: String,
    /// `claude`, `codex`, `opencode`, `pi`, or `gateway` for a session of the host API.
    pub source: String,
    /// The native session id (an adopted session's last key segment), else the gateway's session id.
    pub native_id: String,
    pub node: Option<String>,
    pub kind: String,
    pub label: Option<String>,
    pub cwd: Option<String>,
    /// `running`, `waiting` (for its user), `idle`; a gateway session's latest run may also say
    /// `done`, `failed`, `timeout` or `cancelled`.
    pub state: String,
    pub state_version: u64,
    pub parent_session_key: Option<String>,
    pub updated_at: i64,
}

/// `PUT /v1/sessions/{target}/watchers/{watcher}`: `outcome` is `watching` (a new watch, from
/// `fromStateVersion`), `already-watching`, `upgraded` (an ambient watch became explicit) or `refused`
/// (with `reason`).
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchJson {
    pub watcher: String,
    pub target: String,
    pub outcome: String,
    pub from_state_version: Option<u64>,
    pub reason: Option<String>,
}

/// One event of `stateChanges.events`: only the documented fields.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventJson {
    pub sequence: u64,
    pub kind: String,
    pub actor_type: String,
    pub occurred_at: i64,
    pub summary: String,
    pub actor_id: Option<String>,
    pub run_id: Option<String>,
    pub payload: Option<PayloadJson>,
}

/// A drained system event: `{text, contextKey}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemEventJson {
    pub text: String,
    pub context_key: String,
}

#[cfg(test)]
mod tests {
    //! The body refusals' words, read through the host API's request types.

    use super::{CreateSessionRequest, InboundRequest, NoFields};
    use crate::request_body::decode;

    fn refusal<T: serde::de::DeserializeOwned + std::fmt::Debug>(body: &str) -> String {
        decode::<T>(body.as_bytes()).unwrap_err().to_string()
    }

    /// The words of `args::Args`, which read these bodies before they had types.
    #[test]
    fn refusals_name_the_field_as_before() {
        let cases = [
            ("{\"channel\":\"x\"}", "body.text is required"),
            ("{\"text\":null}", "body.text is required"),
            ("{\"text\":7}", "body.text must be a string"),
            ("{\"text\":\"x\",\"actor\":5}", "body.actor must be an object"),
            ("{\"text\":\"x\",\"actor\":{}}", "actor.type is required"),
            ("{\"text\":\"x\",\"actor\":{\"type\":true}}", "actor.type must be a string"),
            (
                "{\"text\":\"x\",\"actor\":{\"type\":\"human\",\"x\":1}}",
                "actor: unknown field \"x\" (allowed: type, id, label)",
            ),
            (
                "{\"text\":\"x\",\"drain\":false}",
                "body: unknown field \"drain\" (allowed: text, channel, actor, chatType, runId)",
            ),
            ("[1]", "the body must be a JSON object"),
            ("{\"text\":\"x\",\"actor\":[\"human\"]}", "body.actor must be an object"),
            ("null", "the body must be a JSON object"),
        ];
        for (body, words) in cases {
            assert_eq!(refusal::<InboundRequest>(body), words, "{body}");
        }
        assert_eq!(refusal::<NoFields>("{\"drain\":false}"), "body: unknown field \"drain\" (allowed: )");
        assert_eq!(
            refusal::<CreateSessionRequest>("{\"sessionKey\":\"x\",\"incognito\":\"yes\"}"),
            "body.incognito must be a boolean"
        );
        assert!(refusal::<InboundRequest>("{\"text\":").starts_with("malformed JSON body: "));
        assert!(refusal::<NoFields>("{} x").starts_with("malformed JSON body: "));
    }

    #[test]
    fn an_empty_body_is_an_empty_object() {
        assert_eq!(decode::<NoFields>(b" \n").unwrap(), NoFields {});
        assert!(decode::<InboundRequest>(b"").is_err());
    }
}
