//! The store conformance suite, written once over `S: Store` so every backend (SQLite, PostgreSQL) runs
//! exactly the same checks, one part per trait: the `SignalLog` here (appends, pages, heads, retention)
//! and in `cursors.rs` (watch cursors), the `SessionStore` in `sessions.rs`, `Links` in `links.rs`. A
//! backend instantiates it with [`conformance_suite!`], giving a function that builds a fresh, empty
//! [`Harness`] (and a guard that keeps its resources alive).
//!
//! Each `pub async fn` here is one check; the macro turns each into its own test.

use sessionwatch_core::{
    Actor, AgentSessionKey, Cursor, DAY_MS, EventKind, GoalChange, Limit, Millis, NewEvent, Notice,
    Provenance, RegisterDecision, SkipReason, StoredEvent,
};
use sessionwatch_store::{
    Acknowledged, AppendOutcome, AppendRequest, Head, NewSession, RetentionPolicy, SessionFilter, SessionRow,
    Store, WatchEdge, WatchRequest,
};

/// A backend hook that turns the (watcher, target) cursor into a legacy one.
pub type MakeLegacy<S> = Box<dyn Fn(&S, &str, &str) + Send + Sync>;

/// A backend hook that makes every later insert of an event fail (a trigger raising an error).
pub type FailAppends<S> = Box<dyn Fn(&S) + Send + Sync>;

/// What a backend hands the suite.
pub struct Harness<S> {
    pub store: S,
    /// Turns the (watcher, target) cursor into a legacy one: a cursor whose watcher store is unknown
    /// (`watcher_store_path` NULL), as written before store binding existed.
    pub make_legacy: MakeLegacy<S>,
    pub fail_appends: FailAppends<S>,
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

mod cursors;
mod links;
mod sessions;
pub use cursors::*;
pub use links::*;
pub use sessions::*;

/// Instantiates every check of the suite as a `#[tokio::test]`. `$make` is a path to a function returning
/// `(Harness<S>, guard)`; the guard lives for the whole test.
#[macro_export]
macro_rules! conformance_suite {
    ($make:path) => {
        $crate::conformance_suite!(@tests $make;
            // SignalLog: appends, pages, heads, retention (this file)
            contiguous_sequences_per_session,
            concurrent_appends_are_counted_in_group_commits,
            head_survives_pruning_and_never_decreases,
            dedupe_returns_existing_row_and_changes_nothing,
            dedupe_is_scoped_to_the_session,
            only_if_watched_writes_nothing_when_unwatched,
            occurred_at_is_clamped,
            every_event_kind_round_trips_through_a_page,
            workspace_events_keep_paths_and_head_positions_and_member_watches,
            changes_since_pages_and_gaps_from_the_floor,
            state_versions_for_many_sessions,
            retention_by_age,
            retention_by_row_count,
            cursors_expire_after_the_retention_period,
            unwatch_removes_one_cursor,
            clear_watcher_removes_all_its_cursors,
            delete_session_state_removes_both_sides,
            // SignalLog: watch cursors (cursors.rs)
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
            watch_edges_name_both_ends,
            // SessionStore (sessions.rs)
            list_sessions_filters_by_agent_and_pages,
            session_activity_and_the_pending_inbox,
            a_transcript_answers_its_newest_messages_up_to_the_cap,
            native_state_and_cwd_are_kept_on_the_row,
            a_session_read_before_a_write_reads_as_written_after_it,
            a_turn_writes_its_run_event_host_inbox_and_message_together,
            a_turn_keeps_its_delivery_when_its_event_is_not_written,
            a_turn_whose_append_fails_delivers_without_it,
            // Links (links.rs)
            nodes_are_found_by_token_and_revoked,
            links_keep_their_marker_by_compare_and_set,
            watched_links_since_reads_again_after_every_change,
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
    let out = s.register_watch(WatchRequest::new(key(w), key(t), p, store), now).await.expect("register");
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

/// A workspace's events keep their paths and HEAD positions through the payload column; a member's
/// `workspace` watch is stored as such and never notified of its own change.
pub async fn workspace_events_keep_paths_and_head_positions_and_member_watches<S: Store>(h: &Harness<S>) {
    use sessionwatch_core::{HeadAt, HeadMove, HeadMoveKind};
    let s = &h.store;
    let ws = AgentSessionKey::build_workspace(AGENT, "repo", "1a2b3c4d");
    assert_eq!(
        register(s, W, &ws, Provenance::Workspace, STORE, NOW).await,
        RegisterDecision::Seed(Cursor::seeded(0, Provenance::Workspace, STORE, NOW))
    );
    register(s, W2, &ws, Provenance::Workspace, STORE, NOW).await;
    let paths = vec!["src/a.rs".to_string(), "docs/b c.md".to_string()];
    let (e, notices) =
        record(s, req(NewEvent::files_changed(&ws, AGENT, Actor::agent(W), &paths, 2)), NOW).await;
    assert_eq!(e.payload.paths, paths);
    assert_eq!(notices.iter().map(|n| n.watcher.as_str()).collect::<Vec<_>>(), [W2], "not the actor");
    assert!(notices[0].queue_only, "a workspace watch never wakes");
    let moved = HeadMove {
        kind: HeadMoveKind::Checkout,
        from: HeadAt { branch: Some("main".into()), short_id: "1a2b3c4".into() },
        to: HeadAt { branch: Some("x".into()), short_id: "1a2b3c4".into() },
    };
    record(s, req(NewEvent::head_moved(&ws, AGENT, Actor::human(None), &moved)), NOW + 1).await;
    let events = all_events(s, &ws, AGENT).await;
    assert_eq!(events[0].payload.paths, paths);
    assert_eq!(events[0].summary, format!("2 files changed by {W}"));
    assert_eq!(
        (events[1].payload.from.as_deref(), events[1].payload.to.as_deref()),
        (Some("main@1a2b3c4"), Some("x@1a2b3c4"))
    );
    assert_eq!(events[1].summary, "branch main → x");
    assert_eq!(cursor(s, W, &ws).await.unwrap().provenance, Provenance::Workspace);
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

/// A small watch graph: W watches T (explicitly) and T2 (by group), W2 watches T; then T changes, so both
/// watchers of T have a notice pending.
async fn watch_graph<S: Store>(s: &S) {
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    register(s, W, T2, Provenance::AmbientGroup, STORE, NOW).await;
    register(s, W2, T, Provenance::Explicit, STORE, NOW).await;
    record(s, req(human(T)), NOW + 1).await;
}

pub async fn clear_watcher_removes_all_its_cursors<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    watch_graph(s).await;
    register(s, T, W, Provenance::Explicit, STORE, NOW).await;
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
