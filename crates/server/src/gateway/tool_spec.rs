//! The six tools' arguments, defined once. The strict parser (`tool_args.rs`), the MCP input schemas
//! (`mcp/schema.rs`) and the README's tool table are all derived from [`TOOL_SPECS`]; a test keeps the
//! README equal to [`readme_table`].

/// What an argument holds (and so how it is read, checked and advertised).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A session key (or `main`).
    SessionKey,
    /// Text of at most this many bytes, not empty.
    Text {
        max_bytes: usize,
    },
    /// A short free text (a label).
    Label,
    /// An integer in `[min, max]`; decimal strings accepted (OpenClaw's leniency). With `clamp`, values
    /// above `max` are lowered to it (and reported by the tool) instead of refused.
    Int {
        min: i64,
        max: i64,
        clamp: bool,
    },
    Bool,
    /// Session kinds: a list, or one string.
    Kinds,
    /// An agent id.
    AgentId,
    /// Accepted for OpenClaw compatibility and ignored (e.g. `model`: sessions here do not pick models).
    Ignored,
}

/// One argument.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arg {
    pub name: &'static str,
    pub kind: Kind,
    pub required: bool,
    /// OpenClaw's other spellings, accepted and not advertised.
    pub aliases: &'static [&'static str],
    pub help: &'static str,
}

/// One tool.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    /// What the model reads (MCP).
    pub description: &'static str,
    pub args: &'static [Arg],
    /// The fields of its `details` (README).
    #[cfg_attr(not(test), allow(dead_code, reason = "read only by the README table test"))]
    pub details: &'static str,
    pub writes: bool,
    pub idempotent: bool,
}

impl ToolSpec {
    pub(crate) fn arg(&self, name: &str) -> &Arg {
        self.args
            .iter()
            .find(|a| a.name == name)
            .unwrap_or_else(|| panic!("{} has no argument {name}", self.name))
    }

    /// Every accepted field name: the arguments and their aliases.
    pub(crate) fn accepted(&self) -> Vec<&'static str> {
        self.args.iter().flat_map(|a| std::iter::once(a.name).chain(a.aliases.iter().copied())).collect()
    }
}

pub(crate) const MAX_TEXT_BYTES: usize = 256 * 1024;
/// `sessions_list` without a limit (OpenClaw's default).
pub(crate) const DEFAULT_LIST_LIMIT: u32 = 100;
pub(crate) const SESSION_KINDS: [&str; 9] =
    ["main", "group", "subagent", "acp", "cron", "hook", "node", "workspace", "other"];

const fn arg(name: &'static str, kind: Kind, help: &'static str) -> Arg {
    Arg { name, kind, required: false, aliases: &[], help }
}

const fn required(name: &'static str, kind: Kind, help: &'static str) -> Arg {
    Arg { name, kind, required: true, aliases: &[], help }
}

/// OpenClaw's `mode` and `model` on sessions_send / sessions_spawn: accepted, ignored.
const MODE: Arg = arg("mode", Kind::Ignored, "Accepted for OpenClaw compatibility; ignored.");
const MODEL: Arg = arg("model", Kind::Ignored, "Accepted for OpenClaw compatibility; ignored.");

