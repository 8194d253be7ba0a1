//! OpenCode rules on synthetic databases.

use serde_json::{Value, json};
use sessionwatch_upstream::{CatalogId, CheckOutcome, Probe, check, check_opencode_batch};

const S: &str = "ses_test";

/// OpenCode's tables (as of 1.18) holding one empty session `S`.
fn create_opencode_schema(conn: &rusqlite::Connection) {
    conn.execute_batch(
        "PRAGMA journal_mode=WAL;
         CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, slug TEXT, directory TEXT,
            title TEXT, version TEXT, time_created INTEGER, time_updated INTEGER, time_archived INTEGER);
         CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
            time_updated INTEGER NOT NULL, data TEXT NOT NULL);
         CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
         CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
            time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
         CREATE INDEX part_message_id_id_idx ON part (message_id, id);
         CREATE INDEX part_session_idx ON part (session_id);
         CREATE TABLE event_sequence (aggregate_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, owner_id TEXT);",
    )
    .unwrap();
    conn.execute(
        "INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated)
         VALUES (?1, 'prj', 'test', '/test', 'test session', '1.18.33', 1, 2)",
        [S],
    )
    .unwrap();
    conn.execute("INSERT INTO event_sequence (aggregate_id, seq) VALUES (?1, 0)", [S]).unwrap();
}

struct Db {
    _d: tempfile::TempDir,
    path: std::path::PathBuf,
    conn: rusqlite::Connection,
    n: usize,
    seq: i64,
}

impl Db {
    fn new() -> Db {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("opencode.db");
        let conn = rusqlite::Connection::open(&path).unwrap();
        create_opencode_schema(&conn);
        Db { _d: d, path, conn, n: 0, seq: 0 }
    }
    fn msg(&mut self, role: &str, parts: Vec<Value>) -> String {
        self.n += 1;
        let id = format!("msg_{:06}", self.n);
        let created = 1_775_121_600_000i64 + self.n as i64;
        self.conn
            .execute(
                "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
                rusqlite::params![id, S, created, json!({"role": role, "time": {"created": created}}).to_string()],
            )
            .unwrap();
        for (i, p) in parts.iter().enumerate() {
            self.conn
                .execute(
                    "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, 1, 1, ?4)",
                    rusqlite::params![format!("prt_{:06}_{i}", self.n), id, S, p.to_string()],
                )
                .unwrap();
        }
        self.seq += 1;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO event_sequence (aggregate_id, seq) VALUES (?1, ?2)",
                rusqlite::params![S, self.seq],
            )
            .unwrap();
        id
    }
    fn text(&mut self, t: &str) -> String {
        self.msg("user", vec![json!({"type":"text","text":t})])
    }
    /// A user message and the reply that follows it (once the reply exists, the message is complete).
    fn turn(&mut self, t: &str) -> String {
        let id = self.text(t);
        self.msg("assistant", vec![json!({"type":"text","text":"reply"})]);
        id
    }
    fn reference(&self) -> String {
        json!({"dbPath": self.path.to_string_lossy(), "threadId": S}).to_string()
    }
    fn run(&self, marker: &str, own: &[String]) -> (u32, String) {
        let r = self.reference();
        let p = Probe { reference_json: &r, marker_json: marker, own_recent_user_texts: own };
        match check(CatalogId::OpenCode, &p) {
            CheckOutcome::Activity { human_turns, next_marker_json, .. } => (human_turns, next_marker_json),
            CheckOutcome::NoChange => (0, marker.to_string()),
            o => panic!("{o:?}"),
        }
    }
}

const START: &str = r#"{"seq":0,"lastHumanMessageId":null}"#;

