//! Coalescing: twenty rapid changes are one line per watcher, and one wake for a main-session watcher only.

use crate::common::{Env, notices};
use sessionwatch_core::Provenance;
use sessionwatch_kernel::Signal;

const TARGET: &str = "agent:main:telegram:group:g1";
const MAIN: &str = "agent:main:main";
const SUB: &str = "agent:main:subagent:s1";
const AMBIENT: &str = "agent:ops:main";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_rapid_changes_one_line_one_wake() {
    let env = Env::new();
    let k = env.start().await;
    assert!(k.register_watch(MAIN, TARGET, Provenance::Explicit).await);
    assert!(k.register_watch(SUB, TARGET, Provenance::Explicit).await);
    assert!(k.register_watch(AMBIENT, TARGET, Provenance::AmbientGroup).await);
    let mut signals = k.subscribe();
    for _ in 0..20 {
        env.clock.advance(100);
        k.record_human_turn(TARGET, "main", "telegram", None, None).await;
    }
    for w in [MAIN, SUB, AMBIENT] {
        assert_eq!(notices(&k.peek(w)), vec![(TARGET.to_string(), 0)], "one line in {w}'s queue");
    }
    let mut wakes = vec![];
    let mut notice_signals = vec![];
    while let Ok(s) = signals.try_recv() {
        match s {
            Signal::Wake { session, .. } => wakes.push(session),
            Signal::Notice { session, .. } => notice_signals.push(session),
            Signal::Message { .. } => {}
        }
    }
    assert_eq!(wakes, vec![MAIN.to_string()], "one wake, for the main-session watcher only");
    notice_signals.sort();
    assert_eq!(
        notice_signals,
        vec![MAIN.to_string(), SUB.to_string(), AMBIENT.to_string()],
        "one notice each"
    );
    assert_eq!(k.metrics().wakes.load(std::sync::atomic::Ordering::Relaxed), 1);

    // Once the 20 s window has passed, the next change wakes the main session again.
    env.clock.advance(20_000);
    k.record_human_turn(TARGET, "main", "telegram", None, None).await;
    let mut wakes = vec![];
    while let Ok(s) = signals.try_recv() {
        if let Signal::Wake { session, .. } = s {
            wakes.push(session);
        }
    }
    assert_eq!(wakes, vec![MAIN.to_string()]);
}
