//! The store conformance suite, written once over `S: Store` so every backend (SQLite today, PostgreSQL
//! next) runs exactly the same checks. A backend instantiates it with [`conformance_suite!`], giving a
//! function that builds a fresh, empty [`Harness`] (and a guard that keeps its resources alive).
//!
//! Each `pub async fn` here is one check; the macro turns each into its own test.

use sessionwatch_core::{
    Actor, AgentSessionKey, Cursor, DAY_MS, EventKind, GoalChange, Limit, Millis, NewEvent, Notice,
    Provenance, RegisterDecision, SkipReason, StoredEvent,
};
use sessionwatch_store::{
    Acknowledged, AppendOutcome, AppendRequest, Head, NewSession, RetentionPolicy, SessionFilter, SessionRow,
    Store, WatchEdge,
};

/// A backend hook that turns the (watcher, target) cursor into a legacy one.
pub type MakeLegacy<S> = Box<dyn Fn(&S, &str, &str) + Send + Sync>;

/// What a backend hands the suite.
pub struct Harness<S> {
    pub store: S,
    /// Turns the (watcher, target) cursor into a legacy one: a cursor whose watcher store is unknown
    /// (`watcher_store_path` NULL), as written before store binding existed.
    pub make_legacy: MakeLegacy<S>,
}

/// What a backend's `make` answers: a harness and its guard, or `None` when the backend is unavailable
/// (a PostgreSQL server that does not answer), which skips the check.
pub trait IntoHarness<S, G> {
    fn into_harness(self) -> Option<(Harness<S>, G)>;
}

impl<S, G> IntoHarness<S, G> for (Harness<S>, G) {
    fn into_harness(self) -> Option<(Harness<S>, G)> {
        Some(self)
    }
}

impl<S, G> IntoHarness<S, G> for Option<(Harness<S>, G)> {
    fn into_harness(self) -> Option<(Harness<S>, G)> {
        self
    }
}

mod listings;
pub use listings::*;

/// Instantiates every check of the suite as a `#[tokio::test]`. `$make` is a path to a function returning
/// `(Harness<S>, guard)`; the guard lives for the whole test.
#[macro_export]
macro_rules! conformance_suite {
    ($make:path) => {
        $crate::conformance_suite!(@tests $make;
            contiguous_sequences_per_session,
            concurrent_appends_are_counted_in_group_commits,
            head_survives_pruning_and_never_decreases,
            dedupe_returns_existing_row_and_changes_nothing,
            dedupe_is_scoped_to_the_session,
            only_if_watched_writes_nothing_when_unwatched,
            occurred_at_is_clamped,
            child_spawned_seeds_the_producer_watcher,
            material_events_update_lnm_with_frozen_n,
            self_caused_events_are_suppressed,
            invalid_addresses_are_logged_without_cursor_or_notice,
            cursor_bound_to_another_store_is_inert,
            legacy_cursor_must_register_again,
            registration_rules,
            acknowledge_goes_through_the_present,
            a_respawn_keeps_an_unseen_change_pending,
            sweep_reopens_pending_cursors_of_existing_watchers,
            every_event_kind_round_trips_through_a_page,
            changes_since_pages_and_gaps_from_the_floor,
            state_versions_for_many_sessions,
            retention_by_age,
            retention_by_row_count,
            cursors_expire_after_the_retention_period,
            unwatch_removes_one_cursor,
            clear_watcher_removes_all_its_cursors,
            delete_session_state_removes_both_sides,
            watch_edges_name_both_ends,
            list_sessions_filters_by_agent_and_pages,
            session_activity_and_the_pending_inbox,
            nodes_are_found_by_token_and_revoked,
            a_transcript_answers_its_newest_messages_up_to_the_cap,
            native_state_and_cwd_are_kept_on_the_row,
        );
    };
    (@tests $make:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some((harness, _guard)) = $crate::conformance::IntoHarness::into_harness($make()) else {
                    return; // the backend is unavailable (reported as SKIPPED by `$make`)
                };
                $crate::conformance::$name(&harness).await;
            }
        )*
    };
}

pub const NOW: Millis = 1_750_000_000_000;
pub const STORE: &str = "store-a";
pub const W: &str = "agent:main:main";
pub const W2: &str = "agent:main:subagent:w2";
pub const T: &str = "agent:main:subagent:t";
pub const T2: &str = "agent:main:telegram:group:t2";
pub const AGENT: &str = "main";

pub fn key(s: &str) -> AgentSessionKey {
    AgentSessionKey::parse(s).unwrap()
}

pub fn human(target: &str) -> NewEvent {
    NewEvent::human_message(target, AGENT, "telegram", None)
}

pub fn goal(target: &str, actor: Actor) -> NewEvent {
    NewEvent::goal_changed(target, AGENT, &GoalChange::Updated, actor)
}

pub fn compacted(target: &str, op: &str) -> NewEvent {
    NewEvent::compacted(target, AGENT, op)
}

/// A transcript message from the user saying `text`.
pub fn message(text: String) -> sessionwatch_store::NewMessage {
    sessionwatch_store::NewMessage {
        session_id: "sid".into(),
        role: "user".into(),
        text,
        run_id: None,
        from_session: None,
    }
}

pub fn req(event: NewEvent) -> AppendRequest {
    AppendRequest::new(event, STORE)
}

async fn append<S: Store>(s: &S, r: AppendRequest, now: Millis) -> AppendOutcome {
    s.append(r, now).await.expect("append")
}

/// Appends and expects a recorded event; answers it and its notices.
async fn record<S: Store>(s: &S, r: AppendRequest, now: Millis) -> (StoredEvent, Vec<Notice>) {
    match append(s, r, now).await {
        AppendOutcome::Recorded { event, notices } => (std::sync::Arc::unwrap_or_clone(event), notices),
        other => panic!("expected Recorded, got {other:?}"),
    }
}

