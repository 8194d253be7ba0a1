//! The Pi extension's calls (`POST /v1/hooks` with `cli: "pi"`, what `hooks install pi` writes) against a
//! real session file written by Pi 0.73.1 (crates/upstream/tests/fixtures/pi), replayed row by row with a
//! monitor tick after every row: a prompt the extension records (turn id: the user message's
//! timestamp, posted before its row exists) and the monitor then reads is one event, and so is one the
//! monitor reads first; `UserPromptSubmit` never takes notices (Pi posts it after `before_agent_start`),
//! `BeforeAgent` and `PostToolUse` do, once; `SessionStart` only adopts.

use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const WORKER: &str = "01a2361b-d39f-759d-9272-bf2c2772ea6a";
const MANAGER: &str = "01a2361b-e99f-7755-a26e-cb8e6819ce44";
const SESSIONS: &str = "../upstream/tests/fixtures/pi/home/.pi/agent/sessions/--home-user-work-demo--";

fn key(session: &str) -> String {
    format!("agent:main:pi:{session}")
}

/// A Pi home whose session files grow a row at a time, as Pi writes them.
struct PiHome {
    _dir: tempfile::TempDir,
    sessions: PathBuf,
}

impl PiHome {
    fn new(h: &Harness) -> PiHome {
        let (dir, sessions) = h.temp_home(".pi/agent/sessions/--home-user-work-demo--");
        PiHome { _dir: dir, sessions }
    }

    fn name(session: &str) -> String {
        let stamp = if session == WORKER { "2026-12-02T09-35-23-040Z" } else { "2026-12-02T09-35-28-672Z" };
        format!("{stamp}_{session}.jsonl")
    }

    fn file(&self, session: &str) -> PathBuf {
        self.sessions.join(PiHome::name(session))
    }

    fn rows(session: &str) -> Vec<String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(SESSIONS).join(PiHome::name(session));
        std::fs::read_to_string(path).unwrap().lines().map(str::to_string).collect()
    }

    /// Appends the session's fixture rows `from..=to` (1-based).
    fn write(&self, session: &str, from: usize, to: usize) {
        append_rows(&self.file(session), &PiHome::rows(session)[from - 1..to]);
    }
}

/// The user message of fixture row `n`: its text and its `message.timestamp`, as the extension sends them.
fn user_message(session: &str, n: usize) -> (String, String) {
    let row: Value = serde_json::from_str(&PiHome::rows(session)[n - 1]).unwrap();
    assert_eq!(row["message"]["role"], "user", "row {n}");
    let text = row["message"]["content"][0]["text"].as_str().unwrap().to_string();
    (text, row["message"]["timestamp"].as_u64().unwrap().to_string())
}

/// One extension call; the session file is named only once Pi has written it.
async fn hook(h: &Harness, home: &PiHome, session: &str, event: &str, extra: Value) -> Value {
    let mut input = json!({ "session_id": session, "cwd": "/home/user/work/demo", "hook_event_name": event });
    if home.file(session).exists() {
        input["transcript_path"] = json!(home.file(session));
    }
    h.hook("pi", event, merged(input, extra)).await
}

async fn typed(h: &Harness, home: &PiHome, session: &str, row: usize) -> Value {
    let (prompt, turn_id) = user_message(session, row);
    hook(h, home, session, "UserPromptSubmit", json!({ "prompt": prompt, "turn_id": turn_id })).await
}

fn human_events(h: &Harness, session: &str) -> usize {
    h.human_events(&key(session))
}

/// Appends rows `from..=to` one at a time, with a tick after each.
async fn replay(h: &Harness, home: &PiHome, session: &str, from: usize, to: usize) {
    for n in from..=to {
        home.write(session, n, n);
        h.tick().await;
    }
}

/// The manager watches the worker (its `sessions_send` text: "take the parser").
async fn watch_worker(h: &Harness, home: &PiHome) {
    if !home.file(MANAGER).exists() {
        home.write(MANAGER, 1, 5);
        hook(h, home, MANAGER, "SessionStart", json!({})).await;
    }
    h.send_and_watch(&key(MANAGER), &key(WORKER), "take the parser").await;
}

