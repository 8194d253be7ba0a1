//! Workspace membership through the hooks (`POST /v1/hooks`): moving to another directory ends the
//! watch, `sessions_unwatch` ends it for good, `[workspace] awareness = "off"` turns it all off, the
//! idle timer and a graceful stop record a turn's edits, and an explicit watch survives leaving.

use crate::support::*;
use serde_json::{Value, json};
use sessionwatch_server::Config;
use std::path::Path;

const A: &str = "aaaaaaaa-2222-4222-8222-00000000000a";
const B: &str = "bbbbbbbb-2222-4222-8222-00000000000b";

fn key(s: &str) -> String {
    format!("agent:main:claude:{s}")
}

fn repo(dir: &Path, name: &str) -> std::path::PathBuf {
    let r = std::fs::canonicalize(dir).unwrap().join(name);
    std::fs::create_dir_all(&r).unwrap();
    let out = std::process::Command::new("git").args(["init", "-q"]).current_dir(&r).output().unwrap();
    assert!(out.status.success());
    r
}

async fn hook(h: &Harness, session: &str, event: &str, cwd: &Path, extra: Value) -> Value {
    let mut input = json!({ "session_id": session, "cwd": cwd, "hook_event_name": event });
    input.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let r = h.post("/v1/hooks", json!({ "cli": "claude", "event": event, "input": input })).await;
    assert_eq!(r.status, 200, "{event}: {}", r.body);
    r.body
}

/// The notices a prompt of `session` in `cwd` drains.
async fn prompt(h: &Harness, session: &str, cwd: &Path) -> usize {
    let out = hook(h, session, "UserPromptSubmit", cwd, json!({ "prompt": "go" })).await;
    out["additionalContext"].as_str().map_or(0, |t| t.lines().filter(|l| l.starts_with("- Session")).count())
}

async fn write(h: &Harness, session: &str, cwd: &Path, file: &str) {
    let tool = json!({ "tool_name": "Edit", "tool_input": { "file_path": file, "old_string": "a", "new_string": "b" } });
    hook(h, session, "PostToolUse", cwd, tool).await;
}

async fn start_both(h: &Harness, cwd: &Path) {
    for s in [A, B] {
        hook(h, s, "SessionStart", cwd, json!({ "source": "startup" })).await;
        assert_eq!(prompt(h, s, cwd).await, 0);
    }
}

