//! HTTP: `POST /tools/invoke`, the host API, the live stream, health and metrics.

use crate::error::{ApiError, ApiResult};
use crate::gateway::{Gateway, InboundTurn, NewSessionRequest};
use crate::hook_protocol::{HookRequest, ToolUseJson};
use crate::host_protocol::{
    ActorJson, AddMessageRequest, CatalogContinueRequest, ClearGoalRequest, CompactionRequest,
    CreateSessionRequest, InboundRequest, NoFields, RunResultRequest, SetGoalRequest,
};
use crate::metrics::HttpMetrics;
use crate::request_body::{Body, non_empty};
use crate::sse;
use crate::wire;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::{Value, json};
use sessionwatch_core::{Actor, ActorType, RunStatus};
use sessionwatch_store::Store;
use std::sync::Arc;
use std::time::Instant;

pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// What every handler shares.
pub struct AppState<S: Store> {
    pub gateway: Arc<Gateway<S>>,
    /// `None`: no auth (loopback only).
    pub token: Option<String>,
    pub metrics: HttpMetrics,
    /// Browser logins of the dashboard.
    pub logins: crate::dashboard::login::Logins,
}

impl<S: Store> AppState<S> {
    pub fn new(gateway: Arc<Gateway<S>>, token: Option<String>) -> AppState<S> {
        AppState { gateway, token, metrics: HttpMetrics::default(), logins: Default::default() }
    }
}

type Shared<S> = Arc<AppState<S>>;

/// The whole HTTP surface (tests call it with `oneshot`).
pub fn app<S: Store>(state: Arc<AppState<S>>) -> Router {
    app_with_shutdown(state, tokio_util::sync::CancellationToken::new())
}

