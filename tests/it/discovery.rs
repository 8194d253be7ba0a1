//! Clients find the gateway by themselves (issue 34): `serve` on a random port writes its runtime file,
//! and the hook, the tool commands and `mcp` reach it with no `SESSIONWATCH_URL`; one writer per
//! database (issue 33 item 5); a hook's user hears of an outage once.

use crate::cli::hook_in;
use crate::support::{Server, bin, client};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::process::Command;

fn signal(pid: u32, sig: &str) {
    assert!(Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success());
}

/// A loopback port nothing listens on (so a test never reaches a developer's gateway on 7420).
fn closed_port() -> String {
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    addr.to_string()
}

fn prompt(session: &str) -> String {
    format!(
        r#"{{"session_id":"{session}","transcript_path":"/nowhere/{session}.jsonl","hook_event_name":"UserPromptSubmit","prompt_id":"p-{session}","prompt":"typed"}}"#
    )
}

#[test]
fn a_gateway_on_a_random_port_is_found_without_a_url() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let runtime = dir.path().join("gateway.json");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&runtime).unwrap()).unwrap();
    assert_eq!(file["url"], server.base.as_str());
    assert_eq!(file["pid"], server.child.id());
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&runtime).unwrap().permissions().mode() & 0o777, 0o600);
    }

    // A hook with no URL anywhere records the prompt on that gateway.
    let session = "5b0c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d";
    let (ok, out, err) =
        hook_in(dir.path(), &["UserPromptSubmit", "--agent", "claude"], &prompt(session), &[]);
    assert!(ok && out.is_empty() && err.is_empty(), "{out} {err}");
    // And a tool command reads it back from the same gateway.
    let key = format!("agent:main:claude:{session}");
    let (ok, out, err) = client(dir.path(), &["status", &key, "--since", "0", "--json"]);
    assert!(ok && out.contains("human message via claude"), "{out} {err}");

    // A clean stop (SIGTERM) removes the runtime file.
    let mut server = server;
    signal(server.child.id(), "-TERM");
    assert!(server.child.wait().unwrap().success());
    assert!(!runtime.exists(), "removed on a clean exit");
}

/// Issue 34 item 4: a hook that cannot reach the gateway shows its user one line per session per outage;
/// the mark is cleared when the gateway answers, and the next outage is told again.
#[test]
fn a_hooks_user_hears_of_an_outage_once() {
    let dir = tempfile::tempdir().unwrap();
    let listen = closed_port();
    let env = [("SESSIONWATCH_LISTEN", listen.as_str())];
    let session = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
    let args = ["UserPromptSubmit", "--agent", "claude"];
    let user_line = |out: &str| -> Option<String> {
        (!out.is_empty()).then(|| {
            let v: Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{out}: {e}"));
            v["systemMessage"].as_str().unwrap().to_string()
        })
    };

    let (ok, out, err) = hook_in(dir.path(), &args, &prompt(session), &env);
    assert!(ok && err.contains("cannot reach"), "{err}");
    let line = user_line(&out).expect("the first failure is told");
    assert!(line.contains(&format!("http://{listen}")) && line.contains("sessionwatch serve"), "{line}");
    let (ok, out, _) = hook_in(dir.path(), &args, &prompt(session), &env);
    assert!(ok && out.is_empty(), "the same outage is told once: {out}");
    let (_, out, _) = hook_in(
        dir.path(),
        &["Stop", "--agent", "claude"],
        &prompt(session).replace("UserPromptSubmit", "Stop"),
        &env,
    );
    assert!(out.is_empty(), "not by another event either: {out}");
    let other = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a";
    let (_, out, _) = hook_in(dir.path(), &args, &prompt(other), &env);
    assert!(user_line(&out).is_some(), "another session is told too");

    // The gateway comes up: the hook reaches it (through its runtime file) and the mark is cleared.
    let server = Server::start(dir.path());
    let (ok, out, err) = hook_in(dir.path(), &args, &prompt(session), &env);
    assert!(ok && out.is_empty() && err.is_empty(), "{out} {err}");
    // Down again (killed: its runtime file stays, stale): told again, once.
    server.kill();
    let (ok, out, err) = hook_in(dir.path(), &args, &prompt(session), &env);
    assert!(ok && user_line(&out).is_some(), "a new outage is told: {out} {err}");
    assert!(err.contains("stale runtime file"), "{err}");
    let (_, out, _) = hook_in(dir.path(), &args, &prompt(session), &env);
    assert!(out.is_empty(), "{out}");
}

/// Issue 33 item 5: `sessionwatch mcp` without a URL opened an embedded gateway on the data dir's
/// database without its lock, beside a `serve` on another port: two writers on one file (here the
/// gateway's database is elsewhere, so the embedded one would not even see its sessions). It finds the
/// running gateway by its runtime file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_finds_the_running_gateway_by_its_runtime_file() {
    let dir = tempfile::tempdir().unwrap();
    // The gateway's database is not the data dir's default one: an embedded gateway would not see it.
    let db = dir.path().join("elsewhere.db");
    let server = Server::start_with(dir.path(), &["--database", db.to_str().unwrap()]);
    let (status, body) = server
        .post("/v1/sessions", json!({ "sessionKey": "agent:main:found-by-file", "label": "found" }))
        .await;
    assert_eq!(status, 200, "{body}");
    let mcp = crate::mcp_stdio::mcp_child(dir.path(), &["--session", "agent:main:main"]).await;
    let listed = mcp
        .call_tool(CallToolRequestParams::new("sessions_list").with_arguments(serde_json::Map::new()))
        .await
        .unwrap();
    let listed = serde_json::to_string(&listed.structured_content).unwrap();
    assert!(listed.contains("agent:main:found-by-file"), "the tools are the running gateway's: {listed}");
    mcp.cancel().await.unwrap();
}

/// Issue 33 item 5, the other half: a gateway holds the data dir's database but does not answer (here:
/// stopped). `mcp` used to open an embedded gateway on the file beside it; it fails naming the gateway.
#[test]
fn mcp_never_opens_a_second_writer_beside_a_gateway_that_does_not_answer() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let pid = server.child.id();
    signal(pid, "-STOP");
    let out = Command::new(bin())
        .args(["mcp", "--session", "agent:main:main"])
        .env("SESSIONWATCH_HOME", dir.path())
        .env_remove("SESSIONWATCH_URL")
        .env_remove("SESSIONWATCH_CONFIG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    signal(pid, "-CONT");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "no embedded gateway beside a running one: {err}");
    assert!(err.contains(&server.base) && err.contains(&format!("pid {pid}")), "names the gateway: {err}");
    assert!(err.contains("second writer"), "{err}");
    drop(server);
}
