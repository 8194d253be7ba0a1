//! Several gateways (separate pools) acting on one session or one cursor at once.

use crate::{AGENT, NOW, STORE, ensure_session, goal, human, key, pg_schema, record, req, seqs};
use sessionwatch_core::{DAY_MS, Limit, Provenance};
use sessionwatch_store::{AppendOutcome, Head, RetentionPolicy, SignalLog, WatchRequest};

const T: &str = "agent:main:subagent:t";
const W: &str = "agent:main:main";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_from_two_pools_are_contiguous() {
    let schema = pg_schema!("concurrent_appends_from_two_pools_are_contiguous");
    let (a, b) = (schema.store().await, schema.store().await);
    const PER_TASK: usize = 25;
    const TASKS_PER_STORE: usize = 6;
    let mut tasks = vec![];
    for s in [a.clone(), b.clone()] {
        for _ in 0..TASKS_PER_STORE {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let mut got = vec![];
                for _ in 0..PER_TASK {
                    got.push(record(&s, req(human(T)), NOW).await.0.sequence);
                }
                got
            }));
        }
    }
    let mut all = vec![];
    for t in tasks {
        let got = t.await.unwrap();
        assert!(got.windows(2).all(|w| w[0] < w[1]), "each writer sees increasing sequences: {got:?}");
        all.extend(got);
    }
    let n = (2 * TASKS_PER_STORE * PER_TASK) as u64;
    all.sort();
    assert_eq!(all, (1..=n).collect::<Vec<_>>(), "1..n, no hole, no duplicate");
    assert_eq!(seqs(&a, T).await, (1..=n).collect::<Vec<_>>());
    assert_eq!(a.head(T.into(), AGENT.into()).await.unwrap(), Head { head: n, floor: 0 });
}

/// Concurrent appends share group commits (`postgres/batch.rs`): within a batch each event's fan-out
/// sees the cursors the events before it moved, so a burst to a watched target from two gateways still
/// notifies each watcher exactly once, at the first event, and leaves it pending over the whole burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_burst_notifies_each_watcher_once() {
    let schema = pg_schema!("a_concurrent_burst_notifies_each_watcher_once");
    let (a, b) = (schema.store().await, schema.store().await);
    let watchers: Vec<String> = (0..5).map(|i| format!("agent:w{i}:main")).collect();
    for w in &watchers {
        a.register_watch(WatchRequest::new(key(w), key(T), Provenance::Explicit, STORE), NOW).await.unwrap();
    }
    // Eight appends queued before the driver runs: they share the first batch.
    let r = || async { record(&a, req(human(T)), NOW).await };
    let first = tokio::join!(r(), r(), r(), r(), r(), r(), r(), r());
    let mut notified: Vec<(String, u64)> = vec![];
    for (event, n) in [first.0, first.1, first.2, first.3, first.4, first.5, first.6, first.7] {
        notified.extend(n.into_iter().map(|n| (n.watcher.as_str().to_string(), event.sequence)));
    }
    let mut tasks = vec![];
    for s in [a.clone(), b.clone()] {
        for _ in 0..8 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let mut notices = vec![];
                for _ in 0..10 {
                    let (event, n) = record(&s, req(human(T)), NOW).await;
                    notices.extend(n.into_iter().map(|n| (n.watcher.as_str().to_string(), event.sequence)));
                }
                notices
            }));
        }
    }
    for t in tasks {
        notified.extend(t.await.unwrap());
    }
    notified.sort();
    let first: Vec<(String, u64)> = watchers.iter().map(|w| (w.clone(), 1)).collect();
    assert_eq!(notified, first, "one notice per watcher, at the first event of the burst");
    assert_eq!(seqs(&a, T).await, (1..=168).collect::<Vec<_>>());
    for w in &watchers {
        let c = b.cursor(w.clone(), T.into()).await.unwrap().expect("cursor");
        assert_eq!((c.last_seen, c.notified, c.material), (0, 1, 168), "{w}: pending since 1, M derived");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_duplicates_record_once() {
    let schema = pg_schema!("concurrent_duplicates_record_once");
    let (a, b) = (schema.store().await, schema.store().await);
    let mut tasks = vec![];
    for i in 0..16 {
        let s = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            s.append(req(sessionwatch_core::NewEvent::compacted(T, AGENT, "op-1")), NOW).await.unwrap()
        }));
    }
    let mut recorded = 0;
    let mut duplicates = 0;
    for t in tasks {
        match t.await.unwrap() {
            AppendOutcome::Recorded { event, .. } => {
                recorded += 1;
                assert_eq!(event.sequence, 1);
            }
            AppendOutcome::Duplicate(e) => {
                duplicates += 1;
                assert_eq!(e.sequence, 1, "the existing row is answered");
            }
            AppendOutcome::Unwatched => panic!("not only_if_watched"),
        }
    }
    assert_eq!((recorded, duplicates), (1, 15));
    assert_eq!(a.head(T.into(), AGENT.into()).await.unwrap().head, 1, "no head bump for duplicates");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acknowledgements_deliver_once() {
    let schema = pg_schema!("concurrent_acknowledgements_deliver_once");
    let (a, b) = (schema.store().await, schema.store().await);
    ensure_session(&a, W, None).await;
    for round in 0..10u64 {
        let target = format!("{T}{round}");
        a.register_watch(WatchRequest::new(key(W), key(&target), Provenance::Explicit, STORE), NOW)
            .await
            .unwrap();
        record(&a, req(human(&target)), NOW).await; // pending: L=0, N=1, M=1
        record(&b, req(goal(&target)), NOW).await; // M=2 while pending: N stays 1
        // Two gateways acknowledge the same drained notice at once, while a third change lands.
        let (ra, rb, _) = tokio::join!(
            a.acknowledge(key(W), vec![key(&target)], STORE.into(), NOW + 1),
            b.acknowledge(key(W), vec![key(&target)], STORE.into(), NOW + 1),
            b.append(req(human(&target)), NOW + 1),
        );
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        let mut delivered: Vec<u64> = ra.delivered.iter().chain(&rb.delivered).map(|n| n.since).collect();
        delivered.sort();
        let c = a.cursor(W.into(), target.clone()).await.unwrap().unwrap();
        assert_eq!(c.material, 3, "no material update lost");
        // Linearizable: the outcome is that of one serial order of the three operations; and no notice
        // (a `changesSince`) is delivered twice.
        let got = ((c.last_seen, c.notified, c.material), delivered);
        let serial = serial_outcomes(&target);
        assert!(serial.contains(&got), "round {round}: {got:?} is no serial outcome of {serial:?}");
    }
}

