//! The git-dir watcher of a followed workspace, and following workspaces again after a restart.
//!
//! One [`GitDirWatch`] per followed workspace; after each burst the reflog's new lines are read
//! (`poll_head`), attributed to the shell call running at the burst's last write. A hook at a drain
//! point reads the reflog too, so a turn never waits for the debounce. The watcher lives as long as its
//! workspace has a member.

use super::Gateway;
use crate::git_watch::GitDirWatch;
use sessionwatch_core::{AgentSessionKey, SessionKind};
use sessionwatch_store::{SessionFilter, Store};
use sessionwatch_upstream::workspace::Workspace;

impl<S: Store> Gateway<S> {
    /// Starts watching the workspace's git dir; `None` outside git or when the watcher cannot start
    /// (then HEAD moves are still read at every member's drain point).
    pub(super) fn watch_git_dir(&self, ws_key: &str, workspace: &Workspace) -> Option<GitDirWatch> {
        let git_dir = workspace.git_dir()?;
        let (me, key) = (self.me.clone(), ws_key.to_string());
        let watch = GitDirWatch::start(git_dir, move |changed_at| {
            let (me, key) = (me.clone(), key.clone());
            async move {
                let Some(gateway) = me.upgrade() else { return false };
                gateway.poll_head(&key, changed_at).await;
                true
            }
        });
        watch.map_err(|e| tracing::warn!(workspace = ws_key, "cannot watch the git dir: {e}")).ok()
    }

    /// After a restart: every session whose hooks reported a cwd and which has not ended is a member of
    /// that cwd's workspace again, and the workspaces with members are followed.
    pub(crate) async fn resume_workspaces(&self) {
        if !self.config.workspace_awareness {
            return;
        }
        const PAGE: u32 = 500;
        let mut offset = 0;
        loop {
            // Only the sessions that can be members: paging over every session was quadratic at start.
            let filter =
                SessionFilter { offset, limit: PAGE, native_active: true, ..SessionFilter::default() };
            let rows = match self.store.list_sessions(filter).await {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::warn!("cannot list sessions to follow their workspaces: {e}");
                    return;
                }
            };
            for row in &rows {
                let Some(cwd) = row.cwd.as_deref() else { continue };
                // A node's session's cwd is on the node: it joins again with its next hook.
                let on_node = AgentSessionKey::parse(&row.session_key).is_some_and(|k| k.node().is_some());
                if row.kind == SessionKind::Workspace.as_str() || on_node {
                    continue;
                }
                let r = super::SessionRef { key: row.session_key.clone(), agent_id: row.agent_id.clone() };
                self.rejoin_workspace(&r, cwd).await;
            }
            if rows.len() < PAGE as usize {
                return;
            }
            offset += PAGE;
        }
    }
}
