//! The host API's answers: each gateway result projected into its `host_protocol` type.

use crate::gateway::listing::{Listing, WatchAnswer};
use crate::gateway::results::{
    CompactedOutput, DrainedOutput, GoalOutput, InboundOutput, MessageAdded, ResetOutput, RunResultOutput,
    SessionCreated,
};
use crate::host_protocol::{
    CompactedJson, DeletedJson, DrainedJson, GoalJson, InboundJson, InboxItemJson, ListedSessionJson,
    MessageAddedJson, ResetJson, RunResultJson, SessionCreatedJson, SessionListingJson, WatchJson,
};
use crate::host_protocol::{EventJson, SystemEventJson};
use sessionwatch_kernel::WatchOutcome;
use sessionwatch_store::InboxItem;

pub(crate) fn session_created(o: &SessionCreated) -> SessionCreatedJson {
    let s = &o.session;
    SessionCreatedJson {
        created: o.created,
        kind: s.kind.clone(),
        session_id: s.session_id.clone(),
        session_key: s.session_key.clone(),
    }
}

pub(crate) fn inbound(o: &InboundOutput) -> InboundJson {
    InboundJson {
        event: o.event.as_deref().map(EventJson::from),
        session_id: o.session_id.clone(),
        session_key: o.session_key.clone(),
        state_version: o.state_version,
    }
}

/// `{sessionKey, systemEvents: [{text, contextKey}], inbox?: [...]}`.
pub(crate) fn drained(o: &DrainedOutput) -> DrainedJson {
    DrainedJson {
        inbox: o.inbox.as_ref().map(|inbox| inbox.iter().map(inbox_item).collect()),
        session_key: o.session_key.clone(),
        system_events: o.system_events.iter().map(SystemEventJson::from).collect(),
    }
}

pub(crate) fn inbox_item(i: &InboxItem) -> InboxItemJson {
    InboxItemJson {
        created_at: i.created_at,
        from_session_key: i.from_session.clone(),
        run_id: i.run_id.clone(),
        text: i.text.clone(),
    }
}

pub(crate) fn message_added(o: &MessageAdded) -> MessageAddedJson {
    MessageAddedJson { id: o.id, session_key: o.session_key.clone() }
}

pub(crate) fn goal(o: &GoalOutput) -> GoalJson {
    GoalJson {
        changed: o.changed,
        event: o.event.as_ref().map(EventJson::from),
        session_key: o.session_key.clone(),
        state_version: o.state_version,
    }
}

pub(crate) fn compacted(o: &CompactedOutput) -> CompactedJson {
    CompactedJson {
        event: o.event.as_ref().map(EventJson::from),
        recorded: o.recorded,
        session_key: o.session_key.clone(),
    }
}

pub(crate) fn reset(o: &ResetOutput) -> ResetJson {
    ResetJson {
        session_id: o.session_id.clone(),
        session_key: o.session_key.clone(),
        watches_cleared: o.watches_cleared as u64,
    }
}

pub(crate) fn deleted(session_key: &str) -> DeletedJson {
    DeletedJson { deleted: true, session_key: session_key.to_string() }
}

pub(crate) fn run_result(o: &RunResultOutput) -> RunResultJson {
    RunResultJson { accepted: o.accepted, run_id: o.run_id.clone(), status: o.status.clone() }
}

pub(crate) fn session_listing(l: &Listing) -> SessionListingJson {
    SessionListingJson {
        sessions: l
            .sessions
            .iter()
            .map(|s| ListedSessionJson {
                session_key: s.row.session_key.clone(),
                agent_id: s.row.agent_id.clone(),
                source: s.source.clone(),
                native_id: s.native_id.clone(),
                node: s.node.clone(),
                kind: s.row.kind.clone(),
                label: s.row.label.clone(),
                cwd: s.row.cwd.clone(),
                state: s.state.clone(),
                state_version: s.state_version,
                parent_session_key: s.row.spawned_by.clone(),
                updated_at: s.row.updated_at,
            })
            .collect(),
        has_more: l.has_more,
    }
}

pub(crate) fn watch(a: &WatchAnswer) -> WatchJson {
    let (outcome, from, reason) = match &a.outcome {
        WatchOutcome::Seeded { at } => ("watching", Some(*at), None),
        WatchOutcome::Kept => ("already-watching", None, None),
        WatchOutcome::Upgraded => ("upgraded", None, None),
        WatchOutcome::Refused(r) => ("refused", None, Some(r.as_str().to_string())),
        WatchOutcome::Failed(e) => ("failed", None, Some(e.clone())),
    };
    WatchJson {
        watcher: a.watcher.clone(),
        target: a.target.clone(),
        outcome: outcome.into(),
        from_state_version: from,
        reason,
    }
}
