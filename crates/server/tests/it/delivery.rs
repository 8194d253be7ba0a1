//! Delivering notices: a turn that fails loses nothing, and a notice whose watch is gone is not
//! delivered.

use crate::support::*;
use serde_json::json;
use sessionwatch_core::{DAY_MS, ManualClock};
use std::sync::Arc;

const MAIN: &str = "agent:main:main";
const WORKER: &str = "agent:main:worker";

/// MAIN watches WORKER, and a human turn on WORKER leaves MAIN one pending notice.
async fn pending_notice(h: &Harness) {
    h.create(WORKER).await;
    h.tool(MAIN, "sessions_send", json!({ "sessionKey": WORKER, "message": "start", "watch": true })).await;
    h.human_turn(WORKER, "a person steps in").await;
}

/// Issue 11 item 4: begin-turn acknowledged the drained notices before it took the inbox; when taking
/// the inbox failed, the call answered 500 and the notices were gone.
#[tokio::test]
async fn a_turn_that_fails_to_take_the_inbox_loses_no_notice() {
    let h = Harness::start().await;
    pending_notice(&h).await;
    h.tool(WORKER, "sessions_send", json!({ "sessionKey": MAIN, "message": "for the inbox" })).await;
    let db = rusqlite::Connection::open(h.dir.path().join("sessionwatch.db")).unwrap();
    db.execute_batch(
        "CREATE TRIGGER fail_take BEFORE DELETE ON session_inbox BEGIN SELECT RAISE(ABORT, 'injected'); END;",
    )
    .unwrap();
    let failed = h.post(&format!("/v1/sessions/{}/turns", enc(MAIN)), json!({})).await;
    assert_eq!(failed.status, 503, "{}", failed.body);
    assert_eq!(failed.body["error"]["type"], "unavailable", "{}", failed.body);
    db.execute_batch("DROP TRIGGER fail_take;").unwrap();
    let turn = h.post(&format!("/v1/sessions/{}/turns", enc(MAIN)), json!({})).await;
    assert_eq!(turn.status, 200, "{}", turn.body);
    let notices: Vec<_> = turn.body["systemEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["contextKey"].as_str().unwrap().starts_with("session-state:"))
        .collect();
    assert_eq!(notices.len(), 1, "the notice survived the failed turn: {}", turn.body);
    assert_eq!(turn.body["inbox"].as_array().unwrap().len(), 1, "and so did the inbox");
}

/// Issue 11 item 5: after 31 days a prune removed the cursor, but its queued notice was still delivered
/// (and its `changesSince` answered `historyGap: true`). Retention drops it, as reset and delete do, and
/// names the removed watch.
#[tokio::test]
async fn a_notice_whose_watch_expired_is_not_delivered() {
    let clock = Arc::new(ManualClock::new(1_764_662_400_000));
    let h = Harness::start_with(sessionwatch_server::Config::default(), Some(clock.clone())).await;
    pending_notice(&h).await;
    let queued = |h: &Harness| {
        h.gateway.kernel().peek(MAIN).iter().filter(|e| e.context_key.starts_with("session-state:")).count()
    };
    assert_eq!(queued(&h), 1);
    clock.advance(31 * DAY_MS);
    let report = h.gateway.kernel().prune_now().await.unwrap();
    assert_eq!(report.cursors_expired, vec![(MAIN.to_string(), WORKER.to_string())]);
    assert_eq!(queued(&h), 0, "the expired watch's notice left the queue with it");
    assert!(h.turn(MAIN).await.is_empty());
    // A change after the expiry does not notify either: the watch is gone.
    h.human_turn(WORKER, "later").await;
    assert!(h.turn(MAIN).await.is_empty());
}

/// A notice already delivered from the durable cursor (by another process sharing the file, here
/// `sessionwatch db drain`-style access through a second store) is not delivered again from memory.
#[tokio::test]
async fn a_notice_claimed_elsewhere_is_not_delivered_again() {
    let h = Harness::start().await;
    pending_notice(&h).await;
    let other = sessionwatch_store::SqliteStore::open(
        h.dir.path().join("sessionwatch.db"),
        sessionwatch_store::SqliteOptions::default(),
    )
    .unwrap();
    let key = |k: &str| sessionwatch_core::AgentSessionKey::parse(k).unwrap();
    let claimed = sessionwatch_store::SignalLog::acknowledge(
        &other,
        key(MAIN),
        vec![key(WORKER)],
        h.gateway.kernel().config().store_identity.clone(),
        clock_now(),
    )
    .await
    .unwrap();
    assert_eq!(claimed.delivered.len(), 1);
    assert!(h.turn(MAIN).await.is_empty(), "the copy in this gateway's memory is stale");
    let m = h.request(reqwest::Method::GET, "/metrics", None).await;
    assert!(m.body.as_str().unwrap().contains("sessionwatch_notices_dropped_stale_total 1"), "{}", m.body);
}

fn clock_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// `/metrics` counts the store's group commits and the writes they carried (every SQLite write).
#[tokio::test]
async fn metrics_count_the_stores_group_commits() {
    let h = Harness::start().await;
    let counters = |body: &str| {
        let value = |name: &str| -> u64 {
            let line = body.lines().find(|l| l.starts_with(&format!("{name} "))).expect(name);
            line[name.len() + 1..].parse().unwrap()
        };
        (
            value("sessionwatch_store_group_commits_total"),
            value("sessionwatch_store_group_commit_writes_total"),
        )
    };
    let m = h.request(reqwest::Method::GET, "/metrics", None).await;
    let (commits, writes) = counters(m.body.as_str().unwrap());
    for i in 0..3 {
        h.human_turn(WORKER, &format!("turn {i}")).await;
    }
    let m = h.request(reqwest::Method::GET, "/metrics", None).await;
    let (commits_after, writes_after) = counters(m.body.as_str().unwrap());
    assert!(writes_after >= writes + 3, "three recorded turns: {writes} -> {writes_after}");
    assert!(commits_after > commits, "{commits} -> {commits_after}");
    assert!(commits_after - commits <= writes_after - writes, "a commit carries at least one write");
}

/// Issue 33 item 3 (SPEC §5): a reconcile the store cannot answer is the tool error `unavailable` (HTTP
/// 503), never an empty page at `stateVersion` 0, and the gateway answers again once the store does.
#[tokio::test]
async fn a_reconcile_the_store_cannot_answer_is_unavailable() {
    let h = Harness::start().await;
    pending_notice(&h).await;
    let status = |since| json!({ "sessionKey": WORKER, "changesSince": since });
    let before = h.tool(MAIN, "session_status", status(0)).await;
    assert!(before["stateVersion"].as_u64().unwrap() > 0);
    let db = rusqlite::Connection::open(h.dir.path().join("sessionwatch.db")).unwrap();
    db.execute_batch("ALTER TABLE session_state_heads RENAME TO heads_away;").unwrap();
    for args in [status(0), status(1), json!({ "sessionKey": WORKER })] {
        let r = h.tool_reply(MAIN, "session_status", args.clone()).await;
        assert_eq!(r.status, 503, "{args}: {}", r.body);
        assert_eq!(r.body["ok"], false);
        assert_eq!(r.body["error"]["type"], "unavailable", "{}", r.body);
    }
    let list = h.tool_reply(MAIN, "sessions_list", json!({})).await;
    assert_eq!(
        (list.status, list.body["error"]["type"].clone()),
        (503, json!("unavailable")),
        "{}",
        list.body
    );
    db.execute_batch("ALTER TABLE heads_away RENAME TO session_state_heads;").unwrap();
    let after = h.tool(MAIN, "session_status", status(0)).await;
    assert_eq!(after["stateVersion"], before["stateVersion"]);
    assert_eq!(after["stateChanges"], before["stateChanges"]);
}
