//! The awareness story end to end over HTTP.

use crate::support::*;
use serde_json::json;
use std::time::Duration;

const MAIN: &str = "agent:main:main";

#[tokio::test]
async fn spawn_human_turn_one_notice_then_reconcile() {
    let h = Harness::start().await;
    let child = h.spawn_child(MAIN).await;
    let seeded =
        h.gateway.kernel().cursor(MAIN, &child).await.unwrap().expect("the spawn seeds the parent's cursor");
    h.human_turn(&child, "hi from a human").await;

    let notices = h.turn(MAIN).await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].starts_with(&format!("Session \"{child}\" changed (other actor).")));
    let since = since_of(&notices[0]);
    assert_eq!(since, seeded.last_seen, "the notice asks for the changes since the spawn");

    let status = h.tool(MAIN, "session_status", json!({ "sessionKey": child, "changesSince": since })).await;
    let events = status["stateChanges"]["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["kind"], "human_direct_message");
    assert_eq!(events[0]["summary"], "human message via telegram");
    assert_eq!(status["stateVersion"], events[0]["sequence"]);
    assert_eq!(status["stateChanges"]["historyGap"], false);
    assert!(status["statusText"].as_str().unwrap().contains("Session state changes:"));

    assert!(h.turn(MAIN).await.is_empty(), "acknowledged: nothing more to say");
}

#[tokio::test]
async fn twenty_rapid_changes_give_one_notice() {
    let h = Harness::start().await;
    let child = h.spawn_child(MAIN).await;
    for i in 0..20 {
        h.human_turn(&child, &format!("m{i}")).await;
    }
    let queued = h.gateway.kernel().peek(MAIN);
    assert_eq!(
        queued.iter().filter(|e| e.context_key.starts_with("session-state:")).count(),
        1,
        "one line in the watcher's queue"
    );
    assert_eq!(h.turn(MAIN).await.len(), 1);
}

#[tokio::test]
async fn a_burst_is_one_notice_and_later_work_one_more() {
    let h = Harness::start().await;
    let child = h.spawn_child(MAIN).await;
    h.human_turn(&child, "first").await;
    let first = h.turn(MAIN).await;
    assert_eq!(first.len(), 1);
    assert!(h.turn(MAIN).await.is_empty());

    // A burst lands while a notice is pending, then the watcher drains: one notice covers all of it, and
    // the next drain (another hook of the same turn) finds nothing.
    h.human_turn(&child, "second").await;
    h.human_turn(&child, "third").await;
    h.human_turn(&child, "fourth").await;
    let drained = h.turn(MAIN).await;
    assert_eq!(drained.len(), 1);
    assert!(since_of(&drained[0]) > since_of(&first[0]));
    assert!(h.turn(MAIN).await.is_empty(), "no second notice for the same burst");
    // Work after the drain: exactly one fresh notice, from where the last one was acknowledged.
    h.human_turn(&child, "fifth").await;
    let fresh = h.turn(MAIN).await;
    assert_eq!(fresh.len(), 1);
    assert!(since_of(&fresh[0]) > since_of(&drained[0]));
    assert!(h.turn(MAIN).await.is_empty(), "and nothing after it");
}

#[tokio::test]
async fn self_suppression_for_the_senders_own_changes() {
    let h = Harness::start().await;
    let child = h.spawn_child(MAIN).await;
    let other = "agent:main:ops";
    h.create(other).await;
    let watched = h
        .tool(other, "sessions_send", json!({ "sessionKey": child, "message": "hello", "watch": true }))
        .await;
    assert_eq!(watched["watched"], true);
    // The parent changes the child's goal itself: the parent is not told, the other watcher is.
    let r = h
        .request(
            reqwest::Method::PUT,
            &format!("/v1/sessions/{}/goal", enc(&child)),
            Some(json!({ "objective": "ship it", "actor": { "type": "agent", "id": MAIN } })),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["event"]["summary"], "goal created");
    assert!(h.turn(MAIN).await.is_empty(), "the actor is not notified of its own change");
    assert_eq!(h.turn(other).await.len(), 1);
    // The sender's own message is not a human change at all.
    h.tool(MAIN, "sessions_send", json!({ "sessionKey": child, "message": "do this" })).await;
    assert!(h.turn(MAIN).await.is_empty());
    assert!(h.turn(other).await.is_empty());
}

