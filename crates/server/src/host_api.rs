//! The host API's handlers (`/v1/sessions…`, `/v1/runs…`, `/v1/catalog…`, `/v1/monitor/tick`, `/v1/hooks…`)
//! and `GET /metrics`: each decodes its typed request (`host_protocol`, `hook_protocol`), calls one gateway
//! operation and answers through `wire`.

use crate::error::{ApiError, ApiResult};
use crate::gateway::{InboundTurn, SessionSpec};
use crate::hook_protocol::{HookAnswer, HookRequest, ToolUseJson};
use crate::host_protocol::{
    ActorJson, AddMessageRequest, CatalogContinueRequest, CatalogJson, ClearGoalRequest, CompactedJson,
    CompactionRequest, CreateSessionRequest, DeletedJson, DrainedJson, GoalJson, InboundJson, InboundRequest,
    MessageAddedJson, NoFields, ResetJson, RunResultJson, RunResultRequest, SessionCreatedJson,
    SessionListingJson, SetGoalRequest, WatchJson,
};
use crate::request_body::{Body, non_empty};
use crate::state::{Shared, query_param};
use crate::wire::{self, HostAnswer, host_json};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sessionwatch_core::{Actor, ActorType, RunStatus};
use sessionwatch_store::Store;
use std::sync::Arc;

fn actor(a: Option<&ActorJson>, default: Actor) -> ApiResult<Actor> {
    let Some(a) = a else { return Ok(default) };
    let kind = ActorType::parse(non_empty("actor.type", &a.kind)?)
        .ok_or_else(|| ApiError::invalid("actor.type must be \"human\", \"agent\" or \"system\""))?;
    let id = a.id.as_deref().map(str::trim).filter(|s| !s.is_empty());
    let id = match (kind, id) {
        (ActorType::Agent, None) => {
            return Err(ApiError::invalid("actor.id (the acting session key) is required for an agent"));
        }
        (ActorType::Agent, Some(id)) => Some(id.to_ascii_lowercase()),
        (_, id) => id.map(str::to_string),
    };
    Ok(Actor { kind, id })
}

pub(crate) async fn create_session<S: Store>(
    State(state): State<Shared<S>>,
    Body(body): Body<CreateSessionRequest>,
) -> HostAnswer<SessionCreatedJson> {
    let session_key = non_empty("body.sessionKey", &body.session_key)?;
    let agent_id = body.agent_id.map(|s| s.trim().to_ascii_lowercase());
    let spec = SessionSpec {
        chat_type: body.chat_type.as_deref(),
        channel: body.channel.as_deref(),
        label: body.label.as_deref(),
        spawned_by: None,
        created_via: body.created_via.as_deref(),
        creator: body.creator.as_ref().map(|c| actor(Some(c), Actor::system())).transpose()?,
        creator_label: body.creator.as_ref().and_then(|c| c.label.as_deref()),
        quiet: body.visibility.as_deref() == Some("draft") || body.incognito.unwrap_or(false),
    };
    if let Some(agent) = &agent_id
        && !sessionwatch_core::is_valid_agent_id(agent)
    {
        return Err(ApiError::invalid(format!("agentId \"{agent}\" is not a valid agent id")).into());
    }
    let created = state.gateway.create_session(session_key, agent_id.as_deref(), spec).await?;
    Ok(Json(wire::session_created(&created)))
}

pub(crate) async fn inbound<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
    Body(body): Body<InboundRequest>,
) -> HostAnswer<InboundJson> {
    let turn = InboundTurn {
        text: non_empty("body.text", &body.text)?.to_string(),
        channel: body.channel.unwrap_or_else(|| "unknown".into()),
        actor: actor(body.actor.as_ref(), Actor::human(None))?,
        chat_type: body.chat_type,
        run_id: body.run_id,
    };
    Ok(Json(wire::inbound(&state.gateway.inbound(&key, turn).await?)))
}