async fn head<S: Store>(s: &S, k: &str) -> Head {
    head_of(s, k, AGENT).await
}

async fn head_of<S: Store>(s: &S, k: &str, agent: &str) -> Head {
    s.head(k.into(), agent.into()).await.expect("head")
}

async fn cursor<S: Store>(s: &S, w: &str, t: &str) -> Option<Cursor> {
    s.cursor(w.into(), t.into()).await.expect("cursor")
}

async fn register<S: Store>(
    s: &S,
    w: &str,
    t: &str,
    p: Provenance,
    store: &str,
    now: Millis,
) -> RegisterDecision {
    let out = s.register_watch(key(w), key(t), p, store.into(), now).await.expect("register");
    assert_eq!(out.registered, !matches!(out.decision, RegisterDecision::Refused(_)));
    out.decision
}

async fn all_events<S: Store>(s: &S, k: &str, agent: &str) -> Vec<StoredEvent> {
    let mut out = vec![];
    let mut since = 0;
    loop {
        let page = s.changes_since(k.into(), agent.into(), since, Limit::MAX).await.expect("changes");
        since = page.next_since(since);
        out.extend(page.events.iter().map(|e| (**e).clone()));
        if !page.truncated {
            return out;
        }
    }
}

async fn seqs<S: Store>(s: &S, k: &str) -> Vec<u64> {
    all_events(s, k, AGENT).await.iter().map(|e| e.sequence).collect()
}

async fn ensure_session<S: Store>(s: &S, k: &str) {
    let k = key(k);
    s.ensure_session(
        NewSession {
            session_key: k.as_str().into(),
            agent_id: k.agent_id().into(),
            session_id: format!("{k}-1"),
            kind: "other".into(),
            ..NewSession::default()
        },
        NOW,
    )
    .await
    .expect("ensure_session");
}

fn notice(w: &str, t: &str, since: u64) -> Notice {
    Notice { watcher: key(w), target: key(t), since, queue_only: false }
}

fn lnm(c: &Cursor) -> (u64, u64, u64) {
    (c.last_seen, c.notified, c.material)
}

// ------------------------------------------------------------------------------------------------------

pub async fn contiguous_sequences_per_session<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    // Two keys, and the same key under two agents: four independent sequences, interleaved.
    let sessions = [(T, "main"), (T2, "main"), (T, "ops"), (T2, "ops")];
    let mut expected = [0u64; 4];
    for i in 0..40usize {
        let n = (i * 7 + i / 3) % 4;
        let (k, agent) = sessions[n];
        let ev = NewEvent::human_message(k, agent, "web", None);
        let (e, _) = record(s, req(ev), NOW + i as Millis).await;
        expected[n] += 1;
        assert_eq!(e.sequence, expected[n], "sequence of {k}/{agent}");
        assert_eq!((e.session_key.as_str(), e.agent_id.as_str()), (k, agent));
    }
    for (n, (k, agent)) in sessions.iter().enumerate() {
        assert_eq!(head_of(s, k, agent).await, Head { head: expected[n], floor: 0 });
        let got: Vec<u64> = all_events(s, k, agent).await.iter().map(|e| e.sequence).collect();
        assert_eq!(got, (1..=expected[n]).collect::<Vec<_>>(), "{k}/{agent} is exactly 1..head");
    }
    assert_eq!(head_of(s, T, "nobody").await, Head::default(), "an unknown session has head 0");
}

/// Every committed append is counted once, in some group commit: what `/metrics` and `bench kernel`
/// report as writes per commit.
pub async fn concurrent_appends_are_counted_in_group_commits<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    let before = s.group_commits();
    let appends = (0..32).map(|i| {
        let key = if i % 2 == 0 { T } else { T2 };
        record(s, req(NewEvent::human_message(key, "main", "web", None)), NOW + i)
    });
    futures_util::future::join_all(appends).await;
    let counted = s.group_commits().since(before);
    assert_eq!(counted.writes, 32, "{counted:?}");
    assert!((1..=32).contains(&counted.commits), "{counted:?}");
    assert_eq!(head_of(s, T, "main").await.head + head_of(s, T2, "main").await.head, 32);
}

pub async fn head_survives_pruning_and_never_decreases<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    for i in 0..5 {
        record(s, req(human(T)), NOW + i).await;
    }
    let before = head(s, T).await;
    assert_eq!(before, Head { head: 5, floor: 0 });
    // Every row goes.
    let report = s.prune(RetentionPolicy { max_age_ms: 30 * DAY_MS, max_rows: 0 }, NOW + 10).await.unwrap();
    assert_eq!(report.events_by_cap, 5);
    assert_eq!(head(s, T).await, Head { head: 5, floor: 5 }, "the head row survives, floor = last pruned");
    let page = s.changes_since(T.into(), AGENT.into(), 0, Limit::MAX).await.unwrap();
    assert!(page.events.is_empty());
    assert!(page.history_gap);
    assert_eq!(page.earliest_available_sequence, 6);
    let versions = s.state_versions(vec![(T.into(), AGENT.into())]).await.unwrap();
    assert_eq!(versions.get(&(T.to_string(), AGENT.to_string())), Some(&5));
    // Pruning again (nothing left) and by age changes nothing.
    s.prune(RetentionPolicy { max_age_ms: 0, max_rows: 0 }, NOW + 40 * DAY_MS).await.unwrap();
    assert_eq!(head(s, T).await, Head { head: 5, floor: 5 });
    // Appending continues above the old head, never reusing a sequence.
    let (e, _) = record(s, req(human(T)), NOW + 20).await;
    assert_eq!(e.sequence, 6);
    assert_eq!(head(s, T).await, Head { head: 6, floor: 5 });
    assert_eq!(seqs(s, T).await, vec![6]);
}

