//! Restart recovery: the in-memory queue is rebuilt from the durable cursors, exactly once per pending
//! notice.

use crate::common::{Env, human_turn, notices, watching};
use sessionwatch_core::Provenance;
use sessionwatch_kernel::RecordOutcome;

const W: &str = "agent:main:main";
const T: &str = "agent:main:subagent:child";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_notice_survives_a_restart_exactly_once() {
    let (env, k) = watching(W, T).await;
    assert!(matches!(human_turn(&k, T).await, RecordOutcome::Recorded(_)));
    let before = k.peek(W);
    assert_eq!(notices(&before), vec![(T.to_string(), 0)]);
    drop(k);

    // The process dies before the watcher's turn: the notice comes back, byte for byte, once.
    let k = env.start().await;
    assert_eq!(k.peek(W), before, "the same text and context key after the restart");
    let drained = k.drain(W).await;
    assert_eq!(drained, before);
    assert!(k.drain(W).await.is_empty(), "acknowledged: nothing reopens");
    drop(k);

    let k = env.start().await;
    assert!(k.peek(W).is_empty(), "an acknowledged notice does not come back after another restart");
    assert!(k.drain(W).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_without_draining_keeps_one_notice_and_covers_later_work() {
    let env = Env::new();
    let k = env.start().await;
    k.register_watch(W, T, Provenance::Explicit).await;
    for _ in 0..3 {
        human_turn(&k, T).await;
    }
    drop(k);
    // Several restarts in a row: still exactly one line, still `changesSince 0`.
    for _ in 0..3 {
        let k = env.start().await;
        assert_eq!(notices(&k.peek(W)), vec![(T.to_string(), 0)]);
        drop(k);
    }
    let k = env.start().await;
    // More work after the restart joins the same line.
    human_turn(&k, T).await;
    assert_eq!(notices(&k.peek(W)), vec![(T.to_string(), 0)]);
    // One drain covers all four changes, then quiet.
    assert_eq!(notices(&k.drain(W).await), vec![(T.to_string(), 0)]);
    assert!(k.drain(W).await.is_empty());
    drop(k);
    let k = env.start().await;
    assert!(k.peek(W).is_empty());
    let c = k.cursor(W, T).await.unwrap().unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (4, 4, 4));
}
