//! Draining a session's pending notices outside a turn (for MCP clients, which only speak tools).

use super::Gateway;
use crate::error::ApiResult;
use crate::wire;
use serde_json::{Value, json};
use sessionwatch_store::Store;

impl<S: Store> Gateway<S> {
    /// Drains the session's system-event queue and acknowledges each drained session-state notice exactly
    /// as [`Gateway::begin_turn`] does, but leaves the inbox alone. Answers
    /// `{sessionKey, systemEvents: [{text, contextKey}]}`; an unknown session is `not_found`.
    pub async fn drain_notices(&self, raw_key: &str) -> ApiResult<Value> {
        let r = self.resolve_host_key(raw_key, None)?;
        self.require_session(&r).await?;
        let drained = self.kernel.drain(&r.key).await;
        Ok(json!({
            "sessionKey": r.key,
            "systemEvents": drained.iter().map(wire::system_event).collect::<Vec<_>>(),
        }))
    }
}
