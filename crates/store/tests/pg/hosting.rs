//! Which gateway delivers a notice: routing inside the append, NOTIFY to the host, claims, the hosted
//! sweep and read-only reconciliation (the latter two on SQLite too).

use crate::{AGENT, NOW, STORE, ensure_session, human, key, pg_schema, record, req};
use sessionwatch_core::{Notice, Provenance};
use sessionwatch_store::postgres::testing::admin_client;
use sessionwatch_store::{
    HostSignal, PostgresStore, SessionStore, SqliteOptions, SqliteStore, Store, WatchRequest,
};
use std::time::Duration;
use tokio::sync::mpsc::Receiver;

const W_B: &str = "agent:main:main"; // hosted on gateway b
const W_FREE: &str = "agent:ops:main"; // a session no gateway hosts yet
const W_NOROW: &str = "agent:main:subagent:norow"; // a watcher without a session row
const T: &str = "agent:main:dashboard:t";

async fn next(rx: &mut Receiver<HostSignal>) -> HostSignal {
    tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("a host signal in time").unwrap()
}

async fn quiet(rx: &mut Receiver<HostSignal>) {
    if let Ok(s) = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await {
        panic!("unexpected host signal {s:?}");
    }
}

/// `host`'s cross-gateway listener, once it listens.
async fn listening(s: &PostgresStore, host: &str) -> Receiver<HostSignal> {
    let mut rx = s.listen(host);
    assert_eq!(next(&mut rx).await, HostSignal::Listening);
    rx
}

/// A human turn on `T` appended by gateway `host`: the notices answered for its own delivery.
async fn record_on(s: &PostgresStore, host: &str) -> Vec<Notice> {
    let mut r = req(human(T));
    r.host_id = Some(host.into());
    record(s, r, NOW).await.1
}

fn notice(w: &str, since: u64) -> Notice {
    Notice { watcher: key(w), target: key(T), since, queue_only: false }
}

/// Each watcher takes delivery of its notice about `T` (and of the one that reopens), so the next change
/// notifies it again.
async fn settle_all<S: Store>(s: &S) {
    for w in [W_B, W_FREE, W_NOROW] {
        while !s.acknowledge(key(w), vec![key(T)], STORE.into(), NOW).await.unwrap().delivered.is_empty() {}
    }
}

async fn setup<S: Store>(s: &S) {
    ensure_session(s, W_B, Some("b")).await;
    ensure_session(s, W_FREE, None).await;
    for w in [W_B, W_FREE, W_NOROW] {
        assert!(
            s.register_watch(WatchRequest::new(key(w), key(T), Provenance::Explicit, STORE), NOW)
                .await
                .unwrap()
                .registered
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_push_notices_to_the_hosting_gateway() {
    let schema = pg_schema!("appends_push_notices_to_the_hosting_gateway");
    let (a, b) = (schema.store().await, schema.store().await);
    setup(&a).await;
    let mut rx = listening(&b, "b").await;

    let local = record_on(&a, "a").await;
    assert_eq!(local, vec![notice(W_NOROW, 0), notice(W_FREE, 0)], "b's watcher is pushed, not answered");
    assert_eq!(next(&mut rx).await, HostSignal::Watcher(W_B.into()));
    quiet(&mut rx).await;
    let free = a.get_session(W_FREE.into(), "ops".into()).await.unwrap().unwrap();
    assert_eq!(
        free.host_id.as_deref(),
        Some("a"),
        "an unhosted watcher is claimed by the delivering gateway"
    );

    // While the notices are pending, another change notifies nobody anew (one notice per burst).
    let (_, local) = record(&a, req(human(T)), NOW).await;
    assert!(local.is_empty());
    quiet(&mut rx).await;
    settle_all(&a).await;

    // From gateway b itself: its own watcher is local, a's (just claimed) is pushed to a.
    let mut ra = listening(&a, "a").await;
    assert_eq!(record_on(&b, "b").await, vec![notice(W_B, 2), notice(W_NOROW, 2)]);
    assert_eq!(next(&mut ra).await, HostSignal::Watcher(W_FREE.into()));
    quiet(&mut rx).await;
    settle_all(&a).await;

    // Without a host id everything is local and nothing is pushed (single gateway, as on SQLite).
    let (_, local) = record(&a, req(human(T)), NOW).await;
    assert_eq!(local.len(), 3);
    quiet(&mut rx).await;
    quiet(&mut ra).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_reconnects_and_says_so() {
    let schema = pg_schema!("the_listener_reconnects_and_says_so");
    let b = schema.store().await;
    let mut rx = listening(&b, "b").await;
    let admin = admin_client(schema.url()).await.unwrap();
    let killed: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
            &[&b.listener_application_name("b")],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(killed, 1);
    assert_eq!(next(&mut rx).await, HostSignal::Listening, "reconnected: reconcile again");
    drop(rx);
}

async fn reconcile_and_hosted_sweep<S: Store>(s: &S) {
    setup(s).await;
    record(s, req(human(T)), NOW).await;
    let pending = |host: Option<&str>, w: Option<&str>| {
        s.pending_notices_for_host(STORE.into(), host.map(str::to_string), w.map(str::to_string))
    };
    // Watchers without a session row are not recovered (as in the sweep).
    assert_eq!(pending(None, None).await.unwrap(), vec![notice(W_B, 0), notice(W_FREE, 0)]);
    assert_eq!(pending(Some("b"), None).await.unwrap(), vec![notice(W_B, 0)]);
    assert_eq!(pending(Some("b"), Some(W_FREE)).await.unwrap(), vec![]);
    assert_eq!(pending(None, Some(W_FREE)).await.unwrap(), vec![notice(W_FREE, 0)]);
    assert_eq!(pending(Some("other-store"), None).await.unwrap(), vec![]);
    assert_eq!(
        s.pending_notices_for_host("other-store".into(), None, None).await.unwrap(),
        vec![],
        "store binding"
    );
    // Read-only: nothing moved.
    let c = s.cursor(W_B.into(), T.into()).await.unwrap().unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (0, 1, 1));

    // Gateway a sweeps: it claims the unhosted pending watcher and takes only what it hosts.
    let swept = s.sweep_for_host(STORE.into(), Some("a".into()), NOW).await.unwrap();
    assert_eq!(swept, vec![notice(W_FREE, 0)]);
    let free = s.get_session(W_FREE.into(), "ops".into()).await.unwrap().unwrap();
    assert_eq!(free.host_id.as_deref(), Some("a"));
    assert_eq!(s.sweep_for_host(STORE.into(), Some("b".into()), NOW).await.unwrap(), vec![notice(W_B, 0)]);
    // `None` is the plain sweep.
    assert_eq!(s.sweep_for_host(STORE.into(), None, NOW).await.unwrap().len(), 2);
    let _ = AGENT;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_and_hosted_sweep_postgres() {
    let schema = pg_schema!("reconcile_and_hosted_sweep_postgres");
    reconcile_and_hosted_sweep(&schema.store().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_and_hosted_sweep_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(dir.path().join("s.db"), SqliteOptions::default()).unwrap();
    reconcile_and_hosted_sweep(&s).await;
}
