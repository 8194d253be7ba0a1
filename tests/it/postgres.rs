//! Two gateway processes sharing one PostgreSQL database: notices are pushed to the gateway that
//! hosts the watcher.

use crate::support::{Server, wakes};
use serde_json::json;
use sessionwatch_bench::postgres_fixtures::connect;
use std::time::{Duration, Instant};

const MAIN: &str = "agent:main:main";

/// A fresh database on the test server, dropped afterwards; `None` (skipped) when no server answers.
pub(crate) struct TestDatabase {
    admin_url: String,
    name: String,
    pub(crate) url: String,
}

/// The test server: `SESSIONWATCH_TEST_PG_URL` (or `SESSIONWATCH_PG_URL`), else the local default.
fn test_url() -> String {
    ["SESSIONWATCH_TEST_PG_URL", "SESSIONWATCH_PG_URL"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.trim().is_empty()))
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".into())
}

impl TestDatabase {
    pub(crate) async fn create() -> Option<TestDatabase> {
        let admin_url = test_url();
        let admin = match connect(&admin_url, None).await {
            Ok(c) => c,
            Err(e) => {
                let required = std::env::var("SESSIONWATCH_REQUIRE_PG").is_ok_and(|v| v == "1");
                assert!(!required, "PostgreSQL at {admin_url} is required but unreachable: {e}");
                eprintln!("SKIPPED: PostgreSQL at {admin_url} is unreachable ({e})");
                return None;
            }
        };
        let name = format!("sw_it_{}", uuid::Uuid::new_v4().simple());
        admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
        let base = admin_url.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap();
        Some(TestDatabase { url: format!("{base}/{name}"), admin_url, name })
    }

    pub(crate) async fn drop_it(self) {
        if let Ok(admin) = connect(&self.admin_url, None).await {
            let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)).await;
        }
    }
}

/// Two gateways on the database: their data dirs, A and B.
fn two_gateways(db: &TestDatabase) -> ([tempfile::TempDir; 2], Server, Server) {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let a = Server::start_with(dirs[0].path(), &["--database", &db.url]);
    let b = Server::start_with(dirs[1].path(), &["--database", &db.url]);
    (dirs, a, b)
}

async fn human_turn(server: &Server, key: &str, text: &str) {
    let (status, body) = server
        .post(
            &format!("/v1/sessions/{}/inbound", key.replace(':', "%3A")),
            json!({ "text": text, "channel": "telegram", "actor": { "type": "human" } }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_turn_on_gateway_a_wakes_the_watcher_hosted_on_b() {
    let Some(db) = TestDatabase::create().await else { return };
    let (dirs, a, b) = two_gateways(&db);

    // The manager lives on B: it spawns the child there and follows its stream there.
    let child = b.spawn_child(MAIN).await;
    let mut stream = b.stream(MAIN).await;

    let started = Instant::now();
    human_turn(&a, &child, "typed on A").await;
    assert_eq!(wakes(&mut stream, Duration::from_secs(1)).await, 1, "woken on B within a second, once");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(b.turn(MAIN).await.len(), 1);
    assert!(a.turn(MAIN).await.is_empty(), "A does not deliver B's notice");

    // Twenty rapid changes on A: one notice on B, which covers them all when B acknowledges; later
    // changes from A open exactly one fresh notice, which more changes do not multiply.
    for i in 0..20 {
        human_turn(&a, &child, &format!("burst {i}")).await;
    }
    // The notice of the first turn is queued on B already (it woke B); the burst joins it.
    wait_until_queued(&b, 1).await;
    assert_eq!(b.turn(MAIN).await.len(), 1, "one notice for the burst");
    assert!(b.turn(MAIN).await.is_empty(), "the burst does not come back in a second drain");
    human_turn(&a, &child, "after the ack").await;
    human_turn(&a, &child, "and again").await;
    wait_until_queued(&b, 1).await;
    assert_eq!(b.turn(MAIN).await.len(), 1, "the work after the drain, once");
    assert!(b.turn(MAIN).await.is_empty());

    // Kill B with a pending notice; it comes back exactly once on restart.
    human_turn(&a, &child, "while B is down").await;
    b.kill();
    let b = Server::start_with(dirs[1].path(), &["--database", &db.url]);
    assert_eq!(b.turn(MAIN).await.len(), 1, "restored after SIGKILL");
    assert!(b.turn(MAIN).await.is_empty(), "exactly once");
    drop(a);
    drop(b);
    db.drop_it().await;
}

/// Issue 11 item 3: a notice pushed to the gateway that hosts the watcher (A) stayed in A's memory after
/// a turn on B delivered it from the durable cursor, so the next turn on A delivered it again; concurrent
/// turns on A and B both got it. Delivery is a durable claim: once, whichever gateway serves the turn.
/// The gateway's count of queued notices (`/metrics`).
async fn notices_queued(server: &Server) -> u64 {
    let text = reqwest::Client::new()
        .get(format!("{}/metrics", server.base))
        .bearer_auth(&server.token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = text.lines().find(|l| l.starts_with("sessionwatch_notices_queued_total ")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Polls until the gateway has queued `at_least` notices (its cross-gateway listener is asynchronous).
async fn wait_until_queued(server: &Server, at_least: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while notices_queued(server).await < at_least {
        assert!(Instant::now() < deadline, "the notice never reached the watcher's gateway");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_is_delivered_once_when_the_watchers_turns_move_between_gateways() {
    let Some(db) = TestDatabase::create().await else { return };
    let (_dirs, a, b) = two_gateways(&db);
    let child = a.spawn_child(MAIN).await;
    assert!(a.turn(MAIN).await.is_empty(), "the watcher is hosted on A");

    // Moving turns: A holds the notice in memory, B delivers it, A must not deliver it again.
    let queued = notices_queued(&a).await;
    human_turn(&b, &child, "typed on B").await;
    wait_until_queued(&a, queued + 1).await; // A's listener queued it: the copy that must not go out twice
    assert_eq!(b.turn(MAIN).await.len(), 1, "B delivers the pending notice");
    assert!(a.turn(MAIN).await.is_empty(), "A's queued copy was already delivered");
    assert!(b.turn(MAIN).await.is_empty());

    // Concurrent turns on both gateways: exactly one of them delivers each notice.
    for round in 0..5 {
        assert!(a.turn(MAIN).await.is_empty(), "round {round}: A is the host again");
        let queued = notices_queued(&a).await;
        human_turn(&b, &child, &format!("round {round}")).await;
        wait_until_queued(&a, queued + 1).await;
        let (on_a, on_b) = tokio::join!(a.turn(MAIN), b.turn(MAIN));
        assert_eq!(on_a.len() + on_b.len(), 1, "round {round}: A got {on_a:?}, B got {on_b:?}");
        let (on_a, on_b) = tokio::join!(a.turn(MAIN), b.turn(MAIN));
        assert!(on_a.is_empty() && on_b.is_empty(), "round {round}: again {on_a:?} {on_b:?}");
    }
    drop(a);
    drop(b);
    db.drop_it().await;
}
