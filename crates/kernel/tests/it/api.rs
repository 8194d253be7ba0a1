//! The kernel's interface: what a watch registration reports, acknowledging without a drain, typed
//! notices, the head that comes with a page, and shutdown.

use crate::common::{Env, human_sequence as human, notices};
use sessionwatch_core::{
    AgentSessionKey, Limit, NewEvent, Provenance, QueuedEvent, RecordPolicy, SkipReason,
};
use sessionwatch_kernel::WatchOutcome;

const W: &str = "agent:main:main";
const T: &str = "agent:main:subagent:t";
const T2: &str = "agent:main:subagent:u";

fn key(s: &str) -> AgentSessionKey {
    AgentSessionKey::parse(s).unwrap()
}

#[tokio::test]
async fn a_registration_says_what_it_did() {
    let env = Env::new();
    let k = env.start().await;
    k.record(NewEvent::human_message(T, "main", "web", None), RecordPolicy::always()).await;
    assert_eq!(k.register_watch(W, T, Provenance::AmbientGroup).await, WatchOutcome::Seeded { at: 1 });
    assert_eq!(k.register_watch(W, T, Provenance::AmbientGroup).await, WatchOutcome::Kept);
    assert_eq!(k.register_watch(W, T, Provenance::Explicit).await, WatchOutcome::Upgraded);
    assert_eq!(k.register_watch(W, T, Provenance::Explicit).await, WatchOutcome::Kept);
    assert_eq!(
        k.register_watch(T, T, Provenance::Explicit).await,
        WatchOutcome::Refused(SkipReason::SelfWatch)
    );
    assert_eq!(
        k.register_watch("global", T, Provenance::Explicit).await,
        WatchOutcome::Refused(SkipReason::InvalidAddress)
    );
    assert!(!WatchOutcome::Refused(SkipReason::SelfWatch).is_watching());
}

#[tokio::test]
async fn peeked_and_drained_notices_are_typed() {
    let env = Env::new();
    let k = env.start().await;
    k.register_watch(W, T, Provenance::Explicit).await;
    human(&k, T).await;
    let peeked = k.peek(W);
    assert_eq!(peeked.len(), 1);
    let n = peeked[0].notice.as_ref().expect("typed");
    assert_eq!((n.target.as_str(), n.since), (T, 0));
    assert_eq!(notices(&k.drain(W).await), vec![(T.to_string(), 0)]);
}

#[tokio::test]
async fn acknowledging_without_a_drain_claims_only_the_named_targets() {
    let env = Env::new();
    let k = env.start().await;
    k.register_watch(W, T, Provenance::Explicit).await;
    k.register_watch(W, T2, Provenance::Explicit).await;
    human(&k, T).await;
    human(&k, T2).await;
    k.enqueue(W, QueuedEvent::other("hello", "home"), false);

    let claimed = k.acknowledge(&key(W), &[key(T)]).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!((claimed[0].target.as_str(), claimed[0].since), (T, 0));
    // T's line is gone and its cursor settled; T2's notice and the other event stay queued.
    let left = k.peek(W);
    assert_eq!(left.iter().map(|e| e.context_key.as_str()).filter(|c| *c == "home").count(), 1);
    assert_eq!(
        notices(&left.into_iter().filter(|e| e.notice.is_some()).collect::<Vec<_>>()),
        vec![(T2.into(), 0)]
    );
    let cursor = k.cursor(W, T).await.unwrap().unwrap();
    assert!(!cursor.is_pending());
    // Claimed once: a second acknowledgement claims nothing, and a drain delivers T2 only.
    assert!(k.acknowledge(&key(W), &[key(T)]).await.is_empty());
    assert_eq!(
        notices(&k.drain(W).await.into_iter().filter(|e| e.notice.is_some()).collect::<Vec<_>>()),
        vec![(T2.into(), 0)]
    );
    // A change after the acknowledgement notifies again, from the acknowledged position.
    human(&k, T).await;
    assert_eq!(notices(&k.peek(W)), vec![(T.into(), 1)]);
}

#[tokio::test]
async fn a_page_carries_the_head_it_was_read_with() {
    let env = Env::new();
    let k = env.start().await;
    for _ in 0..6 {
        k.record(NewEvent::human_message(T, "main", "web", None), RecordPolicy::always()).await;
    }
    let page = k.changes_since(T, "main", 2, Limit::new(2).unwrap()).await.expect("page");
    assert_eq!(page.head, 6);
    assert_eq!(page.events.iter().map(|e| e.sequence).collect::<Vec<_>>(), vec![3, 4]);
    assert!(page.truncated);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_background_work() {
    let mut env = Env::new();
    // The trailing wake would go out 200 ms (real time) after the second change.
    env.config.wake_coalesce_ms = 200;
    let k = env.start().await;
    k.register_watch(W, T, Provenance::Explicit).await;
    let mut signals = k.subscribe();
    human(&k, T).await; // wakes at once
    k.drain(W).await;
    human(&k, T).await; // within the window: a trailing wake is scheduled
    assert!(!k.is_shut_down());
    k.shutdown().await;
    assert!(k.is_shut_down());
    // Recording still works (best effort, no background task needed) and nothing is left running.
    human(&k, T).await;
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let mut wakes = 0;
    while let Ok(s) = signals.try_recv() {
        wakes += matches!(s, sessionwatch_kernel::Signal::Wake { .. }) as usize;
    }
    assert_eq!(wakes, 1, "only the first, immediate wake");
}