pub async fn dedupe_returns_existing_row_and_changes_nothing<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    let first_ev = human(T).with_dedupe_key(Some("upstream:t:claude:42".into()));
    let (first, notices) = record(s, req(first_ev), NOW + 1).await;
    assert_eq!(notices, vec![notice(W, T, 0)]);
    let cursor_before = cursor(s, W, T).await.unwrap();
    let head_before = head(s, T).await;

    // Same dedupe key, different content and a later clock: the existing row, and nothing else.
    let mut again = goal(T, Actor::human(None)).with_dedupe_key(Some("upstream:t:claude:42".into()));
    again.summary = "something else".into();
    let mut r = req(again);
    r.policy.producer_watchers = vec![W2.into()];
    match append(s, r, NOW + 1000).await {
        AppendOutcome::Duplicate(existing) => assert_eq!(*existing, first),
        other => panic!("expected Duplicate, got {other:?}"),
    }
    assert_eq!(head(s, T).await, head_before, "no head bump");
    assert_eq!(cursor(s, W, T).await.unwrap(), cursor_before, "no cursor move");
    assert_eq!(cursor(s, W2, T).await, None, "no cursor for the producer's watcher either");
    assert_eq!(seqs(s, T).await, vec![1]);

    // A dedupe key is also honoured for log-only kinds (first terminal write of a run wins).
    let ok = NewEvent::run_terminal(T, AGENT, "r1", sessionwatch_core::RunStatus::Ok);
    let (done, _) = record(s, req(ok), NOW + 2).await;
    let late = NewEvent::run_terminal(
        T,
        AGENT,
        "r1",
        sessionwatch_core::RunStatus::Failed(sessionwatch_core::RunOutcome::Timeout),
    );
    assert_eq!(append(s, req(late), NOW + 3).await, AppendOutcome::Duplicate(Box::new(done)));
    assert_eq!(head(s, T).await.head, 2);
}

pub async fn dedupe_is_scoped_to_the_session<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    let dk = Some("compacted:op-1".to_string());
    record(s, req(compacted(T, "op-1")), NOW).await;
    // Another key, and the same key under another agent, record the same dedupe key independently.
    let (e2, _) = record(s, req(compacted(T2, "op-1")), NOW).await;
    assert_eq!(e2.dedupe_key, dk);
    let mut other_agent = compacted(T, "op-1");
    other_agent.agent_id = "ops".into();
    let (e3, _) = record(s, req(other_agent), NOW).await;
    assert_eq!((e3.sequence, e3.agent_id.as_str()), (1, "ops"));
    assert!(matches!(append(s, req(compacted(T, "op-1")), NOW).await, AppendOutcome::Duplicate(_)));
}

pub async fn only_if_watched_writes_nothing_when_unwatched<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    let mut r = req(human(T));
    r.policy.only_if_watched = true;
    assert_eq!(append(s, r.clone(), NOW).await, AppendOutcome::Unwatched);
    assert_eq!(head(s, T).await, Head::default());
    assert!(seqs(s, T).await.is_empty());
    assert!(s.state_versions(vec![(T.into(), AGENT.into())]).await.unwrap().is_empty(), "no head row");
    // A watch on another session does not count.
    register(s, W, T2, Provenance::Explicit, STORE, NOW).await;
    assert_eq!(append(s, r.clone(), NOW).await, AppendOutcome::Unwatched);
    // Once watched, the same request is recorded and notifies.
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    let (e, notices) = record(s, r, NOW + 1).await;
    assert_eq!(e.sequence, 1);
    assert_eq!(notices, vec![notice(W, T, 0)]);
}

pub async fn occurred_at_is_clamped<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    let cases = [
        (None, NOW),
        (Some(NOW + 60_000), NOW),
        (Some(NOW - 5_000), NOW - 5_000),
        (Some(NOW - DAY_MS), NOW - DAY_MS),
        (Some(NOW - 3 * DAY_MS), NOW - DAY_MS),
        (Some(0), NOW - DAY_MS),
    ];
    for (i, (input, want)) in cases.into_iter().enumerate() {
        let (e, _) = record(s, req(human(T).with_occurred_at(input)), NOW).await;
        assert_eq!(e.occurred_at, want, "case {i}: {input:?}");
    }
    let stored: Vec<Millis> = all_events(s, T, AGENT).await.iter().map(|e| e.occurred_at).collect();
    assert_eq!(stored, cases.iter().map(|c| c.1).collect::<Vec<_>>(), "the clamped value is what is stored");
}

pub async fn child_spawned_seeds_the_producer_watcher<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    // History on the child before the spawn never notifies the parent.
    record(s, req(human(T)), NOW).await;
    record(s, req(NewEvent::created(T, AGENT, "sid", Actor::system())), NOW).await;
    let mut r = req(NewEvent::child_spawned(T, AGENT, W, "run-1"));
    r.policy.producer_watchers = vec![W.into()];
    let (spawn, notices) = record(s, r.clone(), NOW + 5).await;
    assert_eq!(spawn.sequence, 3);
    assert_eq!(spawn.kind, EventKind::ChildSpawned);
    assert!(notices.is_empty(), "a spawn seeds, it does not notify");
    let c = cursor(s, W, T).await.expect("the parent's cursor is seeded");
    assert_eq!(lnm(&c), (3, 3, 3));
    assert_eq!(c.store_path.as_deref(), Some(STORE));
    assert_eq!(c.provenance, Provenance::Explicit);
    // The spawn is deduped by run id: no reseed.
    assert!(matches!(append(s, r, NOW + 6).await, AppendOutcome::Duplicate(_)));
    // A later human turn on the child notifies the parent from the spawn point, even when only-if-watched.
    let mut turn = req(human(T));
    turn.policy.only_if_watched = true;
    let (e, notices) = record(s, turn, NOW + 7).await;
    assert_eq!(e.sequence, 4);
    assert_eq!(notices, vec![notice(W, T, 3)]);
    assert_eq!(lnm(&cursor(s, W, T).await.unwrap()), (3, 4, 4));
}

