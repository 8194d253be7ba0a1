//! A real gateway on 127.0.0.1:0 with a temporary SQLite database, and an HTTP client for it.

pub use crate::in_process::{InProcess, follow_stream, session_state_notices};
use serde_json::{Value, json};
use sessionwatch_core::{Clock, ManualClock, SystemClock};
use sessionwatch_server::{Config, Gateway};
use sessionwatch_store::SqliteStore;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

pub const TOKEN: &str = "test-token-0123456789";

pub struct Harness {
    pub base: String,
    pub client: reqwest::Client,
    pub gateway: Arc<Gateway<SqliteStore>>,
    pub dir: tempfile::TempDir,
    running: InProcess,
}

pub struct Reply {
    pub status: u16,
    pub body: Value,
}

impl Harness {
    pub async fn start() -> Harness {
        Harness::start_with(Config::default(), None).await
    }

    pub async fn start_with(mut config: Config, clock: Option<Arc<ManualClock>>) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        config.data_dir = dir.path().to_path_buf();
        Harness::start_in(dir, config, clock).await
    }

    pub async fn start_in(
        dir: tempfile::TempDir,
        config: Config,
        clock: Option<Arc<ManualClock>>,
    ) -> Harness {
        Harness::start_with_token(dir, config, clock, Some(TOKEN)).await
    }

    /// `token: None` is `--auth none`.
    pub async fn start_with_token(
        dir: tempfile::TempDir,
        config: Config,
        clock: Option<Arc<ManualClock>>,
        token: Option<&str>,
    ) -> Harness {
        let c: Arc<dyn Clock> = match &clock {
            Some(c) => c.clone(),
            None => Arc::new(SystemClock),
        };
        let running = InProcess::start(&dir.path().join("sessionwatch.db"), config, c, token).await;
        Harness {
            base: running.base.clone(),
            client: reqwest::Client::new(),
            gateway: running.gateway.clone(),
            dir,
            running,
        }
    }

    /// Stops the server gracefully and hands back the data dir (for a restart on the same database).
    pub async fn stop(mut self) -> tempfile::TempDir {
        self.running.stop().await;
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }

    pub async fn request(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Reply {
        let mut req = self.client.request(method, format!("{}{path}", self.base)).bearer_auth(TOKEN);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        Reply { status, body: serde_json::from_str(&text).unwrap_or(Value::String(text)) }
    }

    /// Points the gateway's upstream catalog and monitor at a (temporary) HOME.
    pub fn set_home(&self, home: &std::path::Path) {
        self.gateway.set_homes(sessionwatch_upstream::Homes::with_home(home));
    }

    /// A temporary HOME the gateway's catalog and monitor read, with the directory `under` made in it
    /// (where a CLI keeps its transcripts); answers the home and that directory.
    pub fn temp_home(&self, under: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let made = dir.path().join(under);
        std::fs::create_dir_all(&made).unwrap();
        self.set_home(dir.path());
        (dir, made)
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.request(reqwest::Method::POST, path, Some(body)).await
    }

    /// A tool call that must succeed; answers `result`.
    pub async fn tool(&self, caller: &str, tool: &str, args: Value) -> Value {
        let r = self.tool_reply(caller, tool, args).await;
        assert_eq!(r.status, 200, "{tool} failed: {}", r.body);
        assert_eq!(r.body["ok"], true);
        r.body["result"]["details"].clone()
    }

    pub async fn tool_reply(&self, caller: &str, tool: &str, args: Value) -> Reply {
        self.post("/tools/invoke", json!({ "tool": tool, "args": args, "sessionKey": caller })).await
    }

    pub async fn create(&self, key: &str) {
        let r = self.post("/v1/sessions", json!({ "sessionKey": key })).await;
        assert_eq!(r.status, 200, "{}", r.body);
    }

    pub async fn human_turn(&self, key: &str, text: &str) -> Value {
        let r = self
            .post(
                &format!("/v1/sessions/{}/inbound", enc(key)),
                json!({ "text": text, "channel": "telegram", "actor": { "type": "human" } }),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }

    /// Begins a turn; answers the texts of the session-state notices it drained (other system events,
    /// such as the Home creation notice, are left out).
    pub async fn turn(&self, key: &str) -> Vec<String> {
        let r = self.post(&format!("/v1/sessions/{}/turns", enc(key)), json!({})).await;
        assert_eq!(r.status, 200, "{}", r.body);
        session_state_notices(&r.body)
    }

    /// A hook call of `cli` that must succeed; answers the hook's answer.
    pub async fn hook(&self, cli: &str, event: &str, input: Value) -> Value {
        let r = self.post("/v1/hooks", json!({ "cli": cli, "event": event, "input": input })).await;
        assert_eq!(r.status, 200, "{event}: {}", r.body);
        r.body
    }

    /// A monitor tick that must succeed; answers its report.
    pub async fn tick(&self) -> Value {
        let t = self.post("/v1/monitor/tick", json!({})).await;
        assert_eq!(t.status, 200, "{}", t.body);
        t.body
    }

    /// `watcher` sends `message` to `target` and watches it.
    pub async fn send_and_watch(&self, watcher: &str, target: &str, message: &str) {
        let args = json!({ "sessionKey": target, "message": message, "watch": true });
        assert_eq!(self.tool(watcher, "sessions_send", args).await["watched"], true);
    }

    /// The human turns the log holds for `session_key` (staged ones included), read from the database file.
    pub fn human_events(&self, session_key: &str) -> usize {
        let db = rusqlite::Connection::open(self.dir.path().join("sessionwatch.db")).unwrap();
        db.query_row(
            "SELECT COUNT(*) FROM (SELECT kind, session_key FROM session_state_events UNION ALL \
             SELECT kind, session_key FROM session_state_events_staged) \
             WHERE session_key = ?1 AND kind = 'human_direct_message'",
            [session_key],
            |r| r.get::<_, i64>(0),
        )
        .unwrap() as usize
    }

    pub async fn spawn_child(&self, parent: &str) -> String {
        let r = self.tool(parent, "sessions_spawn", json!({ "task": "work" })).await;
        r["childSessionKey"].as_str().unwrap().to_string()
    }

    /// Follows the stream of `session`: a channel of `(event, data)`.
    pub async fn stream(&self, session: Option<&str>) -> mpsc::UnboundedReceiver<(String, Value)> {
        let path = match session {
            Some(k) => format!("/v1/stream?sessionKey={}", enc(k)),
            None => "/v1/stream".into(),
        };
        let resp = self.client.get(format!("{}{path}", self.base)).bearer_auth(TOKEN).send().await.unwrap();
        follow_stream(resp).await
    }
}

/// `input` with the fields of `extra` added (a hook's common fields and its event's own).
pub fn merged(mut input: Value, extra: Value) -> Value {
    input.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    input
}

/// Appends `rows` to the file at `path`, one a line, creating it (as a CLI writes its transcript).
pub fn append_rows<R: std::fmt::Display>(path: &std::path::Path, rows: impl IntoIterator<Item = R>) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    for row in rows {
        writeln!(f, "{row}").unwrap();
    }
}

pub fn enc(key: &str) -> String {
    key.replace(':', "%3A")
}

/// Events of one kind received within `wait`.
pub async fn collect(
    rx: &mut mpsc::UnboundedReceiver<(String, Value)>,
    kind: &str,
    wait: Duration,
) -> Vec<Value> {
    let mut out = vec![];
    let deadline = tokio::time::Instant::now() + wait;
    while let Ok(Some((event, data))) = tokio::time::timeout_at(deadline, rx.recv()).await {
        if event == kind {
            out.push(data);
        }
    }
    out
}

/// The `changesSince` number a notice text asks for.
pub fn since_of(notice: &str) -> u64 {
    notice.rsplit("changesSince ").next().unwrap().trim_end_matches('.').parse().unwrap()
}

/// The dashboard path of a session (what notices link to).
pub fn chat_path(key: &str) -> String {
    sessionwatch_server::dashboard::chat_path(key)
}
