//! Claude Code rules on synthetic rows.

use crate::common::*;
use serde_json::{Value, json};
use sessionwatch_upstream::claude::{ClaudeClassifier, classify_row};
use sessionwatch_upstream::jsonl::check_file_with_window;
use sessionwatch_upstream::{CatalogId, CheckOutcome};

fn user(content: Value) -> Value {
    json!({"type":"user","uuid":"u","sessionId":"s","timestamp":"2026-04-02T09:15:02.114Z","userType":"external","isSidechain":false,"message":{"role":"user","content":content}})
}

fn is_human(v: &Value) -> bool {
    classify_row(v).is_some()
}

#[test]
fn row_table() {
    let mut meta = user(json!("Caveat: something"));
    meta["isMeta"] = json!(true);
    let mut side = user(json!("task prompt"));
    side["isSidechain"] = json!(true);
    let mut compact = user(json!("This session is being continued from a previous conversation"));
    compact["isCompactSummary"] = json!(true);
    let mut peer = user(json!("hello from a peer"));
    peer["origin"] = json!({"kind":"peer"});
    let mut typed = user(json!("typed"));
    typed["origin"] = json!({"kind":"human"});
    let cases: Vec<(&str, Value, bool)> = vec![
        ("plain prompt", user(json!("add a retry to the payment client")), true),
        ("typed with origin human", typed, true),
        ("slash command is a human action", user(json!("<command-name>/model</command-name>")), true),
        (
            "assistant",
            json!({"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"hi"}]}}),
            false,
        ),
        ("tool result", user(json!([{"type":"tool_result","tool_use_id":"t","content":"out"}])), false),
        (
            "tool result beside text",
            user(
                json!([{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"t","content":"out"}]),
            ),
            false,
        ),
        ("meta", meta, false),
        ("sidechain", side, false),
        ("compaction summary", compact, false),
        ("peer origin", peer, false),
        ("inter-session", user(json!("[Inter-session message] from agent:main:main")), false),
        (
            "openclaw preamble",
            user(json!("Continue this conversation using the OpenClaw transcript below.\n...")),
            false,
        ),
        ("local command stdout", user(json!("<local-command-stdout>ok</local-command-stdout>")), false),
        ("interrupt marker", user(json!("[Request interrupted by user]")), false),
        ("task notification", user(json!("<task-notification>done</task-notification>")), false),
        ("empty", user(json!("   ")), false),
        (
            "text + image",
            user(
                json!([{"type":"text","text":"[Image #1] what is this"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]),
            ),
            true,
        ),
        (
            "image only",
            user(json!([{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}])),
            false,
        ),
        (
            "text blocks only (harness)",
            user(json!([{"type":"text","text":"<system-reminder>x</system-reminder>"}])),
            false,
        ),
        ("ide tag only", user(json!("<ide_opened_file>a.rs</ide_opened_file>")), false),
        ("ide tag plus text", user(json!("<ide_selection>x</ide_selection> fix this")), true),
        (
            "queued prompt",
            json!({"type":"attachment","timestamp":"2026-04-02T09:16:30.500Z","attachment":{"type":"queued_command","commandMode":"prompt","origin":{"kind":"human"},"prompt":"also log the attempt number"}}),
            true,
        ),
        (
            "queued notification",
            json!({"type":"attachment","attachment":{"type":"queued_command","commandMode":"task-notification","prompt":"x"}}),
            false,
        ),
        (
            "queued from peer",
            json!({"type":"attachment","attachment":{"type":"queued_command","commandMode":"prompt","origin":{"kind":"peer"},"prompt":"x"}}),
            false,
        ),
        (
            "other attachment",
            json!({"type":"attachment","attachment":{"type":"prompt_snapshot","text":"x"}}),
            false,
        ),
        ("queue-operation", json!({"type":"queue-operation","operation":"enqueue","content":"x"}), false),
        ("last-prompt", json!({"type":"last-prompt","lastPrompt":"x"}), false),
        (
            "api-request-blob",
            json!({"type":"api-request-blob","message":{"role":"user","content":[{"type":"text","text":"x"}]}}),
            false,
        ),
        (
            "system compact boundary",
            json!({"type":"system","subtype":"compact_boundary","content":"Conversation compacted"}),
            false,
        ),
        ("not an object", json!([1, 2]), false),
    ];
    for (name, row, want) in cases {
        assert_eq!(is_human(&row), want, "{name}");
    }
}

/// The formats reference's own fixture: human = a1 and the queued_command attachment.
const DOC_FIXTURE: &str = r#"{"type":"user","uuid":"a1","parentUuid":null,"sessionId":"5f0c1e2a-0000-4000-8000-000000000001","timestamp":"2026-04-02T09:15:02.114Z","cwd":"/home/dev/shop","version":"2.1.140","gitBranch":"main","userType":"external","isSidechain":false,"message":{"role":"user","content":"add a retry to the payment client"}}
{"type":"assistant","uuid":"a2","parentUuid":"a1","sessionId":"5f0c1e2a-0000-4000-8000-000000000001","timestamp":"2026-04-02T09:15:06.870Z","cwd":"/home/dev/shop","version":"2.1.140","userType":"external","isSidechain":false,"requestId":"req_01","message":{"role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_01","name":"Read","input":{"file_path":"/home/dev/shop/pay.ts"}}],"stop_reason":"tool_use"}}
{"type":"user","uuid":"a3","parentUuid":"a2","sessionId":"5f0c1e2a-0000-4000-8000-000000000001","timestamp":"2026-04-02T09:15:07.001Z","cwd":"/home/dev/shop","version":"2.1.140","userType":"external","isSidechain":false,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"1\texport async function pay() {}"}]},"toolUseResult":{"type":"text"}}
{"type":"user","uuid":"a4","parentUuid":"a3","sessionId":"5f0c1e2a-0000-4000-8000-000000000001","timestamp":"2026-04-02T09:16:00.000Z","cwd":"/home/dev/shop","version":"2.1.140","userType":"external","isSidechain":false,"isMeta":true,"message":{"role":"user","content":"Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages."}}
{"type":"attachment","sessionId":"5f0c1e2a-0000-4000-8000-000000000001","timestamp":"2026-04-02T09:16:30.500Z","cwd":"/home/dev/shop","attachment":{"type":"queued_command","commandMode":"prompt","origin":{"kind":"human"},"prompt":"also log the attempt number"}}
{"type":"system","subtype":"compact_boundary","uuid":"a5","parentUuid":null,"logicalParentUuid":"a4","sessionId":"5f0c1e2a-0000-4000-8000-000000000001","timestamp":"2026-04-02T10:02:11.000Z","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":167000}}
{"type":"user","uuid":"a6","parentUuid":"a5","sessionId":"5f0c1e2a-0000-4000-8000-000000000001","timestamp":"2026-04-02T10:02:11.050Z","isCompactSummary":true,"isVisibleInTranscriptOnly":true,"message":{"role":"user","content":"This session is being continued from a previous conversation that ran out of context. Summary: ..."}}
"#;

