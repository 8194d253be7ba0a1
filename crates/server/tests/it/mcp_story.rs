//! The MCP story every transport must tell (shared by the streamable HTTP test here and the stdio test of
//! the `sessionwatch` binary, which includes this file): initialize, list the six tools, call each one,
//! a human turn on a watched child brings exactly one notice in the next tool result and none after it
//! was acknowledged, and bad input gets clear tool errors while the server keeps working.

#![allow(dead_code)]

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use serde_json::{Value, json};

pub const MAIN: &str = "agent:main:main";

pub async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> CallToolResult {
    let Value::Object(args) = args else { panic!("args must be an object") };
    client.call_tool(CallToolRequestParams::new(tool).with_arguments(args)).await.unwrap_or_else(|e| {
        panic!("{tool}: protocol error {e}");
    })
}

pub fn structured(r: &CallToolResult) -> &Value {
    r.structured_content.as_ref().expect("structured content")
}

pub fn text(r: &CallToolResult) -> String {
    r.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.as_str()).collect::<Vec<_>>().join("\n")
}

pub fn notices(r: &CallToolResult) -> Vec<Value> {
    structured(r).get("systemEvents").and_then(Value::as_array).cloned().unwrap_or_default()
}

pub fn ok(r: CallToolResult) -> CallToolResult {
    assert_ne!(r.is_error, Some(true), "unexpected tool error: {}", text(&r));
    r
}

pub fn tool_error(r: &CallToolResult, kind: &str, mentions: &str) {
    assert_eq!(r.is_error, Some(true), "expected a tool error: {}", text(r));
    assert_eq!(structured(r)["error"]["type"], kind, "{}", text(r));
    assert!(text(r).contains(mentions), "{:?} should mention {mentions:?}", text(r));
}

/// The whole story over one MCP connection: the six tools, a notice delivered once, bad input.
pub async fn story(client: &RunningService<RoleClient, ()>, human_turn: impl AsyncFnOnce(&str)) {
    let info = client.peer_info().expect("initialized");
    assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("sessionwatch"));

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "session_status",
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "sessions_spawn",
            "sessions_unwatch"
        ]
    );
    for t in &tools {
        assert_eq!(t.input_schema["type"], "object", "{}", t.name);
        assert!(t.description.as_deref().is_some_and(|d| !d.is_empty()), "{}", t.name);
    }

    let status = ok(call(client, "session_status", json!({})).await);
    assert_eq!(structured(&status)["sessionKey"], MAIN);
    assert!(text(&status).contains(MAIN), "{}", text(&status));

    let spawn =
        ok(call(client, "sessions_spawn", json!({ "task": "write the tests", "label": "tests" })).await);
    let child = structured(&spawn)["childSessionKey"].as_str().unwrap().to_string();
    assert!(child.starts_with("agent:main:subagent:"), "{child}");
    assert!(notices(&spawn).is_empty(), "{spawn:?}");

    let list = ok(call(client, "sessions_list", json!({ "kinds": ["subagent"] })).await);
    assert!(structured(&list)["sessions"].as_array().unwrap().iter().any(|s| s["key"] == child.as_str()));

    let send = ok(call(
        client,
        "sessions_send",
        json!({ "sessionKey": child, "message": "also the docs", "watch": true }),
    )
    .await);
    assert_eq!(structured(&send)["sessionKey"], child.as_str());
    assert_eq!(structured(&send)["status"], "accepted");

    let history = ok(call(client, "sessions_history", json!({ "sessionKey": child })).await);
    let texts: Vec<&str> = structured(&history)["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["text"].as_str())
        .collect();
    assert_eq!(texts, ["write the tests", "also the docs"]);
    assert!(notices(&history).is_empty());

    // A human steps into the child: the next tool result carries exactly one notice, then none.
    human_turn(&child).await;
    let first = ok(call(client, "sessions_list", json!({ "limit": 5 })).await);
    let delivered = notices(&first);
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    let notice = delivered[0]["text"].as_str().unwrap();
    assert!(notice.contains(&format!("Session \"{child}\" changed")), "{notice}");
    assert!(text(&first).contains("Session notices"), "{}", text(&first));
    let since: u64 = notice.rsplit("changesSince ").next().unwrap().trim_end_matches('.').parse().unwrap();

    let reconcile =
        ok(call(client, "session_status", json!({ "sessionKey": child, "changesSince": since })).await);
    assert!(notices(&reconcile).is_empty(), "the notice was acknowledged: {reconcile:?}");
    let events = structured(&reconcile)["stateChanges"]["events"].as_array().unwrap().clone();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["kind"], "human_direct_message");
    assert_eq!(events[0]["summary"], "human message via telegram");

    let unwatch = ok(call(client, "sessions_unwatch", json!({ "sessionKey": child })).await);
    assert_eq!(structured(&unwatch)["unwatched"], true);
    assert!(notices(&unwatch).is_empty());

    // Bad input: tool errors (or, for an unknown tool, a protocol error); the server keeps working.
    let unknown = client.call_tool(CallToolRequestParams::new("sessions_explode")).await;
    let e = unknown.expect_err("unknown tool is a protocol error").to_string();
    assert!(e.contains("unknown tool"), "{e}");
    tool_error(
        &call(client, "session_status", json!({ "changesSince": "twelve" })).await,
        "invalid_argument",
        "changesSince",
    );
    tool_error(&call(client, "sessions_list", json!({ "limit": 0 })).await, "invalid_argument", "limit");
    tool_error(
        &call(client, "sessions_send", json!({ "sessionKey": child })).await,
        "invalid_argument",
        "message",
    );
    // An unknown argument is ignored and reported (as OpenClaw ignores it); a known one of the wrong
    // type is still refused, before anything is written.
    let status = ok(call(client, "session_status", json!({ "bogus": 1 })).await);
    assert_eq!(structured(&status)["ignoredArgs"], json!(["bogus"]), "{}", text(&status));
    tool_error(
        &call(client, "sessions_spawn", json!({ "task": 5, "bogus": 1 })).await,
        "invalid_argument",
        "task",
    );
    tool_error(
        &call(client, "sessions_history", json!({ "sessionKey": "agent:main:nowhere" })).await,
        "not_found",
        "agent:main:nowhere",
    );
    let still = ok(call(client, "session_status", json!({ "sessionKey": child })).await);
    assert_eq!(structured(&still)["sessionKey"], child.as_str());
}
