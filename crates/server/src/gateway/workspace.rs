//! Workspace awareness: sessions working in one git worktree share a workspace session
//! (`agent:<agent>:workspace:<name>-<hash>`) on whose log the gateway records who changed the tree
//! (`files_changed` from the hooks' file-writing tool calls, `head_moved` from the git dir), and every
//! member watches it (provenance `workspace`), so the ordinary notice tells each member, once, what the
//! others did. A member is never told of its own change: the events name it as their actor.
//!
//! What lives here: membership (a session joins the workspace of the cwd its hooks report, and leaves it
//! when they report another), the per-turn coalescing of a session's edits, and the attribution of a
//! HEAD move to the session whose shell call was running. The git-dir watcher is `workspace_watch.rs`.
//! A remote node's hook names the worktree it resolved there (its workspace key names the node); the
//! node follows its git dir and reports the moves (`node_workspaces.rs`).
//!
//! Edits are held in memory for the acting session's turn and recorded as one `files_changed` when its
//! turn ends (`Stop`, `SessionEnd`, its next prompt), when another member reaches a drain point (so that
//! member's turn sees them), after [`EDIT_IDLE`] without another edit, and at shutdown.

use super::{Gateway, SessionRef, SessionSpec};
use crate::node_protocol::{HookWorkspace, RemoteHeadPosition};
use sessionwatch_core::{Actor, AgentSessionKey, NewEvent, Provenance, RecordPolicy};
use sessionwatch_kernel::WatchOutcome;
use sessionwatch_store::Store;
use sessionwatch_upstream::hook::{HookEvent, HookInput};
use sessionwatch_upstream::workspace::{self as ws, HeadFollower, Workspace};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A session's pending edits are recorded after this long without another one.
pub(super) const EDIT_IDLE: Duration = Duration::from_secs(5);
/// A shell call that ended this recently may still be the cause of a HEAD move the watcher reports now.
const SHELL_GRACE: Duration = Duration::from_secs(3);
/// At most this many distinct paths are counted per pending batch (the event lists 50 of them).
const MAX_COUNTED_PATHS: usize = 10_000;
/// Resolved working directories remembered (a resolution walks the directory tree).
const RESOLVED_KEPT: usize = 4096;

/// The gateway's workspace state (all in memory; the durable parts are the log and the cursors).
#[derive(Default)]
pub(crate) struct WorkspaceState {
    inner: Mutex<Inner>,
}

#[derive(Default)]
pub(super) struct Inner {
    /// cwd → its workspace.
    resolved: HashMap<String, Arc<Workspace>>,
    /// member session key → its workspace session key.
    members: HashMap<String, String>,
    /// workspace session key → what is followed there (a git dir on this machine).
    followed: HashMap<String, Followed>,
    /// workspace session key → a git dir a remote node follows for the gateway (`node_workspaces.rs`).
    pub(super) on_nodes: HashMap<String, NodeFollowed>,
    /// acting session key → its edits not recorded yet.
    edits: HashMap<String, PendingEdits>,
    /// session key → its latest shell tool call.
    shells: HashMap<String, ShellCall>,
}

pub(super) struct Followed {
    pub(super) agent_id: String,
    pub(super) head: HeadFollower,
    /// The git-dir watcher, held only to be dropped (stopping it) with this entry.
    pub(super) _watcher: Option<crate::git_watch::GitDirWatch>,
}

/// A git dir on a remote node whose HEAD the node follows; the gateway keeps where it last read.
pub(super) struct NodeFollowed {
    pub(super) node: String,
    pub(super) agent_id: String,
    pub(super) git_dir: String,
    pub(super) hash: String,
    /// `None`: the node starts at the present and reports that position.
    pub(super) position: Option<RemoteHeadPosition>,
}

struct PendingEdits {
    workspace: String,
    agent_id: String,
    paths: Vec<String>,
    seen: HashSet<String>,
    /// Bumped by every edit: a flush timer only fires for the batch it was started for.
    generation: u64,
}

struct ShellCall {
    workspace: String,
    started: Instant,
    ended: Option<Instant>,
    /// The same moments on the wall clock (ms since the epoch), for a node's move, which git timed.
    started_ms: i64,
    ended_ms: Option<i64>,
}

/// When a HEAD move happened: seen by this machine's watcher, or timed by a node's reflog.
#[derive(Clone, Copy, Debug)]
pub(super) enum MovedAt {
    Seen(Instant),
    /// ms since the epoch, in whole seconds (git's reflog time).
    Logged(i64),
}

impl ShellCall {
    fn covers(&self, at: MovedAt) -> bool {
        match at {
            MovedAt::Seen(t) => self.started <= t && self.ended.is_none_or(|e| e + SHELL_GRACE >= t),
            MovedAt::Logged(ms) => {
                // The reflog's second is truncated: a call started within it may be the cause.
                let grace = SHELL_GRACE.as_millis() as i64;
                self.started_ms - 1000 <= ms && self.ended_ms.is_none_or(|e| e + grace >= ms)
            }
        }
    }
}