pub async fn material_events_update_lnm_with_frozen_n<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    for _ in 0..3 {
        record(s, req(human(T)), NOW).await;
    }
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    assert_eq!(lnm(&cursor(s, W, T).await.unwrap()), (3, 3, 3));

    let (e4, n4) = record(s, req(human(T)), NOW + 1).await;
    assert_eq!(e4.sequence, 4);
    assert_eq!(n4, vec![notice(W, T, 3)]);
    assert_eq!(lnm(&cursor(s, W, T).await.unwrap()), (3, 4, 4));

    // While the notice is pending, further changes notify nobody anew (the queued notice, whose text
    // depends only on L, already covers them) and M follows them.
    let (_, n5) = record(s, req(goal(T, Actor::system())), NOW + 2).await;
    assert!(n5.is_empty(), "one notice per burst");
    assert_eq!(lnm(&cursor(s, W, T).await.unwrap()), (3, 4, 5), "N stays frozen while pending");

    let (_, n6) = record(s, req(NewEvent::upstream_missing(T, AGENT, "claude")), NOW + 3).await;
    assert!(n6.is_empty());
    assert_eq!(lnm(&cursor(s, W, T).await.unwrap()), (3, 4, 6));

    // Log-only kinds move nothing and notify nobody.
    let before = cursor(s, W, T).await.unwrap();
    for ev in [
        compacted(T, "op"),
        NewEvent::run_terminal(T, AGENT, "r", sessionwatch_core::RunStatus::Ok),
        NewEvent::adopted(T, AGENT, "codex", Actor::human(None)),
        NewEvent::created(T, AGENT, "sid", Actor::system()),
    ] {
        let (_, n) = record(s, req(ev), NOW + 4).await;
        assert!(n.is_empty());
    }
    assert_eq!(cursor(s, W, T).await.unwrap(), before);
    assert_eq!(head(s, T).await.head, 10);
}

pub async fn self_caused_events_are_suppressed<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    register(s, W2, T, Provenance::Explicit, STORE, NOW).await;
    // W changes the goal itself (actor id in another case: classification normalises it).
    let (_, notices) = record(s, req(goal(T, Actor::agent("Agent:Main:Main"))), NOW + 1).await;
    assert_eq!(notices, vec![notice(W2, T, 0)], "only the other watcher hears of it");
    assert_eq!(lnm(&cursor(s, W, T).await.unwrap()), (0, 0, 0), "the actor's cursor does not move");
    assert_eq!(lnm(&cursor(s, W2, T).await.unwrap()), (0, 1, 1));
    // The producer's own watcher is suppressed the same way.
    let mut r = req(goal(T2, Actor::agent(W)));
    r.policy.producer_watchers = vec![W.into()];
    let (_, notices) = record(s, r, NOW + 2).await;
    assert!(notices.is_empty());
    assert_eq!(cursor(s, W, T2).await, None);
}

pub async fn invalid_addresses_are_logged_without_cursor_or_notice<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    // The bare `global` key (session.scope = global): logged and readable, never a watch target.
    let mut r = req(NewEvent::human_message("global", AGENT, "web", None));
    r.policy.producer_watchers = vec![W.into()];
    let (e, notices) = record(s, r, NOW).await;
    assert_eq!(e.sequence, 1);
    assert!(notices.is_empty());
    assert_eq!(cursor(s, W, "global").await, None);
    let mut spawn = req(NewEvent::child_spawned("global", AGENT, W, "r1"));
    spawn.policy.producer_watchers = vec![W.into()];
    let (e, notices) = record(s, spawn, NOW).await;
    assert_eq!(e.sequence, 2);
    assert!(notices.is_empty());
    assert_eq!(cursor(s, W, "global").await, None);
    assert_eq!(
        all_events(s, "global", AGENT).await.iter().map(|e| e.kind).collect::<Vec<_>>(),
        [EventKind::HumanDirectMessage, EventKind::ChildSpawned]
    );
    // An invalid watcher on a valid target, and a spawn naming the child itself as its parent.
    let mut r = req(human(T));
    r.policy.producer_watchers = vec!["main".into(), "global".into(), T.into()];
    let (_, notices) = record(s, r, NOW).await;
    assert!(notices.is_empty());
    let mut spawn = req(NewEvent::child_spawned(T, AGENT, "main", "r2"));
    spawn.policy.producer_watchers = vec!["main".into(), T.into()];
    record(s, spawn, NOW).await;
    for w in ["main", "global", T] {
        assert_eq!(cursor(s, w, T).await, None, "{w}");
    }
}

pub async fn cursor_bound_to_another_store_is_inert<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    assert!(matches!(register(s, W, T, Provenance::Explicit, "a", NOW).await, RegisterDecision::Seed(_)));
    ensure_session(s, W).await;
    let mut r = req(human(T));
    r.watcher_store = "b".into();
    let (_, notices) = record(s, r.clone(), NOW + 1).await;
    assert!(notices.is_empty(), "a cursor of store a is inert for store b");
    let c = cursor(s, W, T).await.unwrap();
    assert_eq!((lnm(&c), c.store_path.as_deref()), ((0, 0, 0), Some("a")));
    // Its own store still works.
    let mut ra = req(human(T));
    ra.watcher_store = "a".into();
    let (_, notices) = record(s, ra, NOW + 2).await;
    assert_eq!(notices, vec![notice(W, T, 0)]);
    // Store b can neither acknowledge nor sweep it.
    assert_eq!(
        s.acknowledge(key(W), vec![key(T)], "b".into(), NOW + 3).await.unwrap(),
        Acknowledged::default()
    );
    assert_eq!(lnm(&cursor(s, W, T).await.unwrap()), (0, 2, 2));
    assert!(s.sweep("b".into(), NOW + 3).await.unwrap().is_empty());
    assert_eq!(s.sweep("a".into(), NOW + 3).await.unwrap(), vec![notice(W, T, 0)]);
    // Registering from store b rebinds the watch at the current head (pending history of store a is not
    // carried over).
    match register(s, W, T, Provenance::Explicit, "b", NOW + 4).await {
        RegisterDecision::Seed(c) => assert_eq!((lnm(&c), c.store_path.as_deref()), ((2, 2, 2), Some("b"))),
        other => panic!("expected Seed, got {other:?}"),
    }
    let (_, notices) = record(s, r, NOW + 5).await;
    assert_eq!(notices, vec![notice(W, T, 2)]);
}

