//! The plugin's posts, with the argument shapes observed with OpenCode 1.18.33 (docs/hooks.md).

use super::*;
use serde_json::json;

const SESSION: &str = "ses_db7511dd8ffe2ceiUBzIlidZhl";
const MESSAGE: &str = "msg_248aee29c001W5x3nD0dbGQ3RK";
const TUI: [&str; 2] = ["bun", "/$bunfs/root/src/cli/tui/worker.js"];
const RUN: [&str; 5] = ["/usr/bin/opencode", "run", "--format", "json", "--session"];
const SERVE: [&str; 4] = ["/usr/bin/opencode", "serve", "--port", "4096"];

fn text_part(id: &str, text: &str, synthetic: bool) -> Value {
    let mut p = json!({ "id": id, "type": "text", "text": text, "messageID": MESSAGE, "sessionID": SESSION });
    if synthetic {
        p["synthetic"] = json!(true);
    }
    p
}

fn chat_message(argv: &[&str], parts: Vec<Value>, extra: Value) -> Value {
    let mut v = json!({
        "sessionID": SESSION,
        "argv": argv,
        "directory": "/home/u/work/demo",
        "db": "/home/u/.local/share/opencode/opencode.db",
        "agent": "build",
        "message": { "id": MESSAGE, "role": "user", "sessionID": SESSION, "time": { "created": 1_760_000_000_000_i64 },
                     "agent": "build", "model": { "providerID": "fakellm", "modelID": "fake-model" } },
        "parts": parts,
    });
    v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    v
}

fn typed(argv: &[&str]) -> HookInput {
    let parts = vec![text_part("prt_248aee29d001aIvq0jBkSIo6do", "Human: use the new grammar.", false)];
    parse_plugin_call(CHAT_MESSAGE, &chat_message(argv, parts, json!({}))).unwrap()
}

#[test]
fn a_prompt_typed_into_the_tui_is_typed_with_the_message_id_as_turn_id() {
    let i = typed(&TUI);
    assert_eq!(i.cli, HookCli::OpenCode);
    assert_eq!(i.event, HookEvent::UserPromptSubmit);
    assert_eq!(i.session_id, SESSION);
    assert_eq!(i.turn_id.as_deref(), Some(MESSAGE), "the id the file monitor reads");
    assert_eq!(i.prompt.as_deref(), Some("Human: use the new grammar."));
    assert_eq!(i.origin, Origin::Typed);
    assert_eq!(i.transcript_path.as_deref(), Some("/home/u/.local/share/opencode/opencode.db"));
    assert_eq!(i.cwd.as_deref(), Some("/home/u/work/demo"));
}

#[test]
fn prompts_of_opencode_run_and_of_its_http_api_are_another_programs() {
    assert_eq!(typed(&RUN).origin, Origin::OtherProgram("run".into()));
    assert_eq!(typed(&SERVE).origin, Origin::OtherProgram("serve".into()));
    assert_eq!(typed(&["/usr/bin/opencode"]).origin, Origin::OtherProgram("unknown".into()));
}

#[test]
fn a_synthetic_part_after_the_typed_one_is_not_part_of_the_prompt() {
    let parts = vec![
        text_part("prt_248aee29d001aIvq0jBkSIo6do", "typed words", false),
        text_part("prt_248aee29d002evGsJgEaLRd1Qh", "sessionwatch: sessions you depend on changed", true),
    ];
    let i = parse_plugin_call(CHAT_MESSAGE, &chat_message(&TUI, parts, json!({}))).unwrap();
    assert_eq!(i.prompt.as_deref(), Some("typed words"));
    assert_eq!(i.origin, Origin::Typed);
}

#[test]
fn a_message_of_synthetic_parts_only_is_opencodes_own() {
    let parts = vec![text_part("prt_248aee29d001aIvq0jBkSIo6do", "Continue if you have next steps", true)];
    let i = parse_plugin_call(CHAT_MESSAGE, &chat_message(&TUI, parts, json!({}))).unwrap();
    assert_eq!(i.origin, Origin::Synthetic);
    assert_eq!(i.prompt.as_deref(), Some(""));
}

#[test]
fn a_sub_agents_task_prompt_and_its_tool_calls_belong_to_a_sub_agent() {
    let parts = vec![text_part("prt_248aee29d001aIvq0jBkSIo6do", "Find the parser", false)];
    let task = chat_message(&TUI, parts.clone(), json!({ "messageID": "msg_248aee29c000parentmsg0001" }));
    assert_eq!(parse_plugin_call(CHAT_MESSAGE, &task).unwrap().origin, Origin::SubAgent);
    let child = chat_message(&TUI, parts, json!({ "parentID": "ses_parent0000000000000000001" }));
    assert_eq!(parse_plugin_call(CHAT_MESSAGE, &child).unwrap().origin, Origin::SubAgent);
    let tool = json!({ "sessionID": SESSION, "argv": TUI, "tool": "bash", "callID": "call_1",
                       "parentID": "ses_parent0000000000000000001" });
    assert_eq!(parse_plugin_call(TOOL_EXECUTE_AFTER, &tool).unwrap().origin, Origin::SubAgent);
}

#[test]
fn tool_execute_after_is_post_tool_use() {
    let tool = json!({ "sessionID": SESSION, "argv": RUN, "tool": "bash", "callID": "call_fake_f88dc1056d2d462a",
                       "directory": "/home/u/work/demo", "db": "/x/opencode.db" });
    let i = parse_plugin_call(TOOL_EXECUTE_AFTER, &tool).unwrap();
    assert_eq!(i.event, HookEvent::PostToolUse);
    assert_eq!(i.tool_name.as_deref(), Some("bash"));
    assert_eq!(i.tool_use_id.as_deref(), Some("call_fake_f88dc1056d2d462a"));
    assert_eq!(i.origin, Origin::Typed);
    assert_eq!(i.prompt, None);
}

#[test]
fn bad_posts_are_refused_with_the_field_named() {
    let ok = chat_message(&TUI, vec![], json!({}));
    assert_eq!(
        parse_plugin_call("session.idle", &ok).unwrap_err(),
        HookError::UnknownEvent("session.idle".into())
    );
    let mut no_session = ok.clone();
    no_session.as_object_mut().unwrap().remove("sessionID");
    assert_eq!(parse_plugin_call(CHAT_MESSAGE, &no_session).unwrap_err(), HookError::Missing("sessionID"));
    let mut bad_session = ok.clone();
    bad_session["sessionID"] = json!("../../etc");
    assert!(matches!(
        parse_plugin_call(CHAT_MESSAGE, &bad_session).unwrap_err(),
        HookError::Invalid { field: "sessionID", .. }
    ));
    let mut no_message = ok.clone();
    no_message.as_object_mut().unwrap().remove("message");
    assert_eq!(parse_plugin_call(CHAT_MESSAGE, &no_message).unwrap_err(), HookError::Missing("message"));
    let mut no_argv = ok;
    no_argv.as_object_mut().unwrap().remove("argv");
    assert_eq!(parse_plugin_call(CHAT_MESSAGE, &no_argv).unwrap_err(), HookError::Missing("argv"));
    assert!(matches!(parse_plugin_call(CHAT_MESSAGE, &json!([1])).unwrap_err(), HookError::NotJson(_)));
}
