//! A remote node's workspace through the node protocol: sessions A and B hooked on node `buildbox`
//! (`POST /v1/hooks` with `node` and the worktree the node resolved) share the node's workspace
//! session; the node's head reports (`POST /v1/node/heads`, node token) become `head_moved`; a local
//! session in a repository of the same name — here even the same path and hash — hears nothing; and a
//! report the gateway refuses changes nothing.

use crate::support::*;
use serde_json::{Value, json};
use std::path::Path;

const NODE: &str = "buildbox";
const A: &str = "aaaaaaaa-3333-4333-8333-00000000000a";
const B: &str = "bbbbbbbb-3333-4333-8333-00000000000b";
const L: &str = "cccccccc-3333-4333-8333-00000000000c";
/// The node's spelling of the worktree (the gateway never reads it).
const NODE_TOP: &str = "/home/dev/app";

fn node_key(s: &str) -> String {
    format!("agent:main:claude@{NODE}:{s}")
}

fn local_key(s: &str) -> String {
    format!("agent:main:claude:{s}")
}

/// A git repository named `app` in `dir`: the gateway's own, and (same path) the node's.
fn app_repo(dir: &Path) -> std::path::PathBuf {
    let app = std::fs::canonicalize(dir).unwrap().join("app");
    std::fs::create_dir_all(&app).unwrap();
    let git = std::process::Command::new("git").args(["init", "-q"]).current_dir(&app).output().unwrap();
    assert!(git.status.success());
    app
}

/// The worktree as `sessionwatch hook --node` resolves and sends it (`paths` relative to it).
fn resolved(app: &Path, paths: &[&str]) -> Value {
    let w = sessionwatch_upstream::workspace::resolve(app);
    json!({ "name": w.name, "hash": w.hash, "gitDir": w.git_dir().unwrap(), "paths": paths,
        "head": { "reflogOffset": 100, "head": { "branch": "main", "shortId": "1a2b3c4" } } })
}

async fn node_hook(h: &Harness, s: &str, event: &str, workspace: Value, extra: Value) -> Reply {
    let mut input = json!({ "session_id": s, "cwd": NODE_TOP, "hook_event_name": event });
    input.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let body =
        json!({ "cli": "claude", "event": event, "node": NODE, "workspace": workspace, "input": input });
    h.post("/v1/hooks", body).await
}

fn notices(reply: &Reply) -> Vec<String> {
    assert_eq!(reply.status, 200, "{}", reply.body);
    let text = reply.body["additionalContext"].as_str().unwrap_or("");
    text.lines().filter(|l| l.starts_with("- Session")).map(str::to_string).collect()
}

async fn node_prompt(h: &Harness, s: &str, app: &Path) -> Vec<String> {
    notices(&node_hook(h, s, "UserPromptSubmit", resolved(app, &[]), json!({ "prompt": "go" })).await)
}

async fn local_prompt(h: &Harness, app: &Path) -> Vec<String> {
    let input = json!({ "session_id": L, "cwd": app, "hook_event_name": "UserPromptSubmit", "prompt": "go" });
    notices(
        &h.post("/v1/hooks", json!({ "cli": "claude", "event": "UserPromptSubmit", "input": input })).await,
    )
}

async fn node_post(h: &Harness, token: &str, path: &str, body: Value) -> Reply {
    let resp =
        h.client.post(format!("{}{path}", h.base)).bearer_auth(token).json(&body).send().await.unwrap();
    let status = resp.status().as_u16();
    Reply { status, body: resp.json().await.unwrap_or(Value::Null) }
}

/// The events a notice's reconcile answers.
async fn reconcile(h: &Harness, caller: &str, notice: &str) -> Vec<Value> {
    let target = notice.split('"').nth(1).unwrap();
    let st = h
        .tool(caller, "session_status", json!({ "sessionKey": target, "changesSince": since_of(notice) }))
        .await;
    st["stateChanges"]["events"].as_array().unwrap().clone()
}

/// The events behind the one notice node session `s` finds at its next prompt.
async fn notified_events(h: &Harness, s: &str, app: &Path) -> Vec<Value> {
    let n = node_prompt(h, s, app).await;
    assert_eq!(n.len(), 1, "{s}: {n:?}");
    reconcile(h, &node_key(s), &n[0]).await
}

fn head(branch: &str, id: &str) -> Value {
    json!({ "branch": branch, "shortId": id })
}

