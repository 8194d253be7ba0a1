//! Claude Code, Codex and Gemini CLI hooks (and the Pi extension, which posts the same shapes): the JSON a
//! hook receives on stdin, and the JSON each CLI expects back.
//!
//! Pure mapping, no I/O. All three CLIs send `session_id`, `transcript_path`, `cwd` and `hook_event_name`
//! with every event, plus per-event fields (`prompt`, `tool_name`, `stop_hook_active`, `agent_id`, …).
//! All accept `{"hookSpecificOutput":{"hookEventName":E,"additionalContext":T}}` (text added to the
//! model's context) and Claude and Codex, for `Stop`, `{"decision":"block","reason":R}` (the model is
//! called again with R). Gemini's events have names of their own (`BeforeAgent` is its prompt hook,
//! `AfterTool` its after-tool hook) and its `SessionStart` context must never be used: a resume drops
//! the prompt it was added to (docs/hooks.md).

use serde_json::{Value, json};

/// The CLIs with hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HookCli {
    Claude,
    Codex,
    Gemini,
    /// OpenCode's sessionwatch plugin ([`opencode`]): it posts to the gateway itself, no command runs.
    OpenCode,
    /// Pi 0.73: no command hooks; its extension (`hooks install pi`) posts these shapes itself.
    Pi,
}

impl HookCli {
    pub const ALL: [HookCli; 5] =
        [HookCli::Claude, HookCli::Codex, HookCli::Gemini, HookCli::OpenCode, HookCli::Pi];

    pub fn as_str(self) -> &'static str {
        self.source().name
    }

    /// The source's name or a hook alias, in any case.
    pub fn parse(s: &str) -> Option<HookCli> {
        let s = s.trim().to_ascii_lowercase();
        crate::source::all()
            .find(|src| src.name == s || src.hook.aliases.contains(&s.as_str()))
            .map(|src| src.hook.cli)
    }

    pub fn catalog(self) -> crate::CatalogId {
        match self {
            HookCli::Claude => crate::CatalogId::Claude,
            HookCli::Codex => crate::CatalogId::Codex,
            HookCli::Gemini => crate::CatalogId::Gemini,
            HookCli::OpenCode => crate::CatalogId::OpenCode,
            HookCli::Pi => crate::CatalogId::Pi,
        }
    }

    /// The description of the source these hooks belong to.
    pub fn source(self) -> &'static crate::source::Source {
        self.catalog().source()
    }

    /// The events installed for this CLI (`hooks install`, `setup`, `doctor`): each source's
    /// `hook.installed` (Codex has no `SessionEnd`; Gemini's prompt and after-tool events are
    /// `BeforeAgent` and `AfterTool`, and it has no `Stop` that can block).
    pub fn events(self) -> &'static [HookEvent] {
        self.source().hook.installed
    }

    /// Whether this CLI sends `event` (Claude's and Codex's events are one family, Gemini's another;
    /// `SessionEnd` is accepted from Codex too, as before).
    pub fn accepts(self, event: HookEvent) -> bool {
        self.source().hook.accepted.contains(&event)
    }
}

/// A string field of a hook's JSON object: absent or null is `None`, another type an error naming it.
pub(crate) fn string_field(
    o: &serde_json::Map<String, Value>,
    k: &'static str,
) -> Result<Option<String>, HookError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(HookError::Invalid { field: k, why: format!("expected a string, got {other}") }),
    }
}

/// Claude Code's events (Codex's too, but for `SessionEnd`, which it does not install): the first eight
/// of [`HookEvent::ALL`].
pub const CLAUDE_EVENTS: &[HookEvent] = HookEvent::ALL.split_at(8).0;

/// The hook events sessionwatch acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    Stop,
    SubagentStart,
    SubagentStop,
    /// The CLI session ended (Claude Code, Gemini): the session becomes idle.
    SessionEnd,
    /// Gemini: a prompt, before the model sees it (its `UserPromptSubmit`; no turn id given).
    BeforeAgent,
    /// Gemini: a tool call finished (its `PostToolUse`).
    AfterTool,
    /// Gemini: a tool is about to be called (its `PreToolUse`); for a call of an MCP tool it names the
    /// call ([`mcp_call_id`]), so `sessionwatch mcp` learns which session calls it.
    BeforeTool,
}

