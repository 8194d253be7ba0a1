//! A slow store must not stall the gateway's async threads: SQLite work runs on the blocking pool.

use crate::support::*;
use serde_json::json;
use std::time::Duration;

const MAIN: &str = "agent:main:main";

/// The test runtime has one thread, so a write that busy-waits on it (here: for the lock another
/// connection holds) would keep `/healthz` from being answered until the write gave up.
#[tokio::test]
async fn a_write_waiting_for_the_database_lock_does_not_delay_healthz() {
    let h = Harness::start().await;
    h.create(MAIN).await;
    let blocker = rusqlite::Connection::open(h.dir.path().join("sessionwatch.db")).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();

    let inbound = tokio::spawn(
        h.client
            .post(format!("{}/v1/sessions/{}/inbound", h.base, enc(MAIN)))
            .bearer_auth(TOKEN)
            .json(&json!({ "text": "hi", "channel": "telegram", "actor": { "type": "human" } }))
            .send(),
    );
    // Let the inbound request reach the store and start waiting for the lock.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let health =
        tokio::time::timeout(Duration::from_secs(4), h.client.get(format!("{}/healthz", h.base)).send())
            .await
            .expect("/healthz answered while a write waits for the database")
            .unwrap();
    assert_eq!(health.status(), 200);
    assert!(!inbound.is_finished(), "the inbound write is still waiting for the lock the test holds");

    blocker.execute_batch("ROLLBACK").unwrap();
    let reply = inbound.await.unwrap().unwrap();
    assert_eq!(reply.status(), 200, "the write goes through once the lock is released");
}
