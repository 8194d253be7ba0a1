//! Codex rules on synthetic rollouts.

use crate::common::*;
use serde_json::{Value, json};
use sessionwatch_upstream::CatalogId;

fn line(v: Value) -> String {
    format!("{v}\n")
}
fn ev(payload: Value) -> String {
    line(json!({"timestamp":"2026-04-02T09:20:05.301Z","type":"event_msg","payload":payload}))
}
fn ri(payload: Value) -> String {
    line(json!({"timestamp":"2026-04-02T09:20:05.300Z","type":"response_item","payload":payload}))
}
fn user_item(text: &str) -> String {
    ri(json!({"type":"message","role":"user","content":[{"type":"input_text","text":text}]}))
}
fn item_completed(turn: &str, text: &str) -> String {
    ev(
        json!({"type":"item_completed","turn_id":turn,"item":{"type":"UserMessage","id":"i","content":[{"type":"text","text":text,"text_elements":[]}]},"completed_at_ms":1775121605301u64}),
    )
}

fn write(content: &str) -> (tempfile::TempDir, String) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("rollout-2026-04-02T09-20-00-0196f0a0-1111-7222-8333-444455556666.jsonl");
    std::fs::write(&p, content).unwrap();
    let r = json!({"filePath": p.to_string_lossy(), "codexHome": d.path().to_string_lossy()}).to_string();
    (d, r)
}

const START: &str = r#"{"offset":0,"humans":0}"#;

#[test]
fn doc_fixture_counts_the_user_message_event_once() {
    let doc = r#"{"timestamp":"2026-04-02T09:20:00.010Z","type":"session_meta","payload":{"id":"0196f0a0-1111-7222-8333-444455556666","timestamp":"2026-04-02T09:20:00.001Z","cwd":"/home/dev/shop","originator":"codex_cli_rs","cli_version":"0.130.0","source":"cli","model_provider":"openai","git":{"branch":"main"}}}
{"timestamp":"2026-04-02T09:20:00.020Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/home/dev/shop</cwd>\n</environment_context>"}]}}
{"timestamp":"2026-04-02T09:20:05.300Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"why does checkout fail on empty carts?"}]}}
{"timestamp":"2026-04-02T09:20:05.301Z","type":"event_msg","payload":{"type":"user_message","message":"why does checkout fail on empty carts?","images":null,"local_images":[],"text_elements":[]}}
{"timestamp":"2026-04-02T09:20:09.900Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_7","output":"{\"output\":\"cart.ts:12 total()\",\"metadata\":{\"exit_code\":0}}"}}
{"timestamp":"2026-04-02T09:40:00.000Z","type":"compacted","payload":{"message":"Summary of the work so far: ..."}}
"#;
    let (_d, r) = write(doc);
    assert_eq!(drain(CatalogId::Codex, &r, START, &[]).0, 1);
}

#[test]
fn rules_table() {
    let t = "turn-1";
    let mut s = String::new();
    s += &ev(json!({"type":"task_started","turn_id":t}));
    s += &ri(
        json!({"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>x"}]}),
    );
    s += &user_item("<environment_context><cwd>/x</cwd></environment_context>");
    // A build writing both event kinds for one prompt: counted once.
    s += &user_item("first prompt");
    s += &ev(json!({"type":"user_message","message":"first prompt"}));
    s += &item_completed(t, "first prompt");
    s += &ri(json!({"type":"function_call_output","call_id":"c","output":"first prompt"}));
    s += &ev(
        json!({"type":"user_message","message":"<environment_context>x</environment_context>","kind":"environment_context"}),
    );
    s += &ev(json!({"type":"user_message","message":"legacy plain","kind":"plain"}));
    s += &ev(json!({"type":"agent_message","message":"hello"}));
    s += &ev(
        json!({"type":"item_completed","turn_id":t,"item":{"type":"AgentMessage","content":[{"type":"Text","text":"hi"}]}}),
    );
    s += &ev(json!({"type":"task_started","turn_id":"turn-2"}));
    // The same text in a later turn is a new prompt.
    s += &item_completed("turn-2", "first prompt");
    let (_d, r) = write(&s);
    let (n, m, _) = drain(CatalogId::Codex, &r, START, &[]);
    assert_eq!(n, 3);
    let m: Value = serde_json::from_str(&m).unwrap();
    assert_eq!((m["turnId"].as_str(), m["userMessageCount"].as_u64()), (Some("turn-2"), Some(1)));
    assert_eq!(drain(CatalogId::Codex, &r, START, &own(&["first prompt"])).0, 1);
}

#[test]
fn oversized_user_message_is_streamed() {
    let huge = "steer ".repeat(250_000);
    let mut s = ev(json!({"type":"task_started","turn_id":"t"}));
    s += &ri(
        json!({"type":"message","role":"developer","content":[{"type":"input_text","text":huge.clone()}]}),
    );
    s += &item_completed("t", &huge);
    let (_d, r) = write(&s);
    let (n, m, _) = drain(CatalogId::Codex, &r, START, &[]);
    assert_eq!((n, offset_of(&m)), (1, s.len() as u64));
}

/// `!ls` typed into the real Codex 0.171.0 TUI (`tests/fixtures/shell-escapes/codex/rollout.jsonl`): a
/// turn of its own whose `CommandExecution` has `source: user_shell`, a human turn as in the other
/// sources; its `<user_shell_command>` context row is not a second one.
#[test]
fn a_shell_escape_is_a_human_turn() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/shell-escapes/codex/rollout.jsonl");
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("rollout.jsonl");
    std::fs::copy(&p, &copy).unwrap();
    assert_eq!(drain(CatalogId::Codex, &file_ref(&copy), START, &[]).0, 2, "\"first prompt\" and !ls");
}

/// A hook may name a rollout that Codex has not written yet, anywhere (not only under `sessions/`): the
/// link waits for it without counting as gone, and its first sight is the baseline.
#[test]
fn a_rollout_adopted_before_it_exists_is_baselined_when_it_appears() {
    use sessionwatch_upstream::{CheckOutcome, Probe, adopt_transcript, check};
    let d = tempfile::tempdir().unwrap();
    let thread = "0196f0a0-1111-7222-8333-444455556666";
    let p = d.path().join(format!("rollout-2026-04-02T09-20-00-{thread}.jsonl"));
    let adoption = adopt_transcript(CatalogId::Codex, thread, &p).expect("adopted before the file exists");
    assert_eq!(adoption.entry.thread_id, thread);
    let probe = |marker: &str| {
        check(
            CatalogId::Codex,
            &Probe {
                reference_json: &adoption.link.reference_json,
                marker_json: marker,
                own_recent_user_texts: &[],
            },
        )
    };
    assert!(matches!(probe(&adoption.link.marker_json), CheckOutcome::Inconclusive(_)), "not missing");
    std::fs::write(&p, format!("{}{}", user_item("copied history"), item_completed("t0", "copied history")))
        .unwrap();
    let CheckOutcome::Activity { human_turns: 0, next_marker_json, .. } = probe(&adoption.link.marker_json)
    else {
        panic!("the first sight is the baseline")
    };
    std::fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .and_then(|mut f| std::io::Write::write_all(&mut f, item_completed("t1", "typed now").as_bytes()))
        .unwrap();
    assert!(matches!(probe(&next_marker_json), CheckOutcome::Activity { human_turns: 1, .. }));
}
