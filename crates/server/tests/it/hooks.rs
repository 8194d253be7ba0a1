//! Claude Code and Codex hooks (`POST /v1/hooks`): adoption at SessionStart, prompts recorded once
//! (also when the file monitor reads the same turn), notices inside the watcher's own turn, Stop
//! blocking once, sub-agents as spawn edges, and bad input that changes nothing.

use crate::bad_input::dump;
use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const MANAGER: &str = "aaaaaaaa-1111-4222-8333-444444444444";
const WORKER: &str = "bbbbbbbb-1111-4222-8333-444444444444";

fn key(session: &str) -> String {
    format!("agent:main:claude:{session}")
}

/// A Claude Code home with a project directory; transcripts appear as turns are written.
struct ClaudeHome {
    _dir: tempfile::TempDir,
    project: PathBuf,
}

impl ClaudeHome {
    fn new(h: &Harness) -> ClaudeHome {
        let (dir, project) = h.temp_home(".claude/projects/-home-u-work-demo");
        ClaudeHome { _dir: dir, project }
    }

    fn transcript(&self, session: &str) -> PathBuf {
        self.project.join(format!("{session}.jsonl"))
    }

    /// Appends the user row Claude Code writes for a typed prompt.
    fn write_prompt(&self, session: &str, prompt_id: &str, text: &str) {
        let row = json!({
            "parentUuid": null, "isSidechain": false, "promptId": prompt_id, "type": "user",
            "message": { "role": "user", "content": text }, "uuid": uuid(), "timestamp": "2026-12-04T02:00:00.000Z",
            "origin": { "kind": "human" }, "promptSource": "typed", "userType": "external",
            "cwd": "/home/u/work/demo", "sessionId": session,
        });
        append_rows(&self.transcript(session), [row]);
    }
}

fn uuid() -> String {
    format!("{:032x}", rand_u128())
}

fn rand_u128() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

fn input(home: &ClaudeHome, session: &str, event: &str, extra: Value) -> Value {
    let common = json!({
        "session_id": session,
        "transcript_path": home.transcript(session),
        "cwd": "/home/u/work/demo",
        "hook_event_name": event,
    });
    merged(common, extra)
}

async fn hook(h: &Harness, home: &ClaudeHome, session: &str, event: &str, extra: Value) -> Value {
    h.hook("claude", event, input(home, session, event, extra)).await
}

/// The input of a Codex hook of `thread` (its rollout at `rollout`).
fn codex_input(thread: &str, rollout: &Path, event: &str, extra: Value) -> Value {
    let common = json!({
        "session_id": thread, "transcript_path": rollout, "cwd": "/home/u/work/demo", "hook_event_name": event,
    });
    merged(common, extra)
}

async fn prompt(h: &Harness, home: &ClaudeHome, session: &str, prompt_id: &str, text: &str) -> Value {
    hook(h, home, session, "UserPromptSubmit", json!({ "prompt_id": prompt_id, "prompt": text })).await
}

/// A gateway where the manager and a worker both started (adopted by their SessionStart), the manager
/// watching the worker.
async fn manager_and_worker() -> (Harness, ClaudeHome) {
    let h = Harness::start().await;
    let home = ClaudeHome::new(&h);
    for s in [MANAGER, WORKER] {
        let started = hook(&h, &home, s, "SessionStart", json!({ "source": "startup" })).await;
        assert_eq!(started["sessionKey"], key(s));
        assert_eq!(started["additionalContext"], Value::Null);
    }
    h.send_and_watch(&key(MANAGER), &key(WORKER), "take the parser").await;
    (h, home)
}

