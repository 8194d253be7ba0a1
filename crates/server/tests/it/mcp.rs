//! MCP over streamable HTTP (`/mcp`), driven by rmcp's own client against the real server on port 0.
//! The story itself is in `mcp_story.rs`, shared with the stdio test of the `sessionwatch` binary.

use crate::in_process::InProcess;
use crate::mcp_story::{MAIN, call, ok, story, structured, tool_error};
use http::{HeaderName, HeaderValue};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use sessionwatch_core::SystemClock;
use sessionwatch_server::Config;
use std::collections::HashMap;
use std::sync::Arc;

const TOKEN: &str = "mcp-test-token";

struct TestGateway {
    url: String,
    running: InProcess,
    _dir: tempfile::TempDir,
}

impl TestGateway {
    async fn start() -> TestGateway {
        let dir = tempfile::tempdir().unwrap();
        let running = InProcess::start_default(dir.path(), TOKEN).await;
        TestGateway { url: running.base.clone(), running, _dir: dir }
    }

    async fn client(&self, session: Option<&str>) -> RunningService<RoleClient, ()> {
        let mut headers = HashMap::new();
        if let Some(s) = session {
            headers
                .insert(HeaderName::from_static("x-sessionwatch-session"), HeaderValue::from_str(s).unwrap());
        }
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", self.url))
            .auth_header(TOKEN)
            .custom_headers(headers);
        ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("initialize over HTTP")
    }

    async fn human_turn(&self, key: &str, text: &str) {
        let url = format!("{}/v1/sessions/{}/inbound", self.url, key.replace(':', "%3A"));
        let resp = reqwest::Client::new()
            .post(url)
            .bearer_auth(TOKEN)
            .json(&json!({ "text": text, "channel": "telegram", "actor": { "type": "human" } }))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "inbound: {}", resp.status());
    }

    /// The server stops promptly with MCP clients connected.
    async fn stop(mut self) {
        self.running.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_streamable_http_story() {
    let gw = TestGateway::start().await;
    let client = gw.client(Some(MAIN)).await;
    story(&client, async |child: &str| gw.human_turn(child, "stop, use the other branch").await).await;
    client.cancel().await.unwrap();
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_caller_comes_from_the_session_header() {
    let gw = TestGateway::start().await;
    let ops = gw.client(Some("agent:ops:worker")).await;
    let status = ok(call(&ops, "session_status", json!({})).await);
    assert_eq!(structured(&status)["sessionKey"], "agent:ops:worker");
    let default = gw.client(None).await;
    let status = ok(call(&default, "session_status", json!({})).await);
    assert_eq!(structured(&status)["sessionKey"], MAIN);
    let bad = gw.client(Some("has space")).await;
    tool_error(&call(&bad, "session_status", json!({})).await, "invalid_argument", "session key");
    // Shutdown ends the MCP streams: it does not wait for the connected clients to leave.
    gw.stop().await;
    drop((ops, default, bad));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_endpoint_requires_the_token_and_a_loopback_host() {
    let gw = TestGateway::start().await;
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let http = reqwest::Client::new();
    let post = |host: Option<&str>, token: Option<&str>| {
        let mut req = http
            .post(format!("{}/mcp", gw.url))
            .header("accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(h) = host {
            req = req.header("host", h);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    assert_eq!(post(None, None).await.unwrap().status(), 401);
    assert_eq!(post(None, Some("wrong")).await.unwrap().status(), 401);
    let rebinding = post(Some("evil.example"), Some(TOKEN)).await.unwrap();
    assert!(rebinding.status().is_client_error(), "{}", rebinding.status());
    assert_eq!(post(None, Some(TOKEN)).await.unwrap().status(), 200);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_extra_hosts_only_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config { data_dir: dir.path().to_path_buf(), ..Config::default() };
    config.set("gateway.mcpAllowedHosts", "gw.example").unwrap();
    let running = InProcess::start(&dir.path().join("sw.db"), config, Arc::new(SystemClock), None).await;
    let url = format!("{}/mcp", running.base);
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let http = reqwest::Client::new();
    for (host, allowed) in [("gw.example", true), ("other.example", false), ("localhost", true)] {
        let resp = http
            .post(&url)
            .header("host", host)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().is_success(), allowed, "{host}: {}", resp.status());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notices_endpoint_drains_the_queue_not_the_inbox() {
    let gw = TestGateway::start().await;
    let client = gw.client(Some(MAIN)).await;
    let spawn = ok(call(&client, "sessions_spawn", json!({ "task": "t" })).await);
    let child = structured(&spawn)["childSessionKey"].as_str().unwrap().to_string();
    // Someone sends main a message (inbox) and a human steps into the child (notice).
    let http = reqwest::Client::new();
    // (Another agent's session, so that its creation notice goes to that agent's Home, not main.)
    let other = gw.client(Some("agent:ops:other")).await;
    ok(call(&other, "sessions_send", json!({ "sessionKey": MAIN, "message": "ping" })).await);
    gw.human_turn(&child, "hello").await;
    let post = |path: String| http.post(format!("{}{path}", gw.url)).bearer_auth(TOKEN).send();
    let drained: Value =
        post("/v1/sessions/agent%3Amain%3Amain/notices".into()).await.unwrap().json().await.unwrap();
    assert_eq!(drained["sessionKey"], MAIN);
    assert_eq!(drained["systemEvents"].as_array().unwrap().len(), 1, "{drained}");
    let again: Value =
        post("/v1/sessions/agent%3Amain%3Amain/notices".into()).await.unwrap().json().await.unwrap();
    assert_eq!(again["systemEvents"], json!([]));
    // The turn still finds the inbox, and no notice (it was acknowledged).
    let turn: Value =
        post("/v1/sessions/agent%3Amain%3Amain/turns".into()).await.unwrap().json().await.unwrap();
    assert_eq!(turn["systemEvents"], json!([]));
    assert_eq!(turn["inbox"].as_array().unwrap().len(), 1, "{turn}");
    let missing = post("/v1/sessions/agent%3Amain%3Anowhere/notices".into()).await.unwrap();
    assert_eq!(missing.status(), 404);
    client.cancel().await.unwrap();
    other.cancel().await.unwrap();
    gw.stop().await;
}

/// Issue 33 item 3: over MCP, a reconcile the store cannot answer is a tool result with `isError`, never
/// an empty page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_a_reconcile_the_store_cannot_answer_is_an_error() {
    let gw = TestGateway::start().await;
    let client = gw.client(Some(MAIN)).await;
    let status = json!({ "sessionKey": MAIN, "changesSince": 0 });
    ok(call(&client, "session_status", status.clone()).await);
    let db = rusqlite::Connection::open(gw._dir.path().join("sw.db")).unwrap();
    db.execute_batch("ALTER TABLE session_state_heads RENAME TO heads_away;").unwrap();
    tool_error(&call(&client, "session_status", status.clone()).await, "unavailable", "try again");
    db.execute_batch("ALTER TABLE heads_away RENAME TO session_state_heads;").unwrap();
    ok(call(&client, "session_status", status).await);
    client.cancel().await.unwrap();
    gw.stop().await;
}