/// [`app`], with the MCP endpoint's streams ended when `mcp_shutdown` is cancelled.
pub fn app_with_shutdown<S: Store>(
    state: Arc<AppState<S>>,
    mcp_shutdown: tokio_util::sync::CancellationToken,
) -> Router {
    let limits = state.gateway.config().limits;
    let mcp_sessions = crate::mcp::BoundedSessions::new(limits.mcp_max_sessions, limits.mcp_idle);
    mcp_sessions.spawn_sweeper(mcp_shutdown.clone());
    let mcp = crate::mcp::http_service(
        state.gateway.clone(),
        &state.gateway.config().mcp_allowed_hosts,
        mcp_sessions.clone(),
        mcp_shutdown,
    );
    let config = state.gateway.config();
    let allowed = crate::guard::AllowedHosts::new(Some(config.listen), &config.mcp_allowed_hosts);
    let api = Router::new()
        .route(
            "/tools/invoke",
            post(invoke_tool::<S>)
                .fallback(|| async { (StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed") }),
        )
        .route("/v1/sessions", post(create_session::<S>).get(list_sessions::<S>))
        .route("/v1/sessions/{key}/watchers/{watcher}", put(watch_session::<S>))
        .route("/v1/sessions/{key}", axum::routing::delete(delete_session::<S>))
        .route("/v1/sessions/{key}/inbound", post(inbound::<S>))
        .route("/v1/sessions/{key}/turns", post(begin_turn::<S>))
        .route("/v1/sessions/{key}/messages", post(add_message::<S>))
        .route("/v1/sessions/{key}/goal", put(set_goal::<S>).delete(clear_goal::<S>))
        .route("/v1/sessions/{key}/compactions", post(compaction::<S>))
        .route("/v1/sessions/{key}/reset", post(reset::<S>))
        .route("/v1/sessions/{key}/notices", post(drain_notices::<S>))
        .route("/v1/runs/{run_id}/result", post(run_result::<S>))
        .route("/v1/stream", get(sse::stream::<S>))
        .route("/v1/catalog", get(catalog::<S>))
        .route("/v1/catalog/continue", post(catalog_continue::<S>))
        .route("/v1/monitor/tick", post(monitor_tick::<S>))
        .route("/v1/hooks", post(hook::<S>))
        .route("/v1/hooks/tool-uses/{id}", get(tool_use::<S>))
        .route("/metrics", get(metrics::<S>))
        .route("/v1/ui/login-links", post(crate::dashboard::issue_login_link::<S>))
        .route("/v1/nodes", get(crate::http_nodes::list::<S>).post(crate::http_nodes::issue::<S>))
        .route("/v1/nodes/{name}", axum::routing::delete(crate::http_nodes::revoke::<S>))
        .nest_service("/mcp", mcp)
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token::<S>))
        .layer(axum::Extension(mcp_sessions));
    let node_api = Router::new()
        .route("/v1/node/sync", post(crate::http_nodes::sync::<S>))
        .route("/v1/node/baselines", post(crate::http_nodes::baselines::<S>))
        .route("/v1/node/outcomes", post(crate::http_nodes::outcomes::<S>))
        .route("/v1/node/heads", post(crate::http_nodes::heads::<S>))
        .route_layer(middleware::from_fn_with_state(state.clone(), crate::http_nodes::require_node::<S>));
    Router::new()
        .route("/healthz", get(|| async { Json(json!({ "ok": true })) }))
        .merge(crate::dashboard::routes::<S>())
        .merge(node_api)
        .merge(api)
        .fallback(|| async {
            error_response(StatusCode::NOT_FOUND, &ApiError::NotFound("no such route".into()))
        })
        .layer(middleware::from_fn_with_state(state.clone(), measure::<S>))
        .layer(middleware::from_fn(reject_undecodable_path))
        .layer(middleware::from_fn(limit_body_size))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(config.limits.body_timeout))
        .layer(middleware::from_fn_with_state(allowed, crate::guard::cross_site_guard))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn require_token<S: Store>(State(state): State<Shared<S>>, req: Request, next: Next) -> Response {
    if let Some(token) = &state.token {
        // A dashboard login opens the live stream it reads, and nothing else of the API.
        let browser_stream = req.method() == axum::http::Method::GET
            && req.uri().path() == "/v1/stream"
            && crate::dashboard::has_login_cookie(&state, req.headers());
        if !browser_stream && !carries_token(req.headers(), token) {
            return error_response(
                StatusCode::UNAUTHORIZED,
                &ApiError::Unauthorized("missing or wrong bearer token".into()),
            );
        }
    }
    next.run(req).await
}

/// The credentials of the request's `Authorization: Bearer …` header.
pub(crate) fn bearer_of(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer_credentials)
}

/// True when the request's bearer credentials are `token` (compared in constant time).
pub(crate) fn carries_token(headers: &axum::http::HeaderMap, token: &str) -> bool {
    bearer_of(headers).is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes()))
}

/// The credentials of an `Authorization: Bearer …` value; the scheme is case-insensitive (RFC 9110 §11.1).
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, rest) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// After a 413, at most this much of the refused body is read and discarded, for at most
/// [`DISCARD_TIME`], before the connection closes.
const DISCARD_BYTES: usize = 8 * 1024 * 1024;
const DISCARD_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// A declared `Content-Length` over the limit is refused before a byte of the body is read (a client
/// announcing 10 GB must not hold a connection until 2 MB arrived); a body that turns out too large
/// while streaming gets the same JSON answer.
///
/// The refused body is then read and discarded (bounded by [`DISCARD_BYTES`] and [`DISCARD_TIME`])
/// while the answer goes out, and the connection closes after it: closing a socket with unread data
/// resets it, and a client that writes its whole body before reading (Python's `http.client`) then saw
/// a broken pipe instead of the 413.
async fn limit_body_size(req: Request, next: Next) -> Response {
    let too_large = || {
        error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            &ApiError::PayloadTooLarge(format!("Payload too large: the limit is {MAX_BODY_BYTES} bytes")),
        )
    };
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok());
    if declared.and_then(|v| v.trim().parse::<u64>().ok()).is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        tokio::spawn(discard_body(req.into_body()));
        let mut resp = too_large();
        resp.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
        return resp;
    }
    let resp = next.run(req).await;
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if resp.status() == StatusCode::PAYLOAD_TOO_LARGE && !is_json { too_large() } else { resp }
}

