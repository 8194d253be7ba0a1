pub use sessionwatch_core::Acknowledged;
use sessionwatch_core::{
    AgentSessionKey, Cursor, DAY_MS, Millis, NewEvent, Notice, Provenance, RecordPolicy, RegisterDecision,
    StoredEvent, decide_registration,
};
use std::sync::Arc;

/// An append and the context its producer knows.
#[derive(Clone, Debug)]
pub struct AppendRequest {
    pub event: NewEvent,
    /// Who else learns of it and whether it is written when unwatched ([`RecordPolicy`], decided in core).
    pub policy: RecordPolicy,
    /// The physical store of the watchers hosted here (cursor store binding).
    pub watcher_store: String,
    /// The gateway making the append. `None` (single gateway, and always on SQLite): every notice is
    /// answered for local delivery. `Some(me)` on a shared PostgreSQL database: a notice whose watcher
    /// is hosted by another gateway is pushed to it (NOTIFY, inside the append transaction) and not
    /// answered; watchers hosted here, or by no gateway yet (they are then claimed for `me`), are
    /// answered for local delivery.
    pub host_id: Option<String>,
}

impl AppendRequest {
    /// An append with no producer watchers, written whether watched or not, for local delivery.
    pub fn new(event: NewEvent, watcher_store: impl Into<String>) -> AppendRequest {
        AppendRequest {
            event,
            policy: RecordPolicy::always(),
            watcher_store: watcher_store.into(),
            host_id: None,
        }
    }
}

/// A watch registration: `watcher` watches `target`, bound to the store of the watchers hosted here.
#[derive(Clone, Debug)]
pub struct WatchRequest {
    pub watcher: AgentSessionKey,
    pub target: AgentSessionKey,
    pub provenance: Provenance,
    /// The physical store of the watchers hosted here (cursor store binding).
    pub watcher_store: String,
}

impl WatchRequest {
    pub fn new(
        watcher: AgentSessionKey,
        target: AgentSessionKey,
        provenance: Provenance,
        watcher_store: impl Into<String>,
    ) -> WatchRequest {
        WatchRequest { watcher, target, provenance, watcher_store: watcher_store.into() }
    }

    /// What core decides for it over the `existing` cursor, at the target's `head`.
    pub(crate) fn decide(&self, existing: Option<&Cursor>, head: u64, now: Millis) -> RegisterDecision {
        let (watcher, target) = (self.watcher.as_str(), self.target.as_str());
        decide_registration(existing, watcher, target, self.provenance, &self.watcher_store, head, now)
    }
}

/// What a store's cross-gateway listener reports to the gateway that hosts watchers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostSignal {
    /// The listener is (again) listening: notices may have been missed while it was not, so reconcile
    /// every watcher hosted here from the durable cursors.
    Listening,
    /// Another gateway changed a cursor of this watcher (a session key hosted here): reconcile it.
    Watcher(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppendOutcome {
    Recorded {
        /// Shared with the tail cache, which keeps the same event.
        event: Arc<StoredEvent>,
        notices: Vec<Notice>,
    },
    /// The dedupe key was already recorded for this session: the existing row, nothing changed.
    Duplicate(Box<StoredEvent>),
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

/// Group commits so far and the writes they carried: `writes / commits` is how well concurrent writers
/// share commits (one per write: none shared).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupCommits {
    /// Write transactions the group-commit path committed.
    pub commits: u64,
    /// The writes in them.
    pub writes: u64,
}

impl GroupCommits {
    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: GroupCommits) -> GroupCommits {
        GroupCommits { commits: self.commits - earlier.commits, writes: self.writes - earlier.writes }
    }
}

/// Where a store's group-commit path counts its commits ([`GroupCommits`]).
#[derive(Debug, Default)]
pub(crate) struct GroupCommitCounter {
    commits: std::sync::atomic::AtomicU64,
    writes: std::sync::atomic::AtomicU64,
}

impl GroupCommitCounter {
    /// One commit carrying `writes` writes.
    pub fn committed(&self, writes: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.writes.fetch_add(writes as u64, Relaxed);
        self.commits.fetch_add(1, Relaxed);
    }

    pub fn get(&self) -> GroupCommits {
        use std::sync::atomic::Ordering::Relaxed;
        GroupCommits { commits: self.commits.load(Relaxed), writes: self.writes.load(Relaxed) }
    }
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

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub events_by_age: u64,
    pub events_by_cap: u64,
    /// The watches retention removed, as (watcher, target), sorted: their queued notices must go too.
    pub cursors_expired: Vec<(String, String)>,
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
    /// The gateway that hosts the session (delivers its notices).
    pub host_id: Option<String>,
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
    pub host_id: Option<String>,
    pub created_at: Millis,
    pub updated_at: Millis,
    /// The working directory its native CLI reported (hooks' `cwd`, or the catalog entry's).
    pub cwd: Option<String>,
    /// What its native CLI is doing, as its hooks or file monitor last said: `running` (a turn is
    /// under way), `waiting` (a turn ended: the user's move) or `idle` (the CLI session ended).
    /// `None` when nothing ever said (a host or spawned session: its runs tell).
    pub native_state: Option<String>,
}

