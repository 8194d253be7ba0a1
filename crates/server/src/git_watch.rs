//! A `notify` watcher on a git dir, debounced: the gateway's followed workspaces and a remote node's
//! (`sessionwatch node`) both learn of HEAD moves through it.
//!
//! It watches the git dir and its `logs/` (non-recursive: HEAD, the reflog, `COMMIT_EDITMSG`,
//! `ORIG_HEAD` all change there when HEAD moves). Reads are not moves (every poll reads HEAD and the
//! reflog). A burst of writes is one call, [`DEBOUNCE`] after its first, naming its last write's moment.

use notify::{RecursiveMode, Watcher};
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Git writes a move as several files in a few milliseconds (lock, rename, reflog line).
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// A running watcher: stopped when dropped.
pub struct GitDirWatch {
    _watcher: Arc<Mutex<notify::RecommendedWatcher>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GitDirWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl GitDirWatch {
    /// Watches `git_dir` (within a tokio runtime): `on_burst(moment)` runs after each burst of writes,
    /// until it answers `false` or the watch is dropped.
    pub fn start<F, Fut>(git_dir: &Path, mut on_burst: F) -> notify::Result<GitDirWatch>
    where
        F: FnMut(Instant) -> Fut + Send + 'static,
        Fut: Future<Output = bool> + Send,
    {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.is_ok_and(|e| !matches!(e.kind, notify::EventKind::Access(_))) {
                let _ = tx.send(Instant::now());
            }
        })?;
        watcher.watch(git_dir, RecursiveMode::NonRecursive)?;
        let watcher = Arc::new(Mutex::new(watcher));
        let logs = git_dir.join("logs");
        let mut logs_watched = watch_logs(&watcher, &logs);
        let w = watcher.clone();
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
                if !on_burst(changed_at).await {
                    return;
                }
            }
        });
        Ok(GitDirWatch { _watcher: watcher, task })
    }
}

fn watch_logs(watcher: &Mutex<notify::RecommendedWatcher>, logs: &Path) -> bool {
    logs.is_dir()
        && watcher.lock().unwrap_or_else(|p| p.into_inner()).watch(logs, RecursiveMode::NonRecursive).is_ok()
}
