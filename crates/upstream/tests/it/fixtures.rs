//! Classification over the real session stores written by the real CLIs (ground truth in
//! tests/fixtures/README.md).

use crate::common::*;
use serde_json::{Value, json};
use sessionwatch_upstream::{Adoption, CatalogId, CheckOutcome, Probe, adopt, check, discover};
use std::path::Path;

struct Case {
    cli: &'static str,
    cat: CatalogId,
    print: &'static str,
    tui: &'static str,
}

const CASES: [Case; 4] = [
    Case {
        cli: "claude",
        cat: CatalogId::Claude,
        print: "dabdface-a74f-47e7-a565-02a8eb260f31",
        tui: "5ae04bcf-dcae-4d38-b508-e94477a366c6",
    },
    Case {
        cli: "codex",
        cat: CatalogId::Codex,
        print: "01a2361a-df64-7aa1-a8f6-d12f148e569f",
        tui: "01a2361a-e5e2-70d2-8b99-d92b15fbab55",
    },
    Case {
        cli: "opencode",
        cat: CatalogId::OpenCode,
        print: "ses_dc9e4dc3affePdRCw2Q0xNTOFV",
        tui: "ses_dc9e48c29ffeenYd5m2nMLeVFi",
    },
    Case {
        cli: "pi",
        cat: CatalogId::Pi,
        print: "01a2361b-d39f-759d-9272-bf2c2772ea6a",
        tui: "01a2361b-e99f-7755-a26e-cb8e6819ce44",
    },
];

fn empty_marker(cat: CatalogId) -> String {
    match cat {
        CatalogId::OpenCode => json!({"seq": 0, "lastHumanMessageId": null}).to_string(),
        _ => json!({"offset": 0, "humans": 0}).to_string(),
    }
}

/// A tick's probe of an adopted session at its adoption marker, without own texts.
fn probe_at_adoption(a: &Adoption) -> Probe<'_> {
    Probe {
        reference_json: &a.link.reference_json,
        marker_json: &a.link.marker_json,
        own_recent_user_texts: &[],
    }
}

/// One JSON row appended to a session file, as the CLI writes it.
fn append_row(path: &Path, row: Value) {
    append(path, &format!("{row}\n"));
}

#[test]
fn discover_lists_both_sessions_of_each_cli() {
    for c in &CASES {
        let (_d, homes) = fixture_home(c.cli);
        let mut calls = 0;
        let mut last = (0, 0);
        let entries = discover(&homes, &mut |d, t| {
            calls += 1;
            last = (d, t);
        });
        assert!(calls > 0 && last.0 == last.1, "{}: progress reaches the total", c.cli);
        let mine: Vec<_> = entries.iter().filter(|e| e.catalog_id == c.cat).collect();
        assert_eq!(mine.len(), 2, "{}: {entries:?}", c.cli);
        for id in [c.print, c.tui] {
            let e = mine.iter().find(|e| e.thread_id == id).unwrap_or_else(|| panic!("{} {id}", c.cli));
            assert_eq!(e.cwd.as_deref(), Some("/home/user/work/demo"), "{}", c.cli);
            assert!(e.title.is_some(), "{}: title", c.cli);
            assert!(e.updated_at_ms > 0);
        }
    }
}

#[test]
fn ground_truth_turns_are_found_exactly_once() {
    for c in &CASES {
        let (_d, homes) = fixture_home(c.cli);
        for (id, turns) in [(c.print, &PRINT_TURNS[..]), (c.tui, &TUI_TURNS[..])] {
            let a = adopt(&homes, c.cat, id).unwrap_or_else(|e| panic!("{} {id}: {e}", c.cli));
            assert_eq!(a.link.upstream_kind, c.cat.upstream_kind());
            let reference = &a.link.reference_json;
            let empty = empty_marker(c.cat);
            // From an empty baseline: every ground-truth human turn and nothing else.
            let (n, _, _) = drain(c.cat, reference, &empty, &[]);
            assert_eq!(n as usize, turns.len(), "{} {id}", c.cli);
            // Each one exactly once: own-texts remove exactly the turns they name.
            let all = own(turns);
            assert_eq!(drain(c.cat, reference, &empty, &all).0, 0, "{} {id}", c.cli);
            for skip in 0..turns.len() {
                let mut some = all.clone();
                some.remove(skip);
                // Whitespace differences do not defeat the self-echo filter.
                let some: Vec<String> =
                    some.iter().map(|s| format!("  {}\n", s.replace(' ', "  "))).collect();
                assert_eq!(drain(c.cat, reference, &empty, &some).0, 1, "{} {id} turn {skip}", c.cli);
            }
            // The adoption baseline reports nothing.
            assert_eq!(check(c.cat, &probe_at_adoption(&a)), CheckOutcome::NoChange, "{} {id}", c.cli);
        }
    }
}

#[test]
fn claude_rows_classify_to_the_ground_truth_texts() {
    use sessionwatch_upstream::claude::classify_row;
    let dir = fixture_root().join("claude/home/.claude/projects/-home-user-work-demo");
    for (id, turns) in [
        ("dabdface-a74f-47e7-a565-02a8eb260f31", &PRINT_TURNS[..]),
        ("5ae04bcf-dcae-4d38-b508-e94477a366c6", &TUI_TURNS[..]),
    ] {
        let text = std::fs::read_to_string(dir.join(format!("{id}.jsonl"))).unwrap();
        let found: Vec<String> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| classify_row(&v))
            .map(|t| t.prefix)
            .collect();
        assert_eq!(found, turns.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    }
}

