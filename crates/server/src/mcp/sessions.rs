//! MCP sessions on `/mcp`, bounded in number and idle time.
//!
//! rmcp's `LocalSessionManager` keeps every session until its client deletes it or its worker idles out
//! (5 minutes), and keeps the handle in its map even then: 2,000 `initialize` calls never followed up
//! took the gateway from 24 to 300 MB. This wrapper closes a session unused for `idle`, and when
//! `max` sessions are live, a new one evicts the least recently used (a client that really went away
//! is the likeliest; one that comes back gets 404 and re-initializes, as the protocol provides).

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) struct BoundedSessions {
    inner: LocalSessionManager,
    last_used: Mutex<HashMap<SessionId, Instant>>,
    max: usize,
    idle: Duration,
}

impl BoundedSessions {
    pub(crate) fn new(max: usize, idle: Duration) -> Arc<BoundedSessions> {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(idle);
        Arc::new(BoundedSessions { inner, last_used: Mutex::default(), max: max.max(1), idle })
    }

    /// Live sessions (for `/metrics`).
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Instant>> {
        self.last_used.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn touch(&self, id: &SessionId) {
        if let Some(t) = self.lock().get_mut(id) {
            *t = Instant::now();
        }
    }

    /// Closes every session idle longer than `idle`; answers how many.
    pub(crate) async fn close_idle(&self) -> usize {
        let now = Instant::now();
        let stale: Vec<SessionId> = self
            .lock()
            .iter()
            .filter(|(_, t)| now.duration_since(**t) > self.idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &stale {
            self.forget(id).await;
        }
        stale.len()
    }

    async fn forget(&self, id: &SessionId) {
        self.lock().remove(id);
        if let Err(e) = self.inner.close_session(id).await {
            tracing::debug!(error = %e, "closing an MCP session");
        }
    }

    /// Runs [`BoundedSessions::close_idle`] every quarter of the idle time until `stop` is cancelled.
    pub(crate) fn spawn_sweeper(self: &Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let me = Arc::downgrade(self);
        let every = (self.idle / 4).max(Duration::from_millis(50));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = stop.cancelled() => return,
                }
                let Some(me) = me.upgrade() else { return };
                let closed = me.close_idle().await;
                if closed > 0 {
                    tracing::debug!(closed, "idle MCP sessions closed");
                }
            }
        });
    }
}

impl SessionManager for BoundedSessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let evict = {
            let used = self.lock();
            (used.len() >= self.max)
                .then(|| used.iter().min_by_key(|(_, t)| **t).map(|(id, _)| id.clone()))
                .flatten()
        };
        if let Some(id) = evict {
            tracing::debug!(session = %id, "MCP session cap reached: closing the least recently used");
            self.forget(&id).await;
        }
        let (id, transport) = self.inner.create_session().await?;
        self.lock().insert(id.clone(), Instant::now());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.lock().contains_key(id) && self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.lock().remove(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.touch(id);
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.resume(id, last_event_id).await
    }
}
