//! The JSON of the six tools' results (`details` of `/tools/invoke`, structured content of MCP), as
//! types: built from the gateway's [`ToolOutput`], and parsed back by the MCP server that reaches a
//! gateway over HTTP, so both MCP paths read the same typed values.

use crate::gateway::listing::run_state;
use crate::gateway::results::{
    HistoryOutput, ListOutput, SendOutput, SendStatus, StatusOutput, ToolOutput, WaitEnd,
};
use crate::gateway::tool_args::ArgNotes;
use crate::host_protocol::{EventJson, SystemEventJson};
use crate::wire::literal::StringLiteral;
use crate::wire::rendered::{self, RenderedEvent};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;
use serde_with::skip_serializing_none;
use sessionwatch_core::{ChangesPage, QueuedEvent, StoredEvent};
use sessionwatch_store::{PayloadJson, SessionActivity, SessionRow, TranscriptMessage};
use std::borrow::Cow;
use std::collections::BTreeMap;

impl From<&StoredEvent> for EventJson {
    fn from(e: &StoredEvent) -> EventJson {
        EventJson {
            sequence: e.sequence,
            kind: e.kind.as_str().into(),
            actor_type: e.actor.kind.as_str().into(),
            occurred_at: e.occurred_at,
            summary: e.summary.clone(),
            actor_id: e.actor.id.clone(),
            run_id: e.run_id.clone(),
            payload: PayloadJson::of(&e.payload),
        }
    }
}

/// `stateChanges`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateChangesJson {
    /// Each `EventJson`, rendered ([`RenderedEvent`]).
    pub events: Vec<RenderedEvent>,
    pub truncated: bool,
    pub earliest_available_sequence: u64,
    pub history_gap: bool,
}

impl From<&ChangesPage> for StateChangesJson {
    fn from(p: &ChangesPage) -> StateChangesJson {
        StateChangesJson {
            events: rendered::render(&p.events),
            truncated: p.truncated,
            earliest_available_sequence: p.earliest_available_sequence,
            history_gap: p.history_gap,
        }
    }
}

/// `session_status`. `ok`, `agentId` and `changedModel` as OpenClaw answers them (the model never
/// changes here).
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusJson {
    pub ok: bool,
    pub session_key: String,
    pub agent_id: String,
    pub changed_model: bool,
    pub session_id: String,
    pub kind: String,
    pub state_version: u64,
    pub state_changes: Option<StateChangesJson>,
    pub status_text: StatusText,
    /// Arguments ignored or clamped (absent when none).
    #[serde(flatten, default)]
    pub notes: ArgNotesJson,
}

/// A status text as its JSON string literal: a `/tools/invoke` answer carries the text twice (the content
/// text and `details.statusText`), so it is escaped once, when it is built ([`StringLiteral`], which also
/// writes the page of changes in it already escaped).
#[derive(Clone, Debug)]
pub struct StatusText {
    json: Box<RawValue>,
}

impl StatusText {
    pub(crate) fn new(text: &str) -> StatusText {
        let mut literal = StringLiteral::with_capacity(text.len() + 2);
        literal.push_text(text);
        StatusText { json: literal.finish() }
    }

    /// The text (decoded from its literal: only the MCP server's readable summary asks for it).
    pub(crate) fn text(&self) -> String {
        serde_json::from_str(self.json.get()).expect("a status text is a JSON string")
    }

    /// The text as a JSON string literal.
    pub(crate) fn as_json(&self) -> &RawValue {
        &self.json
    }
}

/// Equal literals are equal texts: serde_json escapes a text one way only.
impl PartialEq for StatusText {
    fn eq(&self, other: &StatusText) -> bool {
        self.json.get() == other.json.get()
    }
}

impl Serialize for StatusText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for StatusText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<StatusText, D::Error> {
        String::deserialize(deserializer).map(|text| StatusText::new(&text))
    }
}

/// One row of `sessions_list`, with OpenClaw's row fields (sessions here are never archived or pinned).
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRowJson {
    pub key: String,
    pub kind: String,
    #[serialize_always]
    pub channel: Option<String>,
    /// Its label, else its key.
    pub display_name: String,
    /// Its run state as the gateway knows it ([`run_state`]).
    pub status: String,
    /// The keys of the sessions it spawned.
    pub child_sessions: Vec<String>,
    pub updated_at: i64,
    pub session_id: String,
    /// Absent for a session without history.
    pub state_version: Option<u64>,
    pub agent_id: String,
    pub archived: bool,
    pub pinned: bool,
    pub parent_session_key: Option<String>,
    /// A workspace session's members (the sessions working in its worktree now); absent on other rows.
    pub members: Option<Vec<String>>,
}

