//! Remote nodes: `sessionwatch node` on "another machine" (its own HOME and data dir, a separate
//! process) reporting to `sessionwatch serve` over loopback HTTP with its own token.

use crate::support::git_fixture::{git, init_with_commit};
use crate::support::{Server, bin};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const MAIN: &str = "agent:main:main";
const THREAD: &str = "5ae04bcf-dcae-4d38-b508-e94477a366c6";
const NODE: &str = "buildbox";
const ECHO: &str = "please summarise the report";

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The other machine: a HOME holding a real Claude Code store, a data dir holding the node token.
struct RemoteHost {
    home: tempfile::TempDir,
    data: tempfile::TempDir,
    name: String,
}

impl RemoteHost {
    fn new(gateway: &Server, gateway_dir: &Path, name: &str) -> RemoteHost {
        let home = tempfile::tempdir().unwrap();
        let fixtures =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/upstream/tests/fixtures/claude/home");
        copy_dir(&fixtures, home.path());
        let data = tempfile::tempdir().unwrap();
        let out = Command::new(bin())
            .args(["nodes", "add", name, "--url", &gateway.base, "--data-dir"])
            .arg(gateway_dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let token = String::from_utf8(out.stdout).unwrap();
        assert!(token.trim().starts_with("swn_"), "{token}");
        std::fs::write(data.path().join("node-token"), token.trim()).unwrap();
        RemoteHost { home, data, name: name.into() }
    }

    fn transcript(&self) -> PathBuf {
        self.home.path().join(format!(".claude/projects/-home-user-work-demo/{THREAD}.jsonl"))
    }

    fn command(&self, base: &str, extra: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(["node", "--gateway", base, "--name", &self.name, "--data-dir"])
            .arg(self.data.path())
            .args(extra)
            .env("HOME", self.home.path())
            .env("SESSIONWATCH_LOG", "warn");
        for v in ["CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_DATA_HOME", "OPENCODE_DB", "PI_CODING_AGENT_DIR"] {
            c.env_remove(v);
        }
        c
    }

    /// One node tick (`--once`); answers whether it reached the gateway.
    fn tick(&self, base: &str) -> bool {
        let out = self.command(base, &["--once"]).output().unwrap();
        out.status.success()
    }

    /// Human turns typed into the Claude Code session on this machine.
    fn type_turns(&self, from: u32, n: u32) {
        let mut f = std::fs::OpenOptions::new().append(true).open(self.transcript()).unwrap();
        for i in from..from + n {
            let line = json!({"type":"user","uuid":format!("u-remote-{i}"),"sessionId":THREAD,
                "timestamp":"2026-12-02T10:00:00.000Z","userType":"external","promptSource":"typed",
                "origin":{"kind":"human"},"message":{"role":"user","content":format!("remote human {i}")}});
            writeln!(f, "{line}").unwrap();
        }
    }
}

fn key() -> String {
    format!("agent:main:claude@{NODE}:{THREAD}")
}

async fn get(s: &Server, path: &str) -> Value {
    let resp =
        reqwest::Client::new().get(format!("{}{path}", s.base)).bearer_auth(&s.token).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    resp.json().await.unwrap()
}

/// The human turns recorded on the remote session: (events, sum of turns).
async fn human_turns(s: &Server) -> (usize, u64) {
    let st =
        s.tool(MAIN, "session_status", json!({ "sessionKey": key(), "changesSince": 0, "limit": 200 })).await;
    let events: Vec<&Value> = st["stateChanges"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "human_direct_message")
        .collect();
    (events.len(), events.iter().map(|e| e["payload"]["turns"].as_u64().unwrap_or(1)).sum())
}

async fn kinds(s: &Server, kind: &str) -> usize {
    let st =
        s.tool(MAIN, "session_status", json!({ "sessionKey": key(), "changesSince": 0, "limit": 200 })).await;
    st["stateChanges"]["events"].as_array().unwrap().iter().filter(|e| e["kind"] == kind).count()
}

/// The manager sends the remote session a message (our own text) and watches it; the node takes the
/// baseline.
async fn watch_and_baseline(s: &Server, host: &RemoteHost) {
    s.tool(
        MAIN,
        "sessions_send",
        json!({ "sessionKey": key(), "message": ECHO, "timeoutSeconds": 0, "watch": true }),
    )
    .await;
    assert!(host.tick(&s.base), "the node takes the baseline");
}

/// Adopts the node's session through the gateway and has the manager watch it.
/// A gateway (its data dir, the server) and a node ([`NODE`]) whose session it adopted and watches.
async fn a_gateway_watching_a_node_session() -> (tempfile::TempDir, Server, RemoteHost) {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path());
    let host = RemoteHost::new(&s, dir.path(), NODE);
    adopt_and_watch(&s, &host).await;
    (dir, s, host)
}

