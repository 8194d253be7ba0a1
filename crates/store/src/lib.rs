//! The durable state of sessionwatch, one trait per concern: the [`SignalLog`] (events, per-session heads
//! and floors, watch cursors, retention), the [`SessionStore`] (sessions, transcript, inbox, runs) and
//! [`Links`] (upstream links, remote nodes). This is the only crate that speaks SQL. Every backend
//! implements each trait once with the same behaviour, checked by one conformance suite per trait
//! (`tests/it/conformance.rs`); [`Store`] names a backend that implements all three.

mod error;
mod payload;
pub mod postgres;
mod rows;
pub mod sqlite;
mod tail;
mod types;

pub use error::StoreError;
pub use payload::PayloadJson;
pub use postgres::{PostgresOptions, PostgresStore};
pub use sqlite::{SqliteOptions, SqliteStore, Synchronous};
pub use types::*;

use sessionwatch_core::{AgentSessionKey, ChangesPage, Cursor, Limit, Millis, Notice};

use std::collections::HashMap;
use std::future::Future;

pub type Result<T> = std::result::Result<T, StoreError>;

/// A backend with every concern: what the gateway holds. Both backends are cheap-to-clone handles, so the
/// kernel (the log) and the gateway (sessions, links) share one. Times are passed in (`now`) so callers
/// own the clock.
pub trait Store: SignalLog + SessionStore + Links + Clone {}

impl<S: SignalLog + SessionStore + Links + Clone> Store for S {}

