//! Event kinds, actors, payloads, fixed summaries and the occurred-at clamp.

use crate::{DAY_MS, Millis};

/// Upstream clocks lie: occurred-at is clamped to [now − 24 h, now].
pub const MAX_OCCURRED_AT_SKEW_MS: Millis = DAY_MS;

/// Declares the event kinds once: the enum, [`EventKind::ALL`], [`EventKind::as_str`] and
/// [`EventKind::parse`] all come from this one list, so a new kind cannot be left out of any of them (a kind
/// missing from `ALL` would make every page holding it unreadable, on both stores).
macro_rules! event_kinds {
    ($($(#[$doc:meta])* $kind:ident => $name:literal,)+) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum EventKind {
            $($(#[$doc])* $kind,)+
        }

        impl EventKind {
            pub const ALL: [EventKind; [$(EventKind::$kind),+].len()] = [$(EventKind::$kind),+];

            /// The stored and wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(EventKind::$kind => $name,)+
                }
            }

            pub fn parse(s: &str) -> Option<EventKind> {
                match s {
                    $($name => Some(EventKind::$kind),)+
                    _ => None,
                }
            }
        }
    };
}

event_kinds! {
    HumanDirectMessage => "human_direct_message",
    UpstreamMissing => "upstream_missing",
    GoalChanged => "goal_changed",
    ChildSpawned => "child_spawned",
    RunCompleted => "run_completed",
    RunFailed => "run_failed",
    Compacted => "compacted",
    Adopted => "adopted",
    Created => "created",
    /// A workspace's files were written by a session's tools (paths only, never contents).
    FilesChanged => "files_changed",
    /// A workspace's HEAD moved: branch switch, commit, reset, rebase, merge.
    HeadMoved => "head_moved",
}

impl EventKind {
    /// Material kinds move watchers' cursors and queue notices; the rest are log-only
    /// (`child_spawned` seeds the spawner's cursor instead).
    pub fn notifies(self) -> bool {
        matches!(
            self,
            EventKind::HumanDirectMessage
                | EventKind::UpstreamMissing
                | EventKind::GoalChanged
                | EventKind::FilesChanged
                | EventKind::HeadMoved
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActorType {
    Human,
    Agent,
    System,
}

impl ActorType {
    pub fn as_str(self) -> &'static str {
        match self {
            ActorType::Human => "human",
            ActorType::Agent => "agent",
            ActorType::System => "system",
        }
    }

    pub fn parse(s: &str) -> Option<ActorType> {
        match s {
            "human" => Some(ActorType::Human),
            "agent" => Some(ActorType::Agent),
            "system" => Some(ActorType::System),
            _ => None,
        }
    }
}

/// Who caused an event. For an agent the id is the session key that acted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Actor {
    pub kind: ActorType,
    pub id: Option<String>,
}

impl Actor {
    pub fn human(id: Option<String>) -> Actor {
        Actor { kind: ActorType::Human, id }
    }
    pub fn agent(session_key: impl Into<String>) -> Actor {
        Actor { kind: ActorType::Agent, id: Some(session_key.into()) }
    }
    pub fn system() -> Actor {
        Actor { kind: ActorType::System, id: None }
    }

    /// Classify once, at the boundary: a message from another session is an agent, an internal or system
    /// event is the system, anything else (including unknown provenance) is a human.
    pub fn classify(from_session: Option<&str>, internal: bool, human_id: Option<&str>) -> Actor {
        if internal {
            Actor::system()
        } else if let Some(key) = from_session.filter(|k| !k.trim().is_empty()) {
            Actor::agent(key.trim())
        } else {
            Actor::human(human_id.map(str::to_string))
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunOutcome {
    Error,
    Timeout,
    Cancelled,
}

impl RunOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Error => "error",
            RunOutcome::Timeout => "timeout",
            RunOutcome::Cancelled => "cancelled",
        }
    }
    pub fn parse(s: &str) -> Option<RunOutcome> {
        match s {
            "error" => Some(RunOutcome::Error),
            "timeout" => Some(RunOutcome::Timeout),
            "cancelled" => Some(RunOutcome::Cancelled),
            _ => None,
        }
    }
}

/// The terminal status of a run as reported by a runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunStatus {
    Ok,
    Failed(RunOutcome),
}

impl RunStatus {
    pub fn parse(s: &str) -> Option<RunStatus> {
        if s == "ok" { Some(RunStatus::Ok) } else { RunOutcome::parse(s).map(RunStatus::Failed) }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Failed(o) => o.as_str(),
        }
    }
}