impl HookEvent {
    /// Every event sessionwatch accepts, Claude Code's first ([`CLAUDE_EVENTS`]); which ones a CLI gets
    /// installed is [`HookCli::events`].
    pub const ALL: [HookEvent; 11] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
        HookEvent::SessionEnd,
        HookEvent::BeforeAgent,
        HookEvent::AfterTool,
        HookEvent::BeforeTool,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::BeforeAgent => "BeforeAgent",
            HookEvent::AfterTool => "AfterTool",
            HookEvent::BeforeTool => "BeforeTool",
        }
    }

    /// `UserPromptSubmit`, `user_prompt_submit` and `userpromptsubmit` are the same event.
    pub fn parse(s: &str) -> Option<HookEvent> {
        let flat: String =
            s.chars().filter(|c| *c != '_' && *c != '-').collect::<String>().to_ascii_lowercase();
        HookEvent::ALL.into_iter().find(|e| e.as_str().to_ascii_lowercase() == flat)
    }
}

/// One hook invocation, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookInput {
    pub cli: HookCli,
    pub event: HookEvent,
    /// Claude's or Gemini's session UUID, or Codex's thread id.
    pub session_id: String,
    pub transcript_path: Option<String>,
    pub cwd: Option<String>,
    /// `UserPromptSubmit`, `BeforeAgent`: what was typed. (Pi: absent when the extension only drains
    /// notices before a turn; present when it records a typed prompt.)
    pub prompt: Option<String>,
    /// The turn's id, the same one the CLI writes into its transcript (Claude `prompt_id` / row
    /// `promptId`, Codex `turn_id`): the file monitor derives the same dedupe key from it. Gemini gives
    /// none: the gateway derives it from the session's file (`gemini::turn_id_now`). Pi's extension sends
    /// the user message's `timestamp`, which its session file stores as `message.timestamp`
    /// (`pi::PiClassifier::turn_id`).
    pub turn_id: Option<String>,
    pub tool_name: Option<String>,
    pub tool_use_id: Option<String>,
    /// `PostToolUse` / `AfterTool` of a file-writing tool: the paths it wrote, as the tool named them
    /// (`workspace::written_paths`; never the content it carried).
    pub written_paths: Vec<String>,
    /// `Stop`: the CLI is already continuing because of a stop hook.
    pub stop_hook_active: bool,
    /// `SubagentStart` / `SubagentStop`: the native sub-agent's id.
    pub subagent_id: Option<String>,
    pub subagent_type: Option<String>,
    /// Who started what the hook reports (the OpenCode plugin tells; the hook CLIs' prompts are typed).
    pub origin: Origin,
}

