//! Pi rules on synthetic session files, including legacy files and in-place migration.

use crate::common::*;
use serde_json::{Value, json};
use sessionwatch_upstream::{CatalogId, CheckOutcome, Homes, Probe, adopt, check};

fn user(id: &str, text: &str) -> String {
    format!(
        "{}\n",
        json!({"type":"message","id":id,"parentId":null,"timestamp":"2026-04-02T09:30:05.000Z","message":{"role":"user","content":[{"type":"text","text":text}],"timestamp":1775122205000u64}})
    )
}

const DOC: &str = r#"{"type":"session","version":3,"id":"8d3e1c52-6a1f-4c7e-9f10-2b3c4d5e6f70","timestamp":"2026-04-02T09:30:00.123Z","cwd":"/home/dev/shop"}
{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-04-02T09:30:05.000Z","message":{"role":"user","content":[{"type":"text","text":"rename Cart to Basket everywhere"}],"timestamp":1775122205000}}
{"type":"message","id":"b2c3d4e5","parentId":"a1b2c3d4","timestamp":"2026-04-02T09:30:09.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"tc_1","name":"bash","arguments":{"command":"rg -l Cart"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":900,"output":40,"cacheRead":0,"cacheWrite":0,"totalTokens":940,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":1775122209000}}
{"type":"message","id":"c3d4e5f6","parentId":"b2c3d4e5","timestamp":"2026-04-02T09:30:10.000Z","message":{"role":"toolResult","toolCallId":"tc_1","toolName":"bash","content":[{"type":"text","text":"src/cart.ts"}],"isError":false,"timestamp":1775122210000}}
{"type":"custom_message","id":"d4e5f6a7","parentId":"c3d4e5f6","timestamp":"2026-04-02T09:31:00.000Z","customType":"todo-reminder","content":"Remember to update the tests.","display":false}
{"type":"compaction","id":"e5f6a7b8","parentId":"d4e5f6a7","timestamp":"2026-04-02T10:10:00.000Z","summary":"User asked to rename Cart to Basket; files found: src/cart.ts.","firstKeptEntryId":"c3d4e5f6","tokensBefore":152000}
"#;

const START: &str = r#"{"offset":0,"humans":0}"#;

fn write(content: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join(".pi/agent/sessions/--home-dev-shop--");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("2026-04-02T09-30-00-123Z_8d3e1c52-6a1f-4c7e-9f10-2b3c4d5e6f70.jsonl");
    std::fs::write(&p, content).unwrap();
    (d, p)
}

#[test]
fn doc_fixture_only_the_typed_prompt() {
    let (_d, p) = write(DOC.as_bytes());
    let (n, m, _) = drain(CatalogId::Pi, &file_ref(&p), START, &[]);
    assert_eq!((n, offset_of(&m)), (1, DOC.len() as u64));
    assert_eq!(drain(CatalogId::Pi, &file_ref(&p), START, &own(&["rename Cart to Basket everywhere"])).0, 0);
}

#[test]
fn stops_at_first_non_object_row() {
    let mut s = String::from(DOC);
    let before = s.len() as u64;
    s.push_str("[1,2,3]\n");
    s.push_str(&user("z1", "after the array"));
    let (_d, p) = write(s.as_bytes());
    let (n, m, _) = drain(CatalogId::Pi, &file_ref(&p), START, &[]);
    assert_eq!((n, offset_of(&m)), (1, before));
    // Invalid JSON and invalid UTF-8 rows stop it too.
    let mut b = DOC.as_bytes().to_vec();
    b.extend_from_slice(b"{\"type\":\"message\",\"x\":\"\xff\"}\n");
    b.extend_from_slice(user("z2", "never reached").as_bytes());
    let (_d2, p2) = write(&b);
    let (n, m, _) = drain(CatalogId::Pi, &file_ref(&p2), START, &[]);
    assert_eq!((n, offset_of(&m)), (1, DOC.len() as u64));
}

#[test]
fn legacy_file_is_adoptable_and_survives_in_place_migration() {
    // v1: no version, no ids.
    let v1_header = format!(
        "{}\n",
        json!({"type":"session","id":"8d3e1c52-6a1f-4c7e-9f10-2b3c4d5e6f70","timestamp":"2026-04-02T09:30:00.123Z","cwd":"/home/dev/shop"})
    );
    let v1_user = |t: &str| {
        format!(
            "{}\n",
            json!({"type":"message","timestamp":"2026-04-02T09:30:05.000Z","message":{"role":"user","content":t,"timestamp":1775122205000u64}})
        )
    };
    let content = format!("{v1_header}{}{}", v1_user("old one"), v1_user("old two"));
    let (d, p) = write(content.as_bytes());
    let homes = Homes::with_home(d.path());
    let a = adopt(&homes, CatalogId::Pi, "8d3e1c52-6a1f-4c7e-9f10-2b3c4d5e6f70").unwrap();
    let m: Value = serde_json::from_str(&a.link.marker_json).unwrap();
    assert_eq!(m["humans"], 2);
    let r = &a.link.reference_json;
    // Appended to the legacy file: seen.
    append(&p, &v1_user("new in v1"));
    let (n, marker, _) = drain(CatalogId::Pi, r, &a.link.marker_json, &[]);
    assert_eq!(n, 1);
    // Pi opens it: migrates to v3 and rewrites the whole file (longer), then a prompt arrives.
    let v3 = format!(
        "{}\n{}{}{}{}",
        json!({"type":"session","version":3,"id":"8d3e1c52-6a1f-4c7e-9f10-2b3c4d5e6f70","timestamp":"2026-04-02T09:30:00.123Z","cwd":"/home/dev/shop"}),
        user("aaaaaaaa", "old one"),
        user("bbbbbbbb", "old two"),
        user("cccccccc", "new in v1"),
        user("dddddddd", "typed after the migration"),
    );
    std::fs::write(&p, v3).unwrap();
    let (n, _, _) = drain(CatalogId::Pi, r, &marker, &[]);
    assert_eq!(n, 1, "only the prompt after the migration is new");
}

#[test]
fn oversized_prompt_and_truncated_tail() {
    let huge = "x y ".repeat(400_000);
    let mut s = String::from(DOC);
    s.push_str(&user("big", &huge));
    let (_d, p) = write(s.as_bytes());
    append(&p, &user("tail", "partial")[..20]);
    let r = file_ref(&p);
    let (n, m, _) = drain(CatalogId::Pi, &r, START, &[]);
    assert_eq!((n, offset_of(&m)), (2, s.len() as u64));
    let probe = Probe { reference_json: &r, marker_json: &m, own_recent_user_texts: &[] };
    assert_eq!(check(CatalogId::Pi, &probe), CheckOutcome::NoChange);
}

/// `!cmd` in Pi is a `bashExecution` message (`!!cmd` the same, kept out of the model's context): the
/// human acted in the session, a human turn as in Claude Code (`<bash-input>`) and OpenCode.
#[test]
fn a_shell_escape_is_a_human_turn() {
    let mut s = String::from(DOC);
    for (id, exclude) in [("s1", false), ("s2", true)] {
        s.push_str(&format!(
            "{}\n",
            json!({"type":"message","id":id,"parentId":null,"timestamp":"2026-04-02T10:20:00.000Z",
                "message":{"role":"bashExecution","command":"ls","output":"src\n","exitCode":0,"cancelled":false,
                "truncated":false,"excludeFromContext":exclude,"timestamp":1775125200000u64}})
        ));
    }
    let (_d, p) = write(s.as_bytes());
    let (n, _, _) = drain(CatalogId::Pi, &file_ref(&p), START, &[]);
    assert_eq!(n, 3, "the typed prompt and both shell escapes");
}

/// The Pi extension records a typed prompt with the user message's `timestamp` as its turn id; the
/// monitor reads the same number from the row (`message.timestamp`), so both derive one dedupe key.
#[test]
fn the_turn_id_is_the_user_messages_timestamp_as_the_extension_sends_it() {
    let (_d, p) = write(DOC.as_bytes());
    let CheckOutcome::Activity { human_turns, turn_id, .. } = check(
        CatalogId::Pi,
        &Probe { reference_json: &file_ref(&p), marker_json: START, own_recent_user_texts: &[] },
    ) else {
        panic!("activity expected")
    };
    assert_eq!((human_turns, turn_id.as_deref()), (1, Some("1775122205000")));
    let row: Value = serde_json::from_str(DOC.lines().nth(1).unwrap()).unwrap();
    assert_eq!(sessionwatch_upstream::pi::turn_id(&row).as_deref(), Some("1775122205000"));
    let no_time = json!({"type":"message","message":{"role":"user","content":"x"}});
    assert_eq!(sessionwatch_upstream::pi::turn_id(&no_time), None, "no timestamp: the offset key stays");
}

/// The extension names the session's file: adopted from it, at its end, only for its own id.
#[test]
fn the_extension_adopts_the_file_it_names() {
    let (_d, p) = write(DOC.as_bytes());
    let id = "8d3e1c52-6a1f-4c7e-9f10-2b3c4d5e6f70";
    let a = sessionwatch_upstream::adopt_transcript(CatalogId::Pi, id, &p).unwrap();
    assert_eq!(a.entry.thread_id, id);
    assert_eq!(offset_of(&a.link.marker_json), DOC.len() as u64, "the baseline is the file's end");
    assert!(sessionwatch_upstream::adopt_transcript(CatalogId::Pi, "another-id", &p).is_err());
}
