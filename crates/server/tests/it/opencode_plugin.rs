//! OpenCode's sessionwatch plugin (`POST /v1/hooks` with `"cli": "opencode"`): adoption at the first
//! event from the database the plugin names, TUI prompts recorded once with the file monitor, prompts of
//! another program or of a sub-agent left alone, and notices in the prompt and after a tool.

use crate::support::*;
use serde_json::{Value, json};

const MANAGER: &str = "ses_manager000000000000001";
const WORKER: &str = "ses_worker0000000000000001";
const TUI: [&str; 2] = ["bun", "/$bunfs/root/src/cli/tui/worker.js"];
const RUN: [&str; 4] = ["/usr/bin/opencode", "run", "--format", "json"];

fn key(session: &str) -> String {
    format!("agent:main:opencode:{session}")
}

struct OpenCodeDb {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl OpenCodeDb {
    fn new() -> OpenCodeDb {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opencode.db");
        // The tables of OpenCode 1.18's database the monitor reads, and the two sessions.
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE session (id TEXT PRIMARY KEY, parent_id TEXT, directory TEXT, title TEXT,
                time_updated INTEGER);
             CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
                time_updated INTEGER NOT NULL, data TEXT NOT NULL);
             CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
                time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
             CREATE TABLE event_sequence (aggregate_id TEXT PRIMARY KEY, seq INTEGER NOT NULL);",
        )
        .unwrap();
        for s in [MANAGER, WORKER] {
            c.execute("INSERT INTO session VALUES (?1, NULL, '/home/u/work/demo', 'demo', 1)", [s]).unwrap();
            c.execute("INSERT INTO event_sequence VALUES (?1, 1)", [s]).unwrap();
        }
        OpenCodeDb { _dir: dir, path }
    }

    /// What OpenCode stores for a prompt once its reply started: the message, its part, a reply.
    fn store_turn(&self, session: &str, message: &str, text: &str) {
        let c = rusqlite::Connection::open(&self.path).unwrap();
        let user = json!({"role": "user", "time": {"created": 2000}});
        c.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, 2000, 2000, ?3)",
            rusqlite::params![message, session, user.to_string()],
        )
        .unwrap();
        c.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, 1, 1, ?4)",
            rusqlite::params![format!("prt_{message}"), message, session, json!({"type": "text", "text": text}).to_string()],
        )
        .unwrap();
        c.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, 2001, 2001, ?3)",
            rusqlite::params![format!("{message}z"), session, json!({"role": "assistant"}).to_string()],
        )
        .unwrap();
        c.execute("UPDATE event_sequence SET seq = seq + 3 WHERE aggregate_id = ?1", [session]).unwrap();
    }
}

fn common(db: &OpenCodeDb, session: &str, argv: &[&str]) -> Value {
    json!({ "sessionID": session, "argv": argv, "directory": "/home/u/work/demo", "db": db.path })
}

async fn chat(
    h: &Harness,
    db: &OpenCodeDb,
    session: &str,
    argv: &[&str],
    message: &str,
    text: &str,
) -> Value {
    let mut input = common(db, session, argv);
    input["message"] =
        json!({ "id": message, "role": "user", "sessionID": session, "time": { "created": 2000 } });
    input["parts"] = json!([{ "id": format!("prt_{message}"), "type": "text", "text": text }]);
    h.hook("opencode", "chat.message", input).await
}

async fn tool(h: &Harness, db: &OpenCodeDb, session: &str) -> Value {
    let mut input = common(db, session, &RUN);
    input["tool"] = json!("bash");
    input["callID"] = json!("call_1");
    h.hook("opencode", "tool.execute.after", input).await
}

fn human_events(h: &Harness, session: &str) -> usize {
    h.human_events(&key(session))
}

/// The OpenCode database the session's upstream link reads.
fn linked_db(h: &Harness, session: &str) -> Option<String> {
    let db = rusqlite::Connection::open(h.dir.path().join("sessionwatch.db")).unwrap();
    let reference: String = db
        .query_row(
            "SELECT upstream_ref_json FROM session_upstream_links WHERE session_key = ?1",
            [key(session)],
            |r| r.get(0),
        )
        .ok()?;
    serde_json::from_str::<Value>(&reference).ok()?["dbPath"].as_str().map(str::to_string)
}

#[tokio::test]
async fn the_plugin_adopts_records_tui_prompts_once_and_delivers_notices() {
    let h = Harness::start().await;
    let db = OpenCodeDb::new();
    // First events: `opencode run` prompts adopt both sessions and are not recorded at once.
    for s in [MANAGER, WORKER] {
        let first = chat(&h, &db, s, &RUN, &format!("msg_{s}_1"), "hello").await;
        assert_eq!(first["sessionKey"], key(s));
        assert_eq!(first["recorded"], false, "another program's prompt is the monitor's");
    }
    assert_eq!(
        linked_db(&h, WORKER).as_deref(),
        Some(db.path.to_str().unwrap()),
        "linked like catalog continue"
    );
    h.send_and_watch(&key(MANAGER), &key(WORKER), "take the parser").await;

    // Typed into the worker's TUI: one human turn at once, and the monitor reading the stored message adds none.
    let typed = chat(&h, &db, WORKER, &TUI, "msg_worker_2", "use the new grammar").await;
    assert_eq!(typed["recorded"], true);
    db.store_turn(WORKER, "msg_worker_2", "use the new grammar");
    h.tick().await;
    assert_eq!(human_events(&h, WORKER), 1, "hook + monitor: one event");
    // Our own delivered text typed into the TUI is no human turn.
    assert_eq!(chat(&h, &db, WORKER, &TUI, "msg_worker_3", "take the parser").await["recorded"], false);

    // The manager's next prompt gets the notice once; its tool call after that gets nothing.
    let next = chat(&h, &db, MANAGER, &TUI, "msg_manager_2", "how is it going?").await;
    let context = next["additionalContext"].as_str().expect("the notice");
    assert!(context.contains(&format!("Session \"{}\" changed", key(WORKER))), "{context}");
    assert_eq!(tool(&h, &db, MANAGER).await["additionalContext"], Value::Null, "delivered once");
    // A change during a tool call comes back after that tool.
    chat(&h, &db, WORKER, &TUI, "msg_worker_4", "stop, wrong branch").await;
    assert!(tool(&h, &db, MANAGER).await["additionalContext"].as_str().unwrap().contains(&key(WORKER)));
}

#[tokio::test]
async fn a_sub_agents_session_is_left_alone() {
    let h = Harness::start().await;
    let db = OpenCodeDb::new();
    let mut input = common(&db, "ses_child00000000000000001", &TUI);
    input["messageID"] = json!("msg_parent_task");
    input["message"] = json!({ "id": "msg_child_1", "role": "user" });
    input["parts"] = json!([{ "type": "text", "text": "Find the parser" }]);
    let r = h.hook("opencode", "chat.message", input).await;
    assert_eq!(r["recorded"], false);
    let sessions = h.request(reqwest::Method::GET, "/v1/sessions", None).await.body;
    assert!(!sessions.to_string().contains("ses_child"), "not adopted: {sessions}");
    assert_eq!(linked_db(&h, "ses_child00000000000000001"), None);
}

#[tokio::test]
async fn bad_plugin_posts_are_refused() {
    let h = Harness::start().await;
    let r = h.post("/v1/hooks", json!({ "cli": "opencode", "event": "session.idle", "input": {} })).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = h
        .post(
            "/v1/hooks",
            json!({ "cli": "opencode", "event": "chat.message", "input": { "sessionID": "ses_x" } }),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.to_string().contains("argv"), "{}", r.body);
}