/// The kinds of a `session_status` page's events, in order.
fn event_kinds(status: &Value) -> Vec<&str> {
    status["stateChanges"]["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect()
}

fn human_events(h: &Harness, session: &str) -> usize {
    h.human_events(&key(session))
}

#[tokio::test]
async fn session_start_adopts_the_session_once() {
    let h = Harness::start().await;
    let home = ClaudeHome::new(&h);
    for _ in 0..2 {
        hook(&h, &home, WORKER, "SessionStart", json!({ "source": "startup" })).await;
    }
    let status = h.tool(&key(WORKER), "session_status", json!({ "changesSince": 0 })).await;
    let kinds = event_kinds(&status);
    assert_eq!(kinds, ["created", "adopted"], "idempotent");
    let catalog = h.request(reqwest::Method::GET, "/v1/catalog", None).await;
    assert_eq!(catalog.status, 200);
}

#[tokio::test]
async fn a_human_prompt_notifies_the_watching_manager_inside_its_next_prompt_once() {
    let (h, home) = manager_and_worker().await;
    let typed = prompt(&h, &home, WORKER, "p-1", "use the new grammar instead").await;
    assert_eq!(typed["recorded"], true);
    assert_eq!(typed["additionalContext"], Value::Null, "the worker itself has nothing pending");
    // Nothing mid-turn until there is something: a tool call of the worker says nothing.
    let quiet =
        hook(&h, &home, WORKER, "PostToolUse", json!({ "tool_name": "Bash", "tool_use_id": "t1" })).await;
    assert_eq!(quiet["additionalContext"], Value::Null);

    let next = prompt(&h, &home, MANAGER, "m-2", "how is it going?").await;
    let context = next["additionalContext"].as_str().expect("the notice is in the manager's prompt");
    assert!(context.contains(&format!("Session \"{}\" changed (other actor)", key(WORKER))), "{context}");
    assert!(context.contains("changesSince"), "{context}");
    let again =
        hook(&h, &home, MANAGER, "PostToolUse", json!({ "tool_name": "Bash", "tool_use_id": "t2" })).await;
    assert_eq!(again["additionalContext"], Value::Null, "delivered once");
}

#[tokio::test]
async fn a_long_manager_turn_learns_mid_turn_from_post_tool_use() {
    let (h, home) = manager_and_worker().await;
    prompt(&h, &home, WORKER, "p-1", "stop, wrong branch").await;
    let mid =
        hook(&h, &home, MANAGER, "PostToolUse", json!({ "tool_name": "Bash", "tool_use_id": "t1" })).await;
    assert!(mid["additionalContext"].as_str().unwrap().contains(&key(WORKER)));
}

/// The same typed turn reaches us twice: from the hook at once, and from the transcript when the file
/// monitor ticks. Both derive the key from Claude's prompt id: one event.
#[tokio::test]
async fn a_turn_seen_by_the_hook_and_the_file_monitor_is_one_event() {
    let (h, home) = manager_and_worker().await;
    prompt(&h, &home, WORKER, "p-1", "one turn").await;
    home.write_prompt(WORKER, "p-1", "one turn");
    let tick = h.tick().await;
    assert_eq!(tick["links"], 1, "{tick}");
    assert_eq!(human_events(&h, WORKER), 1, "hook + monitor: {tick}");
    // A turn the hook did not see (hooks installed later) is still the monitor's to record.
    home.write_prompt(WORKER, "p-2", "typed while the hook was off");
    h.tick().await;
    assert_eq!(human_events(&h, WORKER), 2);
    // And the hook for a turn the monitor already recorded adds nothing.
    assert_eq!(prompt(&h, &home, WORKER, "p-2", "typed while the hook was off").await["recorded"], false);
    assert_eq!(human_events(&h, WORKER), 2);
}

#[tokio::test]
async fn a_prompt_sessionwatch_delivered_is_not_a_human_turn() {
    let (h, home) = manager_and_worker().await;
    let echo = prompt(&h, &home, WORKER, "p-1", "take the parser").await;
    assert_eq!(echo["recorded"], false, "the manager's sessions_send text, typed in by the runtime");
    assert_eq!(human_events(&h, WORKER), 0);
    assert_eq!(prompt(&h, &home, MANAGER, "m-1", "status?").await["additionalContext"], Value::Null);
}

#[tokio::test]
async fn stop_blocks_once_with_the_notice_and_never_loops() {
    let (h, home) = manager_and_worker().await;
    let idle = hook(&h, &home, MANAGER, "Stop", json!({ "stop_hook_active": false })).await;
    assert_eq!(idle["block"], Value::Null, "nothing pending: the agent stops");
    prompt(&h, &home, WORKER, "p-1", "the spec changed").await;
    let active = hook(&h, &home, MANAGER, "Stop", json!({ "stop_hook_active": true })).await;
    assert_eq!(active["block"], Value::Null, "already continuing because of a stop hook: never block again");
    let first = hook(&h, &home, MANAGER, "Stop", json!({ "stop_hook_active": false })).await;
    assert!(first["block"].as_str().unwrap().contains(&key(WORKER)), "{}", first);
    let second = hook(&h, &home, MANAGER, "Stop", json!({ "stop_hook_active": false })).await;
    assert_eq!(second["block"], Value::Null, "at most one block per notice");
}

#[tokio::test]
async fn a_claude_sub_agent_is_a_spawn_edge() {
    let h = Harness::start().await;
    let home = ClaudeHome::new(&h);
    hook(&h, &home, MANAGER, "SessionStart", json!({ "source": "startup" })).await;
    let sub = json!({ "agent_id": "ab63d3cb1c2e79bd9", "agent_type": "general-purpose", "prompt_id": "m-1" });
    hook(&h, &home, MANAGER, "SubagentStart", sub.clone()).await;
    let child = "agent:main:subagent:claude-ab63d3cb1c2e79bd9";
    let db = rusqlite::Connection::open(h.dir.path().join("sessionwatch.db")).unwrap();
    let spawned_by: String = db
        .query_row("SELECT spawned_by FROM sessions WHERE session_key = ?1", [child], |r| r.get(0))
        .expect("the sub-agent is a session");
    assert_eq!(spawned_by, key(MANAGER));
    // A human stepping into the sub-agent notifies its parent, like any spawned child.
    h.human_turn(child, "a person steps into the sub-agent").await;
    let next = prompt(&h, &home, MANAGER, "m-2", "continue").await;
    assert!(next["additionalContext"].as_str().unwrap().contains(child), "{next}");
    hook(&h, &home, MANAGER, "SubagentStop", sub.clone()).await;
    hook(&h, &home, MANAGER, "SubagentStop", sub).await; // once
    let status =
        h.tool(&key(MANAGER), "session_status", json!({ "sessionKey": child, "changesSince": 0 })).await;
    let kinds = event_kinds(&status);
    assert_eq!(kinds.iter().filter(|k| **k == "child_spawned").count(), 1, "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "run_completed").count(), 1, "{kinds:?}");
}

#[tokio::test]
async fn bad_hook_bodies_are_refused_and_change_nothing() {
    let h = Harness::start().await;
    let home = ClaudeHome::new(&h);
    let good = input(&home, WORKER, "UserPromptSubmit", json!({ "prompt_id": "p", "prompt": "x" }));
    let with = |k: &str, v: Value| {
        let mut i = good.clone();
        i[k] = v;
        json!({ "cli": "claude", "event": "UserPromptSubmit", "input": i })
    };
    let rows = [
        ("unknown cli", json!({ "cli": "cursor", "event": "Stop", "input": good })),
        ("unknown event", json!({ "cli": "claude", "event": "Nope", "input": good })),
        ("event mismatch", json!({ "cli": "claude", "event": "Stop", "input": good })),
        ("input not an object", json!({ "cli": "claude", "event": "Stop", "input": "x" })),
        ("no input", json!({ "cli": "claude", "event": "Stop" })),
        ("extra field", json!({ "cli": "claude", "event": "UserPromptSubmit", "input": good, "x": 1 })),
        (
            "bad agent",
            json!({ "cli": "claude", "event": "UserPromptSubmit", "input": good, "agentId": "Bad Agent" }),
        ),
        ("path in session id", with("session_id", json!("../../etc/passwd"))),
        ("no prompt", with("prompt", Value::Null)),
        ("prompt not text", with("prompt", json!(["x"]))),
        ("bad prompt id", with("prompt_id", json!("a b"))),
    ];
    let before = dump(&h);
    for (name, body) in rows {
        let r = h.post("/v1/hooks", body).await;
        assert_eq!(r.status, 400, "{name}: {}", r.body);
        assert_eq!(r.body["error"]["type"], "invalid_argument", "{name}: {}", r.body);
        assert_eq!(dump(&h), before, "{name} wrote to the database");
    }
    assert!(!Path::new(&home.transcript(WORKER)).exists(), "we never write the CLI's files");
}

/// One identity: an MCP call carries the CLI's own ids in `_meta`; with no session header the gateway's
/// `/mcp` acts for the session they name. Claude Code: the tool-use id its `PreToolUse` hook announced
/// (right even after `/clear`); Codex: its thread id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_call_acts_for_the_session_its_cli_names() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let (h, home) = manager_and_worker().await;
    prompt(&h, &home, WORKER, "p-1", "a person steps in").await;
    let announced = hook(
        &h,
        &home,
        MANAGER,
        "PreToolUse",
        json!({ "tool_name": "mcp__sessionwatch__session_status", "tool_use_id": "toolu_01abc", "tool_input": {} }),
    )
    .await;
    assert_eq!(announced["additionalContext"], Value::Null);
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", h.base)).auth_header(TOKEN);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("initialize");
    let call = |meta: Value| {
        serde_json::from_value::<CallToolRequestParams>(
            json!({ "name": "session_status", "arguments": {}, "_meta": meta }),
        )
        .unwrap()
    };
    let claude = client.call_tool(call(json!({ "claudecode/toolUseId": "toolu_01abc" }))).await.unwrap();
    let structured = claude.structured_content.clone().unwrap();
    assert_eq!(structured["sessionKey"], key(MANAGER), "{structured}");
    let notices = structured["systemEvents"].as_array().expect("the manager's notices ride along");
    assert!(notices.iter().any(|n| n["text"].as_str().unwrap().contains(&key(WORKER))), "{structured}");

    let thread = "019ad2c4-5b1e-7c30-9f4e-2d8a6b1c0e77";
    let codex = client.call_tool(call(json!({ "threadId": thread, "sessionId": thread }))).await.unwrap();
    assert_eq!(codex.structured_content.unwrap()["sessionKey"], format!("agent:main:codex:{thread}"));
    let unknown =
        client.call_tool(call(json!({ "claudecode/toolUseId": "toolu_never_announced" }))).await.unwrap();
    assert_eq!(
        unknown.structured_content.unwrap()["sessionKey"],
        "agent:main:main",
        "no join: the default caller"
    );
    client.cancel().await.unwrap();
}

/// A Codex thread whose rollout does not exist yet when its `SessionStart` hook runs (the TUI writes the
/// rollout only with the first turn). The session is adopted from the hook's ids all the same, and the
/// baseline is taken when the file appears: what the file held then (history a resumed or forked thread
/// copies in) is no new human turn; the typed prompt is recorded once, by hook and monitor together.
#[tokio::test]
async fn a_codex_session_start_before_its_rollout_exists_is_adopted() {
    const THREAD: &str = "01a2361a-e5e2-70d2-8b99-d92b15fbab55";
    const OLD_TURN: &str = "01a23000-0000-7000-8000-000000000001";
    const TURN: &str = "01a2361a-f447-7822-8fee-39dd92e818b4";
    let h = Harness::start().await;
    let home = ClaudeHome::new(&h); // the manager is a Claude session
    let codex_home = home._dir.path().join(".codex");
    let rollout = codex_home.join(format!("sessions/2026/12/06/rollout-2026-12-06T09-34-22-{THREAD}.jsonl"));
    let codex_key = format!("agent:main:codex:{THREAD}");
    let codex = |event: &'static str, extra: Value| {
        let input = codex_input(THREAD, &rollout, event, merged(json!({ "model": "gpt-5.5" }), extra));
        h.hook("codex", event, input)
    };
    let started = codex("SessionStart", json!({ "source": "startup" })).await;
    assert_eq!(started["sessionKey"], codex_key);
    assert!(!rollout.exists(), "we never write the CLI's files");
    hook(&h, &home, MANAGER, "SessionStart", json!({ "source": "startup" })).await;
    h.send_and_watch(&key(MANAGER), &codex_key, "go").await;
    let tick = h.tick().await;
    assert_eq!(tick["missing"], 0, "an unwritten rollout is not a gone one: {tick}");

    // The rollout appears, with a copied-in turn from before this session started, then the typed turn.
    let human = |turn: &str, text: &str| {
        json!({ "timestamp": "2026-12-06T09:34:25.911Z", "type": "event_msg", "payload": {
            "type": "item_completed", "thread_id": THREAD, "turn_id": turn,
            "item": { "type": "UserMessage", "id": uuid(), "content": [{ "type": "text", "text": text }] } } })
    };
    let started_turn = |turn: &str| {
        json!({ "timestamp": "2026-12-06T09:34:25.891Z", "type": "event_msg",
            "payload": { "type": "task_started", "turn_id": turn } })
    };
    std::fs::create_dir_all(rollout.parent().unwrap()).unwrap();
    let meta = json!({ "timestamp": "2026-12-06T09:34:25.890Z", "type": "session_meta",
        "payload": { "id": THREAD, "cwd": "/home/u/work/demo" } });
    append_rows(&rollout, [meta, started_turn(OLD_TURN), human(OLD_TURN, "history")]);
    let tick = h.tick().await;
    assert_eq!(h.human_events(&codex_key), 0, "the file's history is no new turn: {tick}");

    let typed = codex("UserPromptSubmit", json!({ "turn_id": TURN, "prompt": "typed in the TUI" })).await;
    assert_eq!(typed["recorded"], true, "{typed}");
    append_rows(&rollout, [started_turn(TURN), human(TURN, "typed in the TUI")]);
    let tick = h.tick().await;
    assert_eq!(h.human_events(&codex_key), 1, "hook + monitor, one turn: {tick}");
}