pub(crate) const TOOL_SPECS: [ToolSpec; 6] = [
    ToolSpec {
        name: "session_status",
        title: "Session status and changes",
        description: "Show a session's current state: its key, session id, kind and stateVersion (the number of \
             the latest recorded state event). With changesSince=N it also returns the typed events after \
             version N (ascending, at most 200 per page; `truncated` means more follow, page again from the \
             last sequence). Use it to reconcile after a notice: the notice tells you the exact sessionKey \
             and changesSince to pass. `historyGap: true` means N is older than the retained history: \
             re-read the whole session (sessions_history) instead of treating the page as a delta. \
             Reading never acknowledges or moves anything.",
        args: &[
            arg("sessionKey", Kind::SessionKey, "Session to inspect; default: your own session."),
            Arg {
                aliases: &["changes_since"],
                ..arg(
                    "changesSince",
                    Kind::Int { min: 0, max: i64::MAX, clamp: false },
                    "Return the state events after this version (0 = everything retained).",
                )
            },
            arg(
                "limit",
                Kind::Int { min: 1, max: 200, clamp: false },
                "Page size for changesSince (default 200).",
            ),
        ],
        details: "`ok`, `sessionKey`, `agentId`, `changedModel`, `sessionId`, `kind`, `stateVersion`, `stateChanges?`, `statusText`",
        writes: false,
        idempotent: true,
    },
    ToolSpec {
        name: "sessions_list",
        title: "List sessions",
        description: "List sessions, most recently updated first: key, kind, channel, displayName, status (its \
             run state: idle, running, done, failed, timeout, cancelled), childSessions, updatedAt (ms since \
             the epoch), sessionId and stateVersion (when non-zero). `hasMore` tells whether more follow \
             (page with offset).",
        args: &[
            arg("kinds", Kind::Kinds, "Only sessions of these kinds."),
            arg(
                "limit",
                Kind::Int { min: 1, max: 200, clamp: true },
                "At most this many sessions (default 100; more than 200 is 200, reported as limitApplied).",
            ),
            arg(
                "offset",
                Kind::Int { min: 0, max: 1_000_000, clamp: false },
                "Skip this many sessions first.",
            ),
            arg(
                "activeMinutes",
                Kind::Int { min: 1, max: 5_256_000, clamp: false },
                "Only sessions updated within the last N minutes.",
            ),
        ],
        details: "`count`, `sessions: [{key, kind, channel, displayName, status, childSessions, updatedAt, sessionId, stateVersion?, agentId, archived, pinned, parentSessionKey?}]`, `hasMore`, `limitApplied`",
        writes: false,
        idempotent: true,
    },
    ToolSpec {
        name: "sessions_history",
        title: "Session transcript",
        description: "Read a session's recent transcript (the messages that passed through the gateway), oldest \
             first. Use it to refresh your picture of a session, e.g. after session_status reported a \
             historyGap.",
        args: &[
            required("sessionKey", Kind::SessionKey, "Session to read."),
            arg(
                "limit",
                Kind::Int { min: 1, max: 500, clamp: true },
                "The last N messages (default 50; more than 500 is 500).",
            ),
            arg("includeTools", Kind::Bool, "Include tool messages (default false)."),
        ],
        details: "`sessionKey`, `messages`, `truncated`, `droppedMessages`, `contentTruncated`, `contentRedacted`, `bytes`, `pendingInputs: {items: [{id, runId?, fromSessionKey?, createdAt}], total}`",
        writes: false,
        idempotent: true,
    },
    ToolSpec {
        name: "sessions_send",
        title: "Send a message to a session",
        description: "Send a message to another session (it lands in that session's inbox and transcript). \
             Fire and forget by default (status \"accepted\"); with timeoutSeconds > 0, wait up to that long \
             for the run's outcome (status \"ok\" with the reply, \"error\" or \"timeout\"). With watch=true you \
             also watch the session that received the message: from then on you get one notice when \
             another actor changes it. The result's sessionKey is the session that actually received it.",
        args: &[
            arg("sessionKey", Kind::SessionKey, "Session to send to (or give label, or agentId)."),
            arg("label", Kind::Label, "Send to the session carrying this label."),
            arg("agentId", Kind::AgentId, "Send to this agent's main session."),
            Arg {
                aliases: &["text"],
                ..required(
                    "message",
                    Kind::Text { max_bytes: MAX_TEXT_BYTES },
                    "The message text (at most 256 KiB).",
                )
            },
            arg(
                "timeoutSeconds",
                Kind::Int { min: 0, max: 3600, clamp: false },
                "Seconds to wait for the reply (0 = do not wait; default 0).",
            ),
            arg("watch", Kind::Bool, "Watch the receiving session for changes by other actors."),
            MODE,
            MODEL,
        ],
        details: "`runId`, `status`, `reply?`, `sessionKey`, `targetDisposition`, `delivery: {status, mode}`, `watched?`; fire-and-forget: `notificationId`, `durability: \"durable\"`, `runStarted`",
        writes: true,
        idempotent: false,
    },
    ToolSpec {
        name: "sessions_spawn",
        title: "Spawn a sub-agent",
        description: "Spawn a sub-agent session with a task. Answers status \"accepted\", the runId and the \
             childSessionKey. You automatically watch the child: if a human or another agent steps into \
             it, your next tool result carries one notice telling you how to catch up.",
        args: &[
            required(
                "task",
                Kind::Text { max_bytes: MAX_TEXT_BYTES },
                "What the sub-agent should do (at most 256 KiB).",
            ),
            arg("label", Kind::Label, "A short human-readable label."),
            arg("agentId", Kind::AgentId, "Agent that owns the child (default: your agent)."),
            arg(
                "runTimeoutSeconds",
                Kind::Int { min: 0, max: 604_800, clamp: true },
                "Time the child run out after this many seconds (0 = never; more than 7 days is 7 days).",
            ),
            MODE,
            MODEL,
        ],
        details: "`status: \"accepted\"`, `runId`, `childSessionKey`, `mode`, `expectsCompletionMessage`, `note`",
        writes: true,
        idempotent: false,
    },
    ToolSpec {
        name: "sessions_unwatch",
        title: "Stop watching a session",
        description: "Stop watching a session: no more notices about it, and a pending notice about it is dropped. \
             Answers unwatched=true if a watch was removed.",
        args: &[required("sessionKey", Kind::SessionKey, "Session to stop watching.")],
        details: "`unwatched`",
        writes: true,
        idempotent: true,
    },
];