#[tokio::test]
async fn send_with_watch_registers_at_the_current_head() {
    let h = Harness::start().await;
    let target = "agent:main:worker";
    h.create(target).await;
    for i in 0..3 {
        let r = h
            .request(
                reqwest::Method::PUT,
                &format!("/v1/sessions/{}/goal", enc(target)),
                Some(json!({ "objective": format!("goal {i}") })),
            )
            .await;
        assert_eq!(r.status, 200);
    }
    let head = h.tool(MAIN, "session_status", json!({ "sessionKey": target })).await["stateVersion"]
        .as_u64()
        .unwrap();
    let r =
        h.tool(MAIN, "sessions_send", json!({ "sessionKey": target, "message": "hi", "watch": true })).await;
    assert_eq!(r["watched"], true);
    assert_eq!(r["status"], "accepted");
    assert_eq!(r["sessionKey"], target);
    assert!(h.turn(MAIN).await.is_empty(), "earlier history never notifies");
    h.human_turn(target, "now").await;
    let notices = h.turn(MAIN).await;
    assert_eq!(notices.len(), 1);
    assert_eq!(since_of(&notices[0]), head, "the watch starts at the head it saw");

    let no_watch = h.tool(MAIN, "sessions_send", json!({ "sessionKey": target, "message": "x" })).await;
    assert!(no_watch.get("watched").is_none(), "watched only when watch was given");
}

#[tokio::test]
async fn send_with_watch_to_global_is_not_watched() {
    let mut config = sessionwatch_server::Config::default();
    config.set("session.scope", "global").unwrap();
    let h = Harness::start_with(config, None).await;
    h.create("main").await;
    let r = h
        .tool(
            "agent:main:worker",
            "sessions_send",
            json!({ "sessionKey": "main", "message": "hi", "watch": true }),
        )
        .await;
    assert_eq!(r["sessionKey"], "global");
    assert_eq!(r["watched"], false, "a bare global key gets no notices");
}

#[tokio::test]
async fn ambient_group_watch_after_first_human_turn_queues_without_wake() {
    let h = Harness::start().await;
    h.create(MAIN).await;
    let group = "agent:main:telegram:group:-100123";
    let mut stream = h.stream(Some(MAIN)).await;
    let first = h.human_turn(group, "first").await;
    assert!(first.get("event").is_none(), "nobody watched the group before its first human turn");
    assert!(h.turn(MAIN).await.is_empty());
    h.human_turn(group, "second").await;
    let notices = h.turn(MAIN).await;
    assert_eq!(notices.iter().filter(|t| t.contains(group)).count(), 1, "{notices:?}");
    let wakes = collect(&mut stream, "wake", Duration::from_millis(300)).await;
    assert!(wakes.is_empty(), "ambient notices never wake: {wakes:?}");
}

#[tokio::test]
async fn main_watcher_is_woken_a_subagent_is_not() {
    let h = Harness::start().await;
    let child = h.spawn_child(MAIN).await;
    let grandchild = h.spawn_child(&child).await;
    let mut main_stream = h.stream(Some(MAIN)).await;
    let mut child_stream = h.stream(Some(&child)).await;
    h.human_turn(&child, "poke the child").await;
    h.human_turn(&grandchild, "poke the grandchild").await;
    h.human_turn(&child, "again").await;
    let wakes = collect(&mut main_stream, "wake", Duration::from_millis(500)).await;
    assert_eq!(wakes.len(), 1, "one wake, coalesced: {wakes:?}");
    assert_eq!(wakes[0]["sessionKey"], MAIN);
    let child_wakes = collect(&mut child_stream, "wake", Duration::from_millis(300)).await;
    assert!(child_wakes.is_empty(), "sub-agents are not woken");
    assert_eq!(h.turn(&child).await.len(), 1, "the sub-agent gets its notice on its next turn");
}