impl SessionRowJson {
    pub(crate) fn of(s: &SessionRow, state_version: u64, activity: &SessionActivity) -> SessionRowJson {
        SessionRowJson {
            key: s.session_key.clone(),
            kind: s.kind.clone(),
            channel: s.channel.clone(),
            display_name: s.label.clone().unwrap_or_else(|| s.session_key.clone()),
            status: run_state(&activity.latest_run).to_string(),
            child_sessions: activity.children.clone(),
            updated_at: s.updated_at,
            session_id: s.session_id.clone(),
            state_version: (state_version > 0).then_some(state_version),
            agent_id: s.agent_id.clone(),
            archived: false,
            pinned: false,
            parent_session_key: s.spawned_by.clone(),
            members: None,
        }
    }
}

/// `sessions_list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListJson {
    pub count: usize,
    pub sessions: Vec<SessionRowJson>,
    pub has_more: bool,
    pub limit_applied: u32,
    /// Arguments ignored or clamped (absent when none).
    #[serde(flatten, default)]
    pub notes: ArgNotesJson,
}

/// A transcript message.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageJson {
    pub role: String,
    pub text: String,
    pub created_at: i64,
    pub run_id: Option<String>,
    pub from_session_key: Option<String>,
}

impl From<&TranscriptMessage> for MessageJson {
    fn from(m: &TranscriptMessage) -> MessageJson {
        MessageJson {
            role: m.role.clone(),
            text: m.text.clone(),
            created_at: m.created_at,
            run_id: m.run_id.clone(),
            from_session_key: m.from_session.clone(),
        }
    }
}

/// `sessions_history`. Message texts are kept whole and never redacted here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryJson {
    pub session_key: String,
    pub messages: Vec<MessageJson>,
    pub truncated: bool,
    pub dropped_messages: bool,
    pub content_truncated: bool,
    pub content_redacted: bool,
    /// The size of `messages` as JSON.
    pub bytes: usize,
    /// The session's unread inbox (OpenClaw's field).
    pub pending_inputs: PendingInputsJson,
    /// Arguments ignored or clamped (absent when none).
    #[serde(flatten, default)]
    pub notes: ArgNotesJson,
}

/// At most this many pending inputs are listed (`total` counts them all).
const PENDING_INPUTS_SHOWN: usize = 50;

/// `sessions_history.pendingInputs`: the unread inbox, oldest first, without texts (a message sent
/// to the session is in its transcript already).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PendingInputsJson {
    pub items: Vec<PendingInputJson>,
    pub total: usize,
}

/// One unread inbox item.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingInputJson {
    pub id: String,
    pub run_id: Option<String>,
    pub from_session_key: Option<String>,
    pub created_at: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeliveryJson {
    pub status: String,
    pub mode: String,
}

/// `sessions_send`.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendJson {
    pub run_id: String,
    pub status: String,
    pub session_key: String,
    pub target_disposition: String,
    pub delivery: DeliveryJson,
    pub reply: Option<String>,
    pub watched: Option<bool>,
    /// Fire-and-forget only: all three of its fields, or none.
    #[serde(flatten)]
    pub fire_and_forget: Option<FireAndForgetJson>,
    /// Arguments ignored or clamped (absent when none).
    #[serde(flatten, default)]
    pub notes: ArgNotesJson,
}

/// OpenClaw's fields of a fire-and-forget `sessions_send`: the queued inbox item, that it is stored
/// (`"durable"`), and that a run of the target was started for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FireAndForgetJson {
    pub notification_id: String,
    pub durability: String,
    pub run_started: bool,
}

/// `sessions_spawn`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpawnJson {
    pub status: String,
    pub run_id: String,
    pub child_session_key: String,
    pub mode: String,
    pub expects_completion_message: bool,
    pub note: String,
    /// Arguments ignored or clamped (absent when none).
    #[serde(flatten, default)]
    pub notes: ArgNotesJson,
}

