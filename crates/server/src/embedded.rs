//! A gateway on a temporary database and a free loopback port, for `sessionwatch demo` and the benches.

use crate::config::Config;
use crate::gateway::Gateway;
use crate::state::AppState;
use sessionwatch_core::SystemClock;
use sessionwatch_store::sqlite::GatewayLock;
use sessionwatch_store::{SqliteOptions, SqliteStore};
use std::sync::Arc;

pub struct Embedded {
    pub base: String,
    pub token: String,
    pub gateway: Arc<Gateway<SqliteStore>>,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: tempfile::TempDir,
}

impl Embedded {
    pub async fn start() -> anyhow::Result<Embedded> {
        let dir = tempfile::tempdir()?;
        let config = Config { data_dir: dir.path().to_path_buf(), ..Config::default() };
        let db = dir.path().join("sessionwatch.db");
        // Its own temporary database, locked all the same: every in-process writer holds the lock.
        let store = SqliteStore::open_locked(GatewayLock::acquire(&db)?, SqliteOptions::default())?;
        let gateway = Gateway::start(store, config, Arc::new(SystemClock)).await;
        let token = crate::auth::load_or_create_token(dir.path())?;
        let state = Arc::new(AppState::new(gateway.clone(), Some(token.clone())));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(crate::serve::run(listener, state, async {
            let _ = stopped.await;
        }));
        Ok(Embedded { base, token, gateway, stop, server, _dir: dir })
    }

    /// A client of this gateway over its loopback HTTP.
    pub fn http(&self) -> GatewayHttp {
        GatewayHttp { client: reqwest::Client::new(), base: self.base.clone(), token: self.token.clone() }
    }

    /// Stops gracefully: in-flight requests finish.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.server.await??;
        Ok(())
    }
}

/// Requests to a gateway over HTTP with its bearer token: how the demo and the benches call the embedded
/// gateway (and a bench its baseline router, [`GatewayHttp::at`]).
#[derive(Clone, Debug)]
pub struct GatewayHttp {
    client: reqwest::Client,
    base: String,
    token: String,
}

impl GatewayHttp {
    /// `method` on `path` (from the root: `/tools/invoke`), with the bearer token.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token)
    }

    /// Posts `body` as JSON to `path`; the answer whatever its status.
    pub async fn post(&self, path: &str, body: &impl serde::Serialize) -> reqwest::Result<reqwest::Response> {
        self.request(reqwest::Method::POST, path).json(body).send().await
    }

    /// The same client and token, sent to `base` instead.
    pub fn at(&self, base: &str) -> GatewayHttp {
        GatewayHttp { base: base.to_string(), ..self.clone() }
    }
}
