//! Reconciliation pages: limits, truncation and exact gap arithmetic from the durable floor.

use crate::event::StoredEvent;
use std::sync::Arc;

pub const MAX_CHANGES_LIMIT: u32 = 200;

/// A page size from 1 to 200.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit(u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitError;

impl Limit {
    pub const MAX: Limit = Limit(MAX_CHANGES_LIMIT);

    pub fn new(n: i64) -> Result<Limit, LimitError> {
        if (1..=MAX_CHANGES_LIMIT as i64).contains(&n) { Ok(Limit(n as u32)) } else { Err(LimitError) }
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

/// The events after `since`, ascending, at most `limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangesPage {
    /// The session's head (state version) in the same read as the events.
    pub head: u64,
    /// Shared, not copied: a recent page is served from the stores' in-memory tail.
    pub events: Vec<Arc<StoredEvent>>,
    /// More events exist past this page.
    pub truncated: bool,
    pub earliest_available_sequence: u64,
    /// `since` predates retained history (`since < floor`): refresh the whole session instead.
    pub history_gap: bool,
}

impl ChangesPage {
    /// Builds a page from the rows after `since` in ascending order, fetched with `limit + 1` so
    /// truncation is known without a count. `head` and `floor` come from the durable head row.
    pub fn assemble(
        mut rows: Vec<Arc<StoredEvent>>,
        limit: Limit,
        since: u64,
        head: u64,
        floor: u64,
    ) -> ChangesPage {
        let truncated = rows.len() > limit.get() as usize;
        rows.truncate(limit.get() as usize);
        ChangesPage {
            head,
            events: rows,
            truncated,
            earliest_available_sequence: earliest_available(head, floor),
            history_gap: since < floor,
        }
    }

    /// What a read failure answers: an empty page, never an error that breaks the agent's turn.
    pub fn empty() -> ChangesPage {
        ChangesPage {
            head: 0,
            events: vec![],
            truncated: false,
            earliest_available_sequence: 0,
            history_gap: false,
        }
    }

    /// The `since` to ask next: the last sequence returned, or `since` itself for an empty page.
    pub fn next_since(&self, since: u64) -> u64 {
        self.events.last().map_or(since, |e| e.sequence)
    }
}

/// Retained history is exactly `(floor, head]` (pruning removes whole per-session prefixes), so the
/// earliest retained sequence is `floor + 1`; with nothing retained it is `head + 1`, or 0 for a
/// session that never had an event.
pub fn earliest_available(head: u64, floor: u64) -> u64 {
    if head == 0 {
        0
    } else if floor < head {
        floor + 1
    } else {
        head + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Actor, EventKind, Payload};

    fn ev(seq: u64) -> StoredEvent {
        StoredEvent {
            sequence: seq,
            session_key: "agent:main:x".into(),
            agent_id: "main".into(),
            session_id: None,
            kind: EventKind::HumanDirectMessage,
            actor: Actor::human(None),
            run_id: None,
            occurred_at: 0,
            summary: "human message via x".into(),
            payload: Payload::default(),
            dedupe_key: None,
        }
    }

    #[test]
    fn limits() {
        assert!(Limit::new(0).is_err());
        assert!(Limit::new(201).is_err());
        assert!(Limit::new(-1).is_err());
        assert_eq!(Limit::new(200).unwrap(), Limit::MAX);
    }

    #[test]
    fn truncation_and_gap() {
        let rows: Vec<_> = (6..=9).map(|s| Arc::new(ev(s))).collect();
        let p = ChangesPage::assemble(rows.clone(), Limit::new(3).unwrap(), 5, 9, 5);
        assert_eq!(p.events.len(), 3);
        assert!(p.truncated);
        assert!(!p.history_gap, "since == floor is not a gap");
        assert_eq!(p.earliest_available_sequence, 6);
        assert_eq!(p.next_since(5), 8);
        let g = ChangesPage::assemble(rows, Limit::MAX, 4, 9, 5);
        assert!(g.history_gap);
        assert!(!g.truncated);
    }

    #[test]
    fn earliest_available_cases() {
        assert_eq!(earliest_available(0, 0), 0);
        assert_eq!(earliest_available(7, 0), 1);
        assert_eq!(earliest_available(7, 3), 4);
        assert_eq!(earliest_available(7, 7), 8, "everything pruned: head + 1");
    }
}