/// Each kind of user message as OpenCode 1.18 writes it (the real shapes: `tests/fixtures/opencode-cases`).
#[test]
fn what_counts_as_a_human_turn() {
    let mut db = Db::new();
    let cases: Vec<(&str, Vec<Value>, bool)> = vec![
        ("plain", vec![json!({"type":"text","text":"a plain prompt"})], true),
        (
            "mention kept text",
            vec![
                json!({"type":"text","text":"explain @src/pay.ts please"}),
                json!({"type":"file","mime":"text/plain","filename":"pay.ts","url":"file:///x","source":{"type":"file","path":"src/pay.ts","text":{"value":"@src/pay.ts","start":8,"end":19}}}),
            ],
            true,
        ),
        (
            "@file only",
            vec![
                json!({"type":"text","text":"@src/pay.ts "}),
                json!({"type":"text","text":"Called the Read tool with the following input: {}","synthetic":true}),
                json!({"type":"file","mime":"text/plain","filename":"pay.ts","url":"file:///x","source":{"type":"file","path":"src/pay.ts","text":{"value":"@src/pay.ts","start":0,"end":11}}}),
            ],
            true,
        ),
        (
            "image only",
            vec![
                json!({"type":"file","mime":"image/png","filename":"a.png","url":"data:image/png;base64,AAAA"}),
            ],
            true,
        ),
        ("synthetic", vec![json!({"type":"text","text":"Called the Read tool","synthetic":true})], false),
        ("ignored", vec![json!({"type":"text","text":"audience note","ignored":true})], false),
        ("automatic compaction", vec![json!({"type":"compaction","auto":true})], false),
        ("manual /compact", vec![json!({"type":"compaction","auto":false})], true),
        (
            "compaction continue",
            vec![
                json!({"type":"text","text":"Continue if you have next steps, or stop and ask for clarification.","synthetic":true,"metadata":{"compaction_continue":true}}),
            ],
            false,
        ),
        (
            "slash command to sub-agent",
            vec![
                json!({"type":"subtask","prompt":"Review this: the code","description":"review","agent":"general","command":"review"}),
            ],
            true,
        ),
        (
            "!shell escape",
            vec![
                json!({"type":"text","text":"The following tool was executed by the user","synthetic":true}),
            ],
            true,
        ),
        (
            "synthetic file only",
            vec![
                json!({"type":"file","mime":"text/plain","filename":"x","url":"file:///x","synthetic":true}),
            ],
            false,
        ),
    ];
    for (name, parts, want) in cases {
        let before = db.run(START, &[]).1;
        db.msg("user", parts);
        db.msg("assistant", vec![json!({"type":"text","text":"reply"})]);
        let (n, _) = db.run(&before, &[]);
        assert_eq!(n, u32::from(want), "{name}");
    }
}

/// A message is classified once complete: the same answer whether a tick lands between its parts.
#[test]
fn a_message_waits_until_its_reply_starts() {
    let mut db = Db::new();
    let (_, m) = db.run(START, &[]);
    let id = db.msg("user", vec![json!({"type":"text","text":"@notes.txt "})]);
    let (n, pending) = db.run(&m, &[]);
    assert_eq!(n, 0, "only the mention's text so far: not classified yet");
    db.conn
        .execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES ('prt_late', ?1, ?2, 1, 1, ?3)",
            rusqlite::params![id, S, json!({"type":"file","mime":"text/plain","filename":"notes.txt","url":"file:///n","source":{"text":{"value":"@notes.txt","start":0,"end":10}}}).to_string()],
        )
        .unwrap();
    db.msg("assistant", vec![json!({"type":"text","text":"reply"})]);
    let (n, _) = db.run(&pending, &[]);
    assert_eq!(n, 1, "counted once, when complete");
}

#[test]
fn a_repeated_text_is_a_replay_only_after_a_compaction() {
    let mut db = Db::new();
    db.turn("repeat me");
    db.turn("something else");
    let (n, m) = db.run(START, &[]);
    assert_eq!(n, 2);
    db.turn("repeat   me");
    let (n, m) = db.run(&m, &[]);
    assert_eq!(n, 1, "a human repeating words is a turn");
    // OpenCode compacts on its own and re-sends the prompt: a replay.
    db.msg("user", vec![json!({"type":"compaction","auto":true})]);
    let summary = db.msg("assistant", vec![json!({"type":"text","text":"<summary>…</summary>"})]);
    db.conn
        .execute(
            "UPDATE message SET data = json_set(data, '$.summary', json('true')) WHERE id = ?1",
            [summary],
        )
        .unwrap();
    db.turn("repeat me");
    let (n, m) = db.run(&m, &[]);
    assert_eq!(n, 0, "replayed after the compaction");
    db.turn("from the gateway");
    let (n, m) = db.run(&m, &["from  the gateway".to_string()]);
    assert_eq!(n, 0, "our own text");
    // Unchanged sequence: no read.
    let r = db.reference();
    let p = Probe { reference_json: &r, marker_json: &m, own_recent_user_texts: &[] };
    assert_eq!(check(CatalogId::OpenCode, &p), CheckOutcome::NoChange);
}

