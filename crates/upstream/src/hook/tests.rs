//! Hook stdin of both CLIs (shapes observed with Claude Code 2.1.332 and Codex 0.171.0) and the output
//! each expects.

use super::*;

const CLAUDE_SESSION: &str = "c1714f83-3b2e-4f0e-9d51-7a1f3c9e2b10";
const CODEX_THREAD: &str = "019ad2c4-5b1e-7c30-9f4e-2d8a6b1c0e77";

/// A hook's stdin: the fields every CLI sends with each event, then the CLI's own `fields` and the
/// event's `extra` (the later of two alike wins).
fn stdin(session: &str, transcript: &str, event: &str, fields: Value, extra: Value) -> Vec<u8> {
    let mut v = json!({
        "session_id": session,
        "transcript_path": transcript,
        "cwd": "/home/u/work/demo",
        "hook_event_name": event,
    });
    for more in [fields, extra] {
        v.as_object_mut().unwrap().extend(more.as_object().unwrap().clone());
    }
    serde_json::to_vec(&v).unwrap()
}

fn claude(event: &str, extra: Value) -> Vec<u8> {
    let transcript = format!("/home/u/.claude/projects/-home-u-work-demo/{CLAUDE_SESSION}.jsonl");
    stdin(CLAUDE_SESSION, &transcript, event, json!({}), extra)
}

fn codex(event: &str, extra: Value) -> Vec<u8> {
    let transcript =
        format!("/home/u/.codex/sessions/2026/12/02/rollout-2026-12-02T18-47-32-{CODEX_THREAD}.jsonl");
    let fields = json!({ "model": "gpt-5.5", "permission_mode": "bypassPermissions" });
    stdin(CODEX_THREAD, &transcript, event, fields, extra)
}

fn parse(stdin: &[u8]) -> HookInput {
    parse_input(stdin, None, None, None).unwrap()
}

#[test]
fn claude_user_prompt_submit() {
    let i = parse(&claude(
        "UserPromptSubmit",
        json!({ "prompt_id": "de996f93-0a1b-4c2d-8e3f-9a0b1c2d3e4f", "permission_mode": "default", "prompt": "hi" }),
    ));
    assert_eq!(i.cli, HookCli::Claude);
    assert_eq!(i.event, HookEvent::UserPromptSubmit);
    assert_eq!(i.session_id, CLAUDE_SESSION);
    assert_eq!(i.prompt.as_deref(), Some("hi"));
    assert_eq!(i.turn_id.as_deref(), Some("de996f93-0a1b-4c2d-8e3f-9a0b1c2d3e4f"));
}

#[test]
fn codex_user_prompt_submit() {
    let i = parse(&codex(
        "UserPromptSubmit",
        json!({ "turn_id": "019ad2c4-aaaa-7c30-9f4e-2d8a6b1c0e77", "prompt": "go" }),
    ));
    assert_eq!(i.cli, HookCli::Codex);
    assert_eq!(i.turn_id.as_deref(), Some("019ad2c4-aaaa-7c30-9f4e-2d8a6b1c0e77"));
    assert_eq!(i.session_id, CODEX_THREAD);
}

#[test]
fn every_event_of_both_clis_parses() {
    let cases: Vec<(Vec<u8>, HookEvent)> = vec![
        (claude("SessionStart", json!({ "source": "startup" })), HookEvent::SessionStart),
        (codex("SessionStart", json!({ "source": "resume" })), HookEvent::SessionStart),
        (
            claude(
                "PreToolUse",
                json!({ "tool_name": "mcp__sessionwatch__session_status", "tool_input": {}, "tool_use_id": "toolu_01" }),
            ),
            HookEvent::PreToolUse,
        ),
        (
            codex(
                "PostToolUse",
                json!({ "turn_id": "t1", "tool_name": "Bash", "tool_use_id": "call_1", "tool_response": "ok\n" }),
            ),
            HookEvent::PostToolUse,
        ),
        (
            claude("Stop", json!({ "stop_hook_active": true, "last_assistant_message": "done" })),
            HookEvent::Stop,
        ),
        (codex("Stop", json!({ "turn_id": "t1", "stop_hook_active": false })), HookEvent::Stop),
        (
            claude(
                "SubagentStart",
                json!({ "agent_id": "ab63d3cb1c2e79bd9", "agent_type": "general-purpose" }),
            ),
            HookEvent::SubagentStart,
        ),
        (
            codex(
                "SubagentStop",
                json!({ "agent_id": "019ad2c5-0000-7c30-9f4e-2d8a6b1c0e77", "agent_type": "default" }),
            ),
            HookEvent::SubagentStop,
        ),
    ];
    for (stdin, event) in cases {
        let i = parse(&stdin);
        assert_eq!(i.event, event);
    }
    let stop = parse(&claude("Stop", json!({ "stop_hook_active": true })));
    assert!(stop.stop_hook_active);
    let sub =
        parse(&claude("SubagentStart", json!({ "agent_id": "ab63d3cb1c2e79bd9", "agent_type": "Explore" })));
    assert_eq!(
        (sub.subagent_id.as_deref(), sub.subagent_type.as_deref()),
        (Some("ab63d3cb1c2e79bd9"), Some("Explore"))
    );
}