pub(super) fn wall_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Where a hook's session works: its workspace session, and what to follow there.
struct Place {
    ws_key: String,
    name: String,
    follow: Follow,
}

enum Follow {
    /// A worktree on this machine: its git dir is watched here.
    Local(Arc<Workspace>),
    /// A worktree on a remote node, as the hook there resolved it: the node follows its git dir.
    Node { node: String, git_dir: Option<String>, hash: String, head: Option<RemoteHeadPosition> },
}

pub(super) fn lock(m: &WorkspaceState) -> std::sync::MutexGuard<'_, Inner> {
    m.inner.lock().unwrap_or_else(|p| p.into_inner())
}

impl<S: Store> Gateway<S> {
    /// The workspace part of a hook, run before its drain: join (or move to) the workspace of the cwd
    /// it reports, note a shell call or the paths a tool wrote, and — at a drain point — record what
    /// the other members did, so this turn's notice includes it. With `node`, the hook runs on that
    /// remote node, which resolved the cwd itself (`HookWorkspace`, checked by the caller).
    pub(super) async fn workspace_hook(
        &self,
        r: &SessionRef,
        input: &HookInput,
        node: Option<(&str, &HookWorkspace)>,
    ) {
        if !self.config.workspace_awareness {
            return;
        }
        let (place, paths) = match node {
            None => {
                let Some(cwd) = input.cwd.as_deref().filter(|c| !c.is_empty()) else { return };
                let workspace = self.resolve_workspace(cwd).await;
                let paths: Vec<String> = input
                    .written_paths
                    .iter()
                    .filter_map(|p| workspace.relative(p, Path::new(cwd)))
                    .collect();
                let ws_key = AgentSessionKey::build_workspace(&r.agent_id, &workspace.name, &workspace.hash);
                (Place { ws_key, name: workspace.name.clone(), follow: Follow::Local(workspace) }, paths)
            }
            Some((node, w)) => {
                let ws_key = AgentSessionKey::build_node_workspace(&r.agent_id, node, &w.name, &w.hash);
                let follow = Follow::Node {
                    node: node.to_string(),
                    git_dir: w.git_dir.clone(),
                    hash: w.hash.clone(),
                    head: w.head.clone(),
                };
                (Place { ws_key, name: w.name.clone(), follow }, w.paths.clone())
            }
        };
        self.join_workspace(r, &place).await;
        let ws_key = place.ws_key;
        if self.workspace_of(&r.key).as_deref() != Some(ws_key.as_str()) {
            return; // not a member (yet): nothing it does is the workspace's
        }
        let shell = input.tool_name.as_deref().is_some_and(ws::is_shell_tool);
        match input.event {
            HookEvent::PreToolUse if shell => {
                let call = ShellCall {
                    workspace: ws_key.clone(),
                    started: Instant::now(),
                    ended: None,
                    started_ms: wall_ms(),
                    ended_ms: None,
                };
                lock(&self.workspaces).shells.insert(r.key.clone(), call);
            }
            HookEvent::PostToolUse | HookEvent::AfterTool => {
                if shell && let Some(call) = lock(&self.workspaces).shells.get_mut(&r.key) {
                    call.ended = Some(Instant::now());
                    call.ended_ms = Some(wall_ms());
                }
                if !paths.is_empty() {
                    self.note_edits(r, &ws_key, paths);
                }
            }
            // The acting session's turn ends (or a new one begins): its edits are one event.
            HookEvent::Stop
            | HookEvent::SessionEnd
            | HookEvent::UserPromptSubmit
            | HookEvent::BeforeAgent => {
                self.flush_edits(&r.key).await;
            }
            _ => {}
        }
        if drains(input.event) {
            self.settle_workspace(&ws_key, Some(&r.key)).await;
        }
        if input.event == HookEvent::SessionEnd {
            self.leave_workspace(&r.key, false).await;
        }
    }

    async fn resolve_workspace(&self, cwd: &str) -> Arc<Workspace> {
        if let Some(w) = lock(&self.workspaces).resolved.get(cwd) {
            return w.clone();
        }
        let dir = cwd.to_string();
        let resolved = tokio::task::spawn_blocking(move || ws::resolve(Path::new(&dir)))
            .await
            .unwrap_or_else(|_| ws::resolve(Path::new(cwd)));
        let resolved = Arc::new(resolved);
        let mut inner = lock(&self.workspaces);
        if inner.resolved.len() >= RESOLVED_KEPT {
            inner.resolved.clear();
        }
        inner.resolved.insert(cwd.to_string(), resolved.clone());
        resolved
    }

