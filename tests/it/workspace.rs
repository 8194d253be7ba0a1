//! Workspace awareness through the hooks, end to end: `sessionwatch hook <event>` with the CLIs' JSON on
//! stdin, a real `sessionwatch serve` (SQLite, then PostgreSQL), real git repositories.
//!
//! A (Claude Code) and B (Codex) work in one repository; C in another worktree of it, D in another
//! repository. Whatever one member does reaches the other's next prompt as exactly one notice, whose
//! reconcile names the change and its actor; the actor, C and D hear nothing; a restart between the
//! change and the turn keeps the notice; no file content or commit message reaches the database.

use crate::cli::hook_in;
use crate::support::Server;
use crate::support::git_fixture::{git, init_with_commit};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const A: &str = "aaaaaaaa-0000-4000-8000-00000000000a";
const B: &str = "019ad2c4-0000-7000-8000-00000000000b";
const C: &str = "cccccccc-0000-4000-8000-00000000000c";
const D: &str = "dddddddd-0000-4000-8000-00000000000d";
const CONTENT: &str = "SECRET-FILE-CONTENT-7f3a";
const COMMIT_MESSAGE: &str = "SECRET-COMMIT-MESSAGE-9b2c";

/// `repo` (A and B), `linked` (another worktree of it: C), `other` (another repository: D).
struct Repos {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    linked: PathBuf,
    other: PathBuf,
}

fn repos() -> Repos {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (repo, linked, other) = (root.join("app"), root.join("app-side"), root.join("lib"));
    for r in [&repo, &other] {
        std::fs::create_dir_all(r.join("src")).unwrap();
        init_with_commit(r, "README", "first");
    }
    git(&repo, &["worktree", "add", "-q", linked.to_str().unwrap(), "-b", "side"]);
    Repos { _dir: dir, repo, linked, other }
}

fn key(session: &str) -> String {
    let cli = if session == B { "codex" } else { "claude" };
    format!("agent:main:{cli}:{session}")
}

/// Runs one hook of `session` (B is Codex, the others Claude Code) in `cwd`; answers the notice lines
/// its output carries into the model's context.
fn hook(home: &Path, session: &str, event: &str, cwd: &Path, extra: Value) -> Vec<String> {
    let cli = if session == B { "codex" } else { "claude" };
    let mut input = json!({ "session_id": session, "cwd": cwd, "hook_event_name": event });
    input.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let env = [("SESSIONWATCH_HOOK_TIMEOUT_MS", "20000")];
    let (ok, out, err) = hook_in(home, &[event, "--agent", cli], &input.to_string(), &env);
    assert!(ok && !err.contains("cannot reach"), "{event}: {out} {err}");
    if out.trim().is_empty() {
        return vec![];
    }
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}: {e}"));
    let text = v["hookSpecificOutput"]["additionalContext"].as_str().or(v["reason"].as_str()).unwrap_or("");
    text.lines().filter(|l| l.starts_with("- Session")).map(str::to_string).collect()
}

fn prompt(home: &Path, session: &str, cwd: &Path) -> Vec<String> {
    hook(home, session, "UserPromptSubmit", cwd, json!({ "prompt": "go on" }))
}

/// A's Claude Code `Write` of `file` (relative to `cwd`), carrying content that must never be stored.
fn claude_write(home: &Path, session: &str, cwd: &Path, file: &str) {
    let tool = json!({ "tool_name": "Write", "tool_use_id": format!("toolu_{file}"),
        "tool_input": { "file_path": cwd.join(file), "content": CONTENT } });
    assert!(hook(home, session, "PreToolUse", cwd, tool.clone()).is_empty());
    hook(home, session, "PostToolUse", cwd, tool);
}

/// B's Codex `apply_patch` of `file`.
fn codex_patch(home: &Path, cwd: &Path, file: &str) {
    let patch = format!("*** Begin Patch\n*** Add File: {file}\n+{CONTENT}\n*** End Patch\n");
    let tool =
        json!({ "tool_name": "apply_patch", "tool_use_id": "call_1", "tool_input": { "command": patch } });
    hook(home, B, "PreToolUse", cwd, tool.clone());
    hook(home, B, "PostToolUse", cwd, tool);
}