#[test]
fn the_cli_is_detected_without_a_flag_and_the_flag_wins() {
    let no_path = serde_json::to_vec(&json!({
        "session_id": CLAUDE_SESSION, "hook_event_name": "Stop", "stop_hook_active": false
    }))
    .unwrap();
    assert_eq!(parse_input(&no_path, None, None, None), Err(HookError::UnknownCli));
    assert_eq!(parse_input(&no_path, None, None, Some(CLAUDE_SESSION)).unwrap().cli, HookCli::Claude);
    assert_eq!(parse_input(&no_path, None, Some(HookCli::Codex), None).unwrap().cli, HookCli::Codex);
}

#[test]
fn bad_stdin_is_a_clear_error() {
    let cases: Vec<(Vec<u8>, Option<&str>, &str)> = vec![
        (b"".to_vec(), None, "not a JSON object"),
        (b"not json".to_vec(), None, "not a JSON object"),
        (b"[1,2]".to_vec(), None, "not a JSON object"),
        (serde_json::to_vec(&json!({ "hook_event_name": "Stop" })).unwrap(), None, "no session_id"),
        (claude("Nope", json!({})), None, "unknown hook event"),
        (claude("Stop", json!({})), Some("UserPromptSubmit"), "started for UserPromptSubmit"),
        (claude("UserPromptSubmit", json!({})), None, "no prompt"),
        (claude("SubagentStart", json!({})), None, "no agent_id"),
        (claude("Stop", json!({ "stop_hook_active": "yes" })), None, "stop_hook_active is invalid"),
        (claude("UserPromptSubmit", json!({ "prompt": 7 })), None, "prompt is invalid"),
        (
            serde_json::to_vec(&json!({ "session_id": "../../etc", "hook_event_name": "Stop" })).unwrap(),
            None,
            "session_id is invalid",
        ),
        (claude("SubagentStart", json!({ "agent_id": "a:b" })), None, "agent_id is invalid"),
        (vec![b' '; MAX_INPUT_BYTES + 1], None, "more than a hook sends"),
    ];
    for (stdin, arg, want) in cases {
        let err = parse_input(&stdin, arg, None, None).expect_err(want).to_string();
        assert!(err.contains(want), "{want}: {err}");
    }
}

#[test]
fn the_event_argument_names_the_event_in_any_spelling() {
    for spelling in ["UserPromptSubmit", "user_prompt_submit", "userpromptsubmit", "user-prompt-submit"] {
        assert_eq!(HookEvent::parse(spelling), Some(HookEvent::UserPromptSubmit), "{spelling}");
    }
    let stdin = serde_json::to_vec(&json!({ "session_id": CLAUDE_SESSION, "prompt": "x" })).unwrap();
    let i = parse_input(&stdin, Some("UserPromptSubmit"), Some(HookCli::Claude), None).unwrap();
    assert_eq!(i.event, HookEvent::UserPromptSubmit, "the argument stands in for a missing hook_event_name");
}

#[test]
fn output_per_cli_and_event() {
    let notice = "Session \"agent:main:claude:w1\" changed (other actor). …";
    let context = HookReply { context: Some(notice.into()), block: None };
    let block = HookReply { context: None, block: Some(notice.into()) };
    let mut out = vec![];
    // OpenCode runs no command: its plugin reads the gateway's JSON answer itself.
    for cli in HookCli::ALL.into_iter().filter(|c| *c != HookCli::OpenCode) {
        for &event in cli.events() {
            out.push(json!({
                "cli": cli.as_str(),
                "event": event.as_str(),
                "context": render_output(cli, event, &context).map(|s| serde_json::from_str::<Value>(&s).unwrap()),
                "nothing": render_output(cli, event, &HookReply::default()),
            }));
        }
        if matches!(cli, HookCli::Gemini | HookCli::Pi) {
            continue; // no Stop
        }
        out.push(json!({
            "cli": cli.as_str(),
            "event": "Stop (block)",
            "block": render_output(cli, HookEvent::Stop, &block).map(|s| serde_json::from_str::<Value>(&s).unwrap()),
        }));
    }
    insta::assert_json_snapshot!("hook_outputs", out);
}

