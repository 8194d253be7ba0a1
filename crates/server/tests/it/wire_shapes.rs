//! Wire shapes as snapshots: the changesSince JSON, the notice text, begin-turn and errors.

use crate::support::*;
use serde_json::json;
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
