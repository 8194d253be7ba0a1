//! The six tools as MCP sees them: names, descriptions written for a model, and hand-written JSON schemas
//! that mirror the strict argument rules of `gateway/tools.rs` (field names, types, ranges, no extra
//! fields). The gateway still validates every call; the schemas only help the model get it right.

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

const KEY_HELP: &str = "A session key such as \"agent:main:subagent:7f3c\" (from sessions_list, \
sessions_spawn or a notice). \"main\" means your agent's main session.";

/// Instructions sent at `initialize`.
pub const INSTRUCTIONS: &str = "sessionwatch tells you when another actor (a human, another agent) \
changed a session you watch, and lets you catch up exactly before you act. You watch the sub-agents \
you spawn (sessions_spawn) and the sessions you message with watch=true (sessions_send). When a watched \
session changes, the next tool result carries a one-time \"Session notices\" block; each notice names \
the session_status call (sessionKey + changesSince) that returns exactly what changed. Call it before \
acting on that session. Every notice is shown once: it is acknowledged when it is delivered to you.";

fn object(properties: Value, required: &[&str]) -> JsonObject {
    let schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    match schema {
        Value::Object(m) => m,
        _ => unreachable!("a JSON object literal"),
    }
}

fn session_key(what: &str) -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": 512, "description": format!("{what} {KEY_HELP}") })
}

/// Every tool, in the gateway's order.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "session_status",
            "Show a session's current state: its key, session id, kind and stateVersion (the number of \
             the latest recorded state event). With changesSince=N it also returns the typed events after \
             version N (ascending, at most 200 per page; `truncated` means more follow, page again from the \
             last sequence). Use it to reconcile after a notice: the notice tells you the exact sessionKey \
             and changesSince to pass. `historyGap: true` means N is older than the retained history: \
             re-read the whole session (sessions_history) instead of treating the page as a delta. \
             Reading never acknowledges or moves anything.",
            object(
                json!({
                    "sessionKey": session_key("Session to inspect; default: your own session."),
                    "changesSince": {
                        "type": "integer", "minimum": 0,
                        "description": "Return the state events after this version (0 = everything retained)."
                    },
                    "limit": {
                        "type": "integer", "minimum": 1, "maximum": 200,
                        "description": "Page size for changesSince (default 200)."
                    }
                }),
                &[],
            ),
        )
        .with_title("Session status and changes")
        .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true).open_world(false)),
        Tool::new(
            "sessions_list",
            "List sessions, most recently updated first: key, kind, channel, displayName, updatedAt \
             (ms since the epoch), sessionId and stateVersion (when non-zero).",
            object(
                json!({
                    "kinds": {
                        "type": "array",
                        "items": { "type": "string",
                            "enum": ["main", "group", "subagent", "acp", "cron", "hook", "node", "other"] },
                        "description": "Only sessions of these kinds."
                    },
                    "limit": {
                        "type": "integer", "minimum": 1, "maximum": 200,
                        "description": "At most this many sessions (default 50)."
                    },
                    "activeMinutes": {
                        "type": "integer", "minimum": 1, "maximum": 5_256_000,
                        "description": "Only sessions updated within the last N minutes."
                    }
                }),
                &[],
            ),
        )
        .with_title("List sessions")
        .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true).open_world(false)),
        Tool::new(
            "sessions_history",
            "Read a session's recent transcript (the messages that passed through the gateway), oldest \
             first. Use it to refresh your picture of a session, e.g. after session_status reported a \
             historyGap.",
            object(
                json!({
                    "sessionKey": session_key("Session to read."),
                    "limit": {
                        "type": "integer", "minimum": 1, "maximum": 500,
                        "description": "The last N messages (default 50)."
                    },
                    "includeTools": {
                        "type": "boolean",
                        "description": "Include tool messages (default false)."
                    }
                }),
                &["sessionKey"],
            ),
        )
        .with_title("Session transcript")
        .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true).open_world(false)),
        Tool::new(
            "sessions_send",
            "Send a message to another session (it lands in that session's inbox and transcript). \
             Fire and forget by default (status \"accepted\"); with timeoutSeconds > 0, wait up to that long \
             for the run's outcome (status \"ok\" with the reply, \"error\" or \"timeout\"). With watch=true you \
             also watch the session that received the message: from then on you get one notice when \
             another actor changes it. The result's sessionKey is the session that actually received it.",
            object(
                json!({
                    "sessionKey": session_key("Session to send to."),
                    "message": {
                        "type": "string", "minLength": 1,
                        "description": "The message text (at most 256 KiB)."
                    },
                    "timeoutSeconds": {
                        "type": "integer", "minimum": 0, "maximum": 3600,
                        "description": "Seconds to wait for the reply (0 = do not wait; default 0)."
                    },
                    "watch": {
                        "type": "boolean",
                        "description": "Watch the receiving session for changes by other actors."
                    }
                }),
                &["sessionKey", "message"],
            ),
        )
        .with_title("Send a message to a session")
        .with_annotations(
            ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(false),
        ),
        Tool::new(
            "sessions_spawn",
            "Spawn a sub-agent session with a task. Answers status \"accepted\", the runId and the \
             childSessionKey. You automatically watch the child: if a human or another agent steps into \
             it, your next tool result carries one notice telling you how to catch up.",
            object(
                json!({
                    "task": {
                        "type": "string", "minLength": 1,
                        "description": "What the sub-agent should do (at most 256 KiB)."
                    },
                    "label": { "type": "string", "description": "A short human-readable label." },
                    "agentId": {
                        "type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$",
                        "description": "Agent that owns the child (default: your agent)."
                    },
                    "runTimeoutSeconds": {
                        "type": "integer", "minimum": 0, "maximum": 604_800,
                        "description": "Time the child run out after this many seconds (0 = never)."
                    }
                }),
                &["task"],
            ),
        )
        .with_title("Spawn a sub-agent")
        .with_annotations(
            ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(false),
        ),
        Tool::new(
            "sessions_unwatch",
            "Stop watching a session: no more notices about it, and a pending notice about it is dropped. \
             Answers unwatched=true if a watch was removed.",
            object(json!({ "sessionKey": session_key("Session to stop watching.") }), &["sessionKey"]),
        )
        .with_title("Stop watching a session")
        .with_annotations(
            ToolAnnotations::new().read_only(false).destructive(false).idempotent(true).open_world(false),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::TOOL_NAMES;

    #[test]
    fn one_schema_per_gateway_tool() {
        let names: Vec<String> = tools().iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, TOOL_NAMES.map(str::to_string).to_vec());
        for t in tools() {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            assert_eq!(t.input_schema["additionalProperties"], false, "{}", t.name);
            assert!(t.description.as_deref().is_some_and(|d| d.len() > 40), "{}", t.name);
        }
    }
}
