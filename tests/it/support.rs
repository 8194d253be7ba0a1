//! Start `sessionwatch serve` as a child process and talk to it.

#[path = "../../crates/server/tests/it/in_process.rs"]
#[allow(dead_code)] // shared with the server's tests, which use all of it
mod in_process;

pub use in_process::{InProcess, follow_stream, session_state_notices};

#[path = "../../crates/upstream/src/workspace/git_fixture.rs"]
pub mod git_fixture;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_sessionwatch")
}

pub struct Server {
    pub child: Child,
    pub base: String,
    pub token: String,
}

impl Server {
    /// Starts a gateway on a free loopback port with `data_dir`.
    pub fn start(data_dir: &Path) -> Server {
        Server::start_with(data_dir, &[])
    }

    pub fn kill(mut self) {
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let resp = reqwest::Client::new()
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Spawns a child of `parent`; answers its key.
    pub async fn spawn_child(&self, parent: &str) -> String {
        let spawned = self.tool(parent, "sessions_spawn", json!({ "task": "work" })).await;
        spawned["childSessionKey"].as_str().unwrap().to_string()
    }

    pub async fn tool(&self, caller: &str, tool: &str, args: Value) -> Value {
        let (status, body) =
            self.post("/tools/invoke", json!({ "tool": tool, "args": args, "sessionKey": caller })).await;
        assert_eq!(status, 200, "{body}");
        body["result"]["details"].clone()
    }

    /// Session-state notice texts drained by a turn of `key`.
    pub async fn turn(&self, key: &str) -> Vec<String> {
        let (status, body) =
            self.post(&format!("/v1/sessions/{}/turns", key.replace(':', "%3A")), json!({})).await;
        assert_eq!(status, 200, "{body}");
        session_state_notices(&body)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts a gateway with extra `serve` arguments.
    pub fn start_with(data_dir: &Path, extra: &[&str]) -> Server {
        Server::start_adjusted(data_dir, extra, |_| {})
    }

    /// Starts a gateway with extra `serve` arguments, its command adjusted first (environment, limits).
    pub fn start_adjusted(data_dir: &Path, extra: &[&str], adjust: impl FnOnce(&mut Command)) -> Server {
        let mut command = Command::new(bin());
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(extra)
            .env("SESSIONWATCH_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        adjust(&mut command);
        let mut child = command.spawn().expect("start sessionwatch serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected: {line:?}"))
            .to_string();
        let token = std::fs::read_to_string(data_dir.join("token")).unwrap().trim().to_string();
        Server { child, base, token }
    }

    /// Follows the live stream of `key`; answers once the subscription is live.
    pub async fn stream(&self, key: &str) -> tokio::sync::mpsc::UnboundedReceiver<(String, Value)> {
        let resp = reqwest::Client::new()
            .get(format!("{}/v1/stream?sessionKey={}", self.base, key.replace(':', "%3A")))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        follow_stream(resp).await
    }
}

/// Wake events of `rx` within `wait`.
pub async fn wakes(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(String, Value)>,
    wait: std::time::Duration,
) -> usize {
    let deadline = tokio::time::Instant::now() + wait;
    let mut n = 0;
    while let Ok(Some((event, _))) = tokio::time::timeout_at(deadline, rx.recv()).await {
        if event == "wake" {
            n += 1;
        }
    }
    n
}

/// Runs a client command with the data dir `home` and no connection variables: it finds the gateway by
/// the runtime file there, as a user's shell with nothing set would.
pub fn client(home: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(bin())
        .args(args)
        .env("SESSIONWATCH_HOME", home)
        .env_remove("SESSIONWATCH_URL")
        .env_remove("SESSIONWATCH_TOKEN")
        .env_remove("SESSIONWATCH_LISTEN")
        .env_remove("SESSIONWATCH_CONFIG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `sessionwatch bench ARGS --json` with `HOME` at `home`: the figures it printed, one JSON object a
/// line (it must succeed).
pub fn bench_figures(args: &[&str], home: &std::path::Path) -> Vec<serde_json::Value> {
    let out = std::process::Command::new(bin())
        .arg("bench")
        .args(args)
        .arg("--json")
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}