pub(crate) fn spec(tool: &str) -> Option<&'static ToolSpec> {
    TOOL_SPECS.iter().find(|t| t.name == tool)
}

/// The README's tool table, from the specs.
#[cfg(test)]
fn readme_table() -> String {
    let mut out = String::from("| tool | args | details |\n|---|---|---|\n");
    for t in &TOOL_SPECS {
        let args: Vec<String> = t
            .args
            .iter()
            .filter(|a| a.kind != Kind::Ignored)
            .map(|a| {
                let mut s = format!("`{}`", a.name);
                for alias in a.aliases {
                    s.push_str(&format!(" (or `{alias}`)"));
                }
                if !a.required {
                    s.push('?');
                }
                s
            })
            .collect();
        let ignored: Vec<String> =
            t.args.iter().filter(|a| a.kind == Kind::Ignored).map(|a| format!("`{}`", a.name)).collect();
        let mut cell = args.join(", ");
        if !ignored.is_empty() {
            cell.push_str(&format!("; accepted and ignored: {}", ignored.join(", ")));
        }
        let name = if t.name == "sessions_unwatch" {
            format!("`{}` (extension)", t.name)
        } else {
            format!("`{}`", t.name)
        };
        out.push_str(&format!("| {name} | {cell} | {} |\n", t.details));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's table is this definition, not a third hand-kept copy.
    #[test]
    fn the_readme_tool_table_is_generated_from_the_specs() {
        let readme = include_str!("../../../../README.md");
        let table = readme_table();
        assert!(readme.contains(&table), "README.md must contain this table (regenerate it):\n{table}");
    }

    #[test]
    fn every_spec_is_consistent() {
        for t in &TOOL_SPECS {
            let mut names: Vec<&str> = t.accepted();
            let n = names.len();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), n, "{}: a name or alias twice", t.name);
            for a in t.args {
                if let Kind::Int { min, max, .. } = a.kind {
                    assert!(min <= max, "{}.{}", t.name, a.name);
                }
                assert!(!a.help.is_empty(), "{}.{}", t.name, a.name);
            }
        }
        assert_eq!(TOOL_SPECS.map(|t| t.name), super::super::TOOL_NAMES);
    }
}
