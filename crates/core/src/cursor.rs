//! The watch cursor and its L/N/M state machine.
//!
//! L (`last_seen`) is what the watcher acknowledged, N (`notified`) the frozen watermark of the pending
//! notice, M (`material`) the latest notify-worthy event. Invariant: `L <= N <= M`, and a notice is
//! pending exactly when `M > L` (equivalently `N > L`). The notice text depends only on L, so it stays
//! byte-stable while pending.

use crate::Millis;
use crate::key::AgentSessionKey;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Provenance {
    Explicit,
    AmbientGroup,
    /// A member session's watch on its workspace session, held while it works in that worktree.
    Workspace,
}

impl Provenance {
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Explicit => "explicit",
            Provenance::AmbientGroup => "ambient-group",
            Provenance::Workspace => "workspace",
        }
    }
    pub fn parse(s: &str) -> Option<Provenance> {
        match s {
            "explicit" => Some(Provenance::Explicit),
            "ambient-group" => Some(Provenance::AmbientGroup),
            "workspace" => Some(Provenance::Workspace),
            _ => None,
        }
    }
}

impl Provenance {
    /// Registered by the gateway on the watcher's behalf (a group's home, a workspace's members).
    pub fn is_ambient(self) -> bool {
        matches!(self, Provenance::AmbientGroup | Provenance::Workspace)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub last_seen: u64,
    pub notified: u64,
    pub material: u64,
    pub provenance: Provenance,
    /// The physical store of the watcher when the cursor was registered; `None` for a legacy cursor.
    pub store_path: Option<String>,
    pub updated_at: Millis,
}

/// Why a material event did not touch a watcher's cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// Watcher or target is not an agent-qualified key (e.g. the bare `global` key).
    InvalidAddress,
    /// The watcher caused the event (actor id == watcher).
    SelfCaused,
    /// Watcher and target are the same session.
    SelfWatch,
    /// The cursor belongs to a replaced (or unknown legacy) store of the watcher.
    StoreReplaced,
    /// The watcher holds no cursor on the target (never registered, reset, expired or unwatched).
    NotWatching,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::InvalidAddress => "invalid-address",
            SkipReason::SelfCaused => "self-caused",
            SkipReason::SelfWatch => "self-watch",
            SkipReason::StoreReplaced => "store-replaced",
            SkipReason::NotWatching => "not-watching",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MaterialDecision {
    Skip(SkipReason),
    /// Write `cursor` and queue a notice whose text says `changesSince cursor.last_seen`.
    Notify(Cursor),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisterDecision {
    /// Refused: self-watch or an address that is not agent-qualified.
    Refused(SkipReason),
    /// A cursor exists for the same store: keep it (and its pending notice) untouched.
    Keep,
    /// Keep the positions, change ambient provenance to explicit.
    UpgradeToExplicit,
    /// Write a fresh cursor at the target's current head; earlier history never notifies.
    Seed(Cursor),
}

impl Cursor {
    /// A cursor with nothing pending at `at` (L = N = M = at).
    pub fn seeded(at: u64, provenance: Provenance, store_path: &str, now: Millis) -> Cursor {
        Cursor {
            last_seen: at,
            notified: at,
            material: at,
            provenance,
            store_path: Some(store_path.to_string()),
            updated_at: now,
        }
    }

    pub fn is_pending(&self) -> bool {
        self.material > self.last_seen
    }

    pub fn store_matches(&self, store_path: &str) -> bool {
        self.store_path.as_deref() == Some(store_path)
    }

    /// Ambient watches (group, workspace) never wake their watcher: the notice waits for its next turn.
    pub fn queue_only(&self) -> bool {
        self.provenance.is_ambient()
    }

    /// Acknowledge a drained notice through the present: `L = N = M`, where M (settled by the store in
    /// the same transaction) is the newest material event at this moment. The notice told the watcher to
    /// reconcile from the old L, and a reconcile after the drain returns everything up to now, so work that
    /// arrived while the notice was pending is covered by it and never reopens a second one; only a
    /// material event after this opens a fresh notice. (OpenClaw v1 moves L to the frozen N and reopens for
    /// N..M: in an agent CLI several hooks drain in one turn, so that reopen arrived as a second, redundant
    /// notice in the same turn. A deliberate difference.)
    pub fn acknowledge(&mut self, now: Millis) {
        self.last_seen = self.material;
        self.notified = self.material;
        self.updated_at = now;
    }

    /// Delivering a drained notice is a durable claim: it goes out only while the cursor still has it
    /// pending, and then is acknowledged in the same step. A notice queued in memory that another
    /// gateway (or process) already delivered, or whose watch was unwatched, reset or expired, claims
    /// nothing and is dropped; so each notice is delivered once whichever gateway serves the turn. The
    /// delivered text says `changesSince L` of the cursor as it is now, not as it was when queued.
    /// Answers that `changesSince`.
    pub fn claim(&mut self, now: Millis) -> Option<u64> {
        if !self.is_pending() {
            return None;
        }
        let since = self.last_seen;
        self.acknowledge(now);
        Some(since)
    }

    /// Start-up sweep: a pending cursor re-opens its notice at `changesSince L` with `N = M`.
    pub fn sweep(&mut self, now: Millis) -> Option<u64> {
        if !self.is_pending() {
            return None;
        }
        self.notified = self.material;
        self.updated_at = now;
        Some(self.last_seen)
    }
}

/// Both ends of a watch must be agent-qualified and distinct.
pub fn check_watch_address(watcher: &str, target: &str) -> Result<(), SkipReason> {
    let (Some(w), Some(t)) = (AgentSessionKey::parse(watcher), AgentSessionKey::parse(target)) else {
        return Err(SkipReason::InvalidAddress);
    };
    if w == t {
        return Err(SkipReason::SelfWatch);
    }
    Ok(())
}

/// Whether an event whose actor is `actor_id` was caused by `watcher` itself (it never notifies it).
pub fn is_self_caused(actor_id: Option<&str>, watcher: &str) -> bool {
    actor_id.is_some_and(|a| AgentSessionKey::parse(a).is_some_and(|a| a.as_str() == watcher) || a == watcher)
}

/// A material event at `sequence` on `target`, caused by `actor_id`, for one watcher.
pub fn on_material(
    existing: Option<&Cursor>,
    watcher: &str,
    target: &str,
    actor_id: Option<&str>,
    sequence: u64,
    watcher_store: &str,
    now: Millis,
) -> MaterialDecision {
    if let Err(reason) = check_watch_address(watcher, target) {
        return MaterialDecision::Skip(reason);
    }
    if is_self_caused(actor_id, watcher) {
        return MaterialDecision::Skip(SkipReason::SelfCaused);
    }
    let cursor = match existing {
        // Watches come only from spawn seeds and registrations: a producer naming a watcher (the
        // spawner) does not create one, so a reset, an unwatch or an expiry stays in force.
        None => return MaterialDecision::Skip(SkipReason::NotWatching),
        Some(c) if !c.store_matches(watcher_store) => {
            return MaterialDecision::Skip(SkipReason::StoreReplaced);
        }
        Some(c) => {
            let mut c = c.clone();
            if c.notified == c.last_seen {
                c.notified = sequence;
            }
            c.material = c.material.max(sequence);
            c.updated_at = now;
            c
        }
    };
    MaterialDecision::Notify(cursor)
}

/// An explicit or ambient registration of `watcher` on `target` whose head is `head`.
pub fn decide_registration(
    existing: Option<&Cursor>,
    watcher: &str,
    target: &str,
    provenance: Provenance,
    watcher_store: &str,
    head: u64,
    now: Millis,
) -> RegisterDecision {
    if let Err(reason) = check_watch_address(watcher, target) {
        return RegisterDecision::Refused(reason);
    }
    match existing {
        Some(c) if c.store_matches(watcher_store) => {
            if provenance == Provenance::Explicit && c.provenance.is_ambient() {
                RegisterDecision::UpgradeToExplicit
            } else {
                RegisterDecision::Keep
            }
        }
        _ => RegisterDecision::Seed(Cursor::seeded(head, provenance, watcher_store, now)),
    }
}

#[cfg(test)]
mod tests;