const GEMINI_SESSION: &str = "fb2901fb-5c2e-4a7d-9b1e-3c4d5e6f7a8b";

/// Stdin as Gemini CLI 0.61.0 sends it (NATIVE.md 3.2: every event has these five fields).
fn gemini(event: &str, extra: Value) -> Vec<u8> {
    let transcript = "/home/u/.gemini/tmp/demo/chats/session-2026-12-05T00-09-fb2901fb.jsonl";
    stdin(GEMINI_SESSION, transcript, event, json!({ "timestamp": "2026-12-05T00:09:58.817Z" }), extra)
}

#[test]
fn gemini_events_are_detected_and_carry_no_turn_id() {
    let i = parse(&gemini("BeforeAgent", json!({ "prompt": "Please say hello." })));
    assert_eq!((i.cli, i.event), (HookCli::Gemini, HookEvent::BeforeAgent));
    assert_eq!(i.prompt.as_deref(), Some("Please say hello."));
    assert_eq!(i.turn_id, None, "Gemini gives hooks no message id");
    let start = parse(&gemini("SessionStart", json!({ "source": "resume" })));
    assert_eq!((start.cli, start.event), (HookCli::Gemini, HookEvent::SessionStart), "by its chats path");
    let tool = parse(&gemini(
        "AfterTool",
        json!({ "tool_name": "run_shell_command", "tool_input": {}, "tool_response": {"llmContent": "ok"} }),
    ));
    assert_eq!((tool.event, tool.tool_name.as_deref()), (HookEvent::AfterTool, Some("run_shell_command")));
    let end = parse_input(
        &gemini("SessionEnd", json!({ "reason": "exit" })),
        Some("SessionEnd"),
        Some(HookCli::Gemini),
        None,
    );
    assert_eq!(end.unwrap().event, HookEvent::SessionEnd);
}

#[test]
fn gemini_before_agent_needs_its_prompt_and_events_stay_with_their_cli() {
    let no_prompt =
        parse_input(&gemini("BeforeAgent", json!({})), Some("BeforeAgent"), Some(HookCli::Gemini), None);
    assert_eq!(no_prompt, Err(HookError::Missing("prompt")));
    let claude_event =
        parse_input(&gemini("UserPromptSubmit", json!({ "prompt": "x" })), None, Some(HookCli::Gemini), None);
    assert_eq!(claude_event, Err(HookError::NotAnEventOf { cli: "gemini", event: "UserPromptSubmit" }));
    let gemini_event = parse_input(&claude("AfterTool", json!({})), None, Some(HookCli::Claude), None);
    assert_eq!(gemini_event, Err(HookError::NotAnEventOf { cli: "claude", event: "AfterTool" }));
}

#[test]
fn gemini_session_start_never_answers_context() {
    let context = HookReply { context: Some("a notice".into()), block: None };
    assert_eq!(render_output(HookCli::Gemini, HookEvent::SessionStart, &context), None);
    let before = render_output(HookCli::Gemini, HookEvent::BeforeAgent, &context).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&before).unwrap(),
        json!({ "hookSpecificOutput": { "hookEventName": "BeforeAgent", "additionalContext": "a notice" } })
    );
    assert!(
        render_output(HookCli::Gemini, HookEvent::AfterTool, &context).unwrap().contains("\"AfterTool\"")
    );
    assert_eq!(render_output(HookCli::Gemini, HookEvent::SessionEnd, &context), None);
}