/// The signal log: appends (dedupe, head bump, cursor moves in one transaction), pages and heads, watch
/// cursors (registration, acknowledgement, sweep, reconciliation) and retention. The kernel drives it.
pub trait SignalLog: Send + Sync + 'static {
    /// Appends one event in one write transaction: dedupe, head bump, cursor seeding/updates.
    fn append(&self, req: AppendRequest, now: Millis) -> impl Future<Output = Result<AppendOutcome>> + Send;

    /// Registers the request's watcher on its target at the target's current head (see
    /// `decide_registration`).
    fn register_watch(
        &self,
        req: WatchRequest,
        now: Millis,
    ) -> impl Future<Output = Result<RegisterOutcome>> + Send;

    /// Drops a watch; its pending notice goes with it. Answers whether a cursor existed.
    fn unwatch(&self, watcher: String, target: String) -> impl Future<Output = Result<bool>> + Send;

    /// Claims and acknowledges drained notices of `watcher` for `targets` in one transaction
    /// ([`sessionwatch_core::Cursor::claim`]): only a cursor that still has its notice pending delivers
    /// it, so concurrent or stale drains on several gateways deliver each notice once.
    fn acknowledge(
        &self,
        watcher: AgentSessionKey,
        targets: Vec<AgentSessionKey>,
        watcher_store: String,
        now: Millis,
    ) -> impl Future<Output = Result<Acknowledged>> + Send;

    /// Start-up recovery: every pending cursor of an existing watcher with a matching store re-opens its
    /// notice (`N = M`).
    fn sweep(&self, watcher_store: String, now: Millis) -> impl Future<Output = Result<Vec<Notice>>> + Send;

    /// [`SignalLog::sweep`] for one gateway of several: only watchers hosted by `host_id` are swept, and
    /// pending watchers with no recorded host are claimed for it first (so exactly one gateway
    /// recovers each). `None` sweeps every watcher, exactly like `sweep`.
    fn sweep_for_host(
        &self,
        watcher_store: String,
        host_id: Option<String>,
        now: Millis,
    ) -> impl Future<Output = Result<Vec<Notice>>> + Send;

    /// Read-only reconciliation: the notice of every pending cursor (`M > L`, text at `changesSince L`)
    /// whose watcher exists, has a valid address and a matching store, and is hosted by `host_id`
    /// (`None`: any host), optionally only for the watcher `watcher`. Nothing is written: re-delivering
    /// a notice that is already queued is harmless (queues dedupe on the byte-stable text).
    fn pending_notices_for_host(
        &self,
        watcher_store: String,
        host_id: Option<String>,
        watcher: Option<String>,
    ) -> impl Future<Output = Result<Vec<Notice>>> + Send;

    /// Cross-gateway wake-ups for the watchers hosted by `host_id`, when the backend can push them
    /// (PostgreSQL LISTEN/NOTIFY). `None` when it cannot (SQLite: one gateway per database). The
    /// stream reports [`HostSignal::Listening`] first and after every reconnect.
    fn listen_host(&self, host_id: String) -> Option<tokio::sync::mpsc::Receiver<HostSignal>> {
        let _ = host_id;
        None
    }

    fn changes_since(
        &self,
        session_key: String,
        agent_id: String,
        since: u64,
        limit: Limit,
    ) -> impl Future<Output = Result<ChangesPage>> + Send;

    fn head(&self, session_key: String, agent_id: String) -> impl Future<Output = Result<Head>> + Send;

    /// The group commits so far (SQLite: every write, each in the writer's next batch; PostgreSQL: the
    /// appends that went through the batched path, whether alone or with others).
    fn group_commits(&self) -> GroupCommits;

    /// State versions of many sessions in one query; sessions without a head are absent.
    fn state_versions(
        &self,
        sessions: Vec<(String, String)>,
    ) -> impl Future<Output = Result<HashMap<(String, String), u64>>> + Send;

    fn prune(&self, policy: RetentionPolicy, now: Millis)
    -> impl Future<Output = Result<PruneReport>> + Send;

    fn cursor(&self, watcher: String, target: String) -> impl Future<Output = Result<Option<Cursor>>> + Send;

    fn cursors_of_watcher(
        &self,
        watcher: String,
    ) -> impl Future<Output = Result<Vec<(String, Cursor)>>> + Send;

    /// The cursors with one of `keys` on either end (watcher or target), ordered by (watcher, target),
    /// at most `limit`.
    fn watch_edges(
        &self,
        keys: Vec<String>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<WatchEdge>>> + Send;

    /// Removes every cursor held by `watcher` (a reset); answers the targets it watched.
    fn clear_watcher(&self, watcher: String) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// Deletes a session's history, head and every cursor on either side of it.
    fn delete_session_state(
        &self,
        session_key: String,
        agent_id: String,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// Sessions and what belongs to one: its transcript, inbox and runs. The gateway holds it.
pub trait SessionStore: Send + Sync + 'static {
    /// Creates the session row if missing (idempotent). Answers the row and whether it was created.
    fn ensure_session(
        &self,
        new: NewSession,
        now: Millis,
    ) -> impl Future<Output = Result<(SessionRow, bool)>> + Send;
    fn get_session(
        &self,
        session_key: String,
        agent_id: String,
    ) -> impl Future<Output = Result<Option<SessionRow>>> + Send;

    fn list_sessions(&self, filter: SessionFilter) -> impl Future<Output = Result<Vec<SessionRow>>> + Send;

    /// Sets (or, with both `None`, clears) the goal; answers the row as it was before, `None` if unknown.
    fn update_goal(
        &self,
        session_key: String,
        agent_id: String,
        objective: Option<String>,
        status: Option<String>,
        now: Millis,
    ) -> impl Future<Output = Result<Option<SessionRow>>> + Send;

    /// Gives the session a new incarnation id and clears its inbox; answers false for an unknown session.
    fn reset_session(
        &self,
        session_key: String,
        agent_id: String,
        new_session_id: String,
        now: Millis,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Sets what a native CLI session is doing and where (`SessionRow::native_state`, `cwd`); a `None`
    /// keeps that one. Does not bump `updated_at` (a state is not a change of the session). Answers false
    /// for an unknown session.
    fn set_native_state(
        &self,
        session_key: String,
        agent_id: String,
        cwd: Option<String>,
        state: Option<String>,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Records which gateway hosts the session (when given) and bumps `updated_at`.
    fn touch_session(
        &self,
        session_key: String,
        agent_id: String,
        host_id: Option<String>,
        now: Millis,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Appends to the session's transcript (bounded: the oldest messages go past [`TRANSCRIPT_CAP`]).
    fn append_message(
        &self,
        session_key: String,
        agent_id: String,
        message: NewMessage,
        now: Millis,
    ) -> impl Future<Output = Result<i64>> + Send;

    /// The newest `limit` messages, oldest first.
    fn messages(
        &self,
        session_key: String,
        agent_id: String,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<TranscriptMessage>>> + Send;

    fn push_inbox(
        &self,
        session_key: String,
        agent_id: String,
        item: InboxItem,
    ) -> impl Future<Output = Result<i64>> + Send;

    /// Everything waiting in the session's inbox, oldest first, left in place.
    fn pending_inbox(
        &self,
        session_key: String,
        agent_id: String,
    ) -> impl Future<Output = Result<Vec<InboxItem>>> + Send;

    /// Each session's latest run and children (one read for a page of `sessions_list`); a session
    /// without either is absent.
    fn session_activity(
        &self,
        sessions: Vec<(String, String)>,
    ) -> impl Future<Output = Result<HashMap<(String, String), SessionActivity>>> + Send;

    /// Takes (removes and answers) everything waiting in the session's inbox, oldest first.
    fn take_inbox(
        &self,
        session_key: String,
        agent_id: String,
    ) -> impl Future<Output = Result<Vec<InboxItem>>> + Send;

    /// Starts a run; unfinished earlier runs of the same session are superseded.
    fn create_run(&self, run: RunRow) -> impl Future<Output = Result<()>> + Send;

    fn get_run(&self, run_id: String) -> impl Future<Output = Result<Option<RunRow>>> + Send;

    /// Writes a run's terminal outcome: the first write of the current owner wins. The request's
    /// `session_id`, when given, is the writer's incarnation and must be the run's.
    fn finish_run(
        &self,
        request: FinishRunRequest,
        now: Millis,
    ) -> impl Future<Output = Result<FinishRun>> + Send;

    /// The writes of one turn delivered into a session ([`Turn`]: run, event, inbox item, transcript
    /// message, the session's host) in one transaction. The event's append alone may fail and is answered
    /// in [`TurnOutcome::event`], the rest committing without it (recording is best effort).
    fn record_turn(&self, turn: Turn, now: Millis) -> impl Future<Output = Result<TurnOutcome>> + Send;
}

/// Links to sessions of other coding agents (upstream links, their markers) and the remote nodes that
/// report them.
pub trait Links: Send + Sync + 'static {
    /// Creates or updates an upstream link; the marker is kept for the same source and replaced when the
    /// source changed.
    fn upsert_link(&self, link: UpstreamLinkRow) -> impl Future<Output = Result<LinkUpsert>> + Send;

    fn get_link(
        &self,
        session_key: String,
        agent_id: String,
    ) -> impl Future<Output = Result<Option<UpstreamLinkRow>>> + Send;

    /// Links whose session some cursor watches (any provenance), by catalog then key.
    fn watched_links(&self) -> impl Future<Output = Result<Vec<UpstreamLinkRow>>> + Send;

    /// [`Links::watched_links`], unless nothing they depend on (the links, and the cursors that make a
    /// link watched) changed since `known`, the version an earlier answer gave: then
    /// [`WatchedLinks::Unchanged`], from one small read. The version is read before the links, so a write
    /// that lands between the two reads leaves the answer's version behind and the next call reads again.
    fn watched_links_since(&self, known: Option<i64>) -> impl Future<Output = Result<WatchedLinks>> + Send;

    /// Every link whose source lives on `host_id` (watched or not), by session key.
    fn links_of_host(&self, host_id: String) -> impl Future<Output = Result<Vec<UpstreamLinkRow>>> + Send;

    fn delete_link(&self, session_key: String, agent_id: String)
    -> impl Future<Output = Result<bool>> + Send;

    /// Compare-and-set on `updated_at`: advances the marker and resets the missing streak.
    fn advance_link_marker(
        &self,
        link: LinkVersion,
        marker_json: String,
        now: Millis,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Stores the missing streak (compare-and-set on `updated_at`, which it leaves unchanged).
    fn set_link_missing_streak(
        &self,
        link: LinkVersion,
        streak: u32,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Registers node `name` with the SHA-256 (hex) of its token; false when the name is taken.
    fn create_node(
        &self,
        name: String,
        token_sha256: String,
        now: Millis,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Removes node `name` (its token stops working); false when there was none.
    fn revoke_node(&self, name: String) -> impl Future<Output = Result<bool>> + Send;

    /// Records that node `name` reported at `now`; false when there is no such node.
    fn touch_node(&self, name: String, now: Millis) -> impl Future<Output = Result<bool>> + Send;

    /// The node whose token hashes to `token_sha256`.
    fn node_by_token(&self, token_sha256: String) -> impl Future<Output = Result<Option<NodeRow>>> + Send;

    /// Every node, by name.
    fn list_nodes(&self) -> impl Future<Output = Result<Vec<NodeRow>>> + Send;
}

/// Messages kept per session in the gateway transcript.
pub const TRANSCRIPT_CAP: i64 = 500;