    /// Makes `r` a member of the place's workspace (leaving its previous one): the workspace session
    /// exists, `r` watches it from now on, and its git dir is followed. A member already there costs
    /// one lookup.
    async fn join_workspace(&self, r: &SessionRef, place: &Place) {
        let ws_key = place.ws_key.as_str();
        let previous = lock(&self.workspaces).members.get(&r.key).cloned();
        if previous.as_deref() == Some(ws_key) {
            return;
        }
        // A session joins once it exists (adopted by this hook's own handling, after this step): a
        // watch would otherwise create a bare row in its place.
        if !matches!(self.session(r).await, Ok(Some(_))) {
            return;
        }
        if previous.is_some() {
            self.leave_workspace(&r.key, true).await;
        }
        let ws_ref = SessionRef { key: ws_key.to_string(), agent_id: r.agent_id.clone() };
        let spec = SessionSpec {
            channel: Some("workspace"),
            label: Some(&place.name),
            created_via: Some("workspace"),
            quiet: true,
            ..SessionSpec::default()
        };
        if let Err(e) = self.ensure_session(&ws_ref, spec).await {
            tracing::warn!(workspace = ws_key, "cannot create the workspace session: {e}");
            return;
        }
        match self.kernel.register_watch(&r.key, ws_key, Provenance::Workspace).await {
            WatchOutcome::Failed(e) => {
                tracing::warn!(session = %r.key, workspace = ws_key, "cannot watch the workspace: {e}");
                return;
            }
            outcome => tracing::debug!(session = %r.key, workspace = ws_key, ?outcome, "joined a workspace"),
        }
        lock(&self.workspaces).members.insert(r.key.clone(), ws_key.to_string());
        match &place.follow {
            Follow::Local(workspace) => self.follow_workspace(ws_key, &r.agent_id, workspace),
            Follow::Node { node, git_dir: Some(git_dir), hash, head } => {
                let followed = NodeFollowed {
                    node: node.clone(),
                    agent_id: r.agent_id.clone(),
                    git_dir: git_dir.clone(),
                    hash: hash.clone(),
                    position: head.clone(),
                };
                // A member joining later does not move where the node reads from.
                lock(&self.workspaces).on_nodes.entry(ws_key.to_string()).or_insert(followed);
            }
            Follow::Node { git_dir: None, .. } => {} // outside git: nothing moves HEAD
        }
    }

    /// Membership known without a hook: a restart re-resolves the members' cwd. No watch is registered
    /// (one that was unwatched stays so); the git dir is followed again.
    pub(super) async fn rejoin_workspace(&self, r: &SessionRef, cwd: &str) {
        let workspace = self.resolve_workspace(cwd).await;
        let ws_key = AgentSessionKey::build_workspace(&r.agent_id, &workspace.name, &workspace.hash);
        lock(&self.workspaces).members.insert(r.key.clone(), ws_key.clone());
        self.follow_workspace(&ws_key, &r.agent_id, &workspace);
    }

    fn follow_workspace(&self, ws_key: &str, agent_id: &str, workspace: &Arc<Workspace>) {
        if lock(&self.workspaces).followed.contains_key(ws_key) {
            return;
        }
        let head = HeadFollower::start(workspace.as_ref().clone());
        let watcher = self.watch_git_dir(ws_key, workspace);
        let followed = Followed { agent_id: agent_id.to_string(), head, _watcher: watcher };
        lock(&self.workspaces).followed.entry(ws_key.to_string()).or_insert(followed);
    }

    /// `session` leaves its workspace: its edits are recorded, and with `unwatch` (it moved elsewhere)
    /// its workspace watch ends, unless the person made that watch explicit. The git dir is no longer
    /// followed once no member is left.
    async fn leave_workspace(&self, session: &str, unwatch: bool) {
        self.flush_edits(session).await;
        let Some(ws_key) = lock(&self.workspaces).members.remove(session) else { return };
        if unwatch {
            let cursor = self.kernel.cursor(session, &ws_key).await;
            if matches!(cursor, Ok(Some(c)) if c.provenance == Provenance::Workspace) {
                self.kernel.unwatch(session, &ws_key).await;
            }
        }
        let mut inner = lock(&self.workspaces);
        inner.shells.remove(session);
        if !inner.members.values().any(|w| *w == ws_key) {
            inner.followed.remove(&ws_key); // drops its watcher
            inner.on_nodes.remove(&ws_key); // the node's next sync stops following it
        }
    }