fn tmp_file(content: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("s.jsonl");
    std::fs::write(&p, content).unwrap();
    (d, p)
}

const START: &str = r#"{"offset":0,"humans":0}"#;

#[test]
fn doc_fixture_and_queue_repeats_and_self_echo() {
    let (_d, p) = tmp_file(DOC_FIXTURE.as_bytes());
    let r = file_ref(&p);
    let (n, m, _) = drain(CatalogId::Claude, &r, START, &[]);
    assert_eq!(n, 2);
    assert_eq!(offset_of(&m), DOC_FIXTURE.len() as u64);
    assert_eq!(drain(CatalogId::Claude, &r, START, &own(&["add   a retry to the payment client\n"])).0, 1);
    // A queued prompt later repeated as a user row counts once.
    append(
        &p,
        &format!(
            "{}\n",
            json!({"type":"attachment","attachment":{"type":"queued_command","commandMode":"prompt","prompt":"queued text"}})
        ),
    );
    append(
        &p,
        &format!("{}\n", json!({"type":"queue-operation","operation":"enqueue","content":"queued text"})),
    );
    append(&p, &format!("{}\n", user(json!("queued text"))));
    let (n2, _, _) = drain(CatalogId::Claude, &r, &m, &[]);
    assert_eq!(n2, 1);
}

#[test]
fn partial_line_waits_for_its_newline() {
    let row = user(json!("hello there")).to_string();
    let (_d, p) = tmp_file(&row.as_bytes()[..row.len() / 2]);
    let r = file_ref(&p);
    let probe =
        sessionwatch_upstream::Probe { reference_json: &r, marker_json: START, own_recent_user_texts: &[] };
    assert_eq!(sessionwatch_upstream::check(CatalogId::Claude, &probe), CheckOutcome::NoChange);
    append(&p, &format!("{}\n", &row[row.len() / 2..]));
    let (n, m, _) = drain(CatalogId::Claude, &r, START, &[]);
    assert_eq!((n, offset_of(&m)), (1, row.len() as u64 + 1));
}

