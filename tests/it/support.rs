//! Start `sessionwatch serve` as a child process and talk to it.

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
        body["systemEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["contextKey"].as_str().unwrap().starts_with("session-state:"))
            .map(|e| e["text"].as_str().unwrap().to_string())
            .collect()
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
        use futures::StreamExt;
        let resp = reqwest::Client::new()
            .get(format!("{}/v1/stream?sessionKey={}", self.base, key.replace(':', "%3A")))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let mut body = resp.bytes_stream();
            let mut buf = String::new();
            let mut ready = Some(ready_tx);
            while let Some(Ok(chunk)) = body.next().await {
                buf.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(i) = buf.find("\n\n") {
                    let block: String = buf.drain(..i + 2).collect();
                    if block.starts_with(':') {
                        if let Some(r) = ready.take() {
                            let _ = r.send(());
                        }
                        continue;
                    }
                    let event =
                        block.lines().find_map(|l| l.strip_prefix("event:")).unwrap_or("").trim().to_string();
                    let data = block
                        .lines()
                        .find_map(|l| l.strip_prefix("data:"))
                        .unwrap_or("null")
                        .trim()
                        .to_string();
                    if tx.send((event, serde_json::from_str(&data).unwrap_or(Value::Null))).is_err() {
                        return;
                    }
                }
            }
        });
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), ready_rx).await;
        rx
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