#[test]
fn installed_events_per_cli() {
    let names = |c: HookCli| c.events().iter().map(|e| e.as_str()).collect::<Vec<_>>().join(",");
    assert_eq!(
        names(HookCli::Claude),
        "SessionStart,UserPromptSubmit,PreToolUse,PostToolUse,Stop,SubagentStart,SubagentStop,SessionEnd"
    );
    assert_eq!(
        names(HookCli::Codex),
        "SessionStart,UserPromptSubmit,PreToolUse,PostToolUse,Stop,SubagentStart,SubagentStop"
    );
    assert_eq!(names(HookCli::Gemini), "SessionStart,BeforeAgent,BeforeTool,AfterTool,SessionEnd");
    assert_eq!(names(HookCli::Pi), "SessionStart,UserPromptSubmit,BeforeAgent,PostToolUse,SessionEnd");
}

const PI_SESSION: &str = "01a248af-5adb-77fa-b51a-3a39a95ea49c";

/// What the Pi extension posts as `input` (its `session()` plus the event's fields).
fn pi(event: &str, extra: Value) -> Vec<u8> {
    let transcript = "/home/u/.pi/agent/sessions/--home-u-work-demo--/2026-12-06T00-09-41-341Z_01a248af-5adb-77fa-b51a-3a39a95ea49c.jsonl";
    stdin(PI_SESSION, transcript, event, json!({}), extra)
}

/// The extension's prompt carries the user message's timestamp as its turn id (the monitor reads the
/// same `message.timestamp`); its `BeforeAgent` asks for notices with no prompt; Pi sends no Claude or
/// Gemini-only event.
#[test]
fn pi_extension_events_map_and_carry_the_message_timestamp() {
    let parse_pi =
        |event: &str, extra: Value| parse_input(&pi(event, extra), Some(event), Some(HookCli::Pi), None);
    let prompt =
        parse_pi("UserPromptSubmit", json!({ "prompt": "Typed into the TUI.", "turn_id": "1796515267060" }))
            .unwrap();
    assert_eq!((prompt.cli, prompt.event), (HookCli::Pi, HookEvent::UserPromptSubmit));
    assert_eq!(prompt.turn_id.as_deref(), Some("1796515267060"));
    assert_eq!(prompt.session_id, PI_SESSION);
    assert_eq!(parse_pi("UserPromptSubmit", json!({})), Err(HookError::Missing("prompt")));
    let before = parse_pi("BeforeAgent", json!({})).unwrap();
    assert_eq!((before.event, before.prompt), (HookEvent::BeforeAgent, None));
    let tool = parse_pi("PostToolUse", json!({ "tool_name": "bash", "tool_use_id": "call_1" })).unwrap();
    assert_eq!(tool.tool_name.as_deref(), Some("bash"));
    assert_eq!(parse_pi("Stop", json!({})), Err(HookError::NotAnEventOf { cli: "pi", event: "Stop" }));
    assert_eq!(
        parse_pi("AfterTool", json!({})),
        Err(HookError::NotAnEventOf { cli: "pi", event: "AfterTool" })
    );
    let bad = parse_pi("UserPromptSubmit", json!({ "prompt": "x", "turn_id": "12 34" }));
    assert!(matches!(bad, Err(HookError::Invalid { field: "turn_id", .. })), "{bad:?}");
    let detected = parse_input(&pi("SessionStart", json!({})), None, None, None).unwrap();
    assert_eq!(detected.cli, HookCli::Pi, "by its sessions path");
    assert_eq!(HookCli::parse("pi"), Some(HookCli::Pi));
    let context = HookReply { context: Some("a notice".into()), block: None };
    assert_eq!(render_output(HookCli::Pi, HookEvent::SessionStart, &context), None);
}

/// A file-writing tool's `PostToolUse` names its paths and keeps none of the content it carried; its
/// `PreToolUse` (the write has not happened) and other tools name none.
#[test]
fn write_tools_post_their_paths_only() {
    let write =
        json!({ "tool_name": "Write", "tool_input": { "file_path": "src/a.rs", "content": "SECRET" } });
    let post = parse(&claude("PostToolUse", write.clone()));
    assert_eq!(post.written_paths, ["src/a.rs"]);
    assert!(!format!("{post:?}").contains("SECRET"));
    assert!(parse(&claude("PreToolUse", write)).written_paths.is_empty());
    let patch = json!({ "tool_name": "apply_patch", "tool_input": { "command": "*** Begin Patch\n*** Update File: b.rs\n+SECRET\n*** End Patch" } });
    assert_eq!(parse(&codex("PostToolUse", patch)).written_paths, ["b.rs"]);
    let bash = json!({ "tool_name": "Bash", "tool_input": { "command": "echo > c.rs" } });
    assert!(parse(&claude("PostToolUse", bash)).written_paths.is_empty());
}