/// Reads and drops a refused body, up to [`DISCARD_BYTES`] within [`DISCARD_TIME`].
async fn discard_body(body: axum::body::Body) {
    use futures::StreamExt;
    let mut chunks = body.into_data_stream();
    let mut discarded = 0;
    let drain = async {
        while discarded < DISCARD_BYTES
            && let Some(Ok(chunk)) = chunks.next().await
        {
            discarded += chunk.len();
        }
    };
    let _ = tokio::time::timeout(DISCARD_TIME, drain).await;
}

/// A path whose percent-escapes do not decode to UTF-8 gets the JSON error body (axum's extractors
/// would answer plain text).
async fn reject_undecodable_path(req: Request, next: Next) -> Response {
    if percent_encoding::percent_decode_str(req.uri().path()).decode_utf8().is_err() {
        return error_response(
            StatusCode::BAD_REQUEST,
            &ApiError::invalid("the request path is not valid UTF-8 once percent-decoded"),
        );
    }
    next.run(req).await
}

async fn measure<S: Store>(State(state): State<Shared<S>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let resp = next.run(req).await;
    state.metrics.observe(started.elapsed());
    resp
}

pub fn error_response(status: StatusCode, e: &ApiError) -> Response {
    (status, Json(e.body())).into_response()
}

/// Host API errors: unknown sessions are 404.
pub(crate) fn host_error(e: ApiError) -> Response {
    error_response(e.status(), &e)
}

pub(crate) fn host_answer(r: ApiResult<impl serde::Serialize>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => host_error(e),
    }
}

/// `POST /tools/invoke` in OpenClaw's wire format (its recorded answers: `tests/fixtures/openclaw-wire/`):
/// the tool in `tool` or `name`; `action`, `dryRun`, `idempotencyKey` and `agentId` accepted at the top
/// level; `args` missing or an array reads as `{}`. Success is `{"ok":true,"result":{"content":[{"type":
/// "text","text":…}],"details":{…}}}`; errors use OpenClaw's types: `invalid_request` (no tool, a bad
/// envelope), `invalid_request_error` (malformed JSON), `not_found` (unknown tool, 404), `tool_error`.
async fn invoke_tool<S: Store>(State(state): State<Shared<S>>, body: Bytes) -> Response {
    let call = match tool_envelope(&body) {
        Ok(c) => c,
        Err(EnvelopeError(kind, message)) => return tool_failure(StatusCode::BAD_REQUEST, kind, &message),
    };
    let caller = match (&call.caller, &call.agent) {
        (Some(c), _) => Some(c.clone()),
        (None, Some(agent)) => {
            Some(sessionwatch_core::AgentSessionKey::build(agent, &state.gateway.config().main_key))
        }
        (None, None) => None,
    };
    if call.dry_run && crate::gateway::WRITING_TOOLS.contains(&call.tool.as_str()) {
        return tool_failure(
            StatusCode::BAD_REQUEST,
            "tool_error",
            &format!("dryRun is not supported by {}: it would write; call it without dryRun", call.tool),
        );
    }
    match state.gateway.invoke_tool(caller.as_deref(), &call.tool, &call.args).await {
        Ok((output, notes)) => {
            Json(crate::wire::tool_result(&crate::wire::ToolJson::of_call(&output, &notes))).into_response()
        }
        Err(ApiError::UnknownTool(_)) => {
            tool_failure(StatusCode::NOT_FOUND, "not_found", &format!("Tool not available: {}", call.tool))
        }
        Err(e @ ApiError::Internal(_)) => {
            tool_failure(StatusCode::INTERNAL_SERVER_ERROR, "tool_error", &e.to_string())
        }
        Err(e @ ApiError::Unavailable(_)) => {
            tool_failure(StatusCode::SERVICE_UNAVAILABLE, "unavailable", &e.to_string())
        }
        // An unknown target session: the tool failed (OpenClaw's type) on something that is not there.
        Err(e @ ApiError::NotFound(_)) => tool_failure(StatusCode::NOT_FOUND, "tool_error", &e.to_string()),
        Err(e) => tool_failure(StatusCode::BAD_REQUEST, "tool_error", &e.to_string()),
    }
}

