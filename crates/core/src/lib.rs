//! Sans-IO core of sessionwatch.
//!
//! Everything here is pure: session keys, event kinds and their fixed summaries, the L/N/M cursor state
//! machine, notice text and context keys, the bounded system-event queue, and the gap arithmetic of
//! `changesSince`. No tokio, no SQL, no JSON: callers feed values in and get decisions out, so the
//! hardest logic of the product is tested exhaustively without a database.

pub mod changes;
pub mod cursor;
pub mod event;
pub mod key;
pub mod notice;
pub mod policy;
pub mod queue;
pub mod workspace;

pub use changes::{ChangesPage, Limit, LimitError, MAX_CHANGES_LIMIT};
pub use cursor::{
    Cursor, MaterialDecision, Provenance, RegisterDecision, SkipReason, check_watch_address,
    decide_registration, is_self_caused, on_material,
};
pub use event::{
    Actor, ActorType, Event, EventKind, GoalChange, MAX_OCCURRED_AT_SKEW_MS, NewEvent, Payload, RunOutcome,
    RunStatus, StoredEvent, clamp_occurred_at,
};
pub use key::{AgentSessionKey, SessionKind, classify_session_kind, is_valid_agent_id};
pub use notice::{Notice, context_key, decode_context_key, notice_text};
pub use policy::{Acknowledged, AppendCursors, FanOut, HumanTurnSource, RecordPolicy};
pub use queue::{NoticeRef, PushOutcome, QueuedEvent, SYSTEM_EVENT_QUEUE_CAP, SystemEventQueue};
pub use workspace::{HeadAt, HeadMove, HeadMoveKind, MAX_EVENT_PATHS};

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

pub const HOUR_MS: Millis = 60 * 60 * 1000;
pub const DAY_MS: Millis = 24 * HOUR_MS;

/// The source of "now". Injected everywhere time matters so tests can move it.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> Millis;
}

/// Wall-clock time.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as Millis)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to.
#[derive(Debug, Default)]
pub struct ManualClock(std::sync::atomic::AtomicI64);

impl ManualClock {
    pub fn new(now: Millis) -> ManualClock {
        ManualClock(std::sync::atomic::AtomicI64::new(now))
    }
    pub fn set(&self, now: Millis) {
        self.0.store(now, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn advance(&self, by: Millis) {
        self.0.fetch_add(by, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now_ms(&self) -> Millis {
        (**self).now_ms()
    }
}
