//! OpenCode's sessionwatch plugin (`sessionwatch hooks install opencode`): what its handlers post, mapped
//! to a [`HookInput`].
//!
//! The plugin forwards OpenCode's own hook arguments and decides nothing itself, so every rule is here
//! (observed with OpenCode 1.18.33, docs/hooks.md):
//! * `chat.message` fires for every user message: typed into the TUI, `opencode run`, the HTTP API of
//!   `opencode serve` (also another program's), and a sub-agent's task prompt, with no origin field. The
//!   process tells them apart: the TUI runs its server in a worker (`…/cli/tui/worker.js` in
//!   `process.argv`, and no listening port), `run` and `serve` are their subcommands. Only the TUI's
//!   prompts are [`Origin::Typed`]. A sub-agent's prompt comes with `messageID` (and its session has a
//!   `parentID`). A message whose parts are all synthetic or ignored is OpenCode's own.
//! * The prompt's text and its human-ness are read from the message's parts exactly as the file monitor
//!   reads the stored message ([`crate::opencode::human_text`]), and its turn id is the message id the
//!   monitor reads: a prompt seen by both is one event.

use super::{HookCli, HookError, HookEvent, HookInput, Origin, check_id, string_field};
use serde_json::Value;

/// The plugin's events: OpenCode's hook names.
pub const CHAT_MESSAGE: &str = "chat.message";
pub const TOOL_EXECUTE_AFTER: &str = "tool.execute.after";

/// Which OpenCode front end runs the plugin, from that process's `argv`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrontEnd {
    /// The terminal UI (its server runs in a worker thread of the `opencode` process).
    Tui,
    /// Another command (`run`, `serve`, `web`, `acp`, …), named.
    Command(String),
}

impl FrontEnd {
    /// `["bun", "/$bunfs/root/src/cli/tui/worker.js"]` is the TUI's worker; otherwise the first
    /// argument after the program that is a subcommand OpenCode has.
    pub fn of_argv(argv: &[String]) -> FrontEnd {
        if argv.iter().any(|a| a.ends_with("/tui/worker.js") || a.ends_with("/tui/worker.ts")) {
            return FrontEnd::Tui;
        }
        const COMMANDS: [&str; 6] = ["run", "serve", "web", "acp", "attach", "github"];
        let named = argv.iter().skip(1).find(|a| COMMANDS.contains(&a.as_str()));
        FrontEnd::Command(named.cloned().unwrap_or_else(|| "unknown".into()))
    }
}

/// Maps one plugin post (`event`: the OpenCode hook's name; `body`: what the plugin sent) to a hook
/// input. `body` holds `sessionID`, `argv` (the process's), `directory`, `db` (the OpenCode database
/// path), `parentID` (when the plugin saw the session is a sub-agent's) and, for `chat.message`,
/// OpenCode's `messageID` (set for a sub-agent's task prompt), `message` and `parts`; for
/// `tool.execute.after`, `tool` and `callID`.
pub fn parse_plugin_call(event: &str, body: &Value) -> Result<HookInput, HookError> {
    let o = body.as_object().ok_or_else(|| HookError::NotJson("not an object".into()))?;
    let text = |k: &'static str| string_field(o, k);
    let hook_event = match event {
        CHAT_MESSAGE => HookEvent::UserPromptSubmit,
        TOOL_EXECUTE_AFTER => HookEvent::PostToolUse,
        other => return Err(HookError::UnknownEvent(other.to_string())),
    };
    let session_id = text("sessionID")?.ok_or(HookError::Missing("sessionID"))?;
    check_id("sessionID", &session_id)?;
    let argv: Vec<String> = match o.get("argv") {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => return Err(HookError::Missing("argv")),
    };
    let parent = text("parentID")?;
    if let Some(p) = &parent {
        check_id("parentID", p)?;
    }
    let mut input = HookInput {
        cli: HookCli::OpenCode,
        event: hook_event,
        session_id,
        transcript_path: text("db")?.filter(|d| !d.is_empty()),
        cwd: text("directory")?,
        prompt: None,
        turn_id: None,
        tool_name: None,
        tool_use_id: None,
        stop_hook_active: false,
        subagent_id: None,
        subagent_type: None,
        origin: Origin::Typed,
        written_paths: Vec::new(),
    };
    // A sub-agent's session: its task prompt arrives with the parent's `messageID`.
    let sub_agent = parent.is_some()
        || (hook_event == HookEvent::UserPromptSubmit && o.get("messageID").is_some_and(|m| !m.is_null()));
    match hook_event {
        HookEvent::UserPromptSubmit => {
            let message = o.get("message").filter(|m| m.is_object()).ok_or(HookError::Missing("message"))?;
            let id = message.get("id").and_then(Value::as_str).ok_or(HookError::Missing("message.id"))?;
            check_id("message.id", id)?;
            let parts = match o.get("parts") {
                Some(Value::Array(p)) => p.clone(),
                _ => return Err(HookError::Missing("parts")),
            };
            let stored = crate::opencode::Message {
                id: id.to_string(),
                created: message.pointer("/time/created").and_then(Value::as_i64).unwrap_or(0),
                data: message.clone(),
                parts,
            };
            let human = crate::opencode::human_text(&stored);
            input.turn_id = Some(id.to_string());
            input.origin = match (&human, FrontEnd::of_argv(&argv)) {
                _ if sub_agent => Origin::SubAgent,
                (None, _) => Origin::Synthetic,
                (Some(_), FrontEnd::Tui) => Origin::Typed,
                (Some(_), FrontEnd::Command(c)) => Origin::OtherProgram(c),
            };
            input.prompt = Some(human.unwrap_or_default());
        }
        _ => {
            input.tool_name = text("tool")?;
            input.tool_use_id = text("callID")?;
            if let Some(tool) = &input.tool_name {
                input.written_paths =
                    crate::workspace::written_paths(tool, o.get("tool_input")).unwrap_or_default();
            }
            if sub_agent {
                input.origin = Origin::SubAgent;
            }
        }
    }
    Ok(input)
}

#[cfg(test)]
mod tests;