pub async fn legacy_cursor_must_register_again<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    ensure_session(s, W).await;
    record(s, req(human(T)), NOW + 1).await;
    (h.make_legacy)(s, W, T);
    let legacy = cursor(s, W, T).await.unwrap();
    assert_eq!((lnm(&legacy), legacy.store_path.as_deref()), ((0, 1, 1), None), "history kept");
    let (_, notices) = record(s, req(human(T)), NOW + 2).await;
    assert!(notices.is_empty(), "a legacy cursor does not notify");
    assert_eq!(cursor(s, W, T).await.unwrap(), legacy);
    assert!(s.sweep(STORE.into(), NOW + 3).await.unwrap().is_empty(), "nor is it swept");
    assert_eq!(
        s.acknowledge(key(W), vec![key(T)], STORE.into(), NOW + 3).await.unwrap(),
        Acknowledged::default()
    );
    assert_eq!(cursor(s, W, T).await.unwrap(), legacy, "nor acknowledged");
    // Registering again binds it to this store at the current head.
    assert!(matches!(
        register(s, W, T, Provenance::Explicit, STORE, NOW + 4).await,
        RegisterDecision::Seed(_)
    ));
    let c = cursor(s, W, T).await.unwrap();
    assert_eq!((lnm(&c), c.store_path.as_deref()), ((2, 2, 2), Some(STORE)));
    let (_, notices) = record(s, req(human(T)), NOW + 5).await;
    assert_eq!(notices, vec![notice(W, T, 2)]);
}

pub async fn registration_rules<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    for _ in 0..3 {
        record(s, req(human(T)), NOW).await;
    }
    // At the current head: earlier history never notifies.
    match register(s, W, T, Provenance::Explicit, STORE, NOW + 1).await {
        RegisterDecision::Seed(c) => assert_eq!(lnm(&c), (3, 3, 3)),
        other => panic!("expected Seed, got {other:?}"),
    }
    assert_eq!(lnm(&cursor(s, W, T).await.unwrap()), (3, 3, 3));
    // A watch on a session with no history starts at 0.
    register(s, W, T2, Provenance::Explicit, STORE, NOW + 1).await;
    assert_eq!(lnm(&cursor(s, W, T2).await.unwrap()), (0, 0, 0));

    // Re-registering keeps the pending cursor untouched.
    record(s, req(human(T)), NOW + 2).await;
    let pending = cursor(s, W, T).await.unwrap();
    assert_eq!(lnm(&pending), (3, 4, 4));
    assert_eq!(register(s, W, T, Provenance::Explicit, STORE, NOW + 3).await, RegisterDecision::Keep);
    assert_eq!(register(s, W, T, Provenance::AmbientGroup, STORE, NOW + 3).await, RegisterDecision::Keep);
    assert_eq!(cursor(s, W, T).await.unwrap(), pending, "untouched, provenance included");

    // Ambient first; explicit upgrades it, keeping the positions; ambient never downgrades.
    assert!(matches!(
        register(s, W2, T, Provenance::AmbientGroup, STORE, NOW + 4).await,
        RegisterDecision::Seed(_)
    ));
    record(s, req(human(T)), NOW + 5).await;
    let ambient = cursor(s, W2, T).await.unwrap();
    assert_eq!((lnm(&ambient), ambient.provenance), ((4, 5, 5), Provenance::AmbientGroup));
    assert_eq!(
        register(s, W2, T, Provenance::Explicit, STORE, NOW + 6).await,
        RegisterDecision::UpgradeToExplicit
    );
    let upgraded = cursor(s, W2, T).await.unwrap();
    assert_eq!((lnm(&upgraded), upgraded.provenance), ((4, 5, 5), Provenance::Explicit));
    assert_eq!(register(s, W2, T, Provenance::AmbientGroup, STORE, NOW + 7).await, RegisterDecision::Keep);
    assert_eq!(cursor(s, W2, T).await.unwrap().provenance, Provenance::Explicit, "never the reverse");

    // Self-watch is refused and writes nothing.
    assert_eq!(
        register(s, T, T, Provenance::Explicit, STORE, NOW).await,
        RegisterDecision::Refused(SkipReason::SelfWatch)
    );
    assert_eq!(cursor(s, T, T).await, None);
    // Case differences are the same session.
    let out =
        s.register_watch(key("AGENT:main:Subagent:T"), key(T), Provenance::Explicit, STORE.into(), NOW).await;
    assert_eq!(out.unwrap().decision, RegisterDecision::Refused(SkipReason::SelfWatch));
}

