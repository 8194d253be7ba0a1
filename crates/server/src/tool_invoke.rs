//! `POST /tools/invoke`: OpenClaw's envelope and error types around the gateway's tools.

use crate::error::ApiError;
use crate::gateway::WRITING_TOOLS;
use crate::state::Shared;
use crate::wire;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sessionwatch_store::Store;

/// `POST /tools/invoke` in OpenClaw's wire format (its recorded answers: `tests/fixtures/openclaw-wire/`):
/// the tool in `tool` or `name`; `action`, `dryRun`, `idempotencyKey` and `agentId` accepted at the top
/// level; `args` missing or an array reads as `{}`. Success is `{"ok":true,"result":{"content":[{"type":
/// "text","text":…}],"details":{…}}}`; errors use OpenClaw's types: `invalid_request` (no tool, a bad
/// envelope), `invalid_request_error` (malformed JSON), `not_found` (unknown tool, 404), `tool_error`.
pub(crate) async fn invoke_tool<S: Store>(State(state): State<Shared<S>>, body: Bytes) -> Response {
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
    if call.dry_run && WRITING_TOOLS.contains(&call.tool.as_str()) {
        return tool_failure(
            StatusCode::BAD_REQUEST,
            "tool_error",
            &format!("dryRun is not supported by {}: it would write; call it without dryRun", call.tool),
        );
    }
    match state.gateway.invoke_tool(caller.as_deref(), &call.tool, &call.args).await {
        Ok((output, notes)) => wire::tool_result_response(&wire::ToolJson::of_call(&output, &notes)),
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
    let Value::Object(mut m) = v else { return Err(bad("tools.invoke requires a JSON object body")) };
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
    if !matches!(m.get("args"), None | Some(Value::Null | Value::Array(_) | Value::Object(_))) {
        return Err(bad("args must be an object"));
    }
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
    let caller = text("sessionKey")?;
    // Taken out of the body, not copied: the body is not needed after this.
    let args = match m.remove("args") {
        Some(a @ Value::Object(_)) => a,
        // Missing, null or an array (checked above): no arguments.
        _ => json!({}),
    };
    Ok(ToolEnvelope { tool, args, caller, agent, dry_run })
}

fn tool_failure(status: StatusCode, kind: &str, message: &str) -> Response {
    (status, Json(wire::error_body(kind, message))).into_response()
}
