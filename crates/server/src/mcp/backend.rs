//! How the MCP server reaches the tools: in this process ([`EmbeddedBackend`]) or through a running
//! gateway's HTTP API ([`RemoteBackend`]).

use crate::error::{ApiError, ApiResult};
use crate::gateway::Gateway;
use crate::hook_protocol::ToolUseJson;
use crate::host_protocol::SystemEventJson;
use crate::host_protocol::{DrainedJson, ToolCall};
use crate::wire::ToolJson;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};
use sessionwatch_store::Store;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Where tool calls go. `caller` is the calling session key as the client gave it (`main` allowed); the
/// backend resolves it exactly as `POST /tools/invoke` resolves `sessionKey`.
pub trait ToolBackend: Send + Sync + 'static {
    /// Invokes one of the six tools as `caller`: same validation and results as `/tools/invoke`.
    fn call(
        &self,
        caller: &str,
        tool: &str,
        args: &Value,
    ) -> impl Future<Output = ApiResult<ToolJson>> + Send;

    /// Drains the caller's system-event queue, acknowledging the session-state notices among them exactly
    /// as a turn does (the inbox is left alone). Never fails (an unknown caller, or a failure, is an
    /// empty list, logged).
    fn drain_notices(&self, caller: &str) -> impl Future<Output = Vec<SystemEventJson>> + Send;

    /// The session whose Claude Code `PreToolUse` hook announced this tool-use id, if any.
    fn session_of_tool_use(&self, tool_use_id: &str) -> impl Future<Output = Option<String>> + Send;
}

/// The tools of a gateway in this process.
pub struct EmbeddedBackend<S: Store> {
    gateway: Arc<Gateway<S>>,
}

impl<S: Store> EmbeddedBackend<S> {
    pub fn new(gateway: Arc<Gateway<S>>) -> Self {
        EmbeddedBackend { gateway }
    }
}

impl<S: Store> ToolBackend for EmbeddedBackend<S> {
    async fn call(&self, caller: &str, tool: &str, args: &Value) -> ApiResult<ToolJson> {
        let (output, notes) = self.gateway.invoke_tool(Some(caller), tool, args).await?;
        Ok(ToolJson::of_call(&output, &notes))
    }

    async fn session_of_tool_use(&self, tool_use_id: &str) -> Option<String> {
        self.gateway.session_of_tool_use(tool_use_id)
    }

    async fn drain_notices(&self, caller: &str) -> Vec<SystemEventJson> {
        match self.gateway.drain_notices(caller).await {
            Ok(drained) => drained.system_events.iter().map(SystemEventJson::from).collect(),
            Err(ApiError::NotFound(_) | ApiError::InvalidArgument(_)) => Vec::new(),
            Err(e) => {
                tracing::warn!(error = %e, caller, "draining notices failed");
                Vec::new()
            }
        }
    }
}