/// Which sessions `list_sessions` answers, most recently updated first.
#[derive(Clone, Debug, Default)]
pub struct SessionFilter {
    pub kinds: Option<Vec<String>>,
    /// Only sessions of this agent.
    pub agent_id: Option<String>,
    pub updated_since: Option<Millis>,
    /// Rows skipped before the first answered (paging).
    pub offset: u32,
    pub limit: u32,
    /// Only native CLI sessions under way: a working directory known and a state other than `idle` (what a
    /// start rebuilds workspace membership from, without reading every session).
    pub native_active: bool,
}

/// A watch cursor with both of its ends (the dashboard's watch graph).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchEdge {
    pub watcher: String,
    pub target: String,
    pub cursor: Cursor,
    /// The watcher spawned the target (the target's session row names it as `spawned_by`).
    pub spawned: bool,
}

/// A message that passed through the gateway (the small transcript behind `sessions_history`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranscriptMessage {
    pub id: i64,
    pub session_id: String,
    pub role: String,
    pub text: String,
    pub run_id: Option<String>,
    /// The session that sent it, for inter-session messages.
    pub from_session: Option<String>,
    pub created_at: Millis,
}

#[derive(Clone, Debug, Default)]
pub struct NewMessage {
    pub session_id: String,
    pub role: String,
    pub text: String,
    pub run_id: Option<String>,
    pub from_session: Option<String>,
}

/// What a session is doing, as the gateway knows it: its latest run and the sessions it spawned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionActivity {
    /// The latest run: `None` without runs; `Some(None)` while it runs; `Some(Some(status))` once it
    /// ended (`ok`, `error`, `timeout`, `cancelled`).
    pub latest_run: Option<Option<String>>,
    /// The keys of the sessions it spawned (their rows name it as `spawned_by`), sorted.
    pub children: Vec<String>,
}

/// A message waiting for the session's next turn (from `sessions_send` / `sessions_spawn`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboxItem {
    pub id: i64,
    pub run_id: Option<String>,
    pub from_session: Option<String>,
    pub text: String,
    pub created_at: Millis,
}

/// One turn delivered into a session (an inbound message, `sessions_send`, `sessions_spawn`'s task): the
/// writes [`SessionStore::record_turn`](crate::SessionStore::record_turn) makes in one transaction. The text
/// goes to the inbox and to the transcript (role `user`), both with `run_id` and `from_session`.
#[derive(Clone, Debug)]
pub struct Turn {
    pub session_key: String,
    pub agent_id: String,
    /// The incarnation the transcript message belongs to.
    pub session_id: String,
    pub text: String,
    pub run_id: Option<String>,
    /// The sending session, when a session sent it.
    pub from_session: Option<String>,
    /// A run the turn starts, written before the rest (as `create_run`: earlier unfinished runs of the
    /// session are superseded).
    pub run: Option<RunRow>,
    /// The event the turn records, appended as [`SignalLog::append`](crate::SignalLog::append) does.
    pub event: Option<AppendRequest>,
    /// Bumps the session's `updated_at` and records `host_id` as its host when given (as
    /// `touch_session`): the turn is served here.
    pub touch: bool,
    pub host_id: Option<String>,
}

impl Turn {
    /// The inbox item the turn leaves for the session's next turn (its id given by the store).
    pub fn inbox_item(&self, now: Millis) -> InboxItem {
        InboxItem {
            id: 0,
            run_id: self.run_id.clone(),
            from_session: self.from_session.clone(),
            text: self.text.clone(),
            created_at: now,
        }
    }

    /// The transcript message the turn appends.
    pub fn message(&self) -> NewMessage {
        NewMessage {
            session_id: self.session_id.clone(),
            role: "user".into(),
            text: self.text.clone(),
            run_id: self.run_id.clone(),
            from_session: self.from_session.clone(),
        }
    }
}

/// What [`SessionStore::record_turn`](crate::SessionStore::record_turn) wrote.
#[derive(Debug)]
pub struct TurnOutcome {
    pub inbox_id: i64,
    pub message_id: i64,
    /// The append of [`Turn::event`]; an error here rolled back the append alone.
    pub event: Option<crate::Result<AppendOutcome>>,
    /// The session's head as the turn's transaction left it.
    pub head: Head,
}