#[test]
fn new_human_turn_after_adoption_is_reported_once() {
    // Claude
    let (_d, homes) = fixture_home("claude");
    let a = adopt(&homes, CatalogId::Claude, "dabdface-a74f-47e7-a565-02a8eb260f31").unwrap();
    let path = std::path::PathBuf::from(&a.entry.location);
    append_row(
        &path,
        json!({"type":"user","message":{"role":"user","content":"a fourth, typed later"},"timestamp":"2026-12-02T10:00:00.000Z","userType":"external"}),
    );
    append_row(&path, json!({"type":"last-prompt","lastPrompt":"a fourth, typed later"}));
    let probe = probe_at_adoption(&a);
    match check(CatalogId::Claude, &probe) {
        CheckOutcome::Activity { human_turns, occurred_at_ms, .. } => {
            assert_eq!(human_turns, 1);
            assert_eq!(occurred_at_ms, Some(1_796_205_600_000));
        }
        o => panic!("{o:?}"),
    }
    // Codex: a steer appended to the marker turn (no new task_started) is seen.
    let (_d, homes) = fixture_home("codex");
    let a = adopt(&homes, CatalogId::Codex, "01a2361a-e5e2-70d2-8b99-d92b15fbab55").unwrap();
    let path = std::path::PathBuf::from(&a.entry.location);
    append_row(
        &path,
        json!({"timestamp":"2026-12-02T10:00:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"steer it"}]}}),
    );
    append_row(
        &path,
        json!({"timestamp":"2026-12-02T10:00:00.000Z","type":"event_msg","payload":{"type":"item_completed","turn_id":"01a2361b-0fc3-7821-9c67-153a430e307b","item":{"type":"UserMessage","content":[{"type":"text","text":"steer it"}]},"completed_at_ms":1796205600001u64}}),
    );
    let (n, m, _) = drain(CatalogId::Codex, &a.link.reference_json, &a.link.marker_json, &[]);
    assert_eq!(n, 1);
    let m: Value = serde_json::from_str(&m).unwrap();
    assert_eq!(m["turnId"], "01a2361b-0fc3-7821-9c67-153a430e307b");
    assert_eq!(m["userMessageCount"], 2, "the resumed prompt and the steer");
    // Pi
    let (_d, homes) = fixture_home("pi");
    let a = adopt(&homes, CatalogId::Pi, "01a2361b-e99f-7755-a26e-cb8e6819ce44").unwrap();
    let path = std::path::PathBuf::from(&a.entry.location);
    append_row(
        &path,
        json!({"type":"message","id":"x1","parentId":"277afb52","timestamp":"2026-12-02T10:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"one more"}],"timestamp":1796205600000u64}}),
    );
    assert_eq!(drain(CatalogId::Pi, &a.link.reference_json, &a.link.marker_json, &[]).0, 1);
    // OpenCode
    let (_d, homes) = fixture_home("opencode");
    let id = "ses_dc9e48c29ffeenYd5m2nMLeVFi";
    let a = adopt(&homes, CatalogId::OpenCode, id).unwrap();
    let conn = rusqlite::Connection::open(homes.opencode_db_path()).unwrap();
    conn.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES ('msg_2361bffff001zzzzzzzzzzzzzz', ?1, 1796205600000, 1796205600000, ?2)", rusqlite::params![id, json!({"role":"user","time":{"created":1796205600000u64}}).to_string()]).unwrap();
    conn.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES ('prt_new', 'msg_2361bffff001zzzzzzzzzzzzzz', ?1, 1, 1, ?2)", rusqlite::params![id, json!({"type":"text","text":"typed later"}).to_string()]).unwrap();
    conn.execute("UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = ?1", [id]).unwrap();
    let probe = probe_at_adoption(&a);
    // Its parts may still be coming: nothing yet, and the marker stays so the next tick reads again.
    match check(CatalogId::OpenCode, &probe) {
        CheckOutcome::Activity { human_turns, next_marker_json, .. } => {
            assert_eq!(human_turns, 0);
            let m: Value = serde_json::from_str(&next_marker_json).unwrap();
            let adopted: Value = serde_json::from_str(&a.link.marker_json).unwrap();
            assert_eq!(m["seq"], adopted["seq"]);
        }
        o => panic!("{o:?}"),
    }
    // The reply starts: the user message is complete.
    conn.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES ('msg_2361bffff002zzzzzzzzzzzzzz', ?1, 1796205600001, 1796205600001, ?2)", rusqlite::params![id, json!({"role":"assistant","time":{"created":1796205600001u64}}).to_string()]).unwrap();
    conn.execute("UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = ?1", [id]).unwrap();
    drop(conn);
    match check(CatalogId::OpenCode, &probe) {
        CheckOutcome::Activity { human_turns, occurred_at_ms, dedupe_id, next_marker_json, .. } => {
            assert_eq!(human_turns, 1);
            assert_eq!(occurred_at_ms, Some(1_796_205_600_000));
            assert_eq!(dedupe_id, "msg_2361bffff001zzzzzzzzzzzzzz");
            let m: Value = serde_json::from_str(&next_marker_json).unwrap();
            assert_eq!(m["seq"], 31);
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn adopt_unknown_thread_is_not_found() {
    for c in &CASES {
        let (_d, homes) = fixture_home(c.cli);
        assert!(adopt(&homes, c.cat, "no-such-thread").is_err());
        assert!(adopt(&homes, c.cat, "../etc/passwd").is_err());
    }
}