/// The tools of a gateway reached over HTTP: `POST /tools/invoke` with `sessionKey` = the caller, and
/// `POST /v1/sessions/{caller}/notices` for the notices.
pub struct RemoteBackend {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl RemoteBackend {
    pub fn new(base_url: &str, token: Option<String>) -> RemoteBackend {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        RemoteBackend { http, base: base_url.trim_end_matches('/').to_string(), token }
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.post(format!("{}{path}", self.base));
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// Whether a gateway answers `GET /healthz` at the base URL within `timeout`.
    pub async fn is_up(&self, timeout: Duration) -> bool {
        let probe = self.http.get(format!("{}/healthz", self.base)).send();
        matches!(tokio::time::timeout(timeout, probe).await, Ok(Ok(r)) if r.status().is_success())
    }

    /// Checks that the gateway is up and accepts our token (a read-only tool call).
    pub async fn check(&self) -> ApiResult<()> {
        let resp = self
            .post("/tools/invoke")
            .json(&json!({ "tool": "sessions_list", "args": { "limit": 1 } }))
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        match resp.status().as_u16() {
            401 => Err(ApiError::Unauthorized(format!(
                "the gateway at {} refused the bearer token (give --token or the gateway's --data-dir)",
                self.base
            ))),
            s if s >= 500 => {
                Err(ApiError::Internal(format!("the gateway at {} answered HTTP {s}", self.base)))
            }
            _ => Ok(()),
        }
    }

    fn unreachable(&self, e: reqwest::Error) -> ApiError {
        ApiError::Internal(format!("cannot reach the gateway at {}: {e}", self.base))
    }
}

/// Maps the gateway's `{"ok":false,"error":{"type","message"}}` back to the error it came from.
fn remote_error(status: u16, body: &Value) -> ApiError {
    let message = body["error"]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("the gateway answered HTTP {status}"));
    match body["error"]["type"].as_str() {
        // `/tools/invoke` answers in OpenClaw's types: an unknown tool is `not_found` with 404, an unknown
        // target `tool_error` with 404, a bad argument `tool_error` with 400.
        Some("not_found") if status == 404 => ApiError::UnknownTool(message),
        Some("tool_error") if status == 404 => ApiError::NotFound(message),
        Some("tool_error" | "invalid_request" | "invalid_request_error") if status == 400 => {
            ApiError::InvalidArgument(message)
        }
        Some("invalid_argument") => ApiError::InvalidArgument(message),
        Some("not_found") => ApiError::NotFound(message),
        Some("unknown_tool") => ApiError::UnknownTool(message),
        Some("conflict") => ApiError::Conflict(message),
        Some("unauthorized") => ApiError::Unauthorized(message),
        _ if status == 401 => ApiError::Unauthorized(message),
        _ => ApiError::Internal(message),
    }
}

impl ToolBackend for RemoteBackend {
    async fn call(&self, caller: &str, tool: &str, args: &Value) -> ApiResult<ToolJson> {
        let body = ToolCall { tool: tool.to_string(), args, session_key: Some(caller.to_string()) };
        let resp = self.post("/tools/invoke").json(&body).send().await.map_err(|e| self.unreachable(e))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| self.unreachable(e))?;
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        match v.get("ok") {
            Some(Value::Bool(true)) => {
                let details = v.pointer("/result/details").cloned().unwrap_or(Value::Null);
                ToolJson::parse(tool, details).map_err(|e| {
                    ApiError::Internal(format!(
                        "the gateway at {} answered an unexpected {tool} result: {e}",
                        self.base
                    ))
                })
            }
            _ => Err(remote_error(status, &v)),
        }
    }

    async fn session_of_tool_use(&self, tool_use_id: &str) -> Option<String> {
        let path = format!(
            "{}/v1/hooks/tool-uses/{}",
            self.base,
            utf8_percent_encode(tool_use_id, NON_ALPHANUMERIC)
        );
        let mut req = self.http.get(path);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.ok().filter(|r| r.status().is_success())?;
        resp.json::<ToolUseJson>().await.ok().map(|t| t.session_key)
    }

    async fn drain_notices(&self, caller: &str) -> Vec<SystemEventJson> {
        let path = format!("/v1/sessions/{}/notices", utf8_percent_encode(caller, NON_ALPHANUMERIC));
        let resp = match self.post(&path).send().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, caller, "draining notices failed");
                return Vec::new();
            }
        };
        let status = resp.status();
        match resp.json::<Value>().await {
            Ok(v) if status.is_success() => match serde_json::from_value::<DrainedJson>(v) {
                Ok(d) => d.system_events,
                Err(e) => {
                    tracing::warn!(error = %e, caller, "the gateway answered unexpected notices");
                    Vec::new()
                }
            },
            // 400/404: an invalid or not yet existing caller session has nothing queued.
            Ok(_) if status.as_u16() == 400 || status.as_u16() == 404 => Vec::new(),
            other => {
                tracing::warn!(%status, answer = ?other.ok(), caller, "draining notices failed");
                Vec::new()
            }
        }
    }
}
