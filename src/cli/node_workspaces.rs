//! `sessionwatch node`: the git dirs the gateway asks this node to follow (its sessions' worktrees,
//! which the hooks here resolved). Each is read from the position the gateway keeps, with the same
//! `HeadFollower` and git-dir watcher as the gateway's own workspaces: a move is reported at once (after
//! the watcher's debounce) and at every tick, from the position the gateway gave, so a node that
//! restarts, or a report that is lost, goes on from what the gateway stored.

use sessionwatch_server::git_watch::GitDirWatch;
use sessionwatch_server::node_protocol::{FollowedWorkspace, HeadReport, RemoteHeadMove, RemoteHeadPosition};
use sessionwatch_upstream::workspace::{self as ws, HeadFollower, HeadPosition};
use std::collections::HashMap;
use std::path::Path;
use tokio::sync::mpsc;

/// The followed git dirs, by workspace key.
pub struct Followers {
    followed: HashMap<String, Follower>,
    /// A watcher's burst names its workspace key here.
    moved: mpsc::UnboundedSender<String>,
}

struct Follower {
    head: HeadFollower,
    /// The position the gateway holds (the next report's `from`).
    reported: Option<RemoteHeadPosition>,
    _watch: Option<GitDirWatch>,
}

impl Followers {
    /// No git dir followed yet; the receiver names a workspace whose git dir was written.
    pub fn new() -> (Followers, mpsc::UnboundedReceiver<String>) {
        let (moved, rx) = mpsc::unbounded_channel();
        (Followers { followed: HashMap::new(), moved }, rx)
    }

    /// Follows exactly the git dirs of the gateway's sync answer, each from the position it keeps (a
    /// follower already there goes on). A git dir that is not one, or not the one its hash names, is
    /// not followed.
    pub fn update(&mut self, wanted: Vec<FollowedWorkspace>) {
        let keys: Vec<String> = wanted.iter().map(|w| w.workspace_key.clone()).collect();
        self.followed.retain(|k, _| keys.contains(k));
        for w in wanted {
            let current = self.followed.get(&w.workspace_key);
            if current.is_some_and(|f| f.reported == w.position) {
                continue;
            }
            let Some(workspace) = ws::of_git_dir(Path::new(&w.git_dir)).filter(|ws| ws.hash == w.hash) else {
                tracing::warn!(workspace = %w.workspace_key, git_dir = %w.git_dir, "not a git dir of this node: not followed");
                self.followed.remove(&w.workspace_key);
                continue;
            };
            let head = match &w.position {
                Some(p) => HeadFollower::resume(workspace, HeadPosition::from(p)),
                None => HeadFollower::start(workspace),
            };
            // A follower replaced (the gateway holds another position) keeps its watcher.
            let watch = match self.followed.remove(&w.workspace_key) {
                Some(old) => old._watch,
                None => self.watch(&w.workspace_key, &w.git_dir),
            };
            let follower = Follower { head, reported: w.position, _watch: watch };
            self.followed.insert(w.workspace_key, follower);
        }
    }

    fn watch(&self, key: &str, git_dir: &str) -> Option<GitDirWatch> {
        let (tx, key) = (self.moved.clone(), key.to_string());
        let watch = GitDirWatch::start(Path::new(git_dir), move |_| {
            let sent = tx.send(key.clone()).is_ok();
            async move { sent }
        });
        // Without a watcher, moves are still read at every tick.
        watch.map_err(|e| tracing::warn!(git_dir, "cannot watch the git dir: {e}")).ok()
    }

    /// Reads the followed git dirs (`only`: that one) and answers what the gateway does not know yet:
    /// a move, or a position it does not hold.
    pub fn poll(&mut self, only: Option<&str>) -> Vec<HeadReport> {
        let mut reports = vec![];
        for (key, f) in self.followed.iter_mut().filter(|(k, _)| only.is_none_or(|o| o == k.as_str())) {
            let moved = f.head.poll();
            let to = RemoteHeadPosition::from(f.head.position());
            if moved.is_none() && f.reported.as_ref() == Some(&to) {
                continue;
            }
            reports.push(HeadReport {
                workspace_key: key.clone(),
                from: f.reported.clone(),
                to,
                moved: moved.as_ref().map(RemoteHeadMove::of),
            });
        }
        reports
    }

    /// The gateway took these reports: their positions are the ones it holds now.
    pub fn reported(&mut self, reports: &[HeadReport]) {
        for r in reports {
            if let Some(f) = self.followed.get_mut(&r.workspace_key) {
                f.reported = Some(r.to.clone());
            }
        }
    }

    /// The reports did not reach the gateway: every follower starts again from the positions of the
    /// next sync, so the moves they read are read again.
    pub fn forget(&mut self) {
        self.followed.clear();
    }
}