fn changes_since(notice: &str) -> (String, u64) {
    let target = notice.split('"').nth(1).unwrap().to_string();
    let since = notice.rsplit("changesSince ").next().unwrap().trim_end_matches('.').parse().unwrap();
    (target, since)
}

/// The events a notice's reconcile answers.
async fn reconcile(server: &Server, caller: &str, notice: &str) -> Vec<Value> {
    let (target, since) = changes_since(notice);
    assert!(target.starts_with("agent:main:workspace:app-"), "{notice}");
    let status =
        server.tool(caller, "session_status", json!({ "sessionKey": target, "changesSince": since })).await;
    status["stateChanges"]["events"].as_array().unwrap().clone()
}

/// The scenario, on a gateway `start` starts (again, after a restart) with the data dir `home`.
async fn scenario(home: &Path, start: &dyn Fn() -> Server) -> Repos {
    let r = repos();
    let mut server = start();
    for (s, cwd) in [(A, &r.repo), (B, &r.repo.join("src")), (C, &r.linked), (D, &r.other)] {
        assert!(hook(home, s, "SessionStart", cwd, json!({ "source": "startup" })).is_empty());
        assert!(prompt(home, s, cwd).is_empty(), "nothing happened yet");
    }
    let (a_cwd, b_cwd) = (r.repo.clone(), r.repo.join("src"));

    // A's Edit reaches B's next prompt as one notice naming the file and A; A hears nothing of it.
    claude_write(home, A, &a_cwd, "src/lib.rs");
    assert!(hook(home, A, "Stop", &a_cwd, json!({ "stop_hook_active": false })).is_empty());
    let notices = prompt(home, B, &b_cwd);
    assert_eq!(notices.len(), 1, "{notices:?}");
    let events = reconcile(&server, &key(B), &notices[0]).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["kind"], "files_changed");
    assert_eq!(
        (events[0]["actorType"].as_str(), events[0]["actorId"].as_str()),
        (Some("agent"), Some(key(A).as_str()))
    );
    assert_eq!(events[0]["payload"]["paths"], json!(["src/lib.rs"]));
    assert_eq!(events[0]["summary"], format!("1 file changed by {}", key(A)));
    assert!(prompt(home, A, &a_cwd).is_empty(), "A is never told of its own edit");
    assert!(prompt(home, C, &r.linked).is_empty(), "another worktree hears nothing");
    assert!(prompt(home, D, &r.other).is_empty(), "another repository hears nothing");

    // Twenty edits by A before B's turn: one notice, one event listing them all.
    for i in 0..20 {
        claude_write(home, A, &a_cwd, &format!("src/m{i}.rs"));
    }
    hook(home, A, "Stop", &a_cwd, json!({ "stop_hook_active": false }));
    let notices = prompt(home, B, &b_cwd);
    assert_eq!(notices.len(), 1, "{notices:?}");
    let events = reconcile(&server, &key(B), &notices[0]).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["payload"]["paths"].as_array().unwrap().len(), 20);
    assert!(prompt(home, B, &b_cwd).is_empty(), "told once");

    // B's apply_patch reaches A; a restart between the change and A's turn keeps the notice.
    hook(home, B, "UserPromptSubmit", &b_cwd, json!({ "prompt": "patch it" }));
    codex_patch(home, &b_cwd, "notes.md");
    hook(home, B, "Stop", &b_cwd, json!({ "stop_hook_active": false }));
    server.kill(); // SIGKILL: nothing is flushed at exit
    server = start();
    let notices = prompt(home, A, &a_cwd);
    assert_eq!(notices.len(), 1, "{notices:?}");
    // (A's cursor never moved past A's own events, so its reconcile starts before them.)
    let events = reconcile(&server, &key(A), &notices[0]).await;
    let last = events.last().unwrap();
    assert_eq!(last["payload"]["paths"], json!(["src/notes.md"]), "relative to the worktree, not the cwd");
    assert_eq!(last["actorId"], key(B));
    assert!(events.iter().all(|e| e["kind"] == "files_changed"), "{events:?}");
    assert!(prompt(home, B, &b_cwd).is_empty());

    // The human at a shell: `git checkout -b x` reaches A and B once each, naming the branch.
    git(&r.repo, &["checkout", "-q", "-b", "x"]);
    for (s, cwd) in [(A, &a_cwd), (B, &b_cwd)] {
        let notices = prompt(home, s, cwd);
        assert_eq!(notices.len(), 1, "{s}: {notices:?}");
        let events = reconcile(&server, &key(s), &notices[0]).await;
        assert_eq!(events.last().unwrap()["kind"], "head_moved");
        let moved: Vec<&Value> = events.iter().filter(|e| e["kind"] == "head_moved").collect();
        assert_eq!(moved.len(), 1, "{events:?}");
        assert_eq!(moved[0]["summary"], "branch main → x");
        assert_eq!(moved[0]["actorType"], "human");
        assert!(moved[0]["payload"]["to"].as_str().unwrap().starts_with("x@"), "{:?}", moved[0]);
        assert!(prompt(home, s, cwd).is_empty(), "once");
    }
    assert!(prompt(home, C, &r.linked).is_empty(), "another worktree's HEAD did not move");
    assert!(prompt(home, D, &r.other).is_empty());

    // A commit made by A's shell call is A's: B hears of it, A does not.
    let bash =
        json!({ "tool_name": "Bash", "tool_use_id": "toolu_git", "tool_input": { "command": "git commit" } });
    hook(home, A, "PreToolUse", &a_cwd, bash.clone());
    std::fs::write(r.repo.join("c.txt"), CONTENT).unwrap();
    git(&r.repo, &["add", "."]);
    git(&r.repo, &["commit", "-qm", COMMIT_MESSAGE]);
    hook(home, A, "PostToolUse", &a_cwd, bash);
    let notices = prompt(home, B, &b_cwd);
    assert_eq!(notices.len(), 1, "{notices:?}");
    let events = reconcile(&server, &key(B), &notices[0]).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0]["kind"].as_str(), events[0]["actorId"].as_str()),
        (Some("head_moved"), Some(key(A).as_str()))
    );
    assert!(events[0]["summary"].as_str().unwrap().starts_with("commit on x: "), "{:?}", events[0]);
    assert!(prompt(home, A, &a_cwd).is_empty(), "its own commit");

    // The workspace is a session of its own kind, listed with the others.
    let listed = server.tool(&key(A), "sessions_list", json!({ "kinds": ["workspace"] })).await;
    let keys: Vec<&str> =
        listed["sessions"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys.len(), 3, "app, its linked worktree and lib: {keys:?}");
    assert!(keys.iter().any(|k| k.starts_with("agent:main:workspace:app-side-")), "{keys:?}");
    drop(server);
    r
}

