//! Real OpenCode 1.18.33 stores, one per case (`tests/fixtures/opencode-cases/`, made by
//! `make-cases.sh` with the agents kit against the fake model), scored as the store grows: the rows are
//! written again one at a time into a copy, in the order OpenCode wrote them, with a tick after each
//! row, and again one bus event at a time as OpenCode's own `event` table recorded them (a message or a
//! part as it was at that moment: a tool part running before it completed, a message before its parts).
//! Every human turn is found once, nothing else is, and the answer does not depend on where the ticks
//! land.

use sessionwatch_upstream::{CatalogId, CheckOutcome, Probe, check};
use std::path::{Path, PathBuf};

fn case_db(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencode-cases").join(case).join("opencode.db")
}

/// One row of the session as OpenCode wrote it: a message, or a part of one.
enum Row {
    Message(String, i64, String),
    Part(String, String, String),
}

/// The case's top-level session and its rows in writing order (a message, then its parts).
fn rows(conn: &rusqlite::Connection) -> (String, Vec<Row>) {
    let session: String = conn
        .query_row(
            "SELECT id FROM session WHERE parent_id IS NULL ORDER BY time_created DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut out = vec![];
    let mut msgs = conn
        .prepare("SELECT id, time_created, data FROM message WHERE session_id = ?1 ORDER BY time_created, id")
        .unwrap();
    let msgs: Vec<(String, i64, String)> = msgs
        .query_map([&session], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (id, created, data) in msgs {
        let mut parts = conn.prepare("SELECT id, data FROM part WHERE message_id = ?1 ORDER BY id").unwrap();
        let parts: Vec<(String, String)> =
            parts.query_map([&id], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
        out.push(Row::Message(id.clone(), created, data));
        for (pid, pdata) in parts {
            out.push(Row::Part(pid, id.clone(), pdata));
        }
    }
    (session, out)
}

/// Human turns found when ticking after every `every` rows (and once at the end).
fn score(case: &str, every: usize) -> u32 {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opencode.db");
    std::fs::copy(case_db(case), &db).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (session, rows) = rows(&conn);
    conn.execute("DELETE FROM part WHERE session_id = ?1", [&session]).unwrap();
    conn.execute("DELETE FROM message WHERE session_id = ?1", [&session]).unwrap();
    conn.execute(
        "INSERT OR REPLACE INTO event_sequence (aggregate_id, seq, owner_id) VALUES (?1, 1, NULL)",
        [&session],
    )
    .unwrap();
    let reference = serde_json::json!({ "dbPath": db.to_string_lossy(), "threadId": session }).to_string();
    let mut marker = r#"{"seq":1,"lastHumanMessageId":null}"#.to_string();
    let mut found = 0;
    let mut tick = |marker: &mut String| {
        let probe = Probe { reference_json: &reference, marker_json: marker, own_recent_user_texts: &[] };
        match check(CatalogId::OpenCode, &probe) {
            CheckOutcome::Activity { human_turns, next_marker_json, .. } => {
                found += human_turns;
                *marker = next_marker_json;
            }
            CheckOutcome::NoChange => {}
            o => panic!("{case}: {o:?}"),
        }
    };
    for (i, row) in rows.iter().enumerate() {
        match row {
            Row::Message(id, created, data) => conn
                .execute(
                    "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
                    rusqlite::params![id, session, created, data],
                )
                .unwrap(),
            Row::Part(id, message, data) => conn
                .execute(
                    "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, 1, 1, ?4)",
                    rusqlite::params![id, message, session, data],
                )
                .unwrap(),
        };
        conn.execute("UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = ?1", [&session]).unwrap();
        if (i + 1) % every == 0 {
            tick(&mut marker);
        }
    }
    tick(&mut marker);
    found
}

/// Human turns found when the session's bus events (`message.updated`, `message.part.updated`, …) are
/// applied to an emptied copy one at a time, with a tick after each.
fn score_by_events(case: &str) -> u32 {
    score_events_of(&case_db(case), None)
}

/// [`score_by_events`] for one session (default: the newest top-level one) of the store at `source`.
fn score_events_of(source: &Path, session: Option<&str>) -> u32 {
    let case = source.display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opencode.db");
    std::fs::copy(source, &db).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let session = session.map_or_else(|| rows(&conn).0, str::to_string);
    let mut stmt =
        conn.prepare("SELECT seq, type, data FROM event WHERE aggregate_id = ?1 ORDER BY seq").unwrap();
    let events: Vec<(i64, String, String)> = stmt
        .query_map([&session], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    drop(stmt);
    assert!(events.len() > 4, "{case}: the store holds its bus events");
    conn.execute("DELETE FROM part WHERE session_id = ?1", [&session]).unwrap();
    conn.execute("DELETE FROM message WHERE session_id = ?1", [&session]).unwrap();
    conn.execute("UPDATE event_sequence SET seq = 0 WHERE aggregate_id = ?1", [&session]).unwrap();
    let reference = serde_json::json!({ "dbPath": db.to_string_lossy(), "threadId": session }).to_string();
    let mut marker = r#"{"seq":0,"lastHumanMessageId":null}"#.to_string();
    let mut found = 0;
    for (seq, ty, data) in events {
        let data: serde_json::Value = serde_json::from_str(&data).unwrap();
        let strip = |v: &serde_json::Value, keys: &[&str]| {
            let mut v = v.clone();
            for k in keys {
                v.as_object_mut().unwrap().remove(*k);
            }
            v.to_string()
        };
        if ty.starts_with("message.updated") {
            let info = &data["info"];
            let created = info["time"]["created"].as_i64().unwrap_or(0);
            conn.execute(
                "INSERT OR REPLACE INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
                rusqlite::params![info["id"].as_str().unwrap(), session, created, strip(info, &["id", "sessionID"])],
            )
            .unwrap();
        } else if ty.starts_with("message.part.updated") {
            let part = &data["part"];
            conn.execute(
                "INSERT OR REPLACE INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, 1, 1, ?4)",
                rusqlite::params![
                    part["id"].as_str().unwrap(),
                    part["messageID"].as_str().unwrap(),
                    session,
                    strip(part, &["id", "messageID", "sessionID"])
                ],
            )
            .unwrap();
        }
        conn.execute(
            "UPDATE event_sequence SET seq = ?2 WHERE aggregate_id = ?1",
            rusqlite::params![session, seq],
        )
        .unwrap();
        let probe = Probe { reference_json: &reference, marker_json: &marker, own_recent_user_texts: &[] };
        match check(CatalogId::OpenCode, &probe) {
            CheckOutcome::Activity { human_turns, next_marker_json, .. } => {
                found += human_turns;
                marker = next_marker_json;
            }
            CheckOutcome::NoChange => {}
            o => panic!("{case}: {o:?}"),
        }
    }
    found
}

fn check_case(case: &str, human_turns: u32) {
    for every in [1, 2, 3, 1000] {
        assert_eq!(score(case, every), human_turns, "{case}, a tick every {every} rows");
    }
    assert_eq!(score_by_events(case), human_turns, "{case}, a tick after every bus event");
}

#[test]
fn the_ground_truth_sessions_replayed_by_bus_event() {
    // tests/fixtures/opencode: three print-mode turns (the third makes a tool call: its assistant
    // message's tool part goes pending → running → completed) and two typed into the TUI.
    let db = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/opencode/home/.local/share/opencode/opencode.db");
    assert_eq!(score_events_of(&db, Some("ses_dc9e4dc3affePdRCw2Q0xNTOFV")), 3);
    assert_eq!(score_events_of(&db, Some("ses_dc9e48c29ffeenYd5m2nMLeVFi")), 2);
}

#[test]
fn a_human_repeating_words_is_counted() {
    // "same words again", "something else", "same words again": no compaction between.
    check_case("repeat", 3);
}

#[test]
fn a_slash_command_routed_to_a_sub_agent_is_counted() {
    // "first prompt", `/review the code` (a `subtask` part); OpenCode's synthetic follow-up is not.
    check_case("subtask", 2);
}

#[test]
fn an_at_file_only_message_is_counted_once_complete() {
    // "first prompt", then `@notes.txt` picked from the completion list: a text part holding only the
    // mention, two synthetic parts (the file read) and the file part.
    check_case("tui-file", 2);
}

#[test]
fn a_manual_compact_is_counted() {
    // "first prompt", "second prompt", `/compact` (`compaction` part, `auto: false`).
    check_case("tui-compact", 3);
}

#[test]
fn a_shell_escape_is_counted() {
    // "first prompt", `!ls` (OpenCode's synthetic "executed by the user" marker and a bash call).
    check_case("tui-shell", 2);
}
