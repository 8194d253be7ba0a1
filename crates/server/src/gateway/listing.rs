//! `GET /v1/sessions` (every session, by name: its source CLI, working directory, title and state) and
//! the host's explicit watch (`PUT /v1/sessions/{target}/watchers/{watcher}`), which `sessionwatch
//! sessions` and `watch` call. No message content is read.

use super::{Gateway, SessionRef};
use crate::error::{ApiError, ApiResult};
use sessionwatch_core::Provenance;
use sessionwatch_kernel::WatchOutcome;
use sessionwatch_store::{SessionFilter, SessionRow, Store};
use sessionwatch_upstream::CatalogId;

/// Sessions answered at most by one listing (`hasMore` says when there were more).
pub(crate) const LISTING_LIMIT: u32 = 10_000;

/// One session of the listing.
#[derive(Clone, Debug)]
pub(crate) struct ListedSession {
    pub row: SessionRow,
    pub state_version: u64,
    /// `claude`, `codex`, `opencode`, `pi` for an adopted session, `gateway` for a host-API one.
    pub source: String,
    /// The native session id (an adopted session's thread id), else the gateway's session id.
    pub native_id: String,
    /// The remote node it runs on, if any.
    pub node: Option<String>,
    /// `running`, `waiting` (for its user) or `idle`; a gateway session's from its latest run
    /// (`done`, `failed`, … once it ended).
    pub state: String,
}

pub(crate) struct Listing {
    pub sessions: Vec<ListedSession>,
    pub has_more: bool,
}

/// What `PUT …/watchers/{watcher}` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WatchAnswer {
    pub watcher: String,
    pub target: String,
    pub outcome: WatchOutcome,
}

/// An adopted key's source: `agent:<agent>:<catalog>[@<node>]:<thread>` (`adopted_key`,
/// `nodes::remote_key`) → `(catalog, node, thread)`.
pub(crate) fn adopted_parts(key: &str) -> Option<(CatalogId, Option<&str>, &str)> {
    let rest = key.strip_prefix("agent:")?;
    let (_agent, rest) = rest.split_once(':')?;
    let (head, thread) = rest.split_once(':')?;
    let (catalog, node) = match head.split_once('@') {
        Some((c, n)) => (c, Some(n)),
        None => (head, None),
    };
    let catalog = CatalogId::parse(catalog)?;
    (!thread.is_empty()).then_some((catalog, node, thread))
}

impl<S: Store> Gateway<S> {
    /// Every session, most recently updated first, with its source, native id and state.
    pub(crate) async fn session_listing(&self) -> ApiResult<Listing> {
        let store = &self.store;
        let filter = SessionFilter { limit: LISTING_LIMIT + 1, ..SessionFilter::default() };
        let mut rows = store.list_sessions(filter).await?;
        let has_more = rows.len() > LISTING_LIMIT as usize;
        rows.truncate(LISTING_LIMIT as usize);
        let ids: Vec<(String, String)> =
            rows.iter().map(|r| (r.session_key.clone(), r.agent_id.clone())).collect();
        let (versions, activity) =
            tokio::join!(self.kernel.state_versions(ids.clone()), store.session_activity(ids));
        let (versions, mut activity) = (versions?, activity?);
        let sessions = rows
            .into_iter()
            .map(|row| {
                let id = (row.session_key.clone(), row.agent_id.clone());
                let adopted = adopted_parts(&row.session_key).filter(|_| is_native(&row));
                let (source, native_id, node) = match adopted {
                    Some((c, node, thread)) => {
                        (c.as_str().to_string(), thread.to_string(), node.map(str::to_string))
                    }
                    None => ("gateway".to_string(), row.session_id.clone(), None),
                };
                let run = activity.remove(&id).unwrap_or_default().latest_run;
                let state = match &row.native_state {
                    Some(s) => s.clone(),
                    None => run_state(&run).to_string(),
                };
                ListedSession {
                    state_version: versions.get(&id).copied().unwrap_or(0),
                    source,
                    native_id,
                    node,
                    state,
                    row,
                }
            })
            .collect();
        Ok(Listing { sessions, has_more })
    }

    /// Registers an explicit watch of `target` by `watcher` from the host (the registration a
    /// `sessions_send` with `watch: true` makes). Both sessions must exist.
    pub(crate) async fn host_watch(&self, watcher: &str, target: &str) -> ApiResult<WatchAnswer> {
        let (w, t) = self.existing_pair(watcher, target).await?;
        let outcome = self.kernel.register_watch(&w.key, &t.key, Provenance::Explicit).await;
        if let WatchOutcome::Failed(e) = &outcome {
            return Err(ApiError::Internal(format!("the watch was not registered: {e}")));
        }
        Ok(WatchAnswer { watcher: w.key, target: t.key, outcome })
    }

    async fn existing_pair(&self, watcher: &str, target: &str) -> ApiResult<(SessionRef, SessionRef)> {
        let w = self.resolve_with(watcher, || Self::caller_agent(watcher))?;
        let t = self.resolve(target, &w.agent_id)?;
        self.require_session(&w).await?;
        self.require_session(&t).await?;
        Ok((w, t))
    }
}

/// Whether the row is one of a native CLI's sessions (a gateway session could carry a key of that shape).
fn is_native(row: &SessionRow) -> bool {
    matches!(row.created_via.as_deref(), Some("hook" | "catalog" | "node"))
}

/// A session's run state from its latest run: `idle` (none), `running`, `done` (ok), `failed` (error),
/// `timeout`, `cancelled`.
pub(crate) fn run_state(latest_run: &Option<Option<String>>) -> &'static str {
    match latest_run.as_ref().map(|s| s.as_deref()) {
        None => "idle",
        Some(None) => "running",
        Some(Some("ok")) => "done",
        Some(Some("timeout")) => "timeout",
        Some(Some("cancelled")) => "cancelled",
        Some(Some(_)) => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adopted_keys_name_their_source() {
        assert_eq!(adopted_parts("agent:main:claude:3f2a-b"), Some((CatalogId::Claude, None, "3f2a-b")));
        assert_eq!(
            adopted_parts("agent:ops:codex@laptop:019a"),
            Some((CatalogId::Codex, Some("laptop"), "019a"))
        );
        assert_eq!(adopted_parts("agent:main:main"), None);
        assert_eq!(adopted_parts("agent:main:subagent:x"), None);
        assert_eq!(adopted_parts("agent:main:claude:"), None);
        assert_eq!(adopted_parts("global"), None);
    }
}