#[test]
fn invalid_rows_are_skipped_not_blocking() {
    let mut data = Vec::new();
    data.extend_from_slice(b"{not json\n");
    data.extend_from_slice(
        b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"bad \xff\xfe utf8\"}}\n",
    );
    data.extend_from_slice(b"\n   \n");
    data.extend_from_slice(format!("{}\n", user(json!("after the garbage"))).as_bytes());
    let (_d, p) = tmp_file(&data);
    let (n, m, _) = drain(CatalogId::Claude, &file_ref(&p), START, &[]);
    assert_eq!((n, offset_of(&m)), (1, data.len() as u64));
}

#[test]
fn window_limits_each_tick_and_never_splits_rows() {
    let mut data = String::new();
    for i in 0..50 {
        data.push_str(&format!("{}\n", user(json!(format!("prompt {i}")))));
        data.push_str(&format!("{}\n", json!({"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"x".repeat(300)}]}})));
    }
    let (_d, p) = tmp_file(data.as_bytes());
    let mut marker = START.to_string();
    let mut total = 0;
    let mut ticks = 0;
    loop {
        match check_file_with_window(&p, &marker, &[], &mut ClaudeClassifier::default(), 1000) {
            CheckOutcome::Activity { human_turns, next_marker_json, .. } => {
                let (a, b) = (offset_of(&marker), offset_of(&next_marker_json));
                assert!(b > a && b - a <= 1000 && data.as_bytes()[b as usize - 1] == b'\n');
                total += human_turns;
                marker = next_marker_json;
                ticks += 1;
            }
            CheckOutcome::NoChange => break,
            o => panic!("{o:?}"),
        }
    }
    assert_eq!(total, 50);
    assert!(ticks > 10);
}

#[test]
fn oversized_rows_are_streamed_and_classified() {
    let huge = "word ".repeat(300_000); // 1.5 MB of text
    let mut data = String::new();
    data.push_str(&format!("{}\n", user(json!(huge.clone()))));
    data.push_str(&format!(
        "{}\n",
        user(json!([{"type":"tool_result","tool_use_id":"t","content":huge.clone()}]))
    ));
    data.push_str(&format!(
        "{}\n",
        json!({"type":"attachment","attachment":{"type":"prompt_snapshot","text":huge.clone()}})
    ));
    data.push_str(&format!("{}\n", user(json!("small one"))));
    let (_d, p) = tmp_file(data.as_bytes());
    let r = file_ref(&p);
    let (n, m, ticks) = drain(CatalogId::Claude, &r, START, &[]);
    assert_eq!(n, 2, "the huge typed prompt and the small one");
    assert_eq!(offset_of(&m), data.len() as u64);
    assert!(ticks >= 3);
    // Self-echo works on the digest of the huge text too.
    assert_eq!(drain(CatalogId::Claude, &r, START, &[format!("  {huge}  ")]).0, 1);
    // An oversized row still being written waits.
    let (_d2, p2) = tmp_file(&data.as_bytes()[..1_200_000]);
    let probe = sessionwatch_upstream::Probe {
        reference_json: &file_ref(&p2),
        marker_json: START,
        own_recent_user_texts: &[],
    };
    assert_eq!(sessionwatch_upstream::check(CatalogId::Claude, &probe), CheckOutcome::NoChange);
}

/// A Claude session adopted at `SessionStart` before its first prompt has no transcript yet: an idle
/// TUI is not a deleted session (three such checks made `upstream_missing`, a false notice). Once the
/// transcript is written, its prompts count; once it is deleted, it is missing.
#[test]
fn a_transcript_adopted_before_it_is_written_is_not_missing() {
    use sessionwatch_upstream::{Probe, claude};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("projects").join("-work-demo").join("s1.jsonl");
    let adoption = claude::adopt_file(&file, "s1").expect("adopted from the hook's ids");
    let mut marker = adoption.link.marker_json.clone();
    let probe = |marker: &str| -> CheckOutcome {
        claude::check(&Probe {
            reference_json: &adoption.link.reference_json,
            marker_json: marker,
            own_recent_user_texts: &[],
        })
    };
    for _ in 0..4 {
        assert!(matches!(probe(&marker), CheckOutcome::Inconclusive(_)), "not written yet is not gone");
    }
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, format!("{}\n", user(json!("first prompt")))).unwrap();
    match probe(&marker) {
        CheckOutcome::Activity { human_turns, next_marker_json, .. } => {
            assert_eq!(human_turns, 1);
            marker = next_marker_json;
        }
        other => panic!("expected the first prompt, got {other:?}"),
    }
    std::fs::remove_file(&file).unwrap();
    assert!(
        matches!(probe(&marker), CheckOutcome::Missing),
        "a transcript that was seen and is gone is missing"
    );
}