/// A parsed `/tools/invoke` envelope.
struct ToolEnvelope {
    tool: String,
    args: Value,
    caller: Option<String>,
    agent: Option<String>,
    dry_run: bool,
}

/// Why an envelope was refused: OpenClaw's error type and the message (always a 400).
struct EnvelopeError(&'static str, String);

fn tool_envelope(body: &Bytes) -> Result<ToolEnvelope, EnvelopeError> {
    let bad = |message: &str| EnvelopeError("invalid_request", message.to_string());
    let v: Value = if body.iter().all(|b| b.is_ascii_whitespace()) {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| EnvelopeError("invalid_request_error", format!("malformed JSON: {e}")))?
    };
    let Value::Object(m) = &v else { return Err(bad("tools.invoke requires a JSON object body")) };
    const FIELDS: [&str; 8] =
        ["tool", "name", "args", "sessionKey", "action", "dryRun", "idempotencyKey", "agentId"];
    if let Some(k) = m.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(bad(&format!("unknown field \"{k}\" (allowed: {})", FIELDS.join(", "))));
    }
    let text = |k: &str| -> Result<Option<String>, EnvelopeError> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
            Some(_) => Err(bad(&format!("{k} must be a non-empty string"))),
        }
    };
    let tool = match (text("tool")?, text("name")?) {
        (Some(t), _) | (None, Some(t)) => t,
        (None, None) => return Err(bad("tools.invoke requires name")),
    };
    let args = match m.get("args") {
        None | Some(Value::Null) | Some(Value::Array(_)) => json!({}),
        Some(a @ Value::Object(_)) => a.clone(),
        Some(_) => return Err(bad("args must be an object")),
    };
    let dry_run = match m.get("dryRun") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("dryRun must be a boolean")),
    };
    let _ = (text("action")?, text("idempotencyKey")?);
    let agent = text("agentId")?.map(|a| a.to_ascii_lowercase());
    if let Some(a) = &agent
        && !sessionwatch_core::is_valid_agent_id(a)
    {
        return Err(bad(&format!("agentId \"{a}\" is not a valid agent id")));
    }
    Ok(ToolEnvelope { tool, args, caller: text("sessionKey")?, agent, dry_run })
}

fn tool_failure(status: StatusCode, kind: &str, message: &str) -> Response {
    (status, Json(wire::error_body(kind, message))).into_response()
}

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

async fn create_session<S: Store>(
    State(state): State<Shared<S>>,
    Body(body): Body<CreateSessionRequest>,
) -> Response {
    let run = async {
        let req = NewSessionRequest {
            session_key: non_empty("body.sessionKey", &body.session_key)?.to_string(),
            agent_id: body.agent_id.map(|s| s.trim().to_ascii_lowercase()),
            chat_type: body.chat_type,
            channel: body.channel,
            label: body.label,
            created_via: body.created_via,
            creator: body.creator.as_ref().map(|c| actor(Some(c), Actor::system())).transpose()?,
            creator_label: body.creator.and_then(|c| c.label),
            quiet: body.visibility.as_deref() == Some("draft") || body.incognito.unwrap_or(false),
        };
        if let Some(agent) = &req.agent_id
            && !sessionwatch_core::is_valid_agent_id(agent)
        {
            return Err(ApiError::invalid(format!("agentId \"{agent}\" is not a valid agent id")));
        }
        state.gateway.create_session(req).await.map(|o| wire::session_created(&o))
    };
    host_answer(run.await)
}