/// `sessions_unwatch`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnwatchJson {
    pub unwatched: bool,
    /// Arguments ignored or clamped (absent when none).
    #[serde(flatten, default)]
    pub notes: ArgNotesJson,
}

/// What a call's arguments did not do as given: `ignoredArgs` (unknown arguments, and those accepted
/// only for compatibility) and `clampedArgs` (`{name: {requested, applied}}`), each absent when empty.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArgNotesJson {
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub ignored_args: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub clamped_args: BTreeMap<String, ClampJson>,
}

/// A clamped argument: what was asked and what applies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClampJson {
    pub requested: i64,
    pub applied: i64,
}

impl From<&ArgNotes> for ArgNotesJson {
    fn from(n: &ArgNotes) -> ArgNotesJson {
        ArgNotesJson {
            ignored_args: n.ignored_args.clone(),
            clamped_args: n
                .clamped_args
                .iter()
                .map(|(k, (requested, applied))| {
                    (k.clone(), ClampJson { requested: *requested, applied: *applied })
                })
                .collect(),
        }
    }
}

/// A tool's result as JSON, by tool.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ToolJson {
    Status(StatusJson),
    List(ListJson),
    History(HistoryJson),
    Send(SendJson),
    Spawn(SpawnJson),
    Unwatch(UnwatchJson),
}

impl ToolJson {
    /// A call's result with what its arguments did not do as given.
    pub(crate) fn of_call(output: &ToolOutput, notes: &ArgNotes) -> ToolJson {
        let mut json = ToolJson::of(output);
        let slot = match &mut json {
            ToolJson::Status(j) => &mut j.notes,
            ToolJson::List(j) => &mut j.notes,
            ToolJson::History(j) => &mut j.notes,
            ToolJson::Send(j) => &mut j.notes,
            ToolJson::Spawn(j) => &mut j.notes,
            ToolJson::Unwatch(j) => &mut j.notes,
        };
        *slot = ArgNotesJson::from(notes);
        json
    }

    pub(crate) fn of(output: &ToolOutput) -> ToolJson {
        match output {
            ToolOutput::Status(s) => ToolJson::Status(status(s)),
            ToolOutput::List(l) => ToolJson::List(list(l)),
            ToolOutput::History(h) => ToolJson::History(history(h)),
            ToolOutput::Send(s) => ToolJson::Send(send(s)),
            ToolOutput::Spawn(s) => ToolJson::Spawn(SpawnJson {
                status: "accepted".into(),
                run_id: s.run_id.clone(),
                child_session_key: s.child_session_key.clone(),
                mode: "run".into(),
                expects_completion_message: true,
                note: "the child runs on its own; its terminal outcome is recorded and announced to you"
                    .into(),
                notes: ArgNotesJson::default(),
            }),
            ToolOutput::Unwatch { unwatched } => {
                ToolJson::Unwatch(UnwatchJson { unwatched: *unwatched, notes: ArgNotesJson::default() })
            }
        }
    }

    /// Reads `tool`'s result back from the JSON a gateway answered (the MCP server over HTTP).
    pub(crate) fn parse(tool: &str, details: Value) -> Result<ToolJson, serde_json::Error> {
        use serde::de::Error;
        Ok(match tool {
            "session_status" => ToolJson::Status(serde_json::from_value(details)?),
            "sessions_list" => ToolJson::List(serde_json::from_value(details)?),
            "sessions_history" => ToolJson::History(serde_json::from_value(details)?),
            "sessions_send" => ToolJson::Send(serde_json::from_value(details)?),
            "sessions_spawn" => ToolJson::Spawn(serde_json::from_value(details)?),
            "sessions_unwatch" => ToolJson::Unwatch(serde_json::from_value(details)?),
            other => return Err(serde_json::Error::custom(format!("unknown tool {other:?}"))),
        })
    }

    /// About the bytes of its `/tools/invoke` answer: a status's text twice (the content and
    /// `details.statusText`) and its page once more in the details, the text's length each.
    pub(crate) fn answer_size_hint(&self) -> usize {
        match self {
            ToolJson::Status(s) => 3 * s.status_text.as_json().get().len() + 512,
            _ => 2048,
        }
    }