pub async fn acknowledge_goes_through_the_present<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    register(s, W, T2, Provenance::AmbientGroup, STORE, NOW).await;
    // T: one event then two more while pending; T2: one event.
    record(s, req(human(T)), NOW + 1).await;
    record(s, req(human(T)), NOW + 2).await;
    record(s, req(human(T)), NOW + 3).await;
    record(s, req(human(T2)), NOW + 4).await;
    let first = s.acknowledge(key(W), vec![key(T), key(T2)], STORE.into(), NOW + 5).await.unwrap();
    let t2_notice = |since| Notice { watcher: key(W), target: key(T2), since, queue_only: true };
    assert_eq!(first.delivered, vec![notice(W, T, 0), t2_notice(0)], "both were pending: both delivered");
    let t = cursor(s, W, T).await.unwrap();
    assert_eq!((lnm(&t), t.updated_at), ((3, 3, 3), NOW + 5), "the burst is covered by the one notice");
    let t2 = cursor(s, W, T2).await.unwrap();
    assert_eq!(lnm(&t2), (1, 1, 1));
    // A drain point later in the same turn claims nothing: no second notice for the same burst.
    let second = s.acknowledge(key(W), vec![key(T), key(T2)], STORE.into(), NOW + 6).await.unwrap();
    assert_eq!(second, Acknowledged::default());
    assert_eq!(cursor(s, W, T).await.unwrap().updated_at, NOW + 5, "a settled cursor is not touched");
    // A change after the drain opens one fresh notice; an ambient watch's stays queue-only.
    record(s, req(human(T2)), NOW + 7).await;
    record(s, req(human(T2)), NOW + 8).await;
    let again = s.acknowledge(key(W), vec![key(T), key(T2)], STORE.into(), NOW + 9).await.unwrap();
    assert_eq!(again.delivered, vec![t2_notice(1)]);
    assert_eq!(lnm(&cursor(s, W, T2).await.unwrap()), (3, 3, 3));
    // Acknowledging a target without a cursor is a no-op.
    assert_eq!(
        s.acknowledge(key(W2), vec![key(T)], STORE.into(), NOW).await.unwrap(),
        Acknowledged::default()
    );
    assert_eq!(cursor(s, W2, T).await, None);
}

/// A respawn never hides a change the parent has not seen: the parent's cursor on its child has a
/// pending notice (L=1, N=2, M=3: two human turns it never saw) when it spawns the same child key again.
/// The notice stays pending (durably), is delivered once at `changesSince 1`, and its drain acknowledges
/// through the spawn (L=N=M=4).
pub async fn a_respawn_keeps_an_unseen_change_pending<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    let spawn = |run: &str| {
        let mut r = req(NewEvent::child_spawned(T, AGENT, W, run));
        r.policy.producer_watchers = vec![W.into()];
        r
    };
    ensure_session(s, W).await;
    record(s, spawn("run-1"), NOW).await;
    record(s, req(human(T)), NOW + 1).await;
    record(s, req(human(T)), NOW + 2).await;
    assert_eq!(lnm(&cursor(s, W, T).await.unwrap()), (1, 2, 3));
    let (respawn, notices) = record(s, spawn("run-2"), NOW + 3).await;
    assert_eq!(respawn.sequence, 4);
    assert!(notices.is_empty(), "a spawn seeds, it does not notify");
    let c = cursor(s, W, T).await.unwrap();
    assert_eq!(
        (lnm(&c), c.provenance),
        ((1, 2, 4), Provenance::Explicit),
        "still pending, through the spawn"
    );
    let pending = s.pending_notices_for_host(STORE.into(), None, Some(W.into())).await.unwrap();
    assert_eq!(pending, vec![notice(W, T, 1)], "a restart's sweep would find it");
    let ack = s.acknowledge(key(W), vec![key(T)], STORE.into(), NOW + 4).await.unwrap();
    assert_eq!(ack.delivered, vec![notice(W, T, 1)], "exactly one notice, changesSince 1");
    assert_eq!(lnm(&cursor(s, W, T).await.unwrap()), (4, 4, 4));
    // A respawn with nothing pending seeds at the spawn, as the first spawn did.
    let (third, _) = record(s, spawn("run-3"), NOW + 5).await;
    assert_eq!(lnm(&cursor(s, W, T).await.unwrap()), (5, 5, 5));
    assert_eq!(third.sequence, 5);
}

pub async fn sweep_reopens_pending_cursors_of_existing_watchers<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    ensure_session(s, W).await;
    // W: pending on T (L=0, N=1, M=3), settled on T2. W2: pending but no session row.
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    register(s, W, T2, Provenance::AmbientGroup, STORE, NOW).await;
    register(s, W2, T, Provenance::Explicit, STORE, NOW).await;
    for i in 0..3 {
        record(s, req(human(T)), NOW + i).await;
    }
    record(s, req(human(T2)), NOW + 3).await;
    s.acknowledge(key(W), vec![key(T2)], STORE.into(), NOW + 4).await.unwrap();
    let swept = s.sweep(STORE.into(), NOW + 10).await.unwrap();
    assert_eq!(swept, vec![notice(W, T, 0)]);
    let c = cursor(s, W, T).await.unwrap();
    assert_eq!((lnm(&c), c.updated_at), ((0, 3, 3), NOW + 10), "the sweep re-opens with N = M");
    assert_eq!(lnm(&cursor(s, W2, T).await.unwrap()), (0, 1, 3), "a missing watcher is left alone");
    // A pending ambient cursor is swept as queue-only.
    record(s, req(human(T2)), NOW + 11).await;
    let mut swept = s.sweep(STORE.into(), NOW + 12).await.unwrap();
    swept.sort_by(|a, b| a.target.cmp(&b.target));
    assert_eq!(
        swept,
        vec![notice(W, T, 0), Notice { watcher: key(W), target: key(T2), since: 1, queue_only: true }]
    );
    // After acknowledging, nothing is pending and the sweep is empty.
    s.acknowledge(key(W), vec![key(T), key(T2)], STORE.into(), NOW + 13).await.unwrap();
    assert!(s.sweep(STORE.into(), NOW + 14).await.unwrap().is_empty());
}

/// Every event kind is written and read back as itself through a page (a kind the store could not read
/// would make every page holding it unreadable).
pub async fn every_event_kind_round_trips_through_a_page<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    for (i, kind) in EventKind::ALL.into_iter().enumerate() {
        let mut e = human(T);
        e.kind = kind;
        e.summary = format!("{} #{i}", kind.as_str());
        record(s, AppendRequest::new(e, STORE), NOW + i as Millis).await;
    }
    let page = s.changes_since(T.into(), AGENT.into(), 0, Limit::MAX).await.expect("the page reads");
    let kinds: Vec<EventKind> = page.events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, EventKind::ALL.to_vec());
    for kind in EventKind::ALL {
        assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
    }
}