#[tokio::test]
async fn reset_clears_the_watchers_watches() {
    let h = Harness::start().await;
    let child = h.spawn_child(MAIN).await;
    h.human_turn(&child, "x").await;
    let before = h.tool(MAIN, "session_status", json!({})).await["sessionId"].clone();
    let r = h.post(&format!("/v1/sessions/{}/reset", enc(MAIN)), json!({})).await;
    assert_eq!(r.status, 200);
    assert_ne!(r.body["sessionId"], before);
    assert_eq!(r.body["watchesCleared"], 1);
    assert!(h.turn(MAIN).await.is_empty(), "the queued notice went with the watch");
    h.human_turn(&child, "y").await;
    assert!(h.turn(MAIN).await.is_empty(), "no watch after reset");
}

#[tokio::test]
async fn delete_removes_history_and_cursors() {
    let h = Harness::start().await;
    let child = h.spawn_child(MAIN).await;
    h.human_turn(&child, "x").await;
    let r = h.request(reqwest::Method::DELETE, &format!("/v1/sessions/{}", enc(&child)), None).await;
    assert_eq!(r.status, 200);
    assert!(h.turn(MAIN).await.is_empty());
    assert!(h.gateway.kernel().cursor(MAIN, &child).await.unwrap().is_none());
    let r = h.tool_reply(MAIN, "session_status", json!({ "sessionKey": child, "changesSince": 0 })).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["error"]["type"], "tool_error");
    let head = h.gateway.kernel().head(&child, "main").await.expect("head");
    assert_eq!(head.head, 0, "history and head are gone");
    let r = h.post(&format!("/v1/sessions/{}/turns", enc(&child)), json!({})).await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn terminal_run_ownership_first_owner_wins() {
    let h = Harness::start().await;
    let spawn = h.tool(MAIN, "sessions_spawn", json!({ "task": "t" })).await;
    let run = spawn["runId"].as_str().unwrap().to_string();
    let child = spawn["childSessionKey"].as_str().unwrap().to_string();
    // A writer from another incarnation cannot claim it.
    let r = h
        .post(&format!("/v1/runs/{run}/result"), json!({ "status": "ok", "sessionId": "someone-else" }))
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    let r = h.post(&format!("/v1/runs/{run}/result"), json!({ "status": "timeout" })).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["accepted"], true);
    let r = h.post(&format!("/v1/runs/{run}/result"), json!({ "status": "ok" })).await;
    assert_eq!(r.body["accepted"], false, "the first terminal outcome wins");
    // Recorded off the request path: wait for it.
    let mut events = vec![];
    for _ in 0..50 {
        let s = h.tool(MAIN, "session_status", json!({ "sessionKey": child, "changesSince": 0 })).await;
        events = s["stateChanges"]["events"].as_array().unwrap().clone();
        if events.iter().any(|e| e["kind"] == "run_failed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let terminal: Vec<_> =
        events.iter().filter(|e| e["kind"] == "run_failed" || e["kind"] == "run_completed").collect();
    assert_eq!(terminal.len(), 1);
    assert_eq!(terminal[0]["summary"], "child run timed out");
    assert_eq!(terminal[0]["payload"]["outcome"], "timeout");
    assert!(h.turn(MAIN).await.is_empty(), "run outcomes are log-only");

    // A replaced run (a newer run started on the same session) cannot claim either.
    let spawn = h.tool(MAIN, "sessions_spawn", json!({ "task": "t2" })).await;
    let old_run = spawn["runId"].as_str().unwrap().to_string();
    let child2 = spawn["childSessionKey"].as_str().unwrap().to_string();
    h.tool(MAIN, "sessions_send", json!({ "sessionKey": child2, "message": "new work" })).await;
    let r = h.post(&format!("/v1/runs/{old_run}/result"), json!({ "status": "ok" })).await;
    assert_eq!(r.status, 409);
    // Unknown run.
    let r = h.post("/v1/runs/nope/result", json!({ "status": "ok" })).await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn send_and_wait_for_the_reply() {
    let h = Harness::start().await;
    let target = "agent:main:worker";
    h.create(target).await;
    let h = std::sync::Arc::new(h);
    let h2 = h.clone();
    let waiter = tokio::spawn(async move {
        h2.tool(
            MAIN,
            "sessions_send",
            json!({ "sessionKey": target, "message": "2+2?", "timeoutSeconds": 10 }),
        )
        .await
    });
    // The runtime of the target takes its inbox, then reports the run's result.
    let mut run_id = None;
    for _ in 0..100 {
        let r = h.post(&format!("/v1/sessions/{}/turns", enc(target)), json!({})).await;
        if let Some(item) = r.body["inbox"].as_array().and_then(|a| a.first()) {
            assert_eq!(item["text"], "2+2?");
            assert_eq!(item["fromSessionKey"], MAIN);
            run_id = item["runId"].as_str().map(str::to_string);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let run_id = run_id.expect("the message reached the inbox");
    let r = h.post(&format!("/v1/runs/{run_id}/result"), json!({ "status": "ok", "reply": "4" })).await;
    assert_eq!(r.status, 200);
    let result = waiter.await.unwrap();
    assert_eq!(result["status"], "ok");
    assert_eq!(result["reply"], "4");
    let history = h.tool(MAIN, "sessions_history", json!({ "sessionKey": target })).await;
    let roles: Vec<_> = history["messages"].as_array().unwrap().iter().map(|m| m["role"].clone()).collect();
    assert_eq!(roles, [json!("user"), json!("assistant")]);

    let r = h
        .tool(
            MAIN,
            "sessions_send",
            json!({ "sessionKey": target, "message": "again?", "timeoutSeconds": 1 }),
        )
        .await;
    assert_eq!(r["status"], "timeout");
}

#[tokio::test]
async fn sessions_list_shows_state_versions() {
    let h = Harness::start().await;
    let child = h.spawn_child(MAIN).await;
    h.create("agent:main:quiet").await;
    let list = h.tool(MAIN, "sessions_list", json!({})).await;
    let rows = list["sessions"].as_array().unwrap();
    let row = rows.iter().find(|r| r["key"] == child.as_str()).unwrap();
    assert_eq!(row["kind"], "subagent");
    assert!(row["stateVersion"].as_u64().unwrap() >= 2);
    let subagents = h.tool(MAIN, "sessions_list", json!({ "kinds": ["subagent"] })).await;
    assert_eq!(subagents["sessions"].as_array().unwrap().len(), 1);
    let one = h.tool(MAIN, "sessions_list", json!({ "limit": 1 })).await;
    assert_eq!(one["sessions"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn home_notice_on_creation_without_wake() {
    let h = Harness::start().await;
    h.create(MAIN).await;
    let mut stream = h.stream(Some(MAIN)).await;
    for i in 0..25 {
        let r = h
            .post(
                "/v1/sessions",
                json!({ "sessionKey": format!("agent:main:task:{i}"), "label": format!("<b>task {i}</b> {}", "x".repeat(150)),
                        "creator": { "type": "human", "id": "alice" }, "channel": "slack" }),
            )
            .await;
        assert_eq!(r.status, 200);
    }
    h.post("/v1/sessions", json!({ "sessionKey": "cron:nightly" })).await;
    let queued = h.gateway.kernel().peek(MAIN);
    assert_eq!(queued.len(), 1, "a burst of creations is one coalesced entry");
    let text = &queued[0].text;
    assert!(text.starts_with("Recent session creations (bounded summary; older entries may be omitted):"));
    assert!(text.chars().count() <= 8192);
    assert!(text.contains("agent:main:task:24"), "the newest is kept");
    assert!(!text.contains("\"agent:main:task:0\""), "the oldest are dropped first");
    assert!(text.contains("&lt;b&gt;task 24&lt;/b&gt;"), "untrusted text is escaped");
    assert!(!text.contains("cron:nightly"));
    assert!(collect(&mut stream, "wake", Duration::from_millis(200)).await.is_empty());
}

#[tokio::test]
async fn graceful_restart_restores_the_pending_notice_once() {
    let h = Harness::start().await;
    let child = h.spawn_child(MAIN).await;
    h.human_turn(&child, "x").await;
    let config = h.gateway.config().clone();
    let dir = h.stop().await;
    let h = Harness::start_in(dir, config.clone(), None).await;
    assert_eq!(h.turn(MAIN).await.len(), 1, "the start-up sweep restored it");
    let dir = h.stop().await;
    let h = Harness::start_in(dir, config, None).await;
    assert!(h.turn(MAIN).await.is_empty(), "acknowledged before the restart");
}