pub(crate) async fn begin_turn<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
    Body(NoFields {}): Body<NoFields>,
) -> HostAnswer<DrainedJson> {
    Ok(Json(wire::drained(&state.gateway.begin_turn(&key).await?)))
}

pub(crate) async fn add_message<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
    Body(body): Body<AddMessageRequest>,
) -> HostAnswer<MessageAddedJson> {
    let role = non_empty("body.role", &body.role)?;
    if !["assistant", "user", "tool", "system"].contains(&role) {
        return Err(ApiError::invalid("role must be assistant, user, tool or system").into());
    }
    let added = state.gateway.add_message(&key, role, &body.text, body.run_id.as_deref()).await?;
    Ok(Json(wire::message_added(&added)))
}

pub(crate) async fn set_goal<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
    Body(body): Body<SetGoalRequest>,
) -> HostAnswer<GoalJson> {
    if body.objective.is_none() && body.status.is_none() {
        return Err(ApiError::invalid("give objective and/or status (DELETE clears the goal)").into());
    }
    let actor = actor(body.actor.as_ref(), Actor::system())?;
    Ok(Json(wire::goal(&state.gateway.set_goal(&key, body.objective, body.status, actor).await?)))
}

pub(crate) async fn clear_goal<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
    Body(body): Body<ClearGoalRequest>,
) -> HostAnswer<GoalJson> {
    let actor = actor(body.actor.as_ref(), Actor::system())?;
    Ok(Json(wire::goal(&state.gateway.set_goal(&key, None, None, actor).await?)))
}

pub(crate) async fn compaction<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
    Body(body): Body<CompactionRequest>,
) -> HostAnswer<CompactedJson> {
    let operation = non_empty("body.operationId", &body.operation_id)?;
    Ok(Json(wire::compacted(&state.gateway.compacted(&key, operation, body.run_id).await?)))
}

/// Drains the session's system-event queue (acknowledging notices as a turn does), not its inbox.
pub(crate) async fn drain_notices<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
) -> HostAnswer<DrainedJson> {
    Ok(Json(wire::drained(&state.gateway.drain_notices(&key).await?)))
}

pub(crate) async fn reset<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
) -> HostAnswer<ResetJson> {
    Ok(Json(wire::reset(&state.gateway.reset(&key).await?)))
}

pub(crate) async fn delete_session<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
) -> HostAnswer<DeletedJson> {
    Ok(Json(wire::deleted(&state.gateway.delete(&key).await?)))
}

pub(crate) async fn list_sessions<S: Store>(
    State(state): State<Shared<S>>,
) -> HostAnswer<SessionListingJson> {
    Ok(Json(wire::session_listing(&state.gateway.session_listing().await?)))
}

pub(crate) async fn watch_session<S: Store>(
    State(state): State<Shared<S>>,
    Path((target, watcher)): Path<(String, String)>,
) -> HostAnswer<WatchJson> {
    Ok(Json(wire::watch(&state.gateway.host_watch(&watcher, &target).await?)))
}

pub(crate) async fn run_result<S: Store>(
    State(state): State<Shared<S>>,
    Path(run_id): Path<String>,
    Body(body): Body<RunResultRequest>,
) -> HostAnswer<RunResultJson> {
    let status = RunStatus::parse(non_empty("body.status", &body.status)?)
        .ok_or_else(|| ApiError::invalid("status must be ok, error, timeout or cancelled"))?;
    let result = state.gateway.run_result(&run_id, status, body.reply, body.session_id).await?;
    Ok(Json(wire::run_result(&result)))
}

/// `GET /v1/catalog`: adoptable native sessions (Claude Code, Codex, OpenCode, Pi, Gemini CLI).
pub(crate) async fn catalog<S: Store>(
    State(state): State<Shared<S>>,
    uri: axum::http::Uri,
) -> HostAnswer<CatalogJson> {
    let all = query_param(&uri, "all").is_some_and(|v| v == "true" || v == "1");
    Ok(Json(wire::catalog(&state.gateway.catalog(all).await?)))
}