async fn inbound<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
    Body(body): Body<InboundRequest>,
) -> Response {
    let run = async {
        let turn = InboundTurn {
            text: non_empty("body.text", &body.text)?.to_string(),
            channel: body.channel.unwrap_or_else(|| "unknown".into()),
            actor: actor(body.actor.as_ref(), Actor::human(None))?,
            chat_type: body.chat_type,
            run_id: body.run_id,
        };
        state.gateway.inbound(&key, turn).await.map(|o| wire::inbound(&o))
    };
    host_answer(run.await)
}

async fn begin_turn<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
    Body(NoFields {}): Body<NoFields>,
) -> Response {
    host_answer(state.gateway.begin_turn(&key).await.map(|o| wire::drained(&o)))
}

async fn add_message<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
    Body(body): Body<AddMessageRequest>,
) -> Response {
    let run = async {
        let role = non_empty("body.role", &body.role)?;
        if !["assistant", "user", "tool", "system"].contains(&role) {
            return Err(ApiError::invalid("role must be assistant, user, tool or system"));
        }
        state
            .gateway
            .add_message(&key, role, &body.text, body.run_id.as_deref())
            .await
            .map(|o| wire::message_added(&o))
    };
    host_answer(run.await)
}

async fn set_goal<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
    Body(body): Body<SetGoalRequest>,
) -> Response {
    let run = async {
        if body.objective.is_none() && body.status.is_none() {
            return Err(ApiError::invalid("give objective and/or status (DELETE clears the goal)"));
        }
        let actor = actor(body.actor.as_ref(), Actor::system())?;
        state.gateway.set_goal(&key, body.objective, body.status, actor).await.map(|o| wire::goal(&o))
    };
    host_answer(run.await)
}

async fn clear_goal<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
    Body(body): Body<ClearGoalRequest>,
) -> Response {
    let run = async {
        let actor = actor(body.actor.as_ref(), Actor::system())?;
        state.gateway.set_goal(&key, None, None, actor).await.map(|o| wire::goal(&o))
    };
    host_answer(run.await)
}

async fn compaction<S: Store>(
    State(state): State<Shared<S>>,
    Path(key): Path<String>,
    Body(body): Body<CompactionRequest>,
) -> Response {
    let run = async {
        let operation = non_empty("body.operationId", &body.operation_id)?;
        state.gateway.compacted(&key, operation, body.run_id).await.map(|o| wire::compacted(&o))
    };
    host_answer(run.await)
}

/// Drains the session's system-event queue (acknowledging notices as a turn does), not its inbox.
async fn drain_notices<S: Store>(State(state): State<Shared<S>>, Path(key): Path<String>) -> Response {
    host_answer(state.gateway.drain_notices(&key).await.map(|o| wire::drained(&o)))
}

async fn reset<S: Store>(State(state): State<Shared<S>>, Path(key): Path<String>) -> Response {
    host_answer(state.gateway.reset(&key).await.map(|o| wire::reset(&o)))
}

async fn list_sessions<S: Store>(State(state): State<Shared<S>>) -> Response {
    host_answer(state.gateway.session_listing().await.map(|l| wire::session_listing(&l)))
}

async fn watch_session<S: Store>(
    State(state): State<Shared<S>>,
    Path((target, watcher)): Path<(String, String)>,
) -> Response {
    host_answer(state.gateway.host_watch(&watcher, &target).await.map(|a| wire::watch(&a)))
}

async fn delete_session<S: Store>(State(state): State<Shared<S>>, Path(key): Path<String>) -> Response {
    host_answer(state.gateway.delete(&key).await.map(|k| wire::deleted(&k)))
}

async fn run_result<S: Store>(
    State(state): State<Shared<S>>,
    Path(run_id): Path<String>,
    Body(body): Body<RunResultRequest>,
) -> Response {
    let run = async {
        let status = RunStatus::parse(non_empty("body.status", &body.status)?)
            .ok_or_else(|| ApiError::invalid("status must be ok, error, timeout or cancelled"))?;
        state
            .gateway
            .run_result(&run_id, status, body.reply, body.session_id)
            .await
            .map(|o| wire::run_result(&o))
    };
    host_answer(run.await)
}

