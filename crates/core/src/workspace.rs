//! Workspace events: the fixed shapes of `files_changed` and `head_moved` on a workspace session.
//!
//! A workspace session stands for one git worktree shared by several sessions. Its events say who
//! changed the tree and how, never what: paths relative to the worktree, branch names and short commit
//! ids. No file content and no commit message ever reaches the log.

use crate::event::{Actor, EventKind, NewEvent, one_line};

/// A `files_changed` event lists at most this many paths; its summary counts them all.
pub const MAX_EVENT_PATHS: usize = 50;

/// What moved HEAD, as git's reflog names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeadMoveKind {
    /// `checkout: moving from A to B` / `switch`: another branch (or commit) is checked out.
    Checkout,
    Commit,
    Reset,
    Rebase,
    Merge,
    /// Anything else git logs (pull, cherry-pick, am, …).
    Other,
}

impl HeadMoveKind {
    pub const ALL: [HeadMoveKind; 6] = [
        HeadMoveKind::Checkout,
        HeadMoveKind::Commit,
        HeadMoveKind::Reset,
        HeadMoveKind::Rebase,
        HeadMoveKind::Merge,
        HeadMoveKind::Other,
    ];

    /// Its name where a node reports a move (`checkout`, `commit`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            HeadMoveKind::Checkout => "checkout",
            HeadMoveKind::Commit => "commit",
            HeadMoveKind::Reset => "reset",
            HeadMoveKind::Rebase => "rebase",
            HeadMoveKind::Merge => "merge",
            HeadMoveKind::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<HeadMoveKind> {
        HeadMoveKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Of several moves seen at once (a rebase writes many lines), the one that says most.
    fn weight(self) -> u8 {
        match self {
            HeadMoveKind::Other => 0,
            HeadMoveKind::Commit => 1,
            HeadMoveKind::Reset => 2,
            HeadMoveKind::Merge => 3,
            HeadMoveKind::Checkout => 4,
            HeadMoveKind::Rebase => 5,
        }
    }

    pub fn stronger(self, other: HeadMoveKind) -> HeadMoveKind {
        if other.weight() > self.weight() { other } else { self }
    }
}

/// Where HEAD points: a branch (when on one) and the commit's short id (empty in a repository without
/// commits).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeadAt {
    pub branch: Option<String>,
    pub short_id: String,
}

impl HeadAt {
    /// `main@1a2b3c4`, `main` before the first commit, `1a2b3c4` when detached.
    pub fn label(&self) -> String {
        let branch = self.branch.as_deref().map(one_line);
        match (branch, self.short_id.is_empty()) {
            (Some(b), true) => b,
            (Some(b), false) => format!("{b}@{}", self.short_id),
            (None, false) => self.short_id.clone(),
            (None, true) => "unborn".into(),
        }
    }

    /// The branch name, or the short id when detached.
    fn name(&self) -> String {
        self.branch.as_deref().map(one_line).unwrap_or_else(|| self.label())
    }
}

/// One observed move of HEAD (several reflog lines read at once are one move, first `from` to last `to`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeadMove {
    pub kind: HeadMoveKind,
    pub from: HeadAt,
    pub to: HeadAt,
}

impl HeadMove {
    /// One line from a fixed template: `branch main → feature`, `commit on main: 1a2b3c4 → 5d6e7f8`, ….
    pub fn summary(&self) -> String {
        let (from, to) = (&self.from.short_id, &self.to.short_id);
        let on = self.to.name();
        match self.kind {
            HeadMoveKind::Checkout => format!("branch {} → {}", self.from.name(), self.to.name()),
            HeadMoveKind::Commit => format!("commit on {on}: {} → {to}", or_none(from)),
            HeadMoveKind::Reset => format!("reset {on}: {from} → {to}"),
            HeadMoveKind::Rebase => format!("rebase of {on}: {from} → {to}"),
            HeadMoveKind::Merge => format!("merge into {on}: {from} → {to}"),
            HeadMoveKind::Other => format!("HEAD moved on {on}: {from} → {to}"),
        }
    }
}

fn or_none(short_id: &str) -> &str {
    if short_id.is_empty() { "(none)" } else { short_id }
}

impl NewEvent {
    /// `N files changed by <actor>` on the workspace session, N = `count` distinct paths (at least those
    /// given); `paths` (relative, deduplicated by the caller) keeps the first [`MAX_EVENT_PATHS`] in order.
    pub fn files_changed(
        workspace_key: &str,
        agent_id: &str,
        actor: Actor,
        paths: &[String],
        count: usize,
    ) -> NewEvent {
        let n = count.max(paths.len());
        let who = actor_name(&actor);
        let noun = if n == 1 { "file" } else { "files" };
        let mut e = NewEvent::base(
            workspace_key,
            agent_id,
            EventKind::FilesChanged,
            actor,
            format!("{n} {noun} changed by {who}"),
        );
        e.payload.paths = paths.iter().take(MAX_EVENT_PATHS).cloned().collect();
        e
    }

