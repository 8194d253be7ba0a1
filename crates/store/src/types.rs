use sessionwatch_core::{DAY_MS, Millis, NewEvent, Notice, RegisterDecision, StoredEvent};

/// An append and the context its producer knows.
#[derive(Clone, Debug)]
pub struct AppendRequest {
    pub event: NewEvent,
    /// Watchers the producer names besides registered cursors (e.g. the spawner of a child).
    pub producer_watchers: Vec<String>,
    /// Write nothing unless some cursor targets the session (unwatched human turns are free).
    pub only_if_watched: bool,
    /// The physical store of the watchers hosted here (cursor store binding).
    pub watcher_store: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppendOutcome {
    Recorded {
        event: StoredEvent,
        notices: Vec<Notice>,
    },
    /// The dedupe key was already recorded for this session: the existing row, nothing changed.
    Duplicate(StoredEvent),
    /// `only_if_watched` and nobody watches the session: nothing written.
    Unwatched,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterOutcome {
    pub registered: bool,
    pub decision: RegisterDecision,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Head {
    /// The highest sequence ever issued (the state version); never decreases.
    pub head: u64,
    /// The highest pruned sequence: history before `floor + 1` is gone.
    pub floor: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetentionPolicy {
    pub max_age_ms: Millis,
    pub max_rows: u64,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy { max_age_ms: 30 * DAY_MS, max_rows: 50_000 }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub events_by_age: u64,
    pub events_by_cap: u64,
    pub cursors_expired: u64,
}

/// A session as the gateway creates it.
#[derive(Clone, Debug, Default)]
pub struct NewSession {
    pub session_key: String,
    pub agent_id: String,
    pub session_id: String,
    pub kind: String,
    pub chat_type: Option<String>,
    pub channel: Option<String>,
    pub label: Option<String>,
    pub spawned_by: Option<String>,
    pub created_via: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRow {
    pub session_key: String,
    pub agent_id: String,
    pub session_id: String,
    pub kind: String,
    pub chat_type: Option<String>,
    pub channel: Option<String>,
    pub label: Option<String>,
    pub spawned_by: Option<String>,
    pub created_via: Option<String>,
    pub goal_objective: Option<String>,
    pub goal_status: Option<String>,
    pub created_at: Millis,
    pub updated_at: Millis,
}