/// `GET /v1/catalog`: adoptable native sessions (Claude Code, Codex, OpenCode, Pi, Gemini CLI).
async fn catalog<S: Store>(State(state): State<Shared<S>>, uri: axum::http::Uri) -> Response {
    let all = query_param(&uri, "all").is_some_and(|v| v == "true" || v == "1");
    host_answer(state.gateway.catalog(all).await.map(|c| wire::catalog(&c)))
}

/// `POST /v1/catalog/continue {catalogId, threadId, agentId?}`: adopt one.
async fn catalog_continue<S: Store>(
    State(state): State<Shared<S>>,
    Body(body): Body<CatalogContinueRequest>,
) -> Response {
    let run = async {
        let catalog = non_empty("body.catalogId", &body.catalog_id)?;
        let thread = non_empty("body.threadId", &body.thread_id)?;
        state
            .gateway
            .continue_catalog(catalog, thread, body.agent_id.as_deref(), body.node.as_deref())
            .await
            .map(|a| wire::adoption(&a))
    };
    host_answer(run.await)
}

/// `POST /v1/monitor/tick`: run one upstream monitor tick now; answers its report.
async fn monitor_tick<S: Store>(
    State(state): State<Shared<S>>,
    Body(NoFields {}): Body<NoFields>,
) -> Response {
    let report = state.gateway.monitor_tick().await;
    host_answer(serde_json::to_value(report).map_err(|e| ApiError::Internal(e.to_string())))
}

/// `POST /v1/hooks`: one Claude Code / Codex / Gemini CLI hook (`sessionwatch hook <event>` forwards its
/// stdin; the Pi extension posts the same body itself), or one handler of OpenCode's sessionwatch plugin
/// (`"cli": "opencode"`, `"event": "chat.message"|"tool.execute.after"`, `"input"`: what the plugin
/// forwards, `hook::opencode::parse_plugin_call`). The body is a [`HookRequest`], decoded once: `input`
/// is mapped from the decoded value, not parsed again; `workspace` (with `node` only) is the worktree the
/// node resolved.
async fn hook<S: Store>(State(state): State<Shared<S>>, Body(body): Body<HookRequest<Value>>) -> Response {
    use sessionwatch_upstream::hook::{HookCli, parse_value};
    use sessionwatch_upstream::source::Installer;
    let run = async {
        let cli = non_empty("body.cli", &body.cli)?;
        let cli = HookCli::parse(cli).ok_or_else(|| {
            ApiError::invalid(format!("unknown cli {cli:?}: expected claude, codex, gemini, opencode or pi"))
        })?;
        let event = non_empty("body.event", &body.event)?;
        if !body.input.is_object() {
            return Err(ApiError::invalid("body.input must be the hook's JSON object"));
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
        Ok(crate::wire::hook_answer(&outcome))
    };
    host_answer(run.await)
}

/// `GET /v1/hooks/tool-uses/{id}`: the session whose `PreToolUse` hook announced this MCP tool call.
async fn tool_use<S: Store>(State(state): State<Shared<S>>, Path(id): Path<String>) -> Response {
    host_answer(match state.gateway.session_of_tool_use(&id) {
        Some(session_key) => Ok(ToolUseJson { session_key }),
        None => Err(ApiError::NotFound(format!("no hook announced tool use {id:?}"))),
    })
}

async fn metrics<S: Store>(
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

/// Parses `?a=b&c=d` (percent-decoded).
pub fn query_param(headers_uri: &axum::http::Uri, name: &str) -> Option<String> {
    let q = headers_uri.query()?;
    q.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| {
            percent_encoding::percent_decode_str(&v.replace('+', " ")).decode_utf8_lossy().into_owned()
        })
    })
}
