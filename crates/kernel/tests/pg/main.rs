//! Two gateways (two kernels, two pools) on one PostgreSQL database: notices pushed across processes.
//! Each test runs in its own fresh schema; `SKIPPED` without a server unless `SESSIONWATCH_REQUIRE_PG=1`.

use common::human_sequence;
use sessionwatch_core::RecordPolicy;
use sessionwatch_core::{AgentSessionKey, Clock, Limit, NewEvent, Provenance, SystemClock, notice_text};
use sessionwatch_kernel::{Kernel, KernelConfig, RecordOutcome, Signal};
use sessionwatch_store::postgres::testing::{TestSchema, admin_client};
use sessionwatch_store::{PostgresStore, SessionStore};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

const W: &str = "agent:main:main"; // the watcher, hosted on gateway b
const T: &str = "agent:main:dashboard:t"; // the target, changed through gateway a
const IDENTITY: &str = "shared-db";

macro_rules! pg_schema {
    ($name:expr) => {
        match TestSchema::create($name).await {
            Some(s) => s,
            None => return,
        }
    };
}

async fn gateway(schema: &TestSchema, host: &str) -> Kernel<PostgresStore> {
    let config = KernelConfig {
        store_identity: IDENTITY.into(),
        host_id: Some(host.into()),
        ..KernelConfig::default()
    };
    let kernel = Kernel::start(schema.store().await, Arc::new(SystemClock) as Arc<dyn Clock>, config).await;
    wait_listening(&kernel, 1).await;
    kernel
}