/// The only payload fields the log keeps and exposes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Payload {
    pub outcome: Option<RunOutcome>,
    pub channel: Option<String>,
    pub turns: Option<u32>,
    /// `files_changed`: the paths written, relative to the worktree (at most
    /// [`MAX_EVENT_PATHS`](crate::workspace::MAX_EVENT_PATHS); the summary counts them all).
    pub paths: Vec<String>,
    /// `head_moved`: where HEAD was and is (`main@1a2b3c4`, or a short id when detached).
    pub from: Option<String>,
    pub to: Option<String>,
}

impl Payload {
    pub fn is_empty(&self) -> bool {
        self.outcome.is_none()
            && self.channel.is_none()
            && self.turns.is_none()
            && self.paths.is_empty()
            && self.from.is_none()
            && self.to.is_none()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GoalChange {
    Created,
    Updated,
    Cleared,
    StatusChanged(String),
}

impl GoalChange {
    pub fn summary(&self) -> String {
        match self {
            GoalChange::Created => "goal created".into(),
            GoalChange::Updated => "goal updated".into(),
            GoalChange::Cleared => "goal cleared".into(),
            GoalChange::StatusChanged(s) => format!("goal status changed to {}", one_line(s)),
        }
    }
}

/// An event of a session's log, before it is appended ([`NewEvent`]) or as stored ([`StoredEvent`]): the
/// two differ only in the sequence the append gives it and the occurred-at the append clamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event<Sequence, OccurredAt> {
    pub sequence: Sequence,
    pub session_key: String,
    pub agent_id: String,
    pub session_id: Option<String>,
    pub kind: EventKind,
    pub actor: Actor,
    pub run_id: Option<String>,
    pub occurred_at: OccurredAt,
    pub summary: String,
    pub payload: Payload,
    pub dedupe_key: Option<String>,
}

/// An event to append: no sequence yet, and the producer's raw occurred-at (clamped on append). Build it
/// with the constructors, which fix kind, actor, summary, payload and dedupe key together so every
/// producer writes the same shape.
pub type NewEvent = Event<(), Option<Millis>>;

/// An event as stored in the log: its sequence and its clamped occurred-at.
pub type StoredEvent = Event<u64, Millis>;

/// The builder setters of the fields a producer adds after a constructor: `with_x(v)` sets `x` to `v`.
macro_rules! optional_field_setters {
    ($($setter:ident: $field:ident: $ty:ty),* $(,)?) => {
        $(
            pub fn $setter(mut self, $field: $ty) -> NewEvent {
                self.$field = $field;
                self
            }
        )*
    };
}

impl NewEvent {
    pub(crate) fn base(
        session_key: &str,
        agent_id: &str,
        kind: EventKind,
        actor: Actor,
        summary: String,
    ) -> NewEvent {
        NewEvent {
            sequence: (),
            session_key: session_key.to_string(),
            agent_id: agent_id.to_string(),
            session_id: None,
            kind,
            actor,
            run_id: None,
            occurred_at: None,
            summary,
            payload: Payload::default(),
            dedupe_key: None,
        }
    }

    /// `human message via <channel>`; `turns` only when an upstream burst coalesced several turns.
    pub fn human_message(
        session_key: &str,
        agent_id: &str,
        channel: &str,
        actor_id: Option<String>,
    ) -> NewEvent {
        NewEvent::base(
            session_key,
            agent_id,
            EventKind::HumanDirectMessage,
            Actor::human(actor_id),
            format!("human message via {}", normalize_channel(channel)),
        )
    }

    /// The dedupe key of a human turn that the CLI itself identifies (Claude `promptId`, Codex
    /// `turn_id` with the text's digest, Gemini a derived id): the hook that sees the prompt and the file monitor that reads it later derive the
    /// same key, so the turn is recorded once.
    pub fn human_turn_dedupe_key(session_key: &str, turn_id: &str) -> String {
        format!("human-turn:{session_key}:{turn_id}")
    }

    pub fn with_turns(mut self, turns: u32) -> NewEvent {
        if turns > 1 {
            self.payload.turns = Some(turns);
        }
        self
    }

    pub fn upstream_missing(session_key: &str, agent_id: &str, catalog_id: &str) -> NewEvent {
        let catalog = normalize_channel(catalog_id);
        let mut e = NewEvent::base(
            session_key,
            agent_id,
            EventKind::UpstreamMissing,
            Actor::system(),
            format!("upstream missing via {catalog}"),
        );
        e.payload.channel = Some(catalog);
        e
    }