#[tokio::test]
async fn a_prompt_seen_by_the_extension_and_the_monitor_is_one_human_turn_whichever_comes_first() {
    let h = Harness::start().await;
    let home = PiHome::new(&h);
    // A new session: Pi writes its file only with the first reply, so session_start cannot link it yet.
    let started = hook(&h, &home, WORKER, "SessionStart", json!({})).await;
    assert_eq!(
        (started["sessionKey"].clone(), started["additionalContext"].clone()),
        (json!(key(WORKER)), Value::Null)
    );
    assert_eq!(hook(&h, &home, WORKER, "BeforeAgent", json!({})).await["recorded"], false);
    assert_eq!(typed(&h, &home, WORKER, 4).await["recorded"], true, "the first prompt, before any file");
    replay(&h, &home, WORKER, 1, 5).await;
    hook(&h, &home, WORKER, "SessionStart", json!({})).await; // agent_end: linked now
    watch_worker(&h, &home).await; // the monitor reads watched sessions
    h.tick().await;
    assert_eq!(human_events(&h, WORKER), 1);
    let links = h.tick().await;
    assert_eq!(links["links"], 1, "the worker's file is linked: {links}");

    // Turn two: the extension first (message_start), then the row, a tick after each row.
    assert_eq!(typed(&h, &home, WORKER, 6).await["recorded"], true);
    replay(&h, &home, WORKER, 6, 7).await;
    assert_eq!(human_events(&h, WORKER), 2, "the monitor read the same turn");

    // Turn three: the monitor first (say the gateway answered late), then the extension.
    replay(&h, &home, WORKER, 8, 8).await;
    assert_eq!(human_events(&h, WORKER), 3);
    assert_eq!(typed(&h, &home, WORKER, 8).await["recorded"], false, "already recorded by the monitor");
    replay(&h, &home, WORKER, 9, 11).await;
    assert_eq!(human_events(&h, WORKER), 3, "three typed turns, each once");
}

#[tokio::test]
async fn notices_come_before_the_turn_or_after_a_tool_never_with_the_prompt_record() {
    let h = Harness::start().await;
    let home = PiHome::new(&h);
    home.write(WORKER, 1, 5);
    home.write(MANAGER, 1, 5);
    for s in [MANAGER, WORKER] {
        assert_eq!(hook(&h, &home, s, "SessionStart", json!({})).await["sessionKey"], key(s));
    }
    watch_worker(&h, &home).await;
    // A sessions_send text typed into the worker is not a human turn.
    let echo =
        hook(&h, &home, WORKER, "UserPromptSubmit", json!({ "prompt": "take the parser", "turn_id": "1" }))
            .await;
    assert_eq!(echo["recorded"], false, "{echo}");
    assert_eq!(human_events(&h, WORKER), 0);

    assert_eq!(typed(&h, &home, WORKER, 6).await["recorded"], true);
    // The manager's prompt record (posted after before_agent_start) takes nothing ...
    let record = typed(&h, &home, MANAGER, 6).await;
    assert_eq!(record["additionalContext"], Value::Null, "{record}");
    // ... before_agent_start takes the notice, once.
    let before = hook(&h, &home, MANAGER, "BeforeAgent", json!({})).await;
    let context = before["additionalContext"].as_str().expect("the notice before the manager's turn");
    assert!(context.contains(&format!("Session \"{}\" changed", key(WORKER))), "{context}");
    assert_eq!(hook(&h, &home, MANAGER, "BeforeAgent", json!({})).await["additionalContext"], Value::Null);

    // Mid-turn: a change while the manager's tool runs arrives in that tool's result.
    typed(&h, &home, WORKER, 8).await;
    let tool =
        hook(&h, &home, MANAGER, "PostToolUse", json!({ "tool_name": "bash", "tool_use_id": "call_1" }))
            .await;
    assert!(tool["additionalContext"].as_str().unwrap().contains(&key(WORKER)), "{tool}");
    hook(&h, &home, MANAGER, "SessionEnd", json!({})).await;
}