    /// `head_moved` on the workspace session (the caller adds a dedupe key naming the reflog entry, so
    /// two watchers of one git dir record it once).
    pub fn head_moved(workspace_key: &str, agent_id: &str, actor: Actor, moved: &HeadMove) -> NewEvent {
        let mut e = NewEvent::base(workspace_key, agent_id, EventKind::HeadMoved, actor, moved.summary());
        e.payload.from = Some(moved.from.label());
        e.payload.to = Some(moved.to.label());
        e
    }
}

fn actor_name(actor: &Actor) -> String {
    match (&actor.id, actor.kind) {
        (Some(id), crate::ActorType::Agent) => id.clone(),
        (_, kind) => kind.as_str().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(branch: Option<&str>, id: &str) -> HeadAt {
        HeadAt { branch: branch.map(str::to_string), short_id: id.into() }
    }

    #[test]
    fn fixed_summaries_and_payloads() {
        let paths: Vec<String> = (0..73).map(|i| format!("src/f{i}.rs")).collect();
        let e = NewEvent::files_changed(
            "agent:main:workspace:r-1",
            "main",
            Actor::agent("agent:main:a"),
            &paths,
            0,
        );
        assert_eq!(e.kind, EventKind::FilesChanged);
        assert_eq!(e.summary, "73 files changed by agent:main:a");
        assert_eq!(e.payload.paths.len(), MAX_EVENT_PATHS);
        assert_eq!(e.payload.paths[0], "src/f0.rs");
        let one = NewEvent::files_changed("w", "main", Actor::human(None), &paths[..1], 1);
        assert_eq!(one.summary, "1 file changed by human");
        let counted = NewEvent::files_changed("w", "main", Actor::human(None), &paths[..2], 9000);
        assert_eq!(
            (counted.summary.as_str(), counted.payload.paths.len()),
            ("9000 files changed by human", 2)
        );

        let cases = [
            (
                HeadMoveKind::Checkout,
                at(Some("main"), "1a2b3c4"),
                at(Some("feature"), "1a2b3c4"),
                "branch main → feature",
            ),
            (
                HeadMoveKind::Checkout,
                at(Some("main"), "1a2b3c4"),
                at(None, "5d6e7f8"),
                "branch main → 5d6e7f8",
            ),
            (
                HeadMoveKind::Commit,
                at(Some("main"), ""),
                at(Some("main"), "5d6e7f8"),
                "commit on main: (none) → 5d6e7f8",
            ),
            (
                HeadMoveKind::Reset,
                at(Some("main"), "5d6e7f8"),
                at(Some("main"), "1a2b3c4"),
                "reset main: 5d6e7f8 → 1a2b3c4",
            ),
            (HeadMoveKind::Rebase, at(Some("f"), "1"), at(Some("f"), "2"), "rebase of f: 1 → 2"),
            (HeadMoveKind::Merge, at(Some("main"), "1"), at(Some("main"), "2"), "merge into main: 1 → 2"),
            (HeadMoveKind::Other, at(Some("main"), "1"), at(Some("main"), "2"), "HEAD moved on main: 1 → 2"),
        ];
        for (kind, from, to, want) in cases {
            let m = HeadMove { kind, from, to };
            let e = NewEvent::head_moved("w", "main", Actor::human(None), &m);
            assert_eq!(e.summary, want);
            assert_eq!(e.payload.from.as_deref(), Some(m.from.label().as_str()));
        }
        assert_eq!(at(Some("main"), "1a2b3c4").label(), "main@1a2b3c4");
        assert_eq!(at(Some("main"), "").label(), "main");
        assert_eq!(at(None, "1a2b3c4").label(), "1a2b3c4");
    }

    #[test]
    fn move_kinds_read_back() {
        for k in HeadMoveKind::ALL {
            assert_eq!(HeadMoveKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(HeadMoveKind::parse("Checkout"), None);
    }

    #[test]
    fn the_strongest_kind_names_a_burst() {
        assert_eq!(HeadMoveKind::Commit.stronger(HeadMoveKind::Rebase), HeadMoveKind::Rebase);
        assert_eq!(HeadMoveKind::Checkout.stronger(HeadMoveKind::Commit), HeadMoveKind::Checkout);
        assert_eq!(HeadMoveKind::Other.stronger(HeadMoveKind::Other), HeadMoveKind::Other);
    }
}