    pub fn goal_changed(session_key: &str, agent_id: &str, change: &GoalChange, actor: Actor) -> NewEvent {
        NewEvent::base(session_key, agent_id, EventKind::GoalChanged, actor, change.summary())
    }

    /// Recorded on the child; seeds the requester's cursor at this event's sequence.
    pub fn child_spawned(child_key: &str, agent_id: &str, requester_key: &str, run_id: &str) -> NewEvent {
        let mut e = NewEvent::base(
            child_key,
            agent_id,
            EventKind::ChildSpawned,
            Actor::agent(requester_key),
            "child session spawned".into(),
        );
        e.run_id = Some(run_id.to_string());
        e.dedupe_key = Some(format!("child-spawned:{run_id}"));
        e
    }

    /// `run_completed` for ok, `run_failed` with `{outcome}` otherwise; first terminal write wins.
    pub fn run_terminal(child_key: &str, agent_id: &str, run_id: &str, status: RunStatus) -> NewEvent {
        let (kind, summary) = match status {
            RunStatus::Ok => (EventKind::RunCompleted, "child run completed"),
            RunStatus::Failed(RunOutcome::Error) => (EventKind::RunFailed, "child run failed"),
            RunStatus::Failed(RunOutcome::Timeout) => (EventKind::RunFailed, "child run timed out"),
            RunStatus::Failed(RunOutcome::Cancelled) => (EventKind::RunFailed, "child run cancelled"),
        };
        let mut e = NewEvent::base(child_key, agent_id, kind, Actor::system(), summary.into());
        if let RunStatus::Failed(o) = status {
            e.payload.outcome = Some(o);
        }
        e.run_id = Some(run_id.to_string());
        e.dedupe_key = Some(format!("run-terminal:{run_id}"));
        e
    }

    pub fn compacted(session_key: &str, agent_id: &str, operation_id: &str) -> NewEvent {
        let mut e = NewEvent::base(
            session_key,
            agent_id,
            EventKind::Compacted,
            Actor::system(),
            "session compacted".into(),
        );
        e.dedupe_key = Some(format!("compacted:{operation_id}"));
        e
    }

    pub fn adopted(session_key: &str, agent_id: &str, catalog_id: &str, actor: Actor) -> NewEvent {
        let catalog = normalize_channel(catalog_id);
        let mut e = NewEvent::base(
            session_key,
            agent_id,
            EventKind::Adopted,
            actor,
            format!("adopted from {catalog}"),
        );
        e.payload.channel = Some(catalog);
        e.dedupe_key = Some(format!("adopted:{session_key}"));
        e
    }

    pub fn created(session_key: &str, agent_id: &str, session_id: &str, actor: Actor) -> NewEvent {
        let mut e =
            NewEvent::base(session_key, agent_id, EventKind::Created, actor, "session created".into());
        e.session_id = Some(session_id.to_string());
        e.dedupe_key = Some(format!("created:{agent_id}:{session_key}:{session_id}"));
        e
    }

    optional_field_setters! {
        with_session_id: session_id: Option<String>,
        with_run_id: run_id: Option<String>,
        with_occurred_at: occurred_at: Option<Millis>,
        with_dedupe_key: dedupe_key: Option<String>,
    }
}

impl NewEvent {
    /// The row this event becomes at `sequence`, with occurred-at clamped against `now`.
    pub fn stored(&self, sequence: u64, now: Millis) -> StoredEvent {
        self.clone().into_stored(sequence, now)
    }