    pub(crate) fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("tool results always serialize")
    }

    /// The readable text `/tools/invoke` answers, as OpenClaw does, as a JSON string literal: `statusText`
    /// when the tool has one (already escaped, [`StatusText`]), else the details as indented JSON.
    pub(crate) fn text_json(&self) -> Cow<'_, RawValue> {
        match self {
            ToolJson::Status(s) => Cow::Borrowed(s.status_text.as_json()),
            other => {
                let mut text = StringLiteral::with_capacity(1024);
                text.push_pretty(other).expect("tool results always serialize");
                Cow::Owned(text.finish())
            }
        }
    }
}

fn status(s: &StatusOutput) -> StatusJson {
    let row = &s.session;
    let changes = s.changes.as_ref().map(StateChangesJson::from);
    // The page's indented JSON takes some 200 bytes an event once escaped.
    let events = changes.as_ref().map_or(0, |c| c.events.len());
    let mut text = StringLiteral::with_capacity(256 + 256 * events);
    text.push_text(&format!(
        "Session {} ({}), session id {}, state version {}.",
        row.session_key, row.kind, row.session_id, s.state_version
    ));
    if let Some(goal) = &row.goal_objective {
        text.push_text(&format!("\nGoal: {goal}"));
        if let Some(st) = &row.goal_status {
            text.push_text(&format!(" ({st})"));
        }
    }
    if let Some(changes) = &changes {
        text.push_text("\n\nSession state changes:\n```json\n");
        push_changes_block(&mut text, s.state_version, changes);
        text.push_text("\n```");
    }
    StatusJson {
        ok: true,
        session_key: row.session_key.clone(),
        agent_id: row.agent_id.clone(),
        changed_model: false,
        session_id: row.session_id.clone(),
        kind: row.kind.clone(),
        state_version: s.state_version,
        state_changes: changes,
        status_text: StatusText { json: text.finish() },
        notes: ArgNotesJson::default(),
    }
}

