//! The git-dir watcher of a followed workspace, and following workspaces again after a restart.
//!
//! One `notify` watcher per followed workspace, on its git dir and its `logs/` (non-recursive: HEAD,
//! the reflog, `COMMIT_EDITMSG`, `ORIG_HEAD` all change there when HEAD moves). Events are debounced
//! ([`DEBOUNCE`]); then the reflog's new lines are read (`poll_head`), attributed to the shell call
//! running when the first event of the burst arrived. A hook at a drain point reads the reflog too, so a
//! turn never waits for the debounce. The watcher lives as long as its workspace has a member.

use super::Gateway;
use notify::{RecursiveMode, Watcher};
use sessionwatch_core::SessionKind;
use sessionwatch_store::{SessionFilter, Store};
use sessionwatch_upstream::workspace::Workspace;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Git writes a move as several files in a few milliseconds (lock, rename, reflog line).
const DEBOUNCE: Duration = Duration::from_millis(250);

/// A running watcher: stopped when dropped.
pub(super) struct GitDirWatch {
    _watcher: Arc<Mutex<notify::RecommendedWatcher>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GitDirWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<S: Store> Gateway<S> {
    /// Starts watching the workspace's git dir; `None` outside git or when the watcher cannot start
    /// (then HEAD moves are still read at every member's drain point).
    pub(super) fn watch_git_dir(&self, ws_key: &str, workspace: &Workspace) -> Option<GitDirWatch> {
        let git_dir = workspace.git_dir.clone()?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            // Reads (ours included: every poll reads HEAD and the reflog) are not moves.
            if res.is_ok_and(|e| !matches!(e.kind, notify::EventKind::Access(_))) {
                let _ = tx.send(Instant::now());
            }
        });
        let mut watcher = match watcher {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(workspace = ws_key, "cannot watch the git dir: {e}");
                return None;
            }
        };
        if let Err(e) = watcher.watch(&git_dir, RecursiveMode::NonRecursive) {
            tracing::warn!(workspace = ws_key, "cannot watch {}: {e}", git_dir.display());
            return None;
        }
        let watcher = Arc::new(Mutex::new(watcher));
        let logs = git_dir.join("logs");
        let mut logs_watched = watch_logs(&watcher, &logs);
        let (me, key, w) = (self.me.clone(), ws_key.to_string(), watcher.clone());
        let task = tokio::spawn(async move {
            while let Some(mut changed_at) = rx.recv().await {
                tokio::time::sleep(DEBOUNCE).await;
                // The burst's last write is the move's moment: a write before the shell call that
                // caused it (an unrelated one) must not attribute the move to nobody.
                while let Ok(at) = rx.try_recv() {
                    changed_at = changed_at.max(at);
                }
                // A fresh repository gets its `logs/` with its first move.
                if !logs_watched {
                    logs_watched = watch_logs(&w, &logs);
                }
                let Some(gateway) = me.upgrade() else { return };
                gateway.poll_head(&key, changed_at).await;
            }
        });
        Some(GitDirWatch { _watcher: watcher, task })
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
                if row.kind == SessionKind::Workspace.as_str() {
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

fn watch_logs(watcher: &Mutex<notify::RecommendedWatcher>, logs: &Path) -> bool {
    logs.is_dir()
        && watcher.lock().unwrap_or_else(|p| p.into_inner()).watch(logs, RecursiveMode::NonRecursive).is_ok()
}