/// `POST /v1/catalog/continue {catalogId, threadId, agentId?}`: adopt one.
pub(crate) async fn catalog_continue<S: Store>(
    State(state): State<Shared<S>>,
    Body(body): Body<CatalogContinueRequest>,
) -> HostAnswer<Value> {
    let catalog = non_empty("body.catalogId", &body.catalog_id)?;
    let thread = non_empty("body.threadId", &body.thread_id)?;
    let adopted = state
        .gateway
        .continue_catalog(catalog, thread, body.agent_id.as_deref(), body.node.as_deref())
        .await?;
    Ok(Json(wire::adoption(&adopted)))
}

/// `POST /v1/monitor/tick`: run one upstream monitor tick now; answers its report.
pub(crate) async fn monitor_tick<S: Store>(
    State(state): State<Shared<S>>,
    Body(NoFields {}): Body<NoFields>,
) -> HostAnswer<Value> {
    host_json(state.gateway.monitor_tick().await)
}

/// `POST /v1/hooks`: one Claude Code / Codex / Gemini CLI hook (`sessionwatch hook <event>` forwards its
/// stdin; the Pi extension posts the same body itself), or one handler of OpenCode's sessionwatch plugin
/// (`"cli": "opencode"`, `"event": "chat.message"|"tool.execute.after"`, `"input"`: what the plugin
/// forwards, `hook::opencode::parse_plugin_call`). The body is a [`HookRequest`], decoded once: `input`
/// is mapped from the decoded value, not parsed again; `workspace` (with `node` only) is the worktree the
/// node resolved.
pub(crate) async fn hook<S: Store>(
    State(state): State<Shared<S>>,
    Body(body): Body<HookRequest<Value>>,
) -> HostAnswer<HookAnswer> {
    use sessionwatch_upstream::hook::{HookCli, parse_value};
    use sessionwatch_upstream::source::Installer;
    let cli = non_empty("body.cli", &body.cli)?;
    let cli = HookCli::parse(cli).ok_or_else(|| {
        ApiError::invalid(format!("unknown cli {cli:?}: expected claude, codex, gemini, opencode or pi"))
    })?;
    let event = non_empty("body.event", &body.event)?;
    if !body.input.is_object() {
        return Err(ApiError::invalid("body.input must be the hook's JSON object").into());
    }
    let input = match cli.source().installer {
        // The plugin forwards OpenCode's own hook arguments, under OpenCode's hook name.
        Installer::OpenCodePlugin => {
            sessionwatch_upstream::hook::opencode::parse_plugin_call(event, &body.input)
        }
        Installer::Settings(_) | Installer::PiExtension => {
            parse_value(&body.input, Some(event), Some(cli), None)
        }
    }
    .map_err(|e| ApiError::invalid(e.to_string()))?;
    let outcome = state
        .gateway
        .hook(&input, body.agent_id.as_deref(), body.node.as_deref(), body.workspace.as_ref())
        .await?;
    Ok(Json(wire::hook_answer(&outcome)))
}

/// `GET /v1/hooks/tool-uses/{id}`: the session whose `PreToolUse` hook announced this MCP tool call.
pub(crate) async fn tool_use<S: Store>(
    State(state): State<Shared<S>>,
    Path(id): Path<String>,
) -> HostAnswer<ToolUseJson> {
    match state.gateway.session_of_tool_use(&id) {
        Some(session_key) => Ok(Json(ToolUseJson { session_key })),
        None => Err(ApiError::NotFound(format!("no hook announced tool use {id:?}")).into()),
    }
}

pub(crate) async fn metrics<S: Store>(
    State(state): State<Shared<S>>,
    axum::Extension(mcp): axum::Extension<Arc<crate::mcp::BoundedSessions>>,
) -> Response {
    let mut body = state.metrics.render(state.gateway.kernel());
    body.push_str(&format!(
        "# HELP sessionwatch_mcp_sessions Live MCP sessions on /mcp.\n# TYPE sessionwatch_mcp_sessions gauge\nsessionwatch_mcp_sessions {}\n",
        mcp.len()
    ));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}