/// The status text's block, `{"stateVersion", "stateChanges"}` in OpenClaw's key order, as
/// `to_string_pretty` writes it, escaped: written around each event's kept indented form
/// ([`RenderedEvent::in_text`]) rather than serialized, so an event is not rendered again per answer.
fn push_changes_block(text: &mut StringLiteral, state_version: u64, changes: &StateChangesJson) {
    text.push_escaped(r#"{\n  \"stateVersion\": "#);
    text.push_escaped(&state_version.to_string());
    text.push_escaped(r#",\n  \"stateChanges\": {\n    \"events\": ["#);
    for (i, event) in changes.events.iter().enumerate() {
        text.push_escaped(if i == 0 { r#"\n      "# } else { r#",\n      "# });
        text.push_escaped(event.in_text());
    }
    if !changes.events.is_empty() {
        text.push_escaped(r#"\n    "#);
    }
    text.push_escaped(&format!(
        r#"],\n    \"truncated\": {},\n    \"earliestAvailableSequence\": {},\n    \"historyGap\": {}\n  }}\n}}"#,
        changes.truncated, changes.earliest_available_sequence, changes.history_gap
    ));
}

fn list(l: &ListOutput) -> ListJson {
    let sessions: Vec<SessionRowJson> = l
        .sessions
        .iter()
        .map(|(r, v, a)| SessionRowJson {
            members: l.members.get(&r.session_key).cloned(),
            ..SessionRowJson::of(r, *v, a)
        })
        .collect();
    ListJson {
        count: sessions.len(),
        sessions,
        has_more: l.has_more,
        limit_applied: l.limit,
        notes: ArgNotesJson::default(),
    }
}

fn history(h: &HistoryOutput) -> HistoryJson {
    let messages: Vec<MessageJson> = h.messages.iter().map(MessageJson::from).collect();
    let bytes = serde_json::to_vec(&messages).map_or(0, |b| b.len());
    HistoryJson {
        session_key: h.session_key.clone(),
        messages,
        truncated: h.dropped > 0,
        dropped_messages: h.dropped > 0,
        content_truncated: false,
        content_redacted: false,
        bytes,
        pending_inputs: PendingInputsJson {
            items: h
                .pending
                .iter()
                .take(PENDING_INPUTS_SHOWN)
                .map(|i| PendingInputJson {
                    id: i.id.to_string(),
                    run_id: i.run_id.clone(),
                    from_session_key: i.from_session.clone(),
                    created_at: i.created_at,
                })
                .collect(),
            total: h.pending.len(),
        },
        notes: ArgNotesJson::default(),
    }
}

fn send(s: &SendOutput) -> SendJson {
    let (status, mode, reply, fire_and_forget) = match &s.status {
        SendStatus::Accepted { inbox_id } => (
            "accepted",
            "async",
            None,
            Some(FireAndForgetJson {
                notification_id: inbox_id.to_string(),
                durability: "durable".into(),
                run_started: true,
            }),
        ),
        SendStatus::Waited { end, reply } => {
            let status = match end {
                WaitEnd::Ok => "ok",
                WaitEnd::Error => "error",
                WaitEnd::Timeout => "timeout",
            };
            (status, "wait", reply.clone(), None)
        }
    };
    SendJson {
        run_id: s.run_id.clone(),
        status: status.into(),
        session_key: s.session_key.clone(),
        target_disposition: "queued".into(),
        delivery: DeliveryJson { status: "queued".into(), mode: mode.into() },
        reply,
        watched: s.watched,
        fire_and_forget,
        notes: ArgNotesJson::default(),
    }
}

impl From<&QueuedEvent> for SystemEventJson {
    fn from(e: &QueuedEvent) -> SystemEventJson {
        SystemEventJson { text: e.text.clone(), context_key: e.context_key.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sessionwatch_core::{Actor, NewEvent, RunStatus};
    use std::sync::Arc;

    /// The block as it was serialized before events were rendered once: the reference.
    fn serialized_block(state_version: u64, page: &ChangesPage) -> String {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Changes {
            events: Vec<EventJson>,
            truncated: bool,
            earliest_available_sequence: u64,
            history_gap: bool,
        }
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Block {
            state_version: u64,
            state_changes: Changes,
        }
        let block = Block {
            state_version,
            state_changes: Changes {
                events: page.events.iter().map(|e| EventJson::from(&**e)).collect(),
                truncated: page.truncated,
                earliest_available_sequence: page.earliest_available_sequence,
                history_gap: page.history_gap,
            },
        };
        let mut text = StringLiteral::with_capacity(0);
        text.push_pretty(&block).unwrap();
        text.finish().get().to_string()
    }

    fn written_block(state_version: u64, page: &ChangesPage) -> String {
        let mut text = StringLiteral::with_capacity(0);
        push_changes_block(&mut text, state_version, &StateChangesJson::from(page));
        text.finish().get().to_string()
    }

    #[test]
    fn the_changes_block_is_written_as_serde_json_indents_it() {
        let nasty = "quote \" backslash \\ newline \n tab \t nul \u{0} é 💥";
        let mut with_paths = NewEvent::human_message("agent:main:w", "main", nasty, Some(nasty.into()));
        with_paths.payload.paths = vec!["src/a.rs".into(), nasty.into()];
        with_paths.payload.turns = Some(3);
        with_paths.summary = nasty.into();
        let events = [
            NewEvent::human_message("agent:main:w", "main", "telegram", None),
            with_paths,
            NewEvent::run_terminal("agent:main:w", "main", "run-1", RunStatus::Ok),
            NewEvent::created("agent:main:w", "main", "s-1", Actor::system()),
        ];
        let stored: Vec<Arc<StoredEvent>> = events
            .iter()
            .enumerate()
            .map(|(i, e)| Arc::new(e.stored(i as u64 + 1, 1_700_000_000_000)))
            .collect();
        for n in 0..=stored.len() {
            for (truncated, history_gap) in [(false, false), (true, true)] {
                let page = ChangesPage {
                    head: 9,
                    events: stored[..n].to_vec(),
                    truncated,
                    earliest_available_sequence: 2,
                    history_gap,
                };
                assert_eq!(written_block(9, &page), serialized_block(9, &page), "{n} events");
            }
        }
    }

    #[test]
    fn the_details_carry_each_event_compact() {
        let stored = Arc::new(NewEvent::human_message("agent:main:w", "main", "x\"y", None).stored(4, 17));
        let page = ChangesPage {
            head: 4,
            events: vec![stored.clone()],
            truncated: false,
            earliest_available_sequence: 1,
            history_gap: false,
        };
        let details = serde_json::to_value(StateChangesJson::from(&page)).unwrap();
        assert_eq!(details["events"][0], serde_json::to_value(EventJson::from(&*stored)).unwrap());
        let parsed: StateChangesJson = serde_json::from_value(details).unwrap();
        assert_eq!(parsed, StateChangesJson::from(&page));
    }
}