    fn note_edits(&self, r: &SessionRef, ws_key: &str, paths: Vec<String>) {
        let generation = {
            let mut inner = lock(&self.workspaces);
            let pending = inner.edits.entry(r.key.clone()).or_insert_with(|| PendingEdits {
                workspace: ws_key.to_string(),
                agent_id: r.agent_id.clone(),
                paths: Vec::new(),
                seen: HashSet::new(),
                generation: 0,
            });
            for p in paths {
                if pending.seen.len() < MAX_COUNTED_PATHS && pending.seen.insert(p.clone()) {
                    pending.paths.push(p);
                }
            }
            pending.generation += 1;
            pending.generation
        };
        let (me, session) = (self.me.clone(), r.key.clone());
        tokio::spawn(async move {
            tokio::time::sleep(EDIT_IDLE).await;
            let Some(gateway) = me.upgrade() else { return };
            let idle =
                lock(&gateway.workspaces).edits.get(&session).is_some_and(|p| p.generation == generation);
            if idle {
                gateway.flush_edits(&session).await;
            }
        });
    }

    /// Records `session`'s pending edits as one `files_changed` by it.
    pub(super) async fn flush_edits(&self, session: &str) {
        let Some(pending) = lock(&self.workspaces).edits.remove(session) else { return };
        let mut paths = pending.paths;
        paths.truncate(sessionwatch_core::MAX_EVENT_PATHS);
        let count = pending.seen.len();
        let event = NewEvent::files_changed(
            &pending.workspace,
            &pending.agent_id,
            Actor::agent(session),
            &paths,
            count,
        );
        self.kernel.record(event, RecordPolicy::always()).await;
    }

    /// What the other members did, recorded now: their pending edits and any HEAD move not seen yet
    /// (the watcher's debounce may not have fired). `except` is the session whose own edits wait for its
    /// turn to end.
    pub(super) async fn settle_workspace(&self, ws_key: &str, except: Option<&str>) {
        let others: Vec<String> = lock(&self.workspaces)
            .edits
            .iter()
            .filter(|(s, p)| p.workspace == ws_key && Some(s.as_str()) != except)
            .map(|(s, _)| s.clone())
            .collect();
        for s in others {
            self.flush_edits(&s).await;
        }
        self.poll_head(ws_key, Instant::now()).await;
    }

    /// Reads the workspace's HEAD moves since the last read and records them, attributed to the member
    /// whose shell call was running at `changed_at` (else to the human).
    pub(super) async fn poll_head(&self, ws_key: &str, changed_at: Instant) {
        let observed = {
            let mut inner = lock(&self.workspaces);
            let Some(f) = inner.followed.get_mut(ws_key) else { return };
            let agent = f.agent_id.clone();
            f.head.poll().map(|m| (m, agent))
        };
        let Some((observed, agent_id)) = observed else { return };
        self.record_head_move(
            ws_key,
            &agent_id,
            &observed.moved,
            observed.dedupe_key,
            MovedAt::Seen(changed_at),
        )
        .await;
    }

    /// Records a move of the workspace's HEAD, attributed to the member whose shell call was running
    /// when it happened (else to the human).
    pub(super) async fn record_head_move(
        &self,
        ws_key: &str,
        agent_id: &str,
        moved: &sessionwatch_core::HeadMove,
        dedupe_key: String,
        at: MovedAt,
    ) -> sessionwatch_kernel::RecordOutcome {
        let actor = self.shell_actor(ws_key, at).map_or_else(|| Actor::human(None), Actor::agent);
        let event = NewEvent::head_moved(ws_key, agent_id, actor, moved).with_dedupe_key(Some(dedupe_key));
        self.kernel.record(event, RecordPolicy::always()).await
    }

    fn shell_actor(&self, ws_key: &str, at: MovedAt) -> Option<String> {
        let inner = lock(&self.workspaces);
        inner
            .shells
            .iter()
            .filter(|(_, c)| c.workspace == ws_key && c.covers(at))
            .max_by_key(|(_, c)| c.started)
            .map(|(s, _)| s.clone())
    }

    /// Records every session's pending edits (shutdown).
    pub(crate) async fn flush_workspaces(&self) {
        let sessions: Vec<String> = lock(&self.workspaces).edits.keys().cloned().collect();
        for s in sessions {
            self.flush_edits(&s).await;
        }
    }

    /// The workspace session `session` is a member of.
    pub fn workspace_of(&self, session: &str) -> Option<String> {
        lock(&self.workspaces).members.get(session).cloned()
    }

    /// The members of a workspace session, sorted.
    pub fn workspace_members(&self, ws_key: &str) -> Vec<String> {
        let mut m: Vec<String> = lock(&self.workspaces)
            .members
            .iter()
            .filter(|(_, w)| *w == ws_key)
            .map(|(s, _)| s.clone())
            .collect();
        m.sort();
        m
    }
}

/// The hook events at which a session's queue is drained into its turn.
fn drains(event: HookEvent) -> bool {
    matches!(
        event,
        HookEvent::SessionStart
            | HookEvent::UserPromptSubmit
            | HookEvent::BeforeAgent
            | HookEvent::PostToolUse
            | HookEvent::AfterTool
            | HookEvent::Stop
    )
}
