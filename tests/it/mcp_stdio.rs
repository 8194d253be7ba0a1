//! `sessionwatch mcp` on stdio, driven by rmcp's child-process client: the shared MCP story against a
//! gateway on port 0 (`--url`), the embedded gateway (`--embedded`), and a clear failure when the
//! gateway cannot be reached.

#[path = "../../crates/server/tests/it/mcp_story.rs"]
mod mcp_story;

use crate::support::InProcess;

use mcp_story::{MAIN, call, ok, story, structured, tool_error};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;
use std::path::Path;

pub const TOKEN: &str = "stdio-test-token";
pub const BIN: &str = env!("CARGO_BIN_EXE_sessionwatch");

/// Starts `sessionwatch mcp ARGS` as an MCP server on stdio (its home in `home`, never the user's).
pub async fn mcp_child(home: &Path, args: &[&str]) -> RunningService<RoleClient, ()> {
    let cmd = tokio::process::Command::new(BIN).configure(|c| {
        c.arg("mcp").args(args).env("SESSIONWATCH_HOME", home);
        for var in ["SESSIONWATCH_URL", "SESSIONWATCH_TOKEN", "SESSIONWATCH_SESSION", "SESSIONWATCH_CONFIG"] {
            c.env_remove(var);
        }
    });
    ().serve(TokioChildProcess::new(cmd).expect("spawn sessionwatch mcp"))
        .await
        .expect("initialize over stdio")
}

/// A gateway on port 0 in this process, with a bearer token.
pub struct TestGateway {
    pub url: String,
    running: InProcess,
    _dir: tempfile::TempDir,
}

pub async fn start_gateway() -> TestGateway {
    let dir = tempfile::tempdir().unwrap();
    let running = InProcess::start_default(dir.path(), TOKEN).await;
    TestGateway { url: running.base.clone(), running, _dir: dir }
}

impl TestGateway {
    pub async fn stop(mut self) {
        self.running.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_stdio_story_against_a_gateway() {
    let gw = start_gateway().await;
    let url = gw.url.clone();
    let home = tempfile::tempdir().unwrap();
    let client = mcp_child(home.path(), &["--session", MAIN, "--url", &url, "--token", TOKEN]).await;
    let human_turn = async |child: &str| {
        let resp = reqwest::Client::new()
            .post(format!("{url}/v1/sessions/{}/inbound", child.replace(':', "%3A")))
            .bearer_auth(TOKEN)
            .json(&json!({ "text": "wait, I changed the plan", "channel": "telegram", "actor": { "type": "human" } }))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "inbound: {}", resp.status());
    };
    story(&client, human_turn).await;
    client.cancel().await.unwrap();
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_stdio_embedded_gateway() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    let client =
        mcp_child(home.path(), &["--embedded", "--session", MAIN, "--data-dir", data.to_str().unwrap()])
            .await;
    assert_eq!(client.list_all_tools().await.unwrap().len(), 6);
    let spawn = ok(call(&client, "sessions_spawn", json!({ "task": "embedded" })).await);
    let child = structured(&spawn)["childSessionKey"].as_str().unwrap().to_string();
    let status = ok(call(&client, "session_status", json!({ "sessionKey": child, "changesSince": 0 })).await);
    assert_eq!(structured(&status)["stateChanges"]["events"][0]["kind"], "created");
    tool_error(&call(&client, "sessions_list", json!({ "kinds": 5 })).await, "invalid_argument", "kinds");
    client.cancel().await.unwrap();
    assert!(data.join("sessionwatch.db").exists(), "the embedded gateway uses the data dir's database");
}

#[tokio::test]
async fn mcp_stdio_unreachable_gateway_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(BIN)
        .args(["mcp", "--session", MAIN, "--url", "http://127.0.0.1:9", "--token", "x"])
        .env("SESSIONWATCH_HOME", home.path())
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "stdout is for the protocol only");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the gateway at http://127.0.0.1:9"), "{err}");
}

/// Gemini CLI names its session to no MCP server; its `BeforeTool` hook (MCP tools only) announces the
/// call by tool and arguments, and `sessionwatch mcp` started by Gemini (`GEMINI_CLI=1`) acts for the
/// session that announced the same call. Without the announcement, or not started by Gemini, the caller
/// is the default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_stdio_a_gemini_caller_is_the_session_its_before_tool_hook_announced() {
    const SESSION: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
    let gw = start_gateway().await;
    let url = gw.url.clone();
    let hook = async |event: &str, extra: serde_json::Value| {
        let mut input =
            json!({ "session_id": SESSION, "hook_event_name": event, "cwd": "/home/u/work/demo" });
        input.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let resp = reqwest::Client::new()
            .post(format!("{url}/v1/hooks"))
            .bearer_auth(TOKEN)
            .json(&json!({ "cli": "gemini", "event": event, "input": input }))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{event}: {}", resp.status());
    };
    hook("SessionStart", json!({ "source": "startup" })).await;
    // What Gemini 0.61 sends for `mcp_sessionwatch_session_status` (its name for our tool).
    hook(
        "BeforeTool",
        json!({ "tool_name": "mcp_sessionwatch_session_status", "tool_input": { "changesSince": 0 },
                "mcp_context": { "server_name": "sessionwatch", "tool_name": "session_status" } }),
    )
    .await;
    let home = tempfile::tempdir().unwrap();
    let spawn = |gemini: bool| {
        let (home, url) = (home.path().to_path_buf(), url.clone());
        async move {
            let cmd = tokio::process::Command::new(BIN).configure(|c| {
                c.args(["mcp", "--url", &url, "--token", TOKEN]).env("SESSIONWATCH_HOME", &home);
                for var in [
                    "SESSIONWATCH_URL",
                    "SESSIONWATCH_TOKEN",
                    "SESSIONWATCH_SESSION",
                    "CLAUDE_CODE_SESSION_ID",
                ] {
                    c.env_remove(var);
                }
                if gemini {
                    c.env("GEMINI_CLI", "1");
                } else {
                    c.env_remove("GEMINI_CLI");
                }
            });
            ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap()
        }
    };
    // `session_status` without a `sessionKey` reports on the caller's own session.
    let caller_of = async |client: &RunningService<RoleClient, ()>, since: u64| {
        let result = ok(call(client, "session_status", json!({ "changesSince": since })).await);
        structured(&result)["sessionKey"].as_str().unwrap().to_string()
    };
    let gemini = spawn(true).await;
    assert_eq!(caller_of(&gemini, 0).await, format!("agent:main:gemini:{SESSION}"), "the announced call");
    assert_eq!(caller_of(&gemini, 1).await, "agent:main:main", "a call nobody announced");
    gemini.cancel().await.unwrap();
    let plain = spawn(false).await;
    assert_eq!(caller_of(&plain, 0).await, "agent:main:main", "a server Gemini did not start");
    plain.cancel().await.unwrap();
    gw.stop().await;
}