fn moved_to(ws: &str, from: &Value, to_offset: u64, branch: &str, at_ms: i64) -> Value {
    json!({ "workspaceKey": ws, "from": from,
        "to": { "reflogOffset": to_offset, "head": head(branch, "5d6e7f8") },
        "moved": { "kind": "checkout", "from": from["head"], "to": head(branch, "5d6e7f8"),
            "dedupeKey": format!("head-moved:{to_offset}"), "movedAtMs": at_ms } })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_s_sessions_share_the_node_s_workspace_and_its_head_reports() {
    let h = Harness::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = app_repo(dir.path());
    let issued = h.post("/v1/nodes", json!({ "name": NODE })).await;
    let token = issued.body["token"].as_str().unwrap_or_else(|| panic!("{}", issued.body)).to_string();

    for s in [A, B] {
        let started =
            node_hook(&h, s, "SessionStart", resolved(&app, &[]), json!({ "source": "startup" })).await;
        assert!(notices(&started).is_empty());
        assert!(node_prompt(&h, s, &app).await.is_empty(), "nothing happened yet");
    }
    // L works on the gateway's own machine in the very directory the node named: another workspace.
    let input =
        json!({ "session_id": L, "cwd": app, "hook_event_name": "SessionStart", "source": "startup" });
    h.post("/v1/hooks", json!({ "cli": "claude", "event": "SessionStart", "input": input })).await;
    assert!(local_prompt(&h, &app).await.is_empty());
    let ws = h.gateway.workspace_of(&node_key(A)).expect("A is a member");
    assert!(ws.starts_with(&format!("agent:main:workspace@{NODE}:app-")), "{ws}");
    assert_eq!(h.gateway.workspace_members(&ws), [node_key(A), node_key(B)]);
    assert_ne!(h.gateway.workspace_of(&local_key(L)), Some(ws.clone()));

    // sessions_list names the members on the workspace rows only.
    let listed = h.tool(&node_key(A), "sessions_list", json!({ "kinds": ["workspace"] })).await;
    let row = listed["sessions"].as_array().unwrap().iter().find(|r| r["key"] == ws).unwrap().clone();
    assert_eq!(row["members"], json!([node_key(A), node_key(B)]));
    let others = h.tool(&node_key(A), "sessions_list", json!({})).await;
    assert!(
        others["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| (r["kind"] == "workspace") == r.get("members").is_some())
    );

    // A's Edit on the node (paths as the node made them relative) reaches B once, naming the file and A.
    let edit = json!({ "tool_name": "Edit", "tool_input": { "file_path": "/home/dev/app/src/lib.rs" } });
    let r = node_hook(&h, A, "PostToolUse", resolved(&app, &["src/lib.rs"]), edit).await;
    assert_eq!(r.status, 200, "{}", r.body);
    node_hook(&h, A, "Stop", resolved(&app, &[]), json!({})).await;
    let events = notified_events(&h, B, &app).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0]["kind"].as_str(), events[0]["actorId"].as_str()),
        (Some("files_changed"), Some(node_key(A).as_str()))
    );
    assert_eq!(events[0]["payload"]["paths"], json!(["src/lib.rs"]));
    assert!(node_prompt(&h, A, &app).await.is_empty(), "its own edit");
    assert!(local_prompt(&h, &app).await.is_empty(), "the gateway's own worktree of that name");

    // The sync answer names the git dir to follow, from the position the first hook sent.
    let sync = node_post(&h, &token, "/v1/node/sync", json!({ "catalog": [] })).await;
    assert_eq!(sync.status, 200, "{}", sync.body);
    let followed = sync.body["workspaces"].as_array().unwrap();
    assert_eq!(followed.len(), 1, "{}", sync.body);
    assert_eq!(followed[0]["workspaceKey"], ws);
    let position = followed[0]["position"].clone();
    assert_eq!(position["reflogOffset"], 100);

    // The node reports `checkout -b x`: A and B each hear of it once, naming the branch; L nothing.
    let report = moved_to(&ws, &position, 180, "x", now_ms());
    let r = node_post(&h, &token, "/v1/node/heads", json!([report])).await;
    assert_eq!((r.status, r.body["recorded"].as_u64()), (200, Some(1)), "{}", r.body);
    let again = node_post(&h, &token, "/v1/node/heads", json!([report])).await;
    assert_eq!(
        (again.body["recorded"].as_u64(), again.body["stale"].as_u64()),
        (Some(0), Some(1)),
        "compare-and-set"
    );
    for s in [A, B] {
        let events = notified_events(&h, s, &app).await;
        let moved: Vec<&Value> = events.iter().filter(|e| e["kind"] == "head_moved").collect();
        assert_eq!(moved.len(), 1, "{events:?}");
        assert_eq!(moved[0]["summary"], "branch main → x");
        assert_eq!(moved[0]["actorType"], "human");
        assert!(node_prompt(&h, s, &app).await.is_empty(), "once");
    }
    assert!(local_prompt(&h, &app).await.is_empty());
    let position = node_post(&h, &token, "/v1/node/sync", json!({ "catalog": [] })).await.body["workspaces"]
        [0]["position"]
        .clone();
    assert_eq!(position["reflogOffset"], 180);

    // A move while A's shell call (a hook on the node) runs is A's: B hears of it, A does not.
    let bash = json!({ "tool_name": "Bash", "tool_input": { "command": "git checkout -b y" } });
    node_hook(&h, A, "PreToolUse", resolved(&app, &[]), bash.clone()).await;
    let r =
        node_post(&h, &token, "/v1/node/heads", json!([moved_to(&ws, &position, 260, "y", now_ms())])).await;
    assert_eq!(r.body["recorded"], 1, "{}", r.body);
    node_hook(&h, A, "PostToolUse", resolved(&app, &[]), bash).await;
    let events = notified_events(&h, B, &app).await;
    assert_eq!(
        (events[0]["kind"].as_str(), events[0]["actorId"].as_str()),
        (Some("head_moved"), Some(node_key(A).as_str()))
    );
    assert!(node_prompt(&h, A, &app).await.is_empty(), "its own move");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_s_invalid_workspace_reports_are_refused_and_change_nothing() {
    let h = Harness::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = app_repo(dir.path());
    let token =
        h.post("/v1/nodes", json!({ "name": NODE })).await.body["token"].as_str().unwrap().to_string();
    let laptop =
        h.post("/v1/nodes", json!({ "name": "laptop" })).await.body["token"].as_str().unwrap().to_string();
    for s in [A, B] {
        node_hook(&h, s, "SessionStart", resolved(&app, &[]), json!({ "source": "startup" })).await;
        assert!(node_prompt(&h, s, &app).await.is_empty());
    }
    let ws = h.gateway.workspace_of(&node_key(A)).unwrap();
    let version = |h: &Harness| {
        let (g, ws) = (h.gateway.clone(), ws.clone());
        async move { g.kernel().head(&ws, "main").await.unwrap().head }
    };
    let before = version(&h).await;
    let sync = node_post(&h, &token, "/v1/node/sync", json!({ "catalog": [] })).await;
    let position = sync.body["workspaces"][0]["position"].clone();

    // A hook's paths must stay inside the worktree; its workspace needs a node; its git dir is absolute.
    let edit = json!({ "tool_name": "Edit", "tool_input": { "file_path": "/etc/passwd" } });
    for (workspace, why) in [
        (resolved(&app, &["../../etc/passwd"]), "a path leaving the worktree"),
        (resolved(&app, &["/etc/passwd"]), "an absolute path"),
        (resolved(&app, &[".git/config"]), "the git dir"),
        (json!({ "name": "app", "hash": "not-hex!", "paths": ["a.rs"] }), "a bad hash"),
        (json!({ "name": "app", "hash": "1a2b3c4d", "gitDir": "relative/.git" }), "a relative git dir"),
        (json!({ "name": "app", "hash": "1a2b3c4d", "extra": 1 }), "an unknown field"),
    ] {
        let r = node_hook(&h, A, "PostToolUse", workspace, edit.clone()).await;
        assert_eq!(r.status, 400, "{why}: {}", r.body);
    }
    let local = json!({ "cli": "claude", "event": "PostToolUse", "workspace": resolved(&app, &["a.rs"]),
        "input": { "session_id": A, "cwd": "/x", "hook_event_name": "PostToolUse", "tool_name": "Edit" } });
    assert_eq!(h.post("/v1/hooks", local).await.status, 400, "a workspace without a node");

    // Head reports: of another node's workspace, of an unknown kind, with a bad id, a batch holding one
    // bad report, a workspace key that is not one.
    let good = moved_to(&ws, &position, 180, "x", now_ms());
    let mut bad_kind = good.clone();
    bad_kind["moved"]["kind"] = json!("teleport");
    let mut bad_id = good.clone();
    bad_id["to"]["head"]["shortId"] = json!("zz top");
    let mut control = good.clone();
    control["moved"]["to"]["branch"] = json!("x\u{1b}[31m");
    for (token, body, status, why) in [
        (&laptop, json!([good.clone()]), 403, "another node's workspace"),
        (&token, json!([good.clone(), bad_kind]), 400, "one bad report in a batch"),
        (&token, json!([bad_id]), 400, "a short id that is not hex"),
        (&token, json!([control]), 400, "control characters in a branch"),
        (&token, json!([moved_to(&node_key(A), &position, 180, "x", 0)]), 400, "not a workspace key"),
        (&token, json!([{ "workspaceKey": ws, "to": {} }]), 400, "a malformed report"),
    ] {
        let r = node_post(&h, token, "/v1/node/heads", body).await;
        assert_eq!(r.status, status, "{why}: {}", r.body);
    }
    assert_eq!(version(&h).await, before, "nothing was recorded");
    let after = node_post(&h, &token, "/v1/node/sync", json!({ "catalog": [] })).await;
    assert_eq!(after.body["workspaces"][0]["position"], position, "the position did not move");
    assert!(node_prompt(&h, B, &app).await.is_empty(), "nobody was told anything");
}