    /// [`stored`](Self::stored), taking the event's fields instead of copying them.
    pub fn into_stored(self, sequence: u64, now: Millis) -> StoredEvent {
        StoredEvent {
            sequence,
            session_key: self.session_key,
            agent_id: self.agent_id,
            session_id: self.session_id,
            kind: self.kind,
            actor: self.actor,
            run_id: self.run_id,
            occurred_at: clamp_occurred_at(self.occurred_at, now),
            summary: self.summary,
            payload: self.payload,
            dedupe_key: self.dedupe_key,
        }
    }
}

/// A channel or catalog id as it may appear in a summary: one trimmed line, `unknown` when empty.
fn normalize_channel(channel: &str) -> String {
    let c = one_line(channel);
    if c.is_empty() { "unknown".into() } else { c }
}

/// Summaries are one line and short: whitespace runs collapse, control characters go, 64 chars at most.
pub(crate) fn one_line(s: &str) -> String {
    let collapsed: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed.chars().filter(|c| !c.is_control()).take(64).collect()
}

/// Clamps a producer's occurred-at to [now − 24 h, now]; a missing value is `now`.
pub fn clamp_occurred_at(input: Option<Millis>, now: Millis) -> Millis {
    match input {
        None => now,
        Some(t) => t.clamp(now - MAX_OCCURRED_AT_SKEW_MS, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_notify_table() {
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
        let notifying: Vec<_> =
            EventKind::ALL.into_iter().filter(|k| k.notifies()).map(|k| k.as_str()).collect();
        assert_eq!(
            notifying,
            ["human_direct_message", "upstream_missing", "goal_changed", "files_changed", "head_moved"]
        );
    }

    #[test]
    fn fixed_summaries() {
        let cases = [
            (NewEvent::human_message("k", "a", " telegram ", None).summary, "human message via telegram"),
            (NewEvent::human_message("k", "a", "  ", None).summary, "human message via unknown"),
            (NewEvent::upstream_missing("k", "a", "claude").summary, "upstream missing via claude"),
            (NewEvent::goal_changed("k", "a", &GoalChange::Created, Actor::system()).summary, "goal created"),
            (NewEvent::goal_changed("k", "a", &GoalChange::Updated, Actor::system()).summary, "goal updated"),
            (NewEvent::goal_changed("k", "a", &GoalChange::Cleared, Actor::system()).summary, "goal cleared"),
            (
                NewEvent::goal_changed("k", "a", &GoalChange::StatusChanged("done".into()), Actor::system())
                    .summary,
                "goal status changed to done",
            ),
            (NewEvent::child_spawned("k", "a", "p", "r").summary, "child session spawned"),
            (NewEvent::run_terminal("k", "a", "r", RunStatus::Ok).summary, "child run completed"),
            (
                NewEvent::run_terminal("k", "a", "r", RunStatus::Failed(RunOutcome::Error)).summary,
                "child run failed",
            ),
            (
                NewEvent::run_terminal("k", "a", "r", RunStatus::Failed(RunOutcome::Timeout)).summary,
                "child run timed out",
            ),
            (
                NewEvent::run_terminal("k", "a", "r", RunStatus::Failed(RunOutcome::Cancelled)).summary,
                "child run cancelled",
            ),
            (NewEvent::compacted("k", "a", "op").summary, "session compacted"),
            (NewEvent::adopted("k", "a", "codex", Actor::human(None)).summary, "adopted from codex"),
            (NewEvent::created("k", "a", "s", Actor::system()).summary, "session created"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn run_terminal_kinds_payloads_and_dedupe() {
        let ok = NewEvent::run_terminal("c", "main", "r1", RunStatus::Ok);
        assert_eq!(ok.kind, EventKind::RunCompleted);
        assert!(ok.payload.is_empty());
        assert_eq!(ok.dedupe_key.as_deref(), Some("run-terminal:r1"));
        let t = NewEvent::run_terminal("c", "main", "r1", RunStatus::Failed(RunOutcome::Timeout));
        assert_eq!(t.kind, EventKind::RunFailed);
        assert_eq!(t.payload.outcome, Some(RunOutcome::Timeout));
        assert_eq!(t.dedupe_key, ok.dedupe_key, "the first terminal write of a run wins");
    }

    #[test]
    fn turns_only_for_bursts() {
        assert_eq!(NewEvent::human_message("k", "a", "claude", None).with_turns(1).payload.turns, None);
        assert_eq!(NewEvent::human_message("k", "a", "claude", None).with_turns(3).payload.turns, Some(3));
    }

    #[test]
    fn actor_classification_at_the_boundary() {
        assert_eq!(Actor::classify(Some("agent:main:main"), false, None), Actor::agent("agent:main:main"));
        assert_eq!(Actor::classify(None, true, None), Actor::system());
        assert_eq!(Actor::classify(Some("agent:main:main"), true, None), Actor::system());
        assert_eq!(Actor::classify(None, false, Some("u1")), Actor::human(Some("u1".into())));
        assert_eq!(Actor::classify(Some("  "), false, None), Actor::human(None));
    }

    #[test]
    fn occurred_at_is_clamped() {
        let now = 10 * DAY_MS;
        assert_eq!(clamp_occurred_at(None, now), now);
        assert_eq!(clamp_occurred_at(Some(0), now), now - DAY_MS);
        assert_eq!(clamp_occurred_at(Some(now + 5), now), now);
        assert_eq!(clamp_occurred_at(Some(now - 5), now), now - 5);
    }
}