/// A Codex steer (text typed while the agent works) joins the running turn and carries its `turn_id`:
/// it is a human turn of its own, whether its hook or the file monitor sees it first, and in whichever
/// tick the monitor reads it. It was once dropped as the prompt's duplicate.
#[tokio::test]
async fn a_codex_steer_is_a_turn_of_its_own() {
    const THREAD: &str = "01a2496a-c689-7130-964a-45492161b8d2";
    const TURN: &str = "01a2496a-ddba-72d0-9c02-305b1d760096";
    let h = Harness::start().await;
    let home = ClaudeHome::new(&h);
    let rollout = home
        ._dir
        .path()
        .join(format!(".codex/sessions/2026/12/06/rollout-2026-12-06T03-34-24-{THREAD}.jsonl"));
    let codex_key = format!("agent:main:codex:{THREAD}");
    let codex = |event: &'static str, extra: Value| {
        h.hook("codex", event, codex_input(THREAD, &rollout, event, extra))
    };
    let human = |text: &str| {
        json!({ "timestamp": "2026-12-06T03:34:40.000Z", "type": "event_msg", "payload": {
            "type": "item_completed", "thread_id": THREAD, "turn_id": TURN,
            "item": { "type": "UserMessage", "id": uuid(), "content": [{ "type": "text", "text": text }] } } })
    };
    std::fs::create_dir_all(rollout.parent().unwrap()).unwrap();
    append_rows(
        &rollout,
        [json!({ "timestamp": "2026-12-06T03:34:24.000Z", "type": "session_meta",
        "payload": { "id": THREAD, "cwd": "/home/u/work/demo" } })],
    );
    codex("SessionStart", json!({ "source": "startup" })).await;
    // The monitor reads sessions someone watches.
    hook(&h, &home, MANAGER, "SessionStart", json!({ "source": "startup" })).await;
    h.send_and_watch(&key(MANAGER), &codex_key, "go").await;
    let tick = || async {
        let t = h.tick().await;
        assert_eq!(t["links"], 1, "{t}");
    };

    // The prompt, by hook then monitor.
    let typed = codex("UserPromptSubmit", json!({ "turn_id": TURN, "prompt": "first prompt" })).await;
    assert_eq!(typed["recorded"], true, "{typed}");
    append_rows(
        &rollout,
        [
            json!({ "timestamp": "2026-12-06T03:34:39.000Z", "type": "event_msg",
            "payload": { "type": "task_started", "turn_id": TURN } }),
            human("first prompt"),
        ],
    );
    tick().await;
    assert_eq!(h.human_events(&codex_key), 1);
    // A steer into the same turn, by hook then monitor: one more.
    let steer = codex("UserPromptSubmit", json!({ "turn_id": TURN, "prompt": "steer it" })).await;
    assert_eq!(steer["recorded"], true, "the steer is no duplicate of the prompt: {steer}");
    append_rows(&rollout, [human("steer it")]);
    tick().await;
    assert_eq!(h.human_events(&codex_key), 2);
    // A second steer that only the monitor sees, in a later tick: one more.
    append_rows(&rollout, [human("and another")]);
    tick().await;
    assert_eq!(h.human_events(&codex_key), 3);
    // Its hook arriving late records nothing new.
    let late = codex("UserPromptSubmit", json!({ "turn_id": TURN, "prompt": "and  another" })).await;
    assert_eq!(late["recorded"], false, "{late}");
    assert_eq!(h.human_events(&codex_key), 3);
}
