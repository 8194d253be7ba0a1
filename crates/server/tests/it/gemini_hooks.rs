//! Gemini CLI hooks (`POST /v1/hooks` with `cli: "gemini"`) against a real chat file written by Gemini
//! CLI 0.61.0 (crates/upstream/tests/fixtures/gemini-cases/print), replayed row by row as the CLI wrote
//! it: a prompt seen by `BeforeAgent` (before its row exists) and then by the file monitor is one
//! event; notices come back as `additionalContext` on `BeforeAgent` / `AfterTool`, never on
//! `SessionStart`.

use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The session of the fixture file (a `-p` run, resumed once, with a tool call).
const WORKER: &str = "35341f49-cb17-449c-984d-179d4797dcaa";
const MANAGER: &str = "aaaaaaaa-1111-4222-8333-444444444444";
const FIXTURE: &str = "../upstream/tests/fixtures/gemini-cases/print/home/.gemini/tmp/demo/chats/\
                       session-2026-12-06T01-45-35341f49.jsonl";

fn key(session: &str) -> String {
    format!("agent:main:gemini:{session}")
}

/// A Gemini home whose chat files grow a row at a time, as the CLI writes them.
struct GeminiHome {
    _dir: tempfile::TempDir,
    chats: PathBuf,
    rows: Vec<String>,
}

impl GeminiHome {
    fn new(h: &Harness) -> GeminiHome {
        let (dir, chats) = h.temp_home(".gemini/tmp/demo/chats");
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE)).unwrap();
        let rows = text.lines().map(str::to_string).collect();
        GeminiHome { _dir: dir, chats, rows }
    }

    fn file(&self, session: &str) -> PathBuf {
        self.chats.join(format!("session-2026-12-06T01-45-{}.jsonl", &session[..8]))
    }

    /// Appends the worker's fixture rows `range` (1-based, inclusive).
    fn write_worker(&self, from: usize, to: usize) {
        append_rows(&self.file(WORKER), &self.rows[from - 1..to]);
    }

    /// The manager's file: the fixture's first two rows (header, session context) under its id.
    fn write_manager(&self) {
        let text = format!("{}\n{}\n", self.rows[0], self.rows[1]).replace(WORKER, MANAGER);
        std::fs::write(self.file(MANAGER), text).unwrap();
    }

    /// The prompt typed in fixture row `n`.
    fn prompt_of(&self, n: usize) -> String {
        let row: Value = serde_json::from_str(&self.rows[n - 1]).unwrap();
        row["content"][0]["text"].as_str().unwrap().to_string()
    }
}

async fn hook(h: &Harness, home: &GeminiHome, session: &str, event: &str, extra: Value) -> Value {
    let common = json!({
        "session_id": session,
        "transcript_path": home.file(session),
        "cwd": "/home/u/work/demo",
        "hook_event_name": event,
        "timestamp": "2026-12-06T01:45:20.000Z",
    });
    h.hook("gemini", event, merged(common, extra)).await
}

async fn before_agent(h: &Harness, home: &GeminiHome, session: &str, prompt: &str) -> Value {
    hook(h, home, session, "BeforeAgent", json!({ "prompt": prompt })).await
}

async fn after_tool(h: &Harness, home: &GeminiHome, session: &str) -> Value {
    let tool = json!({ "tool_name": "run_shell_command", "tool_input": {"command": "echo ok"},
                       "tool_response": {"llmContent": "ok", "returnDisplay": "ok"} });
    hook(h, home, session, "AfterTool", tool).await
}

fn human_events(h: &Harness, session: &str) -> usize {
    h.human_events(&key(session))
}

/// Both sessions started (adopted by SessionStart), the manager watching the worker.
async fn manager_and_worker(h: &Harness, home: &GeminiHome) {
    home.write_worker(1, 2);
    home.write_manager();
    for s in [MANAGER, WORKER] {
        let started = hook(h, home, s, "SessionStart", json!({ "source": "startup" })).await;
        assert_eq!(started["sessionKey"], key(s));
    }
    h.send_and_watch(&key(MANAGER), &key(WORKER), "take the parser").await;
}