async fn adopt_and_watch(s: &Server, host: &RemoteHost) {
    assert!(host.tick(&s.base), "the node reports its catalog");
    let catalog = get(s, "/v1/catalog?all=true").await;
    assert!(
        catalog["sessions"].as_array().unwrap().iter().any(|e| e["node"] == NODE && e["threadId"] == THREAD),
        "{catalog}"
    );
    let (status, a) = s
        .post("/v1/catalog/continue", json!({ "catalogId": "claude", "threadId": THREAD, "node": NODE }))
        .await;
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["sessionKey"], key());
    assert_eq!(a["baseline"], "pending");
    watch_and_baseline(s, host).await;
    let (status, again) = s
        .post("/v1/catalog/continue", json!({ "catalogId": "claude", "threadId": THREAD, "node": NODE }))
        .await;
    assert_eq!(
        (status, again["link"].as_str(), again["baseline"].as_str()),
        (200, Some("kept"), Some("done"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_on_the_node_is_reported_once() {
    let (dir, s, host) = a_gateway_watching_a_node_session().await;
    assert_eq!(human_turns(&s).await, (0, 0), "history before the adoption never notifies");

    // Our own message echoed into the transcript is not a human.
    let mut f = std::fs::OpenOptions::new().append(true).open(host.transcript()).unwrap();
    let echo = json!({"type":"user","uuid":"u-echo","sessionId":THREAD,"timestamp":"2026-12-02T10:00:00.000Z",
        "userType":"external","promptSource":"typed","message":{"role":"user","content":ECHO}});
    writeln!(f, "{echo}").unwrap();
    assert!(host.tick(&s.base));
    assert_eq!(human_turns(&s).await, (0, 0), "self-echo");

    host.type_turns(1, 2);
    assert!(host.tick(&s.base));
    assert_eq!(human_turns(&s).await, (1, 2), "one event for the burst");
    assert!(host.tick(&s.base));
    assert!(host.tick(&s.base));
    assert_eq!(human_turns(&s).await, (1, 2), "nothing twice");
    let notices = s.turn(MAIN).await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains(&key()));

    let nodes = get(&s, "/v1/nodes").await;
    let n = &nodes["nodes"][0];
    assert_eq!(n["name"], NODE);
    assert_eq!((n["sessions"].as_u64(), n["watchedSessions"].as_u64()), (Some(1), Some(1)));
    assert!(n["lastSeenAt"].as_i64().unwrap() > 0 && n["monitorLagMs"].as_i64().is_some(), "{n}");
    assert!(n["catalogSize"].as_u64().unwrap() >= 1);
    let out = Command::new(bin())
        .args(["catalog", "--all", "--url", &s.base, "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains(THREAD)).unwrap_or_else(|| panic!("{text}"));
    assert!(line.starts_with(NODE) && line.contains(&format!("adopted as {}", key())), "{line}");
    let out = Command::new(bin())
        .args(["nodes", "list", "--json", "--url", &s.base, "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["nodes"][0]["name"], NODE);

    // No transcript content left the machine: the gateway's database holds none of the typed text.
    let db = std::fs::read(dir.path().join("sessionwatch.db")).unwrap();
    let wal = std::fs::read(dir.path().join("sessionwatch.db-wal")).unwrap_or_default();
    for bytes in [&db, &wal] {
        assert!(
            !String::from_utf8_lossy(bytes).contains("remote human"),
            "no human text in the gateway's files"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_turn_burst_is_reported_completely() {
    let (_dir, s, host) = a_gateway_watching_a_node_session().await;
    host.type_turns(1, 500);
    for _ in 0..3 {
        assert!(host.tick(&s.base));
    }
    let (_, turns) = human_turns(&s).await;
    assert_eq!(turns, 500, "every turn of the burst, no window");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_delete_is_one_upstream_missing_after_three_checks() {
    let (_dir, s, host) = a_gateway_watching_a_node_session().await;
    // An unreachable node is no evidence: ticks that never reach the gateway count for nothing.
    for _ in 0..3 {
        assert!(!host.tick("http://127.0.0.1:9"), "the gateway is not there");
    }
    std::fs::remove_file(host.transcript()).unwrap();
    assert!(host.tick(&s.base));
    assert!(host.tick(&s.base));
    assert_eq!(kinds(&s, "upstream_missing").await, 0, "two checks are not enough");
    assert!(host.tick(&s.base));
    assert_eq!(kinds(&s, "upstream_missing").await, 1, "the third definite check");
    assert!(host.tick(&s.base));
    assert_eq!(kinds(&s, "upstream_missing").await, 1, "exactly one");
    assert_eq!(get(&s, "/v1/nodes").await["nodes"][0]["sessions"], 0, "the link is gone");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn serve_on(dir: &Path, port: u16) -> Child {
    let mut child = Command::new(bin())
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir)
        .env("SESSIONWATCH_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return child;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("serve did not start on {port}");
}

/// SIGKILL the gateway and the node at arbitrary moments while a human keeps typing on the node's
/// machine: once both run again, every turn is recorded, and none twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_gateway_or_the_node_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut gateway = serve_on(dir.path(), port);
    let base = format!("http://127.0.0.1:{port}");
    let token = std::fs::read_to_string(dir.path().join("token")).unwrap().trim().to_string();
    let s = Server { child: Command::new("true").spawn().unwrap(), base: base.clone(), token };
    let host = RemoteHost::new(&s, dir.path(), NODE);
    adopt_and_watch(&s, &host).await;

    let start_node = || {
        host.command(&base, &["--interval-seconds", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut node = start_node();
    let mut typed = 0;
    let mut seed = 0x5eed_u64;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for round in 0..6 {
        host.type_turns(typed + 1, 7);
        typed += 7;
        tokio::time::sleep(Duration::from_millis(300 + next(1200))).await;
        if round % 2 == 0 {
            gateway.kill().unwrap();
            gateway.wait().unwrap();
            tokio::time::sleep(Duration::from_millis(next(800))).await;
            gateway = serve_on(dir.path(), port);
        } else {
            node.kill().unwrap();
            node.wait().unwrap();
            node = start_node();
        }
    }
    // Catch up: at most a few ticks.
    let mut turns = 0;
    for _ in 0..40 {
        turns = human_turns(&s).await.1;
        if turns >= u64::from(typed) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (_, after) = human_turns(&s).await;
    node.kill().unwrap();
    node.wait().unwrap();
    gateway.kill().unwrap();
    gateway.wait().unwrap();
    assert_eq!(turns, u64::from(typed), "nothing lost");
    assert_eq!(after, u64::from(typed), "nothing twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_token_opens_only_its_own_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path());
    let host = RemoteHost::new(&s, dir.path(), NODE);
    let other = RemoteHost::new(&s, dir.path(), "laptop");
    adopt_and_watch(&s, &host).await;
    let other_token = std::fs::read_to_string(other.data.path().join("node-token")).unwrap();
    let client = reqwest::Client::new();
    let post = |path: &str, token: &str, body: Value| {
        client.post(format!("{}{path}", s.base)).bearer_auth(token.trim()).json(&body).send()
    };
    let link = get(&s, "/v1/nodes").await;
    assert_eq!(link["nodes"].as_array().unwrap().len(), 2);
    let report =
        json!([{ "sessionKey": key(), "agentId": "main", "updatedAt": 0, "outcome": { "kind": "missing" } }]);
    let r = post("/v1/node/outcomes", &other_token, report.clone()).await.unwrap();
    assert_eq!(r.status(), 403, "laptop may not report on buildbox's session");
    for _ in 0..3 {
        post("/v1/node/outcomes", &other_token, report.clone()).await.unwrap();
    }
    assert_eq!(kinds(&s, "upstream_missing").await, 0, "refused reports change nothing");
    // A node token is not the admin token, and the admin token is not a node.
    let r = client.get(format!("{}/v1/nodes", s.base)).bearer_auth(other_token.trim()).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r =
        post("/tools/invoke", &other_token, json!({ "tool": "sessions_list", "args": {} })).await.unwrap();
    assert_eq!(r.status(), 401);
    let r = post("/v1/node/sync", &s.token, json!({ "catalog": [] })).await.unwrap();
    assert_eq!(r.status(), 401);
    // A node that says another name is refused; a revoked token opens nothing.
    let r = post("/v1/node/sync", &other_token, json!({ "name": NODE, "catalog": [] })).await.unwrap();
    assert_eq!(r.status(), 403);
    let (status, _) = {
        let r =
            client.delete(format!("{}/v1/nodes/laptop", s.base)).bearer_auth(&s.token).send().await.unwrap();
        (r.status().as_u16(), ())
    };
    assert_eq!(status, 200);
    assert!(!other.tick(&s.base), "revoked");
    let r = post("/v1/node/sync", &other_token, json!({ "catalog": [] })).await.unwrap();
    assert_eq!(r.status(), 401);
}

fn run_hook(base: &str, token: &str, event: &str, stdin: &Value) -> String {
    let mut child = Command::new(bin())
        .args(["hook", event, "--agent", "claude", "--node", NODE, "--url", base, "--token", token])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Hooks on the node's machine (`sessionwatch hook --node NAME`) and the node's monitor speak of one
/// session: the hook's prompt and the node's classification of the same turn are one event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_and_the_node_share_one_session() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path());
    let host = RemoteHost::new(&s, dir.path(), NODE);
    let transcript = host.transcript();
    let start = json!({ "session_id": THREAD, "transcript_path": transcript, "cwd": "/w",
        "hook_event_name": "SessionStart", "source": "startup" });
    run_hook(&s.base, &s.token, "SessionStart", &start);
    let link = get(&s, "/v1/nodes").await;
    assert_eq!(link["nodes"][0]["sessions"], 1, "the hook adopted the node's session: {link}");
    watch_and_baseline(&s, &host).await;

    // A human types: the hook sees the prompt at once, the node later sees the same turn in the file.
    let prompt_id = "7d3c2f7e-1111-4222-8333-944455556666";
    let submit = json!({ "session_id": THREAD, "transcript_path": transcript, "cwd": "/w",
        "hook_event_name": "UserPromptSubmit", "prompt": "a human on the build box", "prompt_id": prompt_id });
    run_hook(&s.base, &s.token, "UserPromptSubmit", &submit);
    assert_eq!(human_turns(&s).await.0, 1, "recorded at the source");
    let mut f = std::fs::OpenOptions::new().append(true).open(&transcript).unwrap();
    let row = json!({"type":"user","uuid":"u-hooked","sessionId":THREAD,"promptId":prompt_id,
        "timestamp":"2026-12-02T10:00:00.000Z","userType":"external","promptSource":"typed",
        "origin":{"kind":"human"},"message":{"role":"user","content":"a human on the build box"}});
    writeln!(f, "{row}").unwrap();
    assert!(host.tick(&s.base));
    assert_eq!(human_turns(&s).await.0, 1, "the node's report of the same turn is the same event");
}

/// Two sessions hooked on the node work in one git repository there: a human's `git checkout -b` in
/// it reaches the other session's next prompt as one notice naming the branch, read by the node (its
/// git dir is the node's) both at a tick (`--once`) and by a running node's watcher.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_on_the_node_reaches_the_sessions_working_there() {
    const A: &str = "aaaaaaaa-4444-4444-8444-00000000000a";
    const B: &str = "bbbbbbbb-4444-4444-8444-00000000000b";
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path());
    let host = RemoteHost::new(&s, dir.path(), NODE);
    let repo = std::fs::canonicalize(host.home.path()).unwrap().join("work/app");
    std::fs::create_dir_all(&repo).unwrap();
    init_with_commit(&repo, "README", "first");
    let hook = |session: &str, event: &str, extra: Value| {
        let mut input = json!({ "session_id": session, "cwd": repo, "hook_event_name": event });
        input.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let out = run_hook(&s.base, &s.token, event, &input);
        if out.trim().is_empty() {
            return vec![];
        }
        let v: Value = serde_json::from_str(&out).unwrap();
        let text = v["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or("").to_string();
        text.lines().filter(|l| l.starts_with("- Session")).map(str::to_string).collect::<Vec<_>>()
    };
    let prompt = |session: &str| hook(session, "UserPromptSubmit", json!({ "prompt": "go on" }));
    for session in [A, B] {
        hook(session, "SessionStart", json!({ "source": "startup" }));
        assert!(prompt(session).is_empty());
    }
    let branch_notice = |notices: Vec<String>, branch: &str| {
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(notices[0].contains(&format!("agent:main:workspace@{NODE}:app-")), "{notices:?}");
        let target = notices[0].split('"').nth(1).unwrap().to_string();
        (target, changes_since(&notices[0]), branch.to_string())
    };

    // At a tick: the node reads the git dir from where the hooks found HEAD.
    assert!(host.tick(&s.base));
    git(&repo, &["checkout", "-q", "-b", "x"]);
    assert!(prompt(B).is_empty(), "the gateway cannot read the node's git dir");
    assert!(host.tick(&s.base));
    for session in [A, B] {
        let (target, since, branch) = branch_notice(prompt(session), "x");
        let caller = format!("agent:main:claude@{NODE}:{session}");
        let st =
            s.tool(&caller, "session_status", json!({ "sessionKey": target, "changesSince": since })).await;
        let events = st["stateChanges"]["events"].as_array().unwrap();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["summary"], format!("branch main → {branch}"));
        assert_eq!(events[0]["actorType"], "human");
    }

    // A running node's watcher reports the move without waiting for its next tick.
    let mut node = host
        .command(&s.base, &["--interval-seconds", "3600"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Its first tick done (the sync seen, then a moment for its head reports), only the watcher is left.
    let seen = get(&s, "/v1/nodes").await["nodes"][0]["lastSeenAt"].clone();
    for _ in 0..100 {
        if get(&s, "/v1/nodes").await["nodes"][0]["lastSeenAt"] != seen {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    git(&repo, &["checkout", "-q", "-b", "y"]);
    let mut notices = vec![];
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        notices = prompt(B);
        if !notices.is_empty() {
            break;
        }
    }
    node.kill().unwrap();
    node.wait().unwrap();
    branch_notice(notices, "y");
}

fn changes_since(notice: &str) -> u64 {
    notice.rsplit("changesSince ").next().unwrap().trim_end_matches('.').parse().unwrap()
}
