//! The six tools over the Model Context Protocol (with the official Rust SDK, `rmcp`), on stdio
//! (`sessionwatch mcp`) and on streamable HTTP (`/mcp` on the gateway).
//!
//! The server is generic over a [`ToolBackend`]: the gateway in this process or a gateway reached over
//! HTTP. A tool call behaves exactly as `POST /tools/invoke`: same validation, same result. Tool errors
//! are tool results with `isError: true` and the message; an unknown tool is a protocol error.
//!
//! **Notices.** After every call (successful or not) the caller's system-event queue is drained and its
//! session-state notices acknowledged, as a turn would; whatever came out is appended to the result:
//! `structuredContent.systemEvents: [{text, contextKey}]` and a text block "Session notices: …". An agent
//! that only speaks MCP therefore learns once that a watched session changed.
//!
//! **Caller** ([`CallerRule`]). On stdio `--session` fixes it. Without it, the agent CLI that started us
//! says who calls, so a session's hooks and its MCP tools are one sessionwatch session: Codex puts its
//! thread id in every `tools/call` `_meta.threadId` (→ `agent:<agent>:codex:<thread>`); Claude Code puts
//! the hook's tool-use id in `_meta["claudecode/toolUseId"]`, which the session's `PreToolUse` hook
//! announced to the gateway (→ `agent:<agent>:claude:<session>`), else `CLAUDE_CODE_SESSION_ID` from
//! our environment. Over HTTP the `X-Sessionwatch-Session` header wins, then the same `_meta` rules;
//! the default is `main`. Gemini CLI (0.61.0) tells its MCP servers nothing of its session: no `_meta`
//! on `tools/call`, and their environment is its own plus `GEMINI_CLI=1` (`GEMINI_SESSION_ID` is set
//! for hooks only). Its `BeforeTool` hook (MCP tools only) announces the call by its tool and arguments
//! (`hook::mcp_call_id`), so a stdio server started by Gemini (`GEMINI_CLI=1`) finds the session that
//! announced the same call; else `main`.

mod backend;
pub(crate) mod schema;
mod sessions;

pub(crate) use sessions::BoundedSessions;

pub use backend::{EmbeddedBackend, RemoteBackend, ToolBackend};

use crate::error::ApiError;
use crate::gateway::{Gateway, TOOL_NAMES};
use crate::host_protocol::SystemEventJson;
use crate::wire::ToolJson;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Map, Value};
use sessionwatch_core::AgentSessionKey;
use sessionwatch_store::Store;
use sessionwatch_upstream::CatalogId;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The HTTP header naming the caller session on `/mcp` (default `main`).
pub const SESSION_HEADER: &str = "x-sessionwatch-session";

/// Hosts `/mcp` always accepts (DNS-rebinding protection); others come from `gateway.mcpAllowedHosts`.
pub(crate) const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// How the caller session of a tool call is found (see the module docs).
#[derive(Clone, Debug)]
pub enum CallerRule {
    /// `--session KEY`.
    Fixed(Arc<str>),
    /// The agent CLI says who calls; `agent` owns the session keys, `claude_session` is the
    /// `CLAUDE_CODE_SESSION_ID` of a stdio server's environment, `gemini` says Gemini CLI started it
    /// (`GEMINI_CLI=1`).
    Native { agent: Arc<str>, claude_session: Option<Arc<str>>, gemini: bool },
}

/// An MCP server for the six tools.
pub(crate) struct McpServer<B> {
    backend: Arc<B>,
    caller: CallerRule,
    tools: Arc<Vec<Tool>>,
}

impl<B> Clone for McpServer<B> {
    fn clone(&self) -> Self {
        McpServer { backend: self.backend.clone(), caller: self.caller.clone(), tools: self.tools.clone() }
    }
}

impl<B: ToolBackend> McpServer<B> {
    pub(crate) fn new(backend: Arc<B>, caller: CallerRule) -> Self {
        McpServer { backend, caller, tools: Arc::new(schema::tools()) }
    }