#[tokio::test]
async fn a_prompt_seen_by_before_agent_and_the_monitor_is_one_human_turn_and_reaches_the_manager_once() {
    let h = Harness::start().await;
    let home = GeminiHome::new(&h);
    manager_and_worker(&h, &home).await;

    // Turn one: BeforeAgent runs before the CLI writes the row.
    let typed = before_agent(&h, &home, WORKER, &home.prompt_of(3)).await;
    assert_eq!(typed["recorded"], true, "{typed}");
    assert_eq!(human_events(&h, WORKER), 1);
    home.write_worker(3, 6);
    h.tick().await;
    assert_eq!(human_events(&h, WORKER), 1, "the monitor read the same turn");

    // A resume (new header, history replayed) and the third turn, with a tool call.
    home.write_worker(7, 10);
    let third = before_agent(&h, &home, WORKER, &home.prompt_of(11)).await;
    assert_eq!(third["recorded"], true, "{third}");
    home.write_worker(11, home.rows.len());
    h.tick().await;
    h.tick().await;
    assert_eq!(human_events(&h, WORKER), 2, "two typed turns, each once");

    // The manager: SessionStart never carries the notice (a resume would drop that prompt) ...
    let restarted = hook(&h, &home, MANAGER, "SessionStart", json!({ "source": "resume" })).await;
    assert_eq!(restarted["additionalContext"], Value::Null, "{restarted}");
    // ... its next prompt does, once.
    let next = before_agent(&h, &home, MANAGER, "how is it going?").await;
    let context = next["additionalContext"].as_str().expect("the notice is in the manager's prompt");
    assert!(context.contains(&format!("Session \"{}\" changed (other actor)", key(WORKER))), "{context}");
    assert_eq!(after_tool(&h, &home, MANAGER).await["additionalContext"], Value::Null, "delivered once");
}

#[tokio::test]
async fn after_tool_delivers_mid_turn_and_session_end_idles() {
    let h = Harness::start().await;
    let home = GeminiHome::new(&h);
    manager_and_worker(&h, &home).await;
    assert_eq!(after_tool(&h, &home, WORKER).await["additionalContext"], Value::Null, "nothing pending");
    before_agent(&h, &home, WORKER, "stop, wrong branch").await;
    let mid = after_tool(&h, &home, MANAGER).await;
    assert!(mid["additionalContext"].as_str().unwrap().contains(&key(WORKER)), "{mid}");
    hook(&h, &home, MANAGER, "SessionEnd", json!({ "reason": "exit" })).await;
    let db = rusqlite::Connection::open(h.dir.path().join("sessionwatch.db")).unwrap();
    let state: Option<String> = db
        .query_row("SELECT native_state FROM sessions WHERE session_key = ?1", [key(MANAGER)], |r| r.get(0))
        .unwrap();
    assert_eq!(state.as_deref(), Some("idle"));
}

#[tokio::test]
async fn a_prompt_sessionwatch_delivered_is_not_a_human_turn() {
    let h = Harness::start().await;
    let home = GeminiHome::new(&h);
    manager_and_worker(&h, &home).await;
    let echo = before_agent(&h, &home, WORKER, "take the parser").await;
    assert_eq!(echo["recorded"], false, "the manager's sessions_send text: {echo}");
    assert_eq!(human_events(&h, WORKER), 0);
    assert_eq!(before_agent(&h, &home, MANAGER, "status?").await["additionalContext"], Value::Null);
}

#[tokio::test]
async fn claude_events_are_refused_for_gemini_and_change_nothing() {
    let h = Harness::start().await;
    let home = GeminiHome::new(&h);
    home.write_worker(1, 2);
    let input = json!({ "session_id": WORKER, "transcript_path": home.file(WORKER), "prompt": "x" });
    let r =
        h.post("/v1/hooks", json!({ "cli": "gemini", "event": "UserPromptSubmit", "input": input })).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let db = rusqlite::Connection::open(h.dir.path().join("sessionwatch.db")).unwrap();
    let n: i64 = db
        .query_row("SELECT COUNT(*) FROM sessions WHERE session_key = ?1", [key(WORKER)], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0, "no session was made");
}
