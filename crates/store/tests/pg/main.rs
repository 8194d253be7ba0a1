//! PostgreSQL store tests (each in its own fresh schema). They print `SKIPPED` when no server answers,
//! and fail instead when `SESSIONWATCH_REQUIRE_PG=1`.

mod concurrency;
mod differential;
mod hosting;
mod migrations;
mod tls;

use sessionwatch_core::{AgentSessionKey, GoalChange, Millis, NewEvent};
use sessionwatch_store::{AppendOutcome, AppendRequest, NewSession, Store};

pub const NOW: Millis = 1_750_000_000_000;
pub const STORE: &str = "store-a";
pub const AGENT: &str = "main";

/// A fresh schema for this test, or return (SKIPPED) when PostgreSQL is unreachable.
#[macro_export]
macro_rules! pg_schema {
    ($name:expr) => {
        match sessionwatch_store::postgres::testing::TestSchema::create($name).await {
            Some(s) => s,
            None => return,
        }
    };
}

pub fn key(s: &str) -> AgentSessionKey {
    AgentSessionKey::parse(s).unwrap()
}

pub fn human(target: &str) -> NewEvent {
    NewEvent::human_message(target, AGENT, "telegram", None)
}

pub fn goal(target: &str) -> NewEvent {
    NewEvent::goal_changed(target, AGENT, &GoalChange::Updated, sessionwatch_core::Actor::human(None))
}

pub fn req(event: NewEvent) -> AppendRequest {
    AppendRequest::new(event, STORE)
}

pub async fn record<S: Store>(
    s: &S,
    r: AppendRequest,
    now: Millis,
) -> (sessionwatch_core::StoredEvent, Vec<sessionwatch_core::Notice>) {
    match s.append(r, now).await.expect("append") {
        AppendOutcome::Recorded { event, notices } => (std::sync::Arc::unwrap_or_clone(event), notices),
        other => panic!("expected Recorded, got {other:?}"),
    }
}

pub async fn ensure_session<S: Store>(s: &S, k: &str, host: Option<&str>) {
    let k = key(k);
    s.ensure_session(
        NewSession {
            session_key: k.as_str().into(),
            agent_id: k.agent_id().into(),
            session_id: format!("{}-1", k.as_str()),
            kind: "other".into(),
            host_id: host.map(str::to_string),
            ..NewSession::default()
        },
        NOW,
    )
    .await
    .unwrap();
}

pub async fn seqs<S: Store>(s: &S, k: &str) -> Vec<u64> {
    let mut out = vec![];
    let mut since = 0;
    loop {
        let page =
            s.changes_since(k.into(), AGENT.into(), since, sessionwatch_core::Limit::MAX).await.unwrap();
        out.extend(page.events.iter().map(|e| e.sequence));
        since = page.next_since(since);
        if !page.truncated {
            return out;
        }
    }
}