fn workspace_key(h: &Harness, session: &str) -> String {
    h.gateway.workspace_of(&key(session)).expect("a member")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_the_worktree_or_unwatching_ends_the_watch() {
    let h = Harness::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (app, elsewhere) = (repo(dir.path(), "app"), repo(dir.path(), "elsewhere"));
    start_both(&h, &app).await;
    let ws = workspace_key(&h, A);
    assert_eq!(h.gateway.workspace_members(&ws), [key(A), key(B)]);
    let listed = h.tool(&key(A), "sessions_list", json!({ "kinds": "workspace" })).await;
    assert_eq!(listed["sessions"][0]["key"], ws);
    assert_eq!(listed["sessions"][0]["kind"], "workspace");
    // Its dashboard page names its members and who changed what.
    write(&h, A, &app, "w.rs").await;
    hook(&h, A, "Stop", &app, json!({})).await;
    let page = h.client.get(format!("{}{}", h.base, chat_path(&ws))).bearer_auth(TOKEN).send().await.unwrap();
    let page = page.text().await.unwrap();
    assert_eq!(page.matches("<td>workspace</td>").count(), 2, "both members: {page}");
    assert!(page.contains(&format!("1 file changed by {}", key(A))), "{page}");
    let members = page
        .split("<section id=\"members\">")
        .nth(1)
        .expect("a members section")
        .split("</section>")
        .next()
        .unwrap();
    assert!(
        members.contains("Members (2)") && members.contains(&key(A)) && members.contains(&key(B)),
        "{members}"
    );
    assert!(page.contains("<span class=\"paths\"><code>w.rs</code></span>"), "what A changed: {page}");
    let a_page =
        h.client.get(format!("{}{}", h.base, chat_path(&key(A)))).bearer_auth(TOKEN).send().await.unwrap();
    assert!(!a_page.text().await.unwrap().contains("id=\"members\""), "only a workspace has members");
    assert_eq!(prompt(&h, B, &app).await, 1);

    // B moves to another repository: its watch on `app` ends, so A's edit there is not B's business.
    assert_eq!(prompt(&h, B, &elsewhere).await, 0);
    assert_ne!(workspace_key(&h, B), ws);
    assert_eq!(h.gateway.workspace_members(&ws), [key(A)]);
    write(&h, A, &app, "x.rs").await;
    hook(&h, A, "Stop", &app, json!({})).await;
    assert_eq!(prompt(&h, B, &elsewhere).await, 0);

    // Back in `app`, B watches it again from now on; then unwatches it, which sticks.
    assert_eq!(prompt(&h, B, &app).await, 0, "what happened while away is not news");
    write(&h, A, &app, "y.rs").await;
    hook(&h, A, "Stop", &app, json!({})).await;
    assert_eq!(prompt(&h, B, &app).await, 1);
    let un = h.tool(&key(B), "sessions_unwatch", json!({ "sessionKey": ws })).await;
    assert_eq!(un["unwatched"], true, "{un}");
    write(&h, A, &app, "z.rs").await;
    hook(&h, A, "Stop", &app, json!({})).await;
    assert_eq!(prompt(&h, B, &app).await, 0, "unwatched");

    // An explicit watch is the person's: leaving the worktree keeps it.
    let path = format!("/v1/sessions/{}/watchers/{}", enc(&ws), enc(&key(A)));
    let watched = h.request(reqwest::Method::PUT, &path, None).await;
    assert_eq!(watched.status, 200, "{}", watched.body);
    assert_eq!(prompt(&h, A, &elsewhere).await, 0);
    let status = h.tool(&key(A), "session_status", json!({ "sessionKey": ws })).await;
    assert!(status.is_object());
    let edges = h.gateway.kernel().cursor(&key(A), &ws).await.unwrap();
    assert_eq!(edges.map(|c| c.provenance), Some(sessionwatch_core::Provenance::Explicit));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_are_recorded_when_the_turn_goes_idle_or_the_gateway_stops() {
    let h = Harness::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = repo(dir.path(), "app");
    start_both(&h, &app).await;
    let ws = workspace_key(&h, A);
    let events = |h: &Harness| {
        let (g, ws) = (h.gateway.clone(), ws.clone());
        async move { g.kernel().head(&ws, "main").await.unwrap().head }
    };
    let created = events(&h).await;
    write(&h, A, &app, "a.rs").await;
    write(&h, A, &app, "a.rs").await;
    assert_eq!(events(&h).await, created, "held for A's turn");
    tokio::time::sleep(std::time::Duration::from_millis(5_500)).await;
    assert_eq!(events(&h).await, created + 1, "recorded once A went idle");

    write(&h, A, &app, "b.rs").await;
    let dir = h.stop().await;
    let config = Config { data_dir: dir.path().to_path_buf(), ..Config::default() };
    let h = Harness::start_in(dir, config, None).await;
    assert_eq!(prompt(&h, B, &app).await, 1, "recorded at the stop, kept across the restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn awareness_off_makes_no_workspace() {
    let mut config = Config::default();
    config.set("workspace.awareness", "off").unwrap();
    let h = Harness::start_with(config, None).await;
    let dir = tempfile::tempdir().unwrap();
    let app = repo(dir.path(), "app");
    start_both(&h, &app).await;
    write(&h, A, &app, "a.rs").await;
    hook(&h, A, "Stop", &app, json!({})).await;
    assert_eq!(prompt(&h, B, &app).await, 0);
    assert_eq!(h.gateway.workspace_of(&key(A)), None);
    let listed = h.tool(&key(A), "sessions_list", json!({ "kinds": ["workspace"] })).await;
    assert_eq!(listed["sessions"], json!([]));
}
