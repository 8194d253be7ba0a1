//! What the gateway's operations answer, as values: `wire` alone turns them into JSON (and the tools'
//! results back, for the MCP server that reaches a gateway over HTTP).

use sessionwatch_core::{ChangesPage, QueuedEvent, StoredEvent};
use sessionwatch_store::{InboxItem, SessionActivity, SessionRow, TranscriptMessage};
use std::sync::Arc;

/// The result of one tool call.
#[derive(Clone, Debug)]
pub(crate) enum ToolOutput {
    Status(Box<StatusOutput>),
    List(ListOutput),
    History(HistoryOutput),
    Send(SendOutput),
    Spawn(SpawnOutput),
    Unwatch { unwatched: bool },
}

/// `session_status`: the session, its state version and, when asked, the changes since a position.
#[derive(Clone, Debug)]
pub(crate) struct StatusOutput {
    pub session: SessionRow,
    pub state_version: u64,
    /// The page read for `changesSince` (its head is `state_version`).
    pub changes: Option<ChangesPage>,
}

/// `sessions_list`: one page of sessions, each with its state version (0: no history) and activity.
#[derive(Clone, Debug)]
pub(crate) struct ListOutput {
    pub sessions: Vec<(SessionRow, u64, SessionActivity)>,
    /// Workspace sessions (by key): their members now, sorted.
    pub members: std::collections::HashMap<String, Vec<String>>,
    pub has_more: bool,
    pub limit: u32,
}

/// `sessions_history`: the newest messages shown, oldest first, and how many older ones were left out.
#[derive(Clone, Debug)]
pub(crate) struct HistoryOutput {
    pub session_key: String,
    pub messages: Vec<TranscriptMessage>,
    pub dropped: usize,
    /// The session's unread inbox, oldest first.
    pub pending: Vec<InboxItem>,
}

/// How a `sessions_send` run ended, as far as the caller waited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SendStatus {
    /// Queued; the caller did not wait. `inbox_id`: the message's item in the target's inbox (durable: it
    /// is in the database before the answer).
    Accepted { inbox_id: i64 },
    /// The caller waited (`timeoutSeconds` > 0): how the run ended, as far as it waited, and its reply.
    Waited { end: WaitEnd, reply: Option<String> },
}

/// How a waited `sessions_send` run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitEnd {
    Ok,
    Error,
    Timeout,
}

/// `sessions_send`.
#[derive(Clone, Debug)]
pub(crate) struct SendOutput {
    pub run_id: String,
    pub session_key: String,
    pub status: SendStatus,
    /// `watch: true` → whether a watch is in place; `watch: false` → `Some(false)`; not asked → `None`.
    pub watched: Option<bool>,
}

/// `sessions_spawn`.
#[derive(Clone, Debug)]
pub(crate) struct SpawnOutput {
    pub run_id: String,
    pub child_session_key: String,
}

/// `POST /v1/sessions`: the session and whether this call created it.
#[derive(Clone, Debug)]
pub(crate) struct SessionCreated {
    pub session: SessionRow,
    pub created: bool,
}

/// `POST /v1/sessions/{key}/inbound`.
#[derive(Clone, Debug)]
pub(crate) struct InboundOutput {
    pub session_key: String,
    pub session_id: String,
    pub state_version: u64,
    /// The `human_direct_message` recorded, if one was (shared with the store's tail cache, not copied).
    pub event: Option<Arc<StoredEvent>>,
}

/// A turn's drained system events (`POST …/turns` with the inbox, `POST …/notices` without).
#[derive(Clone, Debug)]
pub(crate) struct DrainedOutput {
    pub session_key: String,
    pub system_events: Vec<QueuedEvent>,
    /// `None` when the inbox was not taken (`…/notices`).
    pub inbox: Option<Vec<InboxItem>>,
}

/// `POST /v1/sessions/{key}/messages`.
#[derive(Clone, Debug)]
pub(crate) struct MessageAdded {
    pub session_key: String,
    pub id: i64,
}

/// `PUT`/`DELETE /v1/sessions/{key}/goal`.
#[derive(Clone, Debug)]
pub(crate) struct GoalOutput {
    pub session_key: String,
    pub changed: bool,
    pub event: Option<StoredEvent>,
    pub state_version: u64,
}

/// `POST /v1/sessions/{key}/compaction`.
#[derive(Clone, Debug)]
pub(crate) struct CompactedOutput {
    pub session_key: String,
    pub recorded: bool,
    /// The event recorded now, or the one recorded before under the same operation id.
    pub event: Option<StoredEvent>,
}

/// `POST /v1/sessions/{key}/reset`.
#[derive(Clone, Debug)]
pub(crate) struct ResetOutput {
    pub session_key: String,
    pub session_id: String,
    pub watches_cleared: usize,
}

/// `POST /v1/runs/{id}/result`.
#[derive(Clone, Debug)]
pub(crate) struct RunResultOutput {
    pub run_id: String,
    /// False when the run had already finished (`status` is then its first outcome).
    pub accepted: bool,
    pub status: String,
}