/// Final (L, N, M) and the delivered `changesSince`s.
type Outcome = ((u64, u64, u64), Vec<u64>);

/// Every serial order of {ack, ack, material event 3} from the cursor (L, N, M) = (0, 1, 2): the final
/// positions and the delivered `changesSince`s, computed with the core
/// state machine.
fn serial_outcomes(target: &str) -> Vec<Outcome> {
    use sessionwatch_core::{Cursor, MaterialDecision, on_material};
    let start = Cursor {
        last_seen: 0,
        notified: 1,
        material: 2,
        ..Cursor::seeded(0, Provenance::Explicit, STORE, NOW)
    };
    let mut out = vec![];
    for append_at in 0..3 {
        let mut c = start.clone();
        let mut delivered = vec![];
        for step in 0..3 {
            if step == append_at {
                match on_material(Some(&c), W, target, None, 3, STORE, NOW) {
                    MaterialDecision::Notify(next) => c = next,
                    MaterialDecision::Skip(r) => panic!("{r:?}"),
                }
            } else if let Some(since) = c.claim(NOW) {
                delivered.push(since);
            }
        }
        out.push(((c.last_seen, c.notified, c.material), delivered));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_raises_floors_with_heads_intact_and_one_pruner_at_a_time() {
    let schema = pg_schema!("pruning_raises_floors_with_heads_intact_and_one_pruner_at_a_time");
    let (a, b) = (schema.store().await, schema.store().await);
    let old = NOW - 40 * DAY_MS;
    for _ in 0..5 {
        record(&a, req(human(T)), old).await;
    }
    for _ in 0..3 {
        record(&a, req(human(T)), NOW).await;
    }
    let policy = RetentionPolicy { max_age_ms: 30 * DAY_MS, max_rows: 50_000 };
    // Two gateways prune at once while a third writer appends: exactly the old prefix goes, once.
    let (ra, rb, w) = tokio::join!(a.prune(policy, NOW), b.prune(policy, NOW), b.append(req(human(T)), NOW));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    w.unwrap();
    assert_eq!(ra.events_by_age + rb.events_by_age, 5, "{ra:?} {rb:?}");
    assert_eq!(a.head(T.into(), AGENT.into()).await.unwrap(), Head { head: 9, floor: 5 });
    assert_eq!(seqs(&a, T).await, vec![6, 7, 8, 9]);
    let gap = a.changes_since(T.into(), AGENT.into(), 4, Limit::MAX).await.unwrap();
    assert!(gap.history_gap && gap.earliest_available_sequence == 6);
    let no_gap = a.changes_since(T.into(), AGENT.into(), 5, Limit::MAX).await.unwrap();
    assert!(!no_gap.history_gap);
    // By row count: keep the newest 2 rows.
    let report = b.prune(RetentionPolicy { max_age_ms: 30 * DAY_MS, max_rows: 2 }, NOW).await.unwrap();
    assert_eq!(report.events_by_cap, 2);
    assert_eq!(a.head(T.into(), AGENT.into()).await.unwrap(), Head { head: 9, floor: 7 });
    // Appending continues at head + 1 after pruning.
    assert_eq!(record(&b, req(human(T)), NOW).await.0.sequence, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_prune_lock_makes_other_pruners_skip() {
    let schema = pg_schema!("a_held_prune_lock_makes_other_pruners_skip");
    let a = schema.store().await;
    for _ in 0..3 {
        record(&a, req(human(T)), NOW - 40 * DAY_MS).await;
    }
    // Hold the prune lock from another session, as a pruning gateway would.
    let mut admin = sessionwatch_store::postgres::testing::admin_client(schema.url()).await.unwrap();
    admin.batch_execute(&format!("SET search_path = {}", schema.schema())).await.unwrap();
    let tx = admin.transaction().await.unwrap();
    let held: bool = tx
        .query_one("SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema()))", &[&0x5357_0002i32])
        .await
        .unwrap()
        .get(0);
    assert!(held);
    let skipped = a.prune(RetentionPolicy::default(), NOW).await.unwrap();
    assert_eq!(skipped, Default::default(), "another pruner is at work: skip");
    tx.rollback().await.unwrap();
    let pruned = a.prune(RetentionPolicy::default(), NOW).await.unwrap();
    assert_eq!(pruned.events_by_age, 3);
}

/// The recent-window cache of one gateway never hides another gateway's writes: appends, a prune and a
/// delete done through the other pool show in the first one's next `changesSince`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tail_cache_never_hides_another_gateways_writes() {
    let schema = pg_schema!("the_tail_cache_never_hides_another_gateways_writes");
    let (a, b) = (schema.store().await, schema.store().await);
    let page = |s: &sessionwatch_store::PostgresStore, since: u64| {
        let s = s.clone();
        async move { s.changes_since(T.into(), AGENT.into(), since, Limit::MAX).await.unwrap() }
    };
    for _ in 0..3 {
        record(&a, req(human(T)), NOW).await;
    }
    let cached = page(&a, 1).await;
    assert_eq!(cached.events.iter().map(|e| e.sequence).collect::<Vec<_>>(), vec![2, 3]);
    assert_eq!(page(&a, 1).await, cached, "a recent window twice: the same answer");
    record(&b, req(human(T)), NOW + 1).await;
    let after_b = page(&a, 1).await;
    assert_eq!(
        after_b.events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        vec![2, 3, 4],
        "B's append shows"
    );
    // A appends after B: its tail starts over from its own event and stays exact.
    record(&a, req(human(T)), NOW + 2).await;
    assert_eq!(page(&a, 3).await.events.iter().map(|e| e.sequence).collect::<Vec<_>>(), vec![4, 5]);
    // B prunes everything older than a day before NOW + 3 days: A's page says so.
    let report =
        b.prune(RetentionPolicy { max_age_ms: DAY_MS, max_rows: 1_000_000 }, NOW + 3 * DAY_MS).await.unwrap();
    assert!(report.events_by_age > 0, "{report:?}");
    let pruned = page(&a, 3).await;
    assert!(pruned.history_gap && pruned.events.is_empty(), "{pruned:?}");
    // B deletes the session: A answers an empty log.
    b.delete_session_state(T.into(), AGENT.into()).await.unwrap();
    let gone = page(&a, 0).await;
    assert!(gone.events.is_empty(), "{gone:?}");
    assert_eq!(a.head(T.into(), AGENT.into()).await.unwrap(), Head::default());
}

/// A batch in which one append fails commits nothing; each append then runs alone, so only the failing
/// one is not recorded and its neighbours are, in order. (A trigger stands in for whatever makes one
/// append fail: a deadlock with another gateway, a dedupe race, bad data.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failing_append_does_not_cost_its_batch() {
    let schema = pg_schema!("one_failing_append_does_not_cost_its_batch");
    let a = schema.store().await;
    let admin = sessionwatch_store::postgres::testing::admin_client(schema.url()).await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN RAISE EXCEPTION 'refused by the test'; END $$; \
             CREATE TRIGGER refuse BEFORE INSERT ON {s}.session_state_events FOR EACH ROW \
             WHEN (NEW.session_key = 'agent:main:subagent:bad') EXECUTE FUNCTION {s}.refuse();",
            s = schema.schema()
        ))
        .await
        .unwrap();
    const BAD: &str = "agent:main:subagent:bad";
    let append = |k: &'static str| {
        let a = a.clone();
        async move { a.append(req(human(k)), NOW).await }
    };
    // Queued together, before the driver runs: one batch.
    let (x, y, bad, z) = tokio::join!(append(T), append(T), append(BAD), append(W));
    assert!(bad.is_err(), "the refused append fails: {bad:?}");
    for (outcome, want) in [(x, 1), (y, 2)] {
        match outcome.unwrap() {
            AppendOutcome::Recorded { event, .. } => assert_eq!(event.sequence, want),
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(z.unwrap(), AppendOutcome::Recorded { .. }));
    assert_eq!(seqs(&a, T).await, vec![1, 2]);
    assert_eq!(seqs(&a, W).await, vec![1]);
    assert_eq!(a.head(BAD.into(), AGENT.into()).await.unwrap(), Head { head: 0, floor: 0 }, "nothing of it");
}