async fn wait_listening(k: &Kernel<PostgresStore>, connects: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while k.metrics().listener_connects.load(Ordering::SeqCst) < connects {
        assert!(Instant::now() < deadline, "listener never (re)connected");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Gateways a and b on `schema`; b hosts W, which watches T.
async fn a_and_b_watching(schema: &TestSchema) -> (Kernel<PostgresStore>, Kernel<PostgresStore>) {
    let (a, b) = (gateway(schema, "a").await, gateway(schema, "b").await);
    assert!(b.register_watch(W, T, Provenance::Explicit).await.is_watching());
    b.host_session(W, "main").await;
    let row = schema.store().await.get_session(W.into(), "main".into()).await.unwrap().unwrap();
    assert_eq!(row.host_id.as_deref(), Some("b"));
    (a, b)
}

fn text(since: u64) -> String {
    notice_text(&AgentSessionKey::parse(T).unwrap(), since)
}

/// Signals for `session` received within `window`.
async fn collect(rx: &mut broadcast::Receiver<Signal>, session: &str, window: Duration) -> Vec<Signal> {
    let deadline = tokio::time::Instant::now() + window;
    let mut out = vec![];
    while let Ok(Ok(s)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        if s.session() == session {
            out.push(s);
        }
    }
    out
}

fn notices(signals: &[Signal]) -> Vec<String> {
    signals
        .iter()
        .filter_map(|s| match s {
            Signal::Notice { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn wakes(signals: &[Signal]) -> usize {
    signals.iter().filter(|s| matches!(s, Signal::Wake { .. })).count()
}

fn queued(k: &Kernel<PostgresStore>) -> Vec<String> {
    k.peek(W).into_iter().map(|e| e.text).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_turn_on_a_wakes_the_watcher_on_b_once() {
    let schema = pg_schema!("a_human_turn_on_a_wakes_the_watcher_on_b_once");
    let (a, b) = a_and_b_watching(&schema).await;
    let (mut sig_a, mut sig_b) = (a.subscribe(), b.subscribe());
    let started = Instant::now();
    assert_eq!(human_sequence(&a, T).await, 1);
    // The wake arrives on b's stream within a second.
    let first = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            if let Signal::Wake { session, .. } = sig_b.recv().await.unwrap()
                && session == W
            {
                return started.elapsed();
            }
        }
    })
    .await
    .expect("b woke W within a second");
    eprintln!("cross-gateway wake after {first:?}");
    let rest = collect(&mut sig_b, W, Duration::from_millis(700)).await;
    assert_eq!(wakes(&rest), 0, "exactly one wake: {rest:?}");
    assert_eq!(queued(&b), vec![text(0)], "exactly one queued notice on b");
    assert!(collect(&mut sig_a, W, Duration::from_millis(10)).await.is_empty(), "nothing on a");
    assert!(queued(&a).is_empty(), "a never queues b's notice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_rapid_changes_one_notice_across_gateways() {
    let schema = pg_schema!("twenty_rapid_changes_one_notice_across_gateways");
    let (a, b) = a_and_b_watching(&schema).await;
    let mut sig_b = b.subscribe();
    for _ in 0..20 {
        human_sequence(&a, T).await;
    }
    let got = collect(&mut sig_b, W, Duration::from_secs(1)).await;
    assert_eq!(notices(&got), vec![text(0)], "twenty changes, one notice");
    assert_eq!(wakes(&got), 1);
    assert_eq!(queued(&b), vec![text(0)]);

    // b drains: the one notice covers all twenty changes; nothing reopens.
    let drained = b.drain(W).await;
    assert_eq!(drained.len(), 1);
    assert!(queued(&b).is_empty());
    let c = b.cursor(W, T).await.unwrap().unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (20, 20, 20));
    assert!(b.drain(W).await.is_empty(), "a second drain point of the turn gets nothing");
    // a records more: exactly one new notice.
    let _ = collect(&mut sig_b, W, Duration::from_millis(100)).await;
    for _ in 0..5 {
        human_sequence(&a, T).await;
    }
    let got = collect(&mut sig_b, W, Duration::from_secs(1)).await;
    assert_eq!(notices(&got), vec![text(20)], "one notice for the next burst");
    assert_eq!(queued(&b), vec![text(20)]);
    assert!(queued(&a).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_listen_connection_loses_no_notice() {
    let schema = pg_schema!("a_lost_listen_connection_loses_no_notice");
    let (a, b) = a_and_b_watching(&schema).await;
    let mut sig_b = b.subscribe();
    let admin = admin_client(schema.url()).await.unwrap();
    let app = schema.store().await.listener_application_name("b");
    let killed: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(killed, 1);
    // a keeps writing while b reconnects: the first NOTIFYs find nobody listening.
    let writer = {
        let a = a.clone();
        tokio::spawn(async move {
            for _ in 0..10 {
                human_sequence(&a, T).await;
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        })
    };
    writer.await.unwrap();
    wait_listening(&b, 2).await;
    let got = collect(&mut sig_b, W, Duration::from_secs(1)).await;
    assert_eq!(notices(&got), vec![text(0)], "b converged: one notice, none lost, none duplicated");
    assert_eq!(queued(&b), vec![text(0)]);
    // And the push path works again after the reconnect.
    b.drain(W).await;
    b.drain(W).await;
    let _ = collect(&mut sig_b, W, Duration::from_millis(100)).await;
    let seq = human_sequence(&a, T).await;
    let got = collect(&mut sig_b, W, Duration::from_secs(1)).await;
    assert_eq!(notices(&got), vec![text(seq - 1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_gateway_gets_its_pending_notices_back_once() {
    let schema = pg_schema!("a_restarted_gateway_gets_its_pending_notices_back_once");
    let (a, b) = a_and_b_watching(&schema).await;
    human_sequence(&a, T).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while queued(&b).is_empty() {
        assert!(Instant::now() < deadline, "the notice never reached b");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(queued(&b), vec![text(0)]);
    // b goes away (its in-memory queue with it); a keeps writing while nobody listens for b.
    drop(b);
    for _ in 0..3 {
        human_sequence(&a, T).await;
    }
    let b = gateway(&schema, "b").await; // sweep, then LISTEN and reconcile
    let mut sig_b = b.subscribe();
    let got = collect(&mut sig_b, W, Duration::from_millis(700)).await;
    assert!(notices(&got).is_empty(), "the reconcile after LISTEN re-delivers nothing: {got:?}");
    assert_eq!(queued(&b), vec![text(0)], "the pending notice is back, exactly once");
    assert!(queued(&a).is_empty());
    // The swept notice covers everything up to the latest change (N = M): draining it leaves nothing.
    b.drain(W).await;
    assert!(queued(&b).is_empty());
    let c = b.cursor(W, T).await.unwrap().unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (4, 4, 4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_from_two_gateways_are_contiguous() {
    let schema = pg_schema!("concurrent_appends_from_two_gateways_are_contiguous");
    let (a, b) = (gateway(&schema, "a").await, gateway(&schema, "b").await);
    let mut tasks = vec![];
    for k in [a.clone(), b.clone(), a.clone(), b.clone()] {
        tasks.push(tokio::spawn(async move {
            for _ in 0..40 {
                let e = NewEvent::human_message(T, "main", "telegram", None);
                assert!(matches!(k.record(e, RecordPolicy::always()).await, RecordOutcome::Recorded(_)));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let page = a.changes_since(T, "main", 0, Limit::MAX).await.expect("page");
    let seqs: Vec<u64> = page.events.iter().map(|e| e.sequence).collect();
    assert_eq!(seqs, (1..=160).collect::<Vec<_>>(), "1..n, no hole, no duplicate");
    assert_eq!(b.head(T, "main").await.expect("head").head, 160);
}

#[allow(dead_code)]
#[path = "../it/common.rs"]
mod common;
#[path = "../it/model.rs"]
mod model;

/// The model-based property test on PostgreSQL: every case in its own fresh schema; a restart is a new
/// pool and kernel on the same schema.
mod model_postgres {
    use crate::model::{Backend, cases, op, retention, run};
    use proptest::prelude::*;
    use sessionwatch_core::ManualClock;
    use sessionwatch_kernel::{Kernel, KernelConfig};
    use sessionwatch_store::PostgresStore;
    use sessionwatch_store::postgres::testing::TestSchema;
    use std::sync::Arc;

    struct PgEnv {
        schema: TestSchema,
        clock: Arc<ManualClock>,
        config: KernelConfig,
    }

    impl Backend for PgEnv {
        type S = PostgresStore;
        async fn start(&self) -> Kernel<PostgresStore> {
            Kernel::start(self.schema.store().await, self.clock.clone(), self.config.clone()).await
        }
        fn clock(&self) -> &ManualClock {
            &self.clock
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(12), ..ProptestConfig::default() })]

        #[test]
        fn kernel_matches_reference_model_on_postgres(ops in prop::collection::vec(op(), 1..50), max_rows in 2usize..12) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let Some(schema) = TestSchema::create("model").await else { return };
                let env = crate::common::Env::with_retention(retention(max_rows));
                let config = env.config.clone();
                let clock = env.clock.clone();
                run(PgEnv { schema, clock, config }, ops, max_rows).await;
            });
        }
    }
}
