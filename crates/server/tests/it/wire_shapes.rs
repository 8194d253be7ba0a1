//! Wire shapes as snapshots: the changesSince JSON, the notice text, begin-turn and errors.

use crate::support::*;
use serde_json::{Value, json};
use sessionwatch_core::ManualClock;
use std::sync::Arc;

const MAIN: &str = "agent:main:main";
const WORKER: &str = "agent:main:worker";

#[tokio::test]
async fn wire_shapes() {
    let clock = Arc::new(ManualClock::new(1_764_662_400_000));
    let h = Harness::start_with(sessionwatch_server::Config::default(), Some(clock.clone())).await;
    h.create(WORKER).await;
    let sent = h
        .tool(MAIN, "sessions_send", json!({ "sessionKey": WORKER, "message": "start", "watch": true }))
        .await;
    insta::assert_json_snapshot!("sessions_send_watch", sent, { ".runId" => "[run]" });
    clock.advance(1000);
    h.human_turn(WORKER, "a human writes").await;
    let r = h
        .request(
            reqwest::Method::PUT,
            &format!("/v1/sessions/{}/goal", enc(WORKER)),
            Some(json!({ "objective": "ship", "status": "active" })),
        )
        .await;
    insta::assert_json_snapshot!("goal_put", r.body);
    let r =
        h.post(&format!("/v1/sessions/{}/compactions", enc(WORKER)), json!({ "operationId": "op-1" })).await;
    assert_eq!(r.status, 200);

    let turn = h.post(&format!("/v1/sessions/{}/turns", enc(MAIN)), json!({})).await.body;
    insta::assert_json_snapshot!("begin_turn", turn);
    let notice = turn["systemEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["contextKey"].as_str().unwrap().starts_with("session-state:"))
        .unwrap();
    insta::assert_snapshot!("notice_text", notice["text"].as_str().unwrap());

    let status = h.tool(MAIN, "session_status", json!({ "sessionKey": WORKER, "changesSince": 1 })).await;
    insta::assert_json_snapshot!("session_status_changes_since", status, { ".sessionId" => "[session-id]", ".statusText" => "[text]" });
    insta::assert_snapshot!(
        "session_status_text",
        status["statusText"].as_str().unwrap().replace(status["sessionId"].as_str().unwrap(), "[session-id]")
    );

    let err = h.tool_reply(MAIN, "session_status", json!({ "sessionKey": "agent:main:nobody" })).await;
    insta::assert_json_snapshot!("error_not_found", err.body);
}

/// Issue 33 item 10: OpenClaw's fields a client reads, filled from what the gateway knows: list rows'
/// `displayName`, run `status` and `childSessions`; history's unread inbox; an ignored argument and a
/// clamped one reported, not refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openclaw_fields_carry_run_state_children_and_the_unread_inbox() {
    let h = Harness::start().await;
    let parent = "agent:main:main";
    let spawned = h
        .tool(
            parent,
            "sessions_spawn",
            json!({ "task": "work", "label": "worker", "runTimeoutSeconds": 9_999_999, "priority": "high" }),
        )
        .await;
    assert_eq!(spawned["ignoredArgs"], json!(["priority"]));
    assert_eq!(
        spawned["clampedArgs"]["runTimeoutSeconds"],
        json!({ "requested": 9_999_999, "applied": 604_800 })
    );
    let child = spawned["childSessionKey"].as_str().unwrap().to_string();
    let run = spawned["runId"].as_str().unwrap().to_string();

    let row = |list: &Value, key: &str| {
        list["sessions"].as_array().unwrap().iter().find(|r| r["key"] == key).cloned().unwrap()
    };
    let list = h.tool(parent, "sessions_list", json!({})).await;
    assert_eq!(row(&list, parent)["childSessions"], json!([child]));
    assert_eq!(row(&list, parent)["status"], "idle");
    assert_eq!(row(&list, parent)["displayName"], parent);
    assert_eq!(row(&list, &child)["status"], "running");
    assert_eq!(row(&list, &child)["displayName"], "worker");
    assert_eq!(row(&list, &child)["childSessions"], json!([]));

    let history = h.tool(parent, "sessions_history", json!({ "sessionKey": child })).await;
    let pending = &history["pendingInputs"];
    assert_eq!(pending["total"], 1, "{history}");
    assert_eq!(pending["items"][0]["runId"], run.as_str());
    assert_eq!(pending["items"][0]["fromSessionKey"], parent);
    assert!(pending["items"][0].get("text").is_none(), "no text beyond the transcript's");

    let r = h.post(&format!("/v1/runs/{run}/result"), json!({ "status": "error" })).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let list = h.tool(parent, "sessions_list", json!({})).await;
    assert_eq!(row(&list, &child)["status"], "failed");
    // The child's turn takes its inbox: nothing is pending any more.
    h.turn(&child).await;
    let history = h.tool(parent, "sessions_history", json!({ "sessionKey": child })).await;
    assert_eq!(history["pendingInputs"], json!({ "items": [], "total": 0 }));
}
