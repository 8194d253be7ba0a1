//! Ports, at kernel level, of client-go's workqueue tests (`util/workqueue/queue_test.go`): the notice for
//! a (watcher, target) is the queue item and a pending notice is "dirty". `Get` is the drain, which
//! claims the notice through the present: work added before it is coalesced into the one notice, work
//! added after it ("Add while processing") comes back exactly once, and then the queue is empty.

use crate::common::{Env, human_sequence as human, notices, watching};
use sessionwatch_core::{Limit, Provenance};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

const W: &str = "agent:main:main";
const T: &str = "agent:main:subagent:t";

/// `TestReinsert`: work added while the item is being processed comes back once after `Done`, then
/// the queue is empty. `TestLen`: duplicate adds do not grow the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reinsert_while_processing_comes_back_once_then_empty() {
    let (_env, k) = watching(W, T).await;
    assert_eq!(human(&k, T).await, 1);
    // Added again (twice) while pending: the queue does not grow.
    human(&k, T).await;
    human(&k, T).await;
    assert_eq!(notices(&k.peek(W)), vec![(T.to_string(), 0)]);
    // The watcher's turn: one line, covering 1..=3; a second drain point of the same turn gets nothing.
    assert_eq!(notices(&k.drain(W).await), vec![(T.to_string(), 0)]);
    assert!(k.peek(W).is_empty(), "the burst is one notice");
    assert!(k.drain(W).await.is_empty());
    let c = k.cursor(W, T).await.unwrap().unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (3, 3, 3));
    // Added while processing (after the drain): re-added once, then empty.
    human(&k, T).await;
    human(&k, T).await;
    assert_eq!(notices(&k.drain(W).await), vec![(T.to_string(), 3)]);
    assert!(k.drain(W).await.is_empty());
    let m = k.metrics();
    assert_eq!(m.notices_acknowledged.load(std::sync::atomic::Ordering::Relaxed), 2);
}

/// `TestAddWhileProcessing`: many producers add work on tokio tasks while consumers drain (and so
/// acknowledge) concurrently. Every batch a consumer drains holds at most one line per target, every
/// event is handed to every watcher through some notice, and once producers stop the queues drain to
/// empty with every cursor settled at the head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_while_processing_with_concurrent_producers_and_consumers() {
    const PRODUCERS: usize = 8;
    const EVENTS_PER_PRODUCER: usize = 25;
    let targets: Vec<String> = (0..4).map(|i| format!("agent:main:subagent:t{i}")).collect();
    let watchers = ["agent:main:main", "agent:main:subagent:w1", "agent:ops:main"];
    let env = Env::new();
    let k = env.start().await;
    for w in watchers {
        for t in &targets {
            assert!(k.register_watch(w, t, Provenance::Explicit).await.is_watching());
        }
    }
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));

    let mut consumers = vec![];
    for w in watchers {
        let k = k.clone();
        let done = done.clone();
        consumers.push(tokio::spawn(async move {
            // What this watcher learnt per target by reconciling from each drained notice.
            let mut seen: HashMap<String, BTreeSet<u64>> = HashMap::new();
            let mut batches = 0usize;
            let mut quiet_after_done = 0;
            loop {
                let finished = done.load(std::sync::atomic::Ordering::SeqCst);
                let batch = notices(&k.drain(w).await);
                let targets_in_batch: BTreeSet<&String> = batch.iter().map(|(t, _)| t).collect();
                assert_eq!(
                    targets_in_batch.len(),
                    batch.len(),
                    "{w}: one line per target in a batch: {batch:?}"
                );
                for (t, since) in &batch {
                    let mut cursor = *since;
                    loop {
                        let page = k.changes_since(t, "main", cursor, Limit::MAX).await.expect("page");
                        assert!(!page.history_gap);
                        seen.entry(t.clone()).or_default().extend(page.events.iter().map(|e| e.sequence));
                        cursor = page.next_since(cursor);
                        if !page.truncated {
                            break;
                        }
                    }
                }
                if !batch.is_empty() {
                    batches += 1;
                }
                if finished {
                    if batch.is_empty() {
                        quiet_after_done += 1;
                        if quiet_after_done == 2 {
                            break;
                        }
                    } else {
                        quiet_after_done = 0;
                    }
                }
                tokio::time::sleep(Duration::from_micros(300)).await;
                assert!(batches < 10_000, "the queue must drain");
            }
            (w, seen)
        }));
    }

    let mut producers = vec![];
    for p in 0..PRODUCERS {
        let k = k.clone();
        let targets = targets.clone();
        producers.push(tokio::spawn(async move {
            for i in 0..EVENTS_PER_PRODUCER {
                let t = &targets[(p * 7 + i * 3) % targets.len()];
                human(&k, t).await;
                if i % 5 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    for p in producers {
        p.await.unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut results = vec![];
    for c in consumers {
        results.push(c.await.unwrap());
    }

    let mut total = 0;
    for t in &targets {
        total += k.head(t, "main").await.expect("head").head;
    }
    assert_eq!(total, (PRODUCERS * EVENTS_PER_PRODUCER) as u64);
    for (w, seen) in results {
        assert!(k.peek(w).is_empty(), "{w}: drained to empty");
        for t in &targets {
            let head = k.head(t, "main").await.expect("head").head;
            let got = seen.get(t).cloned().unwrap_or_default();
            assert_eq!(got, (1..=head).collect::<BTreeSet<_>>(), "{w} learnt every event of {t}");
            let c = k.cursor(w, t).await.unwrap().unwrap();
            assert_eq!((c.last_seen, c.notified, c.material), (head, head, head), "{w} -> {t} settled");
        }
    }
}