    async fn caller(
        &self,
        context: &RequestContext<RoleServer>,
        tool: &str,
        args: &Value,
    ) -> Result<String, ApiError> {
        let (agent, claude_session, gemini) = match &self.caller {
            CallerRule::Fixed(c) => return Ok(c.to_string()),
            CallerRule::Native { agent, claude_session, gemini } => (agent, claude_session, *gemini),
        };
        let header = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get(SESSION_HEADER));
        if let Some(v) = header {
            return v.to_str().map(|s| s.trim().to_string()).map_err(|_| {
                ApiError::invalid("the X-Sessionwatch-Session header must be a session key in plain text")
            });
        }
        let meta = &context.meta.0.0;
        let native_id = |k: &str| {
            meta.get(k).and_then(Value::as_str).filter(|id| {
                !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            })
        };
        if let Some(thread) = native_id("threadId") {
            return Ok(AgentSessionKey::build_adopted(agent, CatalogId::Codex.as_str(), thread));
        }
        if let Some(tool_use) = meta.get("claudecode/toolUseId").and_then(Value::as_str)
            && let Some(key) = self.backend.session_of_tool_use(tool_use).await
        {
            return Ok(key);
        }
        if let Some(session) = claude_session {
            return Ok(AgentSessionKey::build_adopted(agent, CatalogId::Claude.as_str(), session));
        }
        if gemini {
            let call = sessionwatch_upstream::hook::mcp_call_id(tool, Some(args));
            if let Some(key) = self.backend.session_of_tool_use(&call).await {
                return Ok(key);
            }
        }
        Ok("main".to_string())
    }

    /// Calls a tool as `caller` and renders the MCP result, with the caller's drained notices appended.
    /// An unknown tool is a protocol error (`invalid_params`); everything else is a tool result.
    pub(crate) async fn call(
        &self,
        caller: &str,
        tool: &str,
        args: Value,
    ) -> Result<CallToolResult, ErrorData> {
        if !TOOL_NAMES.contains(&tool) {
            return Err(unknown_tool(tool));
        }
        let outcome = self.backend.call(caller, tool, &args).await;
        if let Err(ApiError::UnknownTool(_)) = outcome {
            return Err(unknown_tool(tool));
        }
        let notices = self.backend.drain_notices(caller).await;
        Ok(render(outcome, notices))
    }
}

fn unknown_tool(tool: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown tool \"{tool}\" (available: {})", TOOL_NAMES.join(", ")), None)
}

impl<B: ToolBackend> ServerHandler for McpServer<B> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("sessionwatch", env!("CARGO_PKG_VERSION")).with_title("sessionwatch"),
            )
            .with_instructions(schema::INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = request.name.to_string();
        if !TOOL_NAMES.contains(&tool.as_str()) {
            return Err(unknown_tool(&tool));
        }
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let caller = match self.caller(&context, &tool, &args).await {
            Ok(c) => c,
            Err(e) => return Ok(render(Err(e), Vec::new()).into()),
        };
        tracing::debug!(tool, caller, "mcp tool call");
        Ok(self.call(&caller, &tool, args).await?.into())
    }
}

/// The result of a call: structured content (the tool's result, or `{error:{type,message}}`) plus a
/// readable text block, then the notices (`systemEvents` and a "Session notices" text block).
fn render(outcome: Result<ToolJson, ApiError>, notices: Vec<SystemEventJson>) -> CallToolResult {
    let (mut structured, text, is_error) = match outcome {
        Ok(result) => {
            let text = summary(&result);
            let structured = match result.to_value() {
                Value::Object(m) => m,
                other => Map::from_iter([("result".to_string(), other)]),
            };
            (structured, text, false)
        }
        Err(e) => {
            let kind = crate::wire::error_kind(&e);
            let text = format!("Error ({kind}): {e}");
            let body = crate::wire::error_detail(kind, &e.to_string());
            (Map::from_iter([("error".to_string(), body)]), text, true)
        }
    };
    let mut content = vec![ContentBlock::text(text)];
    if !notices.is_empty() {
        content.push(ContentBlock::text(notices_text(&notices)));
        let events = serde_json::to_value(&notices).expect("notices always serialize");
        structured.insert("systemEvents".into(), events);
    }
    let mut result = if is_error { CallToolResult::error(content) } else { CallToolResult::success(content) };
    result.structured_content = Some(Value::Object(structured));
    result
}

