//! Issue 11 item 8: abandoned MCP sessions held memory (2,000 `initialize` calls never followed up took
//! the gateway from 24 to 300 MB for minutes). Sessions are capped in number and idle time.

use crate::support::*;
use serde_json::{Value, json};
use sessionwatch_server::Config;
use sessionwatch_server::config::Limits;
use std::time::Duration;

async fn start(limits: Limits) -> Harness {
    Harness::start_with(Config { limits, ..Config::default() }, None).await
}

fn mcp(h: &Harness, session: Option<&str>, body: Value) -> reqwest::RequestBuilder {
    let mut req = h
        .client
        .post(format!("{}/mcp", h.base))
        .bearer_auth(TOKEN)
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    if let Some(s) = session {
        req = req.header("mcp-session-id", s).header("mcp-protocol-version", "2025-06-18");
    }
    req
}

/// `initialize`, then `notifications/initialized`: answers the session id.
async fn open(h: &Harness) -> String {
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "0" } } });
    let resp = mcp(h, None, init).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let id = resp.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let _ = resp.text().await;
    let done = mcp(h, Some(&id), json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    assert!(done.send().await.unwrap().status().is_success());
    id
}

/// Whether the session still answers `tools/list`.
async fn alive(h: &Harness, id: &str) -> bool {
    let resp =
        mcp(h, Some(id), json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" })).send().await.unwrap();
    let ok = resp.status() == 200;
    let _ = resp.text().await;
    ok
}

async fn live_sessions(h: &Harness) -> u64 {
    let m = h.request(reqwest::Method::GET, "/metrics", None).await;
    let text = m.body.as_str().unwrap().to_string();
    let line = text.lines().find(|l| l.starts_with("sessionwatch_mcp_sessions ")).expect("the gauge");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_sessions_beyond_the_cap_evict_the_least_recently_used() {
    let h = start(Limits { mcp_max_sessions: 3, ..Limits::default() }).await;
    let first = open(&h).await;
    let second = open(&h).await;
    let third = open(&h).await;
    assert!(alive(&h, &first).await, "used just now: the least recently used is now the second");
    let fourth = open(&h).await;
    assert_eq!(live_sessions(&h).await, 3);
    assert!(!alive(&h, &second).await, "evicted");
    for id in [&first, &third, &fourth] {
        assert!(alive(&h, id).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_mcp_sessions_are_closed_and_freed() {
    let h = start(Limits { mcp_idle: Duration::from_millis(400), ..Limits::default() }).await;
    let ids = [open(&h).await, open(&h).await];
    assert_eq!(live_sessions(&h).await, 2);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(live_sessions(&h).await, 0, "freed");
    for id in &ids {
        assert!(!alive(&h, id).await, "closed");
    }
    let again = open(&h).await;
    assert!(alive(&h, &again).await, "a new session works");
}
