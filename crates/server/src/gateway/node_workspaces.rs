//! A remote node's workspaces, gateway side. A node's hook resolves its session's cwd on the node
//! (`HookWorkspace`), so its workspace session is the node's (`agent:<a>:workspace@<node>:<name>-<hash>`)
//! and joins, edits and shell calls go through `workspace.rs` like a local hook's. Only HEAD moves need
//! the node: the sync answer names the git dirs to follow with the position the gateway keeps, and the
//! node reports each move from that position (`POST /v1/node/heads`), compare-and-set, so a report
//! applied twice, or one from a stale position, records nothing more. The positions live in memory
//! with the membership: after a gateway restart a node's workspace is followed again from its next
//! member hook.

use super::Gateway;
use super::workspace::{MovedAt, lock, wall_ms};
use crate::error::{ApiError, ApiResult};
use crate::node_protocol::{FollowedWorkspace, HeadReport, HeadReportAnswer, MAX_HEAD_REPORTS};
use sessionwatch_core::{AgentSessionKey, SessionKind, classify_session_kind};
use sessionwatch_kernel::RecordOutcome;
use sessionwatch_store::Store;

impl<S: Store> Gateway<S> {
    /// The git dirs node `node` follows for the gateway (its sync answer).
    pub(super) fn node_followed_workspaces(&self, node: &str) -> Vec<FollowedWorkspace> {
        let inner = lock(&self.workspaces);
        let mut out: Vec<FollowedWorkspace> = inner
            .on_nodes
            .iter()
            .filter(|(_, f)| f.node == node)
            .map(|(key, f)| FollowedWorkspace {
                workspace_key: key.clone(),
                git_dir: f.git_dir.clone(),
                hash: f.hash.clone(),
                position: f.position.clone(),
            })
            .collect();
        out.sort_by(|a, b| a.workspace_key.cmp(&b.workspace_key));
        out
    }

    /// `POST /v1/node/heads`: every report is checked (its fields, and that it names a workspace of
    /// this node) before any is applied; then each one whose `from` is the position the gateway keeps
    /// moves it to `to` and records its move, attributed to the member whose shell call was running
    /// when git logged it.
    pub async fn node_heads(&self, node: &str, reports: Vec<HeadReport>) -> ApiResult<HeadReportAnswer> {
        if reports.len() > MAX_HEAD_REPORTS {
            return Err(ApiError::invalid(format!("at most {MAX_HEAD_REPORTS} head reports")));
        }
        for r in &reports {
            r.check().map_err(ApiError::invalid)?;
            let key = AgentSessionKey::parse(&r.workspace_key).filter(|k| {
                k.as_str() == r.workspace_key
                    && classify_session_kind(k.as_str(), None, "main") == SessionKind::Workspace
            });
            let Some(key) = key else {
                return Err(ApiError::invalid(format!("{:?} is not a workspace key", r.workspace_key)));
            };
            if key.node() != Some(node) {
                return Err(ApiError::Forbidden(format!(
                    "node {node:?} does not host workspace {:?}",
                    r.workspace_key
                )));
            }
        }
        let mut answer = HeadReportAnswer::default();
        for r in reports {
            let agent_id = {
                let mut inner = lock(&self.workspaces);
                match inner.on_nodes.get_mut(&r.workspace_key) {
                    Some(f) if f.node == node && f.position == r.from => {
                        f.position = Some(r.to.clone());
                        Some(f.agent_id.clone())
                    }
                    _ => None,
                }
            };
            let Some(agent_id) = agent_id else {
                answer.stale += 1;
                continue;
            };
            answer.advanced += 1;
            let Some(moved) = &r.moved else { continue };
            let at = MovedAt::Logged(moved.moved_at_ms.unwrap_or_else(wall_ms));
            let outcome = self
                .record_head_move(
                    &r.workspace_key,
                    &agent_id,
                    &moved.head_move(),
                    moved.dedupe_key.clone(),
                    at,
                )
                .await;
            if matches!(outcome, RecordOutcome::Recorded(_)) {
                answer.recorded += 1;
            }
        }
        Ok(answer)
    }
}