/// Who started the prompt (or the turn) a hook reports. Only a [`Origin::Typed`] prompt is recorded
/// as a human turn at once; a prompt of another origin is left to the file monitor (which counts what
/// it can tell is a human's), and a sub-agent's session is not ours to adopt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Typed by a human into the CLI's own front end.
    Typed,
    /// Written by the CLI itself (OpenCode: synthetic or ignored parts only).
    Synthetic,
    /// A native sub-agent's session (OpenCode: the `task` tool's child session).
    SubAgent,
    /// Sent through the CLI's API or `run` command by another program (the OpenCode front end named).
    OtherProgram(String),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HookError {
    #[error("hook input is not a JSON object: {0}")]
    NotJson(String),
    #[error("hook input has no {0}")]
    Missing(&'static str),
    #[error("hook input field {field} is invalid: {why}")]
    Invalid { field: &'static str, why: String },
    #[error("unknown hook event {0:?}")]
    UnknownEvent(String),
    #[error("the command was started for {arg} but the input is for {input}")]
    EventMismatch { arg: &'static str, input: String },
    #[error(
        "cannot tell whether this hook runs under Claude Code, Codex or Gemini CLI; pass --agent claude|codex|gemini"
    )]
    UnknownCli,
    #[error("{cli} has no {event} hook")]
    NotAnEventOf { cli: &'static str, event: &'static str },
}

/// Hook input is small; anything larger is refused (a hook must never block on a huge stdin).
pub const MAX_INPUT_BYTES: usize = 4 * 1024 * 1024;

/// Parses a hook's stdin. `event_arg` is the event the command was installed for (`sessionwatch hook
/// <event>`), `cli` the `--agent` flag; `claude_env_session` is `CLAUDE_CODE_SESSION_ID` when set.
pub fn parse_input(
    stdin: &[u8],
    event_arg: Option<&str>,
    cli: Option<HookCli>,
    claude_env_session: Option<&str>,
) -> Result<HookInput, HookError> {
    if stdin.len() > MAX_INPUT_BYTES {
        return Err(HookError::NotJson(format!("{} bytes is more than a hook sends", stdin.len())));
    }
    let v: Value = serde_json::from_slice(stdin).map_err(|e| HookError::NotJson(e.to_string()))?;
    parse_value(&v, event_arg, cli, claude_env_session)
}

/// [`parse_input`] of a hook's input already decoded (the gateway decodes the request it arrives in once).
pub fn parse_value(
    v: &Value,
    event_arg: Option<&str>,
    cli: Option<HookCli>,
    claude_env_session: Option<&str>,
) -> Result<HookInput, HookError> {
    let o = v.as_object().ok_or_else(|| HookError::NotJson("not an object".into()))?;
    let text = |k: &'static str| string_field(o, k);
    // The command line's event is checked first.
    let arg_event = event_arg.map(parse_event).transpose()?;
    let event = event_of(arg_event, text("hook_event_name")?.as_deref())?;
    let session_id = text("session_id")?.ok_or(HookError::Missing("session_id"))?;
    check_id("session_id", &session_id)?;
    let transcript_path = text("transcript_path")?;
    let cli = match cli {
        Some(c) => c,
        None => detect_cli(o, event, transcript_path.as_deref(), &session_id, claude_env_session)?,
    };
    if !cli.accepts(event) {
        return Err(HookError::NotAnEventOf { cli: cli.as_str(), event: event.as_str() });
    }
    let turn_id = match cli.source().hook.turn_id_field {
        Some(field) => text(field)?,
        None => None,
    };
    if let Some(t) = &turn_id {
        check_id(if cli == HookCli::Claude { "prompt_id" } else { "turn_id" }, t)?;
    }
    let subagent_id = text("agent_id")?;
    if let Some(a) = &subagent_id {
        check_id("agent_id", a)?;
    }
    let stop_hook_active = bool_field(o, "stop_hook_active")?;
    let tool_name = text("tool_name")?;
    let written_paths = match (event, &tool_name) {
        (HookEvent::PostToolUse | HookEvent::AfterTool, Some(tool)) => {
            crate::workspace::written_paths(tool, o.get("tool_input")).unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let prompt = text("prompt")?;
    check_required(cli, event, prompt.as_deref(), subagent_id.as_deref())?;
    Ok(HookInput {
        cli,
        event,
        session_id,
        transcript_path,
        cwd: text("cwd")?,
        prompt,
        turn_id,
        tool_use_id: match (event, o.get("mcp_context")) {
            // Gemini names no call: its MCP call is named by the tool and the arguments it carries.
            (HookEvent::BeforeTool, Some(Value::Object(mcp))) => {
                mcp.get("tool_name").and_then(Value::as_str).map(|t| mcp_call_id(t, o.get("tool_input")))
            }
            _ => text("tool_use_id")?,
        },
        tool_name,
        written_paths,
        stop_hook_active,
        subagent_id,
        subagent_type: text("agent_type")?,
        origin: Origin::Typed,
    })
}

/// A boolean field, false when absent or null.
fn bool_field(o: &serde_json::Map<String, Value>, field: &'static str) -> Result<bool, HookError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(HookError::Invalid { field, why: format!("expected a boolean, got {other}") }),
    }
}

/// The fields `event` cannot do without: a prompt's text, a sub-agent's id.
fn check_required(
    cli: HookCli,
    event: HookEvent,
    prompt: Option<&str>,
    subagent_id: Option<&str>,
) -> Result<(), HookError> {
    // Pi's `BeforeAgent` (its `before_agent_start`) only asks for the notices: the typed prompt comes
    // with its own `UserPromptSubmit`, once Pi has stamped it.
    let prompt_needed = match event {
        HookEvent::UserPromptSubmit => true,
        HookEvent::BeforeAgent => cli != HookCli::Pi,
        _ => false,
    };
    if prompt_needed && prompt.is_none() {
        return Err(HookError::Missing("prompt"));
    }
    if matches!(event, HookEvent::SubagentStart | HookEvent::SubagentStop) && subagent_id.is_none() {
        return Err(HookError::Missing("agent_id"));
    }
    Ok(())
}

fn parse_event(name: &str) -> Result<HookEvent, HookError> {
    HookEvent::parse(name).ok_or_else(|| HookError::UnknownEvent(name.to_string()))
}

/// The hook's event: the one the command line names (`sessionwatch hook EVENT`), which the input's
/// `hook_event_name` must agree with when it has one, or else the input's.
fn event_of(arg: Option<HookEvent>, input: Option<&str>) -> Result<HookEvent, HookError> {
    match (arg, input) {
        (Some(a), Some(i)) if HookEvent::parse(i) != Some(a) => {
            Err(HookError::EventMismatch { arg: a.as_str(), input: i.to_string() })
        }
        (Some(a), _) => Ok(a),
        (None, Some(i)) => parse_event(i),
        (None, None) => Err(HookError::Missing("hook_event_name")),
    }
}

/// The name of one MCP tool call by its tool and arguments, for a CLI that names its calls to neither
/// its hooks nor its MCP servers (Gemini CLI): its `BeforeTool` hook and `sessionwatch mcp` derive the
/// same id from what each sees (`mcp_context.tool_name` and `tool_input`; the `tools/call` name and
/// arguments). Two sessions making the same call at the same moment are told apart by neither.
pub fn mcp_call_id(tool: &str, args: Option<&Value>) -> String {
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Object(o) => {
                let mut keys: Vec<&String> = o.keys().collect();
                keys.sort();
                out.push('{');
                for k in keys {
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    canonical(&o[k], out);
                    out.push(',');
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                a.iter().for_each(|v| {
                    canonical(v, out);
                    out.push(',');
                });
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(args.unwrap_or(&Value::Null), &mut text);
    let digest = crate::text::NormText::of(&text);
    let tool: String = tool.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(64).collect();
    format!("mcp-{tool}-{:x}-{:x}", digest.len, digest.hash)
}

/// Ids become parts of session keys and dedupe keys: the characters both CLIs use, bounded.
pub(crate) fn check_id(field: &'static str, id: &str) -> Result<(), HookError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok { Ok(()) } else { Err(HookError::Invalid { field, why: format!("{id:?} is not an id") }) }
}

/// Which CLI sent this: a Gemini-only event, then the transcript's location (Gemini
/// `.gemini/tmp/<project>/chats/session-….jsonl`, `~/.claude/projects/…`, Codex `rollout-….jsonl`), then
/// `CLAUDE_CODE_SESSION_ID` (Claude sets it for its hooks; Codex adds nothing), then fields only one
/// of them sends (Claude `prompt_id`, Codex `turn_id` / `model`).
fn detect_cli(
    o: &serde_json::Map<String, Value>,
    event: HookEvent,
    transcript: Option<&str>,
    session_id: &str,
    claude_env_session: Option<&str>,
) -> Result<HookCli, HookError> {
    if matches!(event, HookEvent::BeforeAgent | HookEvent::AfterTool | HookEvent::BeforeTool) {
        return Ok(HookCli::Gemini);
    }
    if let Some(t) = transcript {
        let name = std::path::Path::new(t).file_name().and_then(|n| n.to_str()).unwrap_or("");
        if t.contains("/.pi/agent/sessions/") {
            return Ok(HookCli::Pi);
        }
        if t.contains("/.gemini/tmp/") || (name.starts_with("session-") && t.contains("/chats/")) {
            return Ok(HookCli::Gemini);
        }
        if name.starts_with("rollout-") || t.contains("/.codex/") {
            return Ok(HookCli::Codex);
        }
        if t.contains("/.claude/") || t.contains("/projects/") {
            return Ok(HookCli::Claude);
        }
    }
    if claude_env_session == Some(session_id) {
        return Ok(HookCli::Claude);
    }
    if o.contains_key("prompt_id") {
        return Ok(HookCli::Claude);
    }
    if o.contains_key("turn_id") || o.contains_key("model") {
        return Ok(HookCli::Codex);
    }
    Err(HookError::UnknownCli)
}

/// What sessionwatch answers a hook.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookReply {
    /// Text added to the model's context.
    pub context: Option<String>,
    /// `Stop` only: keep the agent going, with this reason.
    pub block: Option<String>,
}

/// The stdout line that shows `line` to the CLI's user, never to the model (`systemMessage`; all of them
/// read it).
pub fn render_system_message(line: &str) -> String {
    json!({ "systemMessage": line }).to_string()
}

/// The stdout the CLI expects for `reply`; `None`: print nothing (no noise when there is nothing to say).
pub fn render_output(cli: HookCli, event: HookEvent, reply: &HookReply) -> Option<String> {
    // The three CLIs read the same shapes (observed with Claude Code 2.1.332, Codex 0.171.0 and Gemini
    // CLI 0.61.0), but Gemini's SessionStart context is stored as a prompt prefix or a row of its own
    // that a resume then drops with the prompt: never answered there.
    if matches!(cli, HookCli::Gemini | HookCli::Pi) && event == HookEvent::SessionStart {
        return None;
    }
    if let Some(reason) = &reply.block {
        return Some(json!({ "decision": "block", "reason": reason }).to_string());
    }
    let context = reply.context.as_ref()?;
    match event {
        // Both CLIs ignore additionalContext on Stop in a way that differs (Claude continues the turn,
        // Codex drops it): a Stop speaks only by blocking.
        HookEvent::Stop | HookEvent::SubagentStop | HookEvent::SessionEnd => None,
        _ => Some(
            json!({
                "hookSpecificOutput": { "hookEventName": event.as_str(), "additionalContext": context }
            })
            .to_string(),
        ),
    }
}

pub mod opencode;
#[cfg(test)]
mod tests;