pub async fn changes_since_pages_and_gaps_from_the_floor<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    let page = |since: u64, limit: i64| {
        let l = Limit::new(limit).unwrap();
        async move { s.changes_since(T.into(), AGENT.into(), since, l).await.unwrap() }
    };
    let empty = page(0, 200).await;
    assert_eq!(
        (empty.events.len(), empty.truncated, empty.earliest_available_sequence, empty.history_gap),
        (0, false, 0, false)
    );
    for i in 0..12 {
        record(s, req(if i % 2 == 0 { human(T) } else { goal(T, Actor::human(None)) }), NOW + i).await;
        record(s, req(human(T2)), NOW + i).await;
    }
    let seq_of = |p: &sessionwatch_core::ChangesPage| p.events.iter().map(|e| e.sequence).collect::<Vec<_>>();
    let p = page(0, 5).await;
    assert_eq!(
        (seq_of(&p), p.truncated, p.earliest_available_sequence, p.history_gap),
        (vec![1, 2, 3, 4, 5], true, 1, false)
    );
    assert!(p.events.iter().all(|e| e.session_key == T), "only the asked session");
    assert_eq!(p.events[1].kind, EventKind::GoalChanged);
    let p = page(5, 5).await;
    assert_eq!((seq_of(&p), p.truncated), (vec![6, 7, 8, 9, 10], true));
    let p = page(7, 5).await;
    assert_eq!((seq_of(&p), p.truncated), (vec![8, 9, 10, 11, 12], false), "exactly a full page left");
    let p = page(10, 200).await;
    assert_eq!((seq_of(&p), p.truncated), (vec![11, 12], false));
    for since in [12, 13, 1000] {
        let p = page(since, 200).await;
        assert_eq!((p.events.len(), p.truncated, p.history_gap), (0, false, false), "since {since}");
    }
    // Prune so T keeps 8..=12 (the newest 10 rows overall, interleaved with T2): floor 7.
    s.prune(RetentionPolicy { max_age_ms: 30 * DAY_MS, max_rows: 10 }, NOW + 20).await.unwrap();
    assert_eq!(head(s, T).await, Head { head: 12, floor: 7 });
    for since in 0..=13u64 {
        let p = page(since, 3).await;
        assert_eq!(p.history_gap, since < 7, "historyGap is exactly since < floor (since {since})");
        assert_eq!(p.earliest_available_sequence, 8);
        let first = since.max(7) + 1;
        let want: Vec<u64> = (first..=12).take(3).collect();
        assert_eq!(seq_of(&p), want, "since {since}");
        assert_eq!(p.truncated, first + 3 <= 12, "since {since}");
    }
    // Reading never moves a cursor.
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    let before = cursor(s, W, T).await;
    page(0, 200).await;
    assert_eq!(cursor(s, W, T).await, before);
}

pub async fn state_versions_for_many_sessions<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    let n = 1000u64;
    let keys: Vec<String> = (0..n).map(|i| format!("agent:main:subagent:s{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        for _ in 0..(i % 3 + 1) {
            record(s, req(NewEvent::human_message(k, AGENT, "web", None)), NOW).await;
        }
    }
    // Same key under another agent is a different session.
    record(s, req(NewEvent::human_message(&keys[0], "ops", "web", None)), NOW).await;
    let mut ask: Vec<(String, String)> = keys.iter().map(|k| (k.clone(), AGENT.to_string())).collect();
    ask.push((keys[0].clone(), "ops".into()));
    ask.push(("agent:main:subagent:never".into(), AGENT.into()));
    ask.push((keys[1].clone(), "nobody".into()));
    let versions = s.state_versions(ask).await.unwrap();
    assert_eq!(versions.len(), n as usize + 1, "sessions without a head are absent");
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(versions[&(k.clone(), AGENT.to_string())], (i % 3 + 1) as u64, "{k}");
    }
    assert_eq!(versions[&(keys[0].clone(), "ops".to_string())], 1);
    assert!(s.state_versions(vec![]).await.unwrap().is_empty());
}

pub async fn retention_by_age<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    let old = NOW - 40 * DAY_MS;
    // T: 3 old then 2 recent; T2: all old; a third session only recent.
    let t3 = "agent:main:subagent:t3";
    for i in 0..3 {
        record(s, req(human(T)), old + i).await;
        record(s, req(human(T2)), old + i).await;
    }
    for i in 0..2 {
        record(s, req(human(T)), NOW - 1000 + i).await;
        record(s, req(human(t3)), NOW - 1000 + i).await;
    }
    let report = s.prune(RetentionPolicy { max_age_ms: 30 * DAY_MS, max_rows: 50_000 }, NOW).await.unwrap();
    assert_eq!((report.events_by_age, report.events_by_cap), (6, 0));
    assert_eq!(head(s, T).await, Head { head: 5, floor: 3 });
    assert_eq!(seqs(s, T).await, vec![4, 5]);
    assert_eq!(head(s, T2).await, Head { head: 3, floor: 3 }, "all pruned: the head stays, floor = head");
    assert!(seqs(s, T2).await.is_empty());
    assert_eq!(head(s, t3).await, Head { head: 2, floor: 0 });
    // Pruning is idempotent.
    assert_eq!(
        s.prune(RetentionPolicy { max_age_ms: 30 * DAY_MS, max_rows: 50_000 }, NOW).await.unwrap(),
        Default::default()
    );
    // A clock that jumps backwards prunes nothing more.
    let report = s.prune(RetentionPolicy::default(), NOW - 100 * DAY_MS).await.unwrap();
    assert_eq!(report.events_by_age, 0);
    assert_eq!(seqs(s, T).await, vec![4, 5]);
    // A session whose whole log was pruned numbers on from its head.
    let (e, _) = record(s, req(human(T2)), NOW).await;
    assert_eq!(e.sequence, 4);
    assert_eq!(head(s, T2).await, Head { head: 4, floor: 3 });
    assert_eq!(seqs(s, T2).await, vec![4]);
}