fn assert_no_content(dump: &str) {
    assert!(!dump.contains(CONTENT), "a file's content reached the database");
    assert!(!dump.contains(COMMIT_MESSAGE), "a commit message reached the database");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_in_one_worktree_learn_of_each_others_changes_once_on_sqlite() {
    let home = tempfile::tempdir().unwrap();
    let _repos = scenario(home.path(), &|| Server::start(home.path())).await;
    let mut dump = Vec::new();
    for f in std::fs::read_dir(home.path()).unwrap() {
        let p = f.unwrap().path();
        if p.file_name().unwrap().to_string_lossy().starts_with("sessionwatch.db") {
            dump.extend(std::fs::read(p).unwrap());
        }
    }
    assert!(!dump.is_empty());
    assert_no_content(&String::from_utf8_lossy(&dump));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_in_one_worktree_learn_of_each_others_changes_once_on_postgres() {
    let Some(db) = crate::postgres::TestDatabase::create().await else { return };
    let home = tempfile::tempdir().unwrap();
    let _repos = scenario(home.path(), &|| Server::start_with(home.path(), &["--database", &db.url])).await;
    let client = sessionwatch_bench::postgres_fixtures::connect(&db.url, None).await.unwrap();
    let tables = client
        .query("SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'", &[])
        .await
        .unwrap();
    let mut dump = String::new();
    for t in tables {
        let name: String = t.get(0);
        for row in client.query(&format!("SELECT t::text FROM {name} t"), &[]).await.unwrap() {
            dump.push_str(&row.get::<_, String>(0));
        }
    }
    assert!(dump.contains("files_changed"), "the dump reads the log");
    assert_no_content(&dump);
    drop(client);
    db.drop_it().await;
}
