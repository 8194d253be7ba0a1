//! Conformance checks of the watch cursors: spawn seeding, the L/N/M machine, self-suppression, store
//! binding, registration, acknowledgement through the present, the start-up sweep and the watch edges.

use super::*;

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
    let upper = WatchRequest::new(key("AGENT:main:Subagent:T"), key(T), Provenance::Explicit, STORE);
    let out = s.register_watch(upper, NOW).await;
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

pub async fn watch_edges_name_both_ends<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    watch_graph(s).await;
    register(s, T2, W2, Provenance::Explicit, STORE, NOW).await;
    let ends = |edges: Vec<WatchEdge>| -> Vec<(String, String)> {
        edges.into_iter().map(|e| (e.watcher, e.target)).collect()
    };
    let of_t = s.watch_edges(vec![T.into()], 100).await.unwrap();
    assert_eq!(
        ends(of_t.clone()),
        vec![(W.to_string(), T.to_string()), (W2.to_string(), T.to_string())],
        "both watchers of T, ordered by watcher"
    );
    assert_eq!(lnm(&of_t[0].cursor), (0, 1, 1), "the cursor comes with the edge");
    let both = s.watch_edges(vec![W2.into(), T2.into()], 100).await.unwrap();
    assert_eq!(
        ends(both),
        vec![
            (W.to_string(), T2.to_string()),
            (W2.to_string(), T.to_string()),
            (T2.to_string(), W2.to_string()),
        ],
        "an edge with both ends in the set is answered once"
    );
    assert_eq!(s.watch_edges(vec![T.into()], 1).await.unwrap().len(), 1, "at most limit");
    assert!(s.watch_edges(vec![], 10).await.unwrap().is_empty());
    assert!(!of_t[0].spawned, "no session row names W as T's spawner");
    let child = NewSession {
        session_key: T.into(),
        agent_id: AGENT.into(),
        session_id: "t-1".into(),
        kind: "subagent".into(),
        spawned_by: Some(W2.into()),
        ..NewSession::default()
    };
    s.ensure_session(child, NOW).await.unwrap();
    let spawned: Vec<bool> =
        s.watch_edges(vec![T.into()], 100).await.unwrap().iter().map(|e| e.spawned).collect();
    assert_eq!(spawned, vec![false, true], "W2 spawned T, W only watches it");
}
