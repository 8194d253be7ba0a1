//! Coalescing: twenty rapid changes are one line per watcher, and one wake for a main-session watcher only.

use crate::common::{Env, human_turn, notices};
use sessionwatch_core::{NewEvent, Provenance, RecordPolicy};
use sessionwatch_kernel::{Kernel, Signal};
use sessionwatch_store::SqliteStore;
use tokio::sync::broadcast;

const TARGET: &str = "agent:main:telegram:group:g1";
const MAIN: &str = "agent:main:main";
const SUB: &str = "agent:main:subagent:s1";
const AMBIENT: &str = "agent:ops:main";

/// A started kernel in which `MAIN` watches `TARGET`, and its signals from then on.
async fn main_watching_target(env: &Env) -> (Kernel<SqliteStore>, broadcast::Receiver<Signal>) {
    let k = env.start().await;
    assert!(k.register_watch(MAIN, TARGET, Provenance::Explicit).await.is_watching());
    let signals = k.subscribe();
    (k, signals)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_rapid_changes_one_line_one_wake() {
    let env = Env::new();
    let k = env.start().await;
    assert!(k.register_watch(MAIN, TARGET, Provenance::Explicit).await.is_watching());
    assert!(k.register_watch(SUB, TARGET, Provenance::Explicit).await.is_watching());
    assert!(k.register_watch(AMBIENT, TARGET, Provenance::AmbientGroup).await.is_watching());
    let mut signals = k.subscribe();
    for _ in 0..20 {
        env.clock.advance(100);
        human_turn(&k, TARGET).await;
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
            Signal::Message { .. } | Signal::Changed { .. } | Signal::Acknowledged { .. } => {}
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
    human_turn(&k, TARGET).await;
    let mut wakes = vec![];
    while let Ok(s) = signals.try_recv() {
        if let Signal::Wake { session, .. } = s {
            wakes.push(session);
        }
    }
    assert_eq!(wakes, vec![MAIN.to_string()]);
}

/// The sessions woken since the last look, sorted (the wakes taken from `signals`).
fn woken(signals: &mut tokio::sync::broadcast::Receiver<Signal>) -> Vec<String> {
    let mut sessions = vec![];
    while let Ok(s) = signals.try_recv() {
        if let Signal::Wake { session, .. } = s {
            sessions.push(session);
        }
    }
    sessions.sort();
    sessions
}

fn wakes_of(signals: &mut tokio::sync::broadcast::Receiver<Signal>) -> usize {
    woken(signals).len()
}

/// A change inside the coalescing window is not dropped: one trailing wake goes out when the window
/// ends, unless a turn drained the queue meanwhile.
#[tokio::test(start_paused = true)]
async fn a_change_inside_the_window_gets_one_trailing_wake() {
    let env = Env::new();
    let (k, mut signals) = main_watching_target(&env).await;
    human_turn(&k, TARGET).await;
    assert_eq!(wakes_of(&mut signals), 1, "the first change wakes at once");
    k.drain(MAIN).await;
    env.clock.advance(1_000);
    for _ in 0..5 {
        human_turn(&k, TARGET).await;
    }
    assert_eq!(wakes_of(&mut signals), 0, "inside the window: coalesced");
    tokio::time::sleep(std::time::Duration::from_secs(21)).await;
    assert_eq!(wakes_of(&mut signals), 1, "one trailing wake at the end of the window");

    // Drained (and every reopen drained too) before the window ends: no trailing wake.
    k.drain(MAIN).await;
    human_turn(&k, TARGET).await;
    while !k.drain(MAIN).await.is_empty() {}
    tokio::time::sleep(std::time::Duration::from_secs(21)).await;
    assert_eq!(wakes_of(&mut signals), 0, "nothing left to wake for");
}

/// The dashboard's live view: every append says the session's new state version, and a turn that takes
/// its notices says so (a watcher's pending edge clears without a reload).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_and_acknowledgements_are_signalled() {
    let env = Env::new();
    let (k, mut signals) = main_watching_target(&env).await;
    human_turn(&k, TARGET).await;
    human_turn(&k, TARGET).await;
    assert_eq!(k.drain(MAIN).await.len(), 1);
    let mut seen = vec![];
    while let Ok(s) = signals.try_recv() {
        match s {
            Signal::Changed { session, sequence } => seen.push(format!("changed {session} {sequence}")),
            Signal::Acknowledged { session, notices } => seen.push(format!("ack {session} {notices}")),
            _ => {}
        }
    }
    assert_eq!(
        seen,
        vec![format!("changed {TARGET} 1"), format!("changed {TARGET} 2"), format!("ack {MAIN} 1")]
    );
}

/// A change while the watcher's notice is still pending notifies nobody anew (one notice per burst), but
/// the watcher is reminded: one trailing wake at the end of the window, as a repeated delivery would do.
/// Not for the actor itself.
#[tokio::test(start_paused = true)]
async fn a_pending_watcher_is_reminded_once_per_window() {
    let env = Env::new();
    let (k, mut signals) = main_watching_target(&env).await;
    let change = |actor: Option<&str>| {
        let mut e = NewEvent::human_message(TARGET, "main", "telegram", None);
        if let Some(a) = actor {
            e.actor = sessionwatch_core::Actor::agent(a.to_string());
        }
        k.record(e, RecordPolicy::always())
    };
    change(None).await;
    assert_eq!(wakes_of(&mut signals), 1, "the first change wakes at once");
    env.clock.advance(1_000);
    change(Some(MAIN)).await; // the watcher's own change: no reminder
    tokio::time::sleep(std::time::Duration::from_secs(21)).await;
    assert_eq!(wakes_of(&mut signals), 0);
    env.clock.advance(25_000);
    change(None).await; // outside the window: wakes at once
    env.clock.advance(1_000);
    for _ in 0..5 {
        change(None).await;
    }
    assert_eq!(wakes_of(&mut signals), 1, "the reminder is coalesced");
    tokio::time::sleep(std::time::Duration::from_secs(21)).await;
    assert_eq!(wakes_of(&mut signals), 1, "one trailing wake for the pending notice");
    assert_eq!(k.peek(MAIN).len(), 1, "still one line");
}

/// Once every holder of a notice is absorbed, a burst's further changes pass over them all at once; a
/// trailing wake that ends meanwhile makes its watcher due again: the next change inside its new window
/// schedules the next trailing wake, as before the holders were found absorbed.
#[tokio::test(start_paused = true)]
async fn a_watcher_whose_trailing_wake_went_out_is_reminded_again() {
    let env = Env::new();
    let (k, mut signals) = main_watching_target(&env).await;
    let change =
        || k.record(NewEvent::human_message(TARGET, "main", "telegram", None), RecordPolicy::always());
    change().await;
    assert_eq!(woken(&mut signals), [MAIN], "the first change wakes at once");
    env.clock.advance(1_000);
    for _ in 0..3 {
        change().await; // the first schedules the trailing wake; then the holder is absorbed
    }
    tokio::time::sleep(std::time::Duration::from_secs(21)).await;
    assert_eq!(woken(&mut signals), [MAIN], "the trailing wake");
    // The kernel's clock has not moved: the watcher was woken just now, inside a new window.
    change().await;
    tokio::time::sleep(std::time::Duration::from_secs(21)).await;
    assert_eq!(woken(&mut signals), [MAIN], "one trailing wake for the change after it");
}

/// A watcher that comes to hold a notice about the target while the other holders are absorbed is
/// reminded by the next change like any holder.
#[tokio::test(start_paused = true)]
async fn a_new_holder_among_absorbed_ones_is_reminded() {
    const OTHER_MAIN: &str = "agent:ops:main";
    let env = Env::new();
    let (k, mut signals) = main_watching_target(&env).await;
    let change =
        || k.record(NewEvent::human_message(TARGET, "main", "telegram", None), RecordPolicy::always());
    change().await;
    env.clock.advance(1_000);
    for _ in 0..3 {
        change().await;
    }
    assert_eq!(woken(&mut signals), [MAIN]);
    assert!(k.register_watch(OTHER_MAIN, TARGET, Provenance::Explicit).await.is_watching());
    change().await;
    assert_eq!(woken(&mut signals), [OTHER_MAIN], "its first notice wakes it at once");
    env.clock.advance(1_000);
    change().await; // inside its window: its trailing wake is scheduled
    tokio::time::sleep(std::time::Duration::from_secs(21)).await;
    assert_eq!(woken(&mut signals), [MAIN, OTHER_MAIN], "a trailing wake each");
}