pub async fn retention_by_row_count<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    let t3 = "agent:main:subagent:t3";
    let order = [T, T2, T, t3, T, T2, T2, T, t3, T, T2, T, T, t3, T2];
    let mut log = vec![];
    for (i, k) in order.iter().enumerate() {
        let (e, _) = record(s, req(human(k)), NOW + i as Millis).await;
        log.push((*k, e.sequence));
    }
    let heads_before = [head(s, T).await.head, head(s, T2).await.head, head(s, t3).await.head];
    let report = s.prune(RetentionPolicy { max_age_ms: 30 * DAY_MS, max_rows: 6 }, NOW + 100).await.unwrap();
    assert_eq!((report.events_by_age, report.events_by_cap), (0, 9));
    let (pruned, kept) = log.split_at(log.len() - 6);
    for k in [T, T2, t3] {
        let want: Vec<u64> = kept.iter().filter(|(kk, _)| *kk == k).map(|(_, s)| *s).collect();
        assert_eq!(seqs(s, k).await, want, "{k} keeps exactly its newest rows");
        let floor = pruned.iter().filter(|(kk, _)| *kk == k).map(|(_, s)| *s).max().unwrap_or(0);
        assert_eq!(head(s, k).await.floor, floor, "{k}: floor = highest pruned sequence");
    }
    assert_eq!([head(s, T).await.head, head(s, T2).await.head, head(s, t3).await.head], heads_before);
    // Pruning never creates heads.
    assert!(
        s.state_versions(vec![("agent:main:subagent:none".into(), AGENT.into())]).await.unwrap().is_empty()
    );
    // A cap above the row count prunes nothing.
    let report = s.prune(RetentionPolicy { max_age_ms: 30 * DAY_MS, max_rows: 6 }, NOW + 100).await.unwrap();
    assert_eq!(report.events_by_cap, 0);
}

pub async fn cursors_expire_after_the_retention_period<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    let start = NOW - 31 * DAY_MS;
    register(s, W, T, Provenance::Explicit, STORE, start).await;
    register(s, W, T2, Provenance::Explicit, STORE, start).await;
    register(s, W2, T, Provenance::Explicit, STORE, start).await;
    // Touching a cursor (a material event, or an acknowledgement) keeps it alive.
    record(s, req(human(T2)), NOW - DAY_MS).await;
    register(s, W2, T2, Provenance::Explicit, STORE, NOW - 29 * DAY_MS).await;
    let report = s.prune(RetentionPolicy::default(), NOW).await.unwrap();
    let mut expired = report.cursors_expired.clone();
    expired.sort();
    assert_eq!(expired, vec![(W.to_string(), T.to_string()), (W2.to_string(), T.to_string())], "named");
    assert_eq!(cursor(s, W, T).await, None);
    assert_eq!(cursor(s, W2, T).await, None);
    assert!(cursor(s, W, T2).await.is_some());
    assert!(cursor(s, W2, T2).await.is_some(), "29 days old is within retention");
}

pub async fn unwatch_removes_one_cursor<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    register(s, W, T2, Provenance::Explicit, STORE, NOW).await;
    assert!(s.unwatch(W.into(), T.into()).await.unwrap());
    assert!(!s.unwatch(W.into(), T.into()).await.unwrap());
    assert_eq!(cursor(s, W, T).await, None);
    assert!(cursor(s, W, T2).await.is_some());
    let mut r = req(human(T));
    r.policy.only_if_watched = true;
    assert_eq!(append(s, r, NOW).await, AppendOutcome::Unwatched);
}

pub async fn clear_watcher_removes_all_its_cursors<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    register(s, W, T2, Provenance::AmbientGroup, STORE, NOW).await;
    register(s, W2, T, Provenance::Explicit, STORE, NOW).await;
    register(s, T, W, Provenance::Explicit, STORE, NOW).await;
    record(s, req(human(T)), NOW + 1).await;
    let mut cleared = s.clear_watcher(W.into()).await.unwrap();
    cleared.sort();
    assert_eq!(cleared, vec![T.to_string(), T2.to_string()]);
    assert!(s.cursors_of_watcher(W.into()).await.unwrap().is_empty());
    assert!(cursor(s, W2, T).await.is_some(), "other watchers keep theirs");
    assert!(cursor(s, T, W).await.is_some(), "cursors targeting the watcher stay");
    assert!(s.clear_watcher(W.into()).await.unwrap().is_empty());
    assert!(s.sweep(STORE.into(), NOW + 2).await.unwrap().iter().all(|n| n.watcher.as_str() != W));
}

pub async fn delete_session_state_removes_both_sides<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    ensure_session(s, T).await;
    for _ in 0..3 {
        record(s, req(human(T)), NOW).await;
        record(s, req(human(T2)), NOW).await;
    }
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    register(s, T, T2, Provenance::Explicit, STORE, NOW).await;
    register(s, W, T2, Provenance::Explicit, STORE, NOW).await;
    // The same key under another agent is another session and stays.
    record(s, req(NewEvent::human_message(T, "ops", "web", None)), NOW).await;
    s.delete_session_state(T.into(), AGENT.into()).await.unwrap();
    assert_eq!(head(s, T).await, Head::default());
    assert!(seqs(s, T).await.is_empty());
    assert_eq!(cursor(s, W, T).await, None, "cursors targeting it go");
    assert_eq!(cursor(s, T, T2).await, None, "cursors it held go");
    assert!(cursor(s, W, T2).await.is_some());
    assert_eq!(head(s, T2).await.head, 3);
    assert_eq!(head_of(s, T, "ops").await.head, 1);
    assert!(s.state_versions(vec![(T.into(), AGENT.into())]).await.unwrap().is_empty());
    // A deleted session starts again from 1.
    let (e, _) = record(s, req(human(T)), NOW + 1).await;
    assert_eq!(e.sequence, 1);
}