fn notices_text(notices: &[SystemEventJson]) -> String {
    let mut out = String::from(
        "Session notices (each is delivered once and is now acknowledged; act on it before relying on \
         what you knew about that session):",
    );
    for n in notices {
        out.push_str("\n- ");
        out.push_str(&n.text);
    }
    out
}

/// A readable rendering of a tool result for models that read text only.
fn summary(result: &ToolJson) -> String {
    let head = match result {
        ToolJson::Status(s) => return s.status_text.text(),
        ToolJson::List(l) => {
            let mut s = format!("{} session(s):", l.sessions.len());
            for r in &l.sessions {
                s.push_str(&format!(
                    "\n- {} ({}), stateVersion {}",
                    r.key,
                    r.kind,
                    r.state_version.unwrap_or(0)
                ));
                s.push_str(&format!(", {}", r.status));
                if r.display_name != r.key {
                    s.push_str(&format!(", \"{}\"", r.display_name));
                }
            }
            return s;
        }
        ToolJson::History(h) => {
            let mut s =
                format!("Transcript of {} ({} message(s), oldest first):", h.session_key, h.messages.len());
            for m in &h.messages {
                s.push_str(&format!("\n[{}] {}", m.role, m.text));
            }
            return s;
        }
        ToolJson::Send(v) => {
            let mut s = format!("Message sent to {}: run {}, status {}.", v.session_key, v.run_id, v.status);
            if let Some(reply) = &v.reply {
                s.push_str(&format!("\nReply: {reply}"));
            }
            match v.watched {
                Some(true) => s.push_str("\nYou now watch that session."),
                Some(false) => s.push_str("\nNo watch was registered."),
                None => {}
            }
            s
        }
        ToolJson::Spawn(v) => format!(
            "Spawned {} (run {}, status {}). You watch it: a change by another actor brings one notice.",
            v.child_session_key, v.run_id, v.status
        ),
        ToolJson::Unwatch(v) if v.unwatched => "Stopped watching that session.".to_string(),
        ToolJson::Unwatch(_) => "There was no watch on that session.".to_string(),
    };
    let pretty = serde_json::to_string_pretty(result).expect("tool results always serialize");
    format!("{head}\n\n```json\n{pretty}\n```")
}

/// Serves the MCP server on stdin/stdout until the client goes away. Logs must go to stderr.
pub async fn serve_stdio<B: ToolBackend>(backend: Arc<B>, caller: CallerRule) -> anyhow::Result<()> {
    let server = McpServer::new(backend, caller);
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}

/// The streamable HTTP service for `/mcp`: tools of `gateway` in this process, caller per request from
/// [`SESSION_HEADER`]. Accepts loopback `Host`s plus `extra_hosts`; its sessions are `sessions`
/// (bounded); stops its streams when `shutdown` is cancelled.
pub(crate) fn http_service<S: Store>(
    gateway: Arc<Gateway<S>>,
    extra_hosts: &[String],
    sessions: Arc<BoundedSessions>,
    shutdown: CancellationToken,
) -> StreamableHttpService<McpServer<EmbeddedBackend<S>>, BoundedSessions> {
    let backend = Arc::new(EmbeddedBackend::new(gateway));
    let hosts: Vec<String> =
        LOOPBACK_HOSTS.iter().map(|h| h.to_string()).chain(extra_hosts.iter().cloned()).collect();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_cancellation_token(shutdown)
        .with_max_request_body_bytes(crate::state::MAX_BODY_BYTES);
    StreamableHttpService::new(
        move || {
            let rule = CallerRule::Native {
                agent: super::gateway::DEFAULT_AGENT.into(),
                claude_session: None,
                gemini: false,
            };
            Ok(McpServer::new(backend.clone(), rule))
        },
        sessions,
        config,
    )
}