#[test]
fn sequence_reset_rebaselines_and_deleted_row_is_missing() {
    let mut db = Db::new();
    db.turn("one");
    let (_, m) = db.run(START, &[]);
    db.conn.execute("UPDATE event_sequence SET seq = 0", []).unwrap();
    db.turn("two");
    db.conn.execute("UPDATE event_sequence SET seq = 0", []).unwrap();
    let (n, m2) = db.run(&m, &[]);
    assert_eq!(n, 0);
    let v: Value = serde_json::from_str(&m2).unwrap();
    assert_eq!(v["seq"], 0);
    assert_eq!(v["lastHumanMessageId"], "msg_000001");
    // Batch: one missing, one present, one with a bad reference.
    let other = json!({"dbPath": db.path.to_string_lossy(), "threadId": "ses_gone"}).to_string();
    let r = db.reference();
    let probes = [
        Probe { reference_json: &r, marker_json: &m2, own_recent_user_texts: &[] },
        Probe { reference_json: &other, marker_json: START, own_recent_user_texts: &[] },
        Probe { reference_json: "{}", marker_json: START, own_recent_user_texts: &[] },
    ];
    let out = check_opencode_batch(&db.path, &probes);
    assert_eq!(out[0], CheckOutcome::NoChange);
    assert_eq!(out[1], CheckOutcome::Missing);
    assert!(matches!(out[2], CheckOutcome::Inconclusive(_)));
    db.conn.execute("DELETE FROM session WHERE id = ?1", [S]).unwrap();
    assert_eq!(check_opencode_batch(&db.path, &probes[..1])[0], CheckOutcome::Missing);
}

#[test]
fn v2_session_message_rows_are_used_when_present() {
    let db = Db::new();
    db.conn
        .execute_batch(
            "CREATE TABLE session_message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, type TEXT NOT NULL, seq INTEGER NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);",
        )
        .unwrap();
    let rows = [
        ("msg_20", "synthetic", 7, json!({"text":"<system-reminder>plan mode is active</system-reminder>"})),
        ("msg_21", "user", 8, json!({"text":"ship it","files":[],"agents":[]})),
        ("msg_22", "compaction", 9, json!({"summary":"x"})),
    ];
    for (id, ty, seq, data) in rows {
        db.conn
            .execute(
                "INSERT INTO session_message VALUES (?1, ?2, ?3, ?4, 1775125260000, 1775125260000, ?5)",
                rusqlite::params![id, S, ty, seq, data.to_string()],
            )
            .unwrap();
    }
    db.conn.execute("INSERT OR REPLACE INTO event_sequence (aggregate_id, seq) VALUES (?1, 9)", [S]).unwrap();
    let (n, m) = db.run(START, &[]);
    assert_eq!(n, 1);
    let v: Value = serde_json::from_str(&m).unwrap();
    assert_eq!(v["v2Seq"], 9);
}

#[test]
fn database_is_opened_read_only() {
    let mut db = Db::new();
    db.text("hello");
    let before = std::fs::read(&db.path).unwrap();
    let _ = db.run(START, &[]);
    // The monitor never writes (no schema change, no WAL checkpoint of its own).
    let conn = sessionwatch_upstream::opencode::open_ro(&db.path).unwrap();
    assert!(conn.execute("INSERT INTO session (id) VALUES ('x')", []).is_err());
    assert_eq!(before.len(), std::fs::read(&db.path).unwrap().len());
}

/// Issue 38: a prompt that got a notice from the sessionwatch plugin is one message with the typed text
/// part and a synthetic one after it. The monitor counts the typed part as the human's prompt (not the
/// whole message as synthetic) and reports the message id as the turn id, the one the plugin reported.
#[test]
fn a_prompt_with_the_plugins_synthetic_notice_is_a_human_turn_keyed_by_its_message_id() {
    let mut db = Db::new();
    let id = db.msg(
        "user",
        vec![
            json!({"type": "text", "text": "Human: use the new grammar."}),
            json!({"type": "text", "synthetic": true, "text": "sessionwatch: sessions you depend on changed"}),
        ],
    );
    db.msg("assistant", vec![json!({"type": "text", "text": "reply"})]);
    let r = db.reference();
    let p = Probe { reference_json: &r, marker_json: START, own_recent_user_texts: &[] };
    match check(CatalogId::OpenCode, &p) {
        CheckOutcome::Activity { human_turns, turn_id, .. } => {
            assert_eq!(human_turns, 1);
            assert_eq!(turn_id.as_deref(), Some(id.as_str()));
        }
        o => panic!("{o:?}"),
    }
    // Our own delivered text typed into the session is no human turn, notice part or not.
    let own = vec!["Human: use the new grammar.".to_string()];
    assert_eq!(db.run(START, &own).0, 0);
}
