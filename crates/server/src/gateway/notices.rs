//! Draining a session's pending notices outside a turn (for MCP clients, which only speak tools).

use super::Gateway;
use super::results::DrainedOutput;
use crate::error::ApiResult;
use sessionwatch_store::Store;

impl<S: Store> Gateway<S> {
    /// Drains the session's system-event queue and acknowledges each drained session-state notice exactly
    /// as [`Gateway::begin_turn`] does, but leaves the inbox alone; an unknown session is `not_found`.
    pub(crate) async fn drain_notices(&self, raw_key: &str) -> ApiResult<DrainedOutput> {
        let r = self.resolve_host_key(raw_key, None)?;
        self.require_session(&r).await?;
        let drained = self.kernel.drain(&r.key).await;
        Ok(DrainedOutput { session_key: r.key, system_events: drained, inbox: None })
    }
}