/// A run of a session (a spawned child's task, a waited `sessions_send`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRow {
    pub run_id: String,
    pub session_key: String,
    pub agent_id: String,
    /// The session incarnation that owns the run.
    pub session_id: String,
    /// The session that asked for the run (the spawner), if any.
    pub requester: Option<String>,
    /// Whether the run was spawned as a child (its terminal outcome is logged on the child).
    pub is_child: bool,
    pub status: Option<String>,
    pub reply: Option<String>,
    /// A later run of the same session replaced this one before it finished.
    pub superseded: bool,
    pub created_at: Millis,
    pub finished_at: Option<Millis>,
}

impl RunRow {
    /// Whether a terminal outcome may finish this unfinished run, its session's incarnation now being
    /// `current` and the writer's `writer` (when it says): only its current owner's may (not after a
    /// later run replaced it, nor once the session was reset, nor from another incarnation).
    pub(crate) fn may_be_finished_by(&self, current: Option<&str>, writer: Option<&str>) -> bool {
        let stale_incarnation = current != Some(self.session_id.as_str());
        let wrong_writer = writer.is_some_and(|s| s != self.session_id);
        !(self.superseded || stale_incarnation || wrong_writer)
    }
}

/// A run's terminal outcome, as its writer reports it
/// ([`SessionStore::finish_run`](crate::SessionStore::finish_run)).
#[derive(Clone, Debug)]
pub struct FinishRunRequest {
    pub run_id: String,
    pub status: String,
    pub reply: Option<String>,
    /// The writer's incarnation, when given: it must be the run's.
    pub session_id: Option<String>,
}

/// What a terminal-outcome write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishRun {
    /// This write was the first terminal outcome: it wins.
    Finished(RunRow),
    /// An earlier terminal outcome already won; the stored run is answered unchanged.
    AlreadyFinished(RunRow),
    /// The writer is not the run's current owner (replaced run, or an older session incarnation).
    NotOwner(RunRow),
    Unknown,
}

/// A link from an adopted session to its upstream source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamLinkRow {
    pub session_key: String,
    pub agent_id: String,
    pub catalog_id: String,
    pub host_id: String,
    pub thread_id: String,
    pub upstream_kind: String,
    pub reference_json: String,
    pub marker_json: String,
    pub last_scanned_at: Option<Millis>,
    /// Consecutive checks that found the source gone (kept durably).
    pub missing_streak: u32,
    pub created_at: Millis,
    pub updated_at: Millis,
}

impl UpstreamLinkRow {
    /// The link as this row read it: what a compare-and-set on `updated_at` expects.
    pub fn version(&self) -> LinkVersion {
        LinkVersion {
            session_key: self.session_key.clone(),
            agent_id: self.agent_id.clone(),
            updated_at: self.updated_at,
        }
    }
}

/// A link written last at `updated_at`: the compare-and-set of
/// [`Links::advance_link_marker`](crate::Links::advance_link_marker) and
/// [`Links::set_link_missing_streak`](crate::Links::set_link_missing_streak) writes only that version.
#[derive(Clone, Debug)]
pub struct LinkVersion {
    pub session_key: String,
    pub agent_id: String,
    pub updated_at: Millis,
}

/// What [`crate::Links::watched_links_since`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchedLinks {
    /// Nothing [`crate::Links::watched_links`] answers changed since the version the caller holds.
    Unchanged,
    /// The watched links and the version they were read at, to ask with next time (`None`: the backend
    /// keeps no version, and every call reads the links).
    Read { links: Vec<UpstreamLinkRow>, version: Option<i64> },
}

/// What an upsert of a link did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkUpsert {
    Created,
    /// Same source: the existing marker was kept.
    Kept,
    /// The source changed: the marker was re-baselined.
    Rebaselined,
}

impl LinkUpsert {
    /// What writing `link` over `existing` (its session's stored link, if any) does: the stored link is
    /// kept while it names the same upstream session the same way.
    pub(crate) fn of(existing: Option<&UpstreamLinkRow>, link: &UpstreamLinkRow) -> LinkUpsert {
        match existing {
            None => LinkUpsert::Created,
            Some(old)
                if old.catalog_id == link.catalog_id
                    && old.host_id == link.host_id
                    && old.thread_id == link.thread_id
                    && old.upstream_kind == link.upstream_kind
                    && old.reference_json == link.reference_json =>
            {
                LinkUpsert::Kept
            }
            Some(_) => LinkUpsert::Rebaselined,
        }
    }
}

/// A remote node (`sessionwatch node`) the gateway issued a token to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRow {
    pub name: String,
    pub created_at: Millis,
    /// When it last reported (`None`: never).
    pub last_seen_at: Option<Millis>,
}
