//! A gateway in this process on 127.0.0.1:0 over a SQLite database, and a reader of its live stream. The
//! server's tests and the binary's (`tests/it`, which include this file by path) share them.

use futures::StreamExt;
use serde_json::Value;
use sessionwatch_core::{Clock, SystemClock};
use sessionwatch_server::{AppState, Config, Gateway};
use sessionwatch_store::{SqliteOptions, SqliteStore};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

pub struct InProcess {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub gateway: Arc<Gateway<SqliteStore>>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl InProcess {
    /// A gateway on the database file `db`; `token: None` is `--auth none`.
    pub async fn start(db: &Path, config: Config, clock: Arc<dyn Clock>, token: Option<&str>) -> InProcess {
        let store = SqliteStore::open(db, SqliteOptions::default()).unwrap();
        let gateway = Gateway::start(store, config, clock).await;
        let state = Arc::new(AppState::new(gateway.clone(), token.map(str::to_string)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(sessionwatch_server::run(listener, state, async {
            let _ = stopped.await;
        }));
        InProcess { base, gateway, stop: Some(stop), server: Some(server) }
    }

    /// A gateway with the default configuration and the system clock, its data (`sw.db`) in `dir`.
    pub async fn start_default(dir: &Path, token: &str) -> InProcess {
        let config = Config { data_dir: dir.to_path_buf(), ..Config::default() };
        InProcess::start(&dir.join("sw.db"), config, Arc::new(SystemClock), Some(token)).await
    }

    /// Stops the server gracefully: in-flight requests finish, and it must be gone within 10 s (also with
    /// clients such as MCP sessions still connected).
    pub async fn stop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        let server = self.server.take().unwrap();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the server stops promptly, clients connected or not")
            .unwrap()
            .unwrap();
    }
}

/// The texts of the session-state notices a turn's answer (`POST /v1/sessions/<key>/turns`) drained;
/// other system events, such as the Home creation notice, are left out.
pub fn session_state_notices(turn: &Value) -> Vec<String> {
    turn["systemEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["contextKey"].as_str().unwrap().starts_with("session-state:"))
        .map(|e| e["text"].as_str().unwrap().to_string())
        .collect()
}

/// Follows a live stream (`GET /v1/stream` answered 200): a channel of its `(event, data)`; answers once
/// the subscription is live (its first comment), or after 5 s.
pub async fn follow_stream(resp: reqwest::Response) -> mpsc::UnboundedReceiver<(String, Value)> {
    assert_eq!(resp.status(), 200);
    let (tx, rx) = mpsc::unbounded_channel();
    let (ready_tx, ready_rx) = oneshot::channel::<()>();
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
                let mut event = String::new();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(e) = line.strip_prefix("event:") {
                        event = e.trim().to_string();
                    } else if let Some(d) = line.strip_prefix("data:") {
                        data.push_str(d.trim());
                    }
                }
                if tx.send((event, serde_json::from_str(&data).unwrap_or(Value::Null))).is_err() {
                    return;
                }
            }
        }
    });
    let _ = tokio::time::timeout(Duration::from_secs(5), ready_rx).await;
    rx
}
