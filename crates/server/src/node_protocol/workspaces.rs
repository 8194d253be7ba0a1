//! A node's workspaces: the cwd of a node's session lies on the node's filesystem, so the node resolves
//! it. The hook process there (`sessionwatch hook --node NAME`) sends the resolved worktree (its name,
//! hash and git dir) and the paths a tool wrote, relative to it ([`HookWorkspace`]); the gateway names
//! the git dirs to follow in its sync answer ([`FollowedWorkspace`], with the position it keeps); the
//! node reports HEAD moves ([`HeadReport`], `POST /v1/node/heads`). Names, relative paths, branch names
//! and short ids only: no file content and no commit message.
//!
//! A node is less trusted than the gateway's own hooks: every field is checked ([`HookWorkspace::check`],
//! [`HeadReport::check`]) before anything is written.

use serde::{Deserialize, Serialize};
use sessionwatch_core::{HeadAt, HeadMove, HeadMoveKind};
use sessionwatch_upstream::workspace::HeadPosition;

/// Paths one hook may name (a tool call writes a few; a patch a few hundred at most).
pub const MAX_HOOK_PATHS: usize = 1000;
const MAX_PATH: usize = 4096;
const MAX_NAME: usize = 255;
const MAX_DEDUPE_KEY: usize = 512;
/// Head reports one request may carry.
pub const MAX_HEAD_REPORTS: usize = 1000;

/// `POST /v1/hooks` `"workspace"` (with `"node"` only): the worktree the hook's cwd lies in, resolved
/// on the node.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookWorkspace {
    /// The worktree's directory name (the readable part of the workspace key).
    pub name: String,
    /// 8 hex characters over its git dir (or the directory, outside git): two worktrees apart.
    pub hash: String,
    /// Its git dir on the node (absolute); absent outside git (then nothing is followed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_dir: Option<String>,
    /// `PostToolUse` of a file-writing tool: the paths it wrote, relative to the worktree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Where HEAD is now: where the gateway starts following when this hook is the workspace's first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<RemoteHeadPosition>,
}

/// Where HEAD points (a branch, when on one, and the commit's short id).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemoteHead {
    #[serde(default)]
    pub branch: Option<String>,
    pub short_id: String,
}

/// How far the node's follower of a git dir has read: the reflog's length and HEAD as last seen.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemoteHeadPosition {
    pub reflog_offset: u64,
    #[serde(default)]
    pub head: Option<RemoteHead>,
}

/// A git dir the gateway wants followed on the node: its HEAD moves become `head_moved` events.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FollowedWorkspace {
    pub workspace_key: String,
    pub git_dir: String,
    /// The git dir's hash (the node follows only a git dir whose hash it is).
    pub hash: String,
    /// Where the last report left it; `None`: start at the present and report that position.
    pub position: Option<RemoteHeadPosition>,
}

/// `POST /v1/node/heads`: one followed git dir read again, from `from` (the position the gateway gave,
/// compare-and-set) to `to`, with the move in between if HEAD moved.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeadReport {
    pub workspace_key: String,
    pub from: Option<RemoteHeadPosition>,
    pub to: RemoteHeadPosition,
    #[serde(default)]
    pub moved: Option<RemoteHeadMove>,
}

/// A move of HEAD as the node's follower folded it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemoteHeadMove {
    /// `checkout`, `commit`, `reset`, `rebase`, `merge` or `other`.
    pub kind: String,
    pub from: RemoteHead,
    pub to: RemoteHead,
    /// Names the move's last reflog entry: a report applied twice is one event.
    pub dedupe_key: String,
    /// When git wrote it (the reflog's time), ms since the epoch: a shell call of a node's session
    /// running then caused it.
    #[serde(default)]
    pub moved_at_ms: Option<i64>,
}

/// What `POST /v1/node/heads` did.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HeadReportAnswer {
    /// Moves recorded as `head_moved`.
    pub recorded: usize,
    /// Positions taken (moves included).
    pub advanced: usize,
    /// Reports from a position that is not the gateway's (stale), or on a git dir no longer followed.
    pub stale: usize,
}

fn printable(field: &str, s: &str, max: usize) -> Result<(), String> {
    if s.is_empty() || s.len() > max {
        return Err(format!("{field}: 1 to {max} bytes"));
    }
    if s.chars().any(char::is_control) {
        return Err(format!("{field}: no control characters"));
    }
    Ok(())
}

fn components(p: &str) -> impl Iterator<Item = &str> {
    p.split(['/', '\\'])
}

/// A path relative to the worktree: not absolute, no `..`, no `.git`.
fn relative_path(field: &str, p: &str) -> Result<(), String> {
    printable(field, p, MAX_PATH)?;
    let drive = p.as_bytes().get(1) == Some(&b':') && p.as_bytes()[0].is_ascii_alphabetic();
    if p.starts_with(['/', '\\']) || drive {
        return Err(format!("{field}: {p:?} is not relative to the worktree"));
    }
    if components(p).any(|c| c == ".." || c == ".git") {
        return Err(format!("{field}: {p:?} leaves the worktree"));
    }
    Ok(())
}

fn absolute_path(field: &str, p: &str) -> Result<(), String> {
    printable(field, p, MAX_PATH)?;
    let drive = p.as_bytes().get(1) == Some(&b':') && p.as_bytes()[0].is_ascii_alphabetic();
    if !(p.starts_with('/') || drive) {
        return Err(format!("{field}: {p:?} is not absolute"));
    }
    if components(p).any(|c| c == ".." || c == ".") {
        return Err(format!("{field}: {p:?} is not canonical"));
    }
    Ok(())
}

fn hash(field: &str, h: &str) -> Result<(), String> {
    if h.len() != 8 || !h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(format!("{field}: 8 lower-case hex characters"));
    }
    Ok(())
}

impl HookWorkspace {
    /// A written path as it may be named: relative to the worktree, without `..` or `.git`.
    pub fn check_path(p: &str) -> Result<(), String> {
        relative_path("workspace.paths", p)
    }

    /// Every field as a node may send it, or why not.
    pub fn check(&self) -> Result<(), String> {
        printable("workspace.name", &self.name, MAX_NAME)?;
        hash("workspace.hash", &self.hash)?;
        if let Some(g) = &self.git_dir {
            absolute_path("workspace.gitDir", g)?;
        }
        if self.paths.len() > MAX_HOOK_PATHS {
            return Err(format!("workspace.paths: at most {MAX_HOOK_PATHS}"));
        }
        for p in &self.paths {
            HookWorkspace::check_path(p)?;
        }
        if let Some(h) = &self.head {
            h.check("workspace.head")?;
        }
        Ok(())
    }
}

impl RemoteHead {
    fn check(&self, field: &str) -> Result<(), String> {
        if let Some(b) = &self.branch {
            printable(&format!("{field}.branch"), b, MAX_NAME)?;
        }
        let id = &self.short_id;
        if id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("{field}.shortId: at most 64 hex characters"));
        }
        Ok(())
    }
}

impl RemoteHeadPosition {
    fn check(&self, field: &str) -> Result<(), String> {
        self.head.as_ref().map_or(Ok(()), |h| h.check(&format!("{field}.head")))
    }
}

impl HeadReport {
    /// Every field as a node may send it, or why not (which node's workspace it names is the
    /// gateway's check).
    pub fn check(&self) -> Result<(), String> {
        printable("workspaceKey", &self.workspace_key, MAX_PATH)?;
        if let Some(f) = &self.from {
            f.check("from")?;
        }
        self.to.check("to")?;
        if let Some(m) = &self.moved {
            if HeadMoveKind::parse(&m.kind).is_none() {
                return Err(format!("moved.kind: unknown kind {:?}", m.kind));
            }
            m.from.check("moved.from")?;
            m.to.check("moved.to")?;
            printable("moved.dedupeKey", &m.dedupe_key, MAX_DEDUPE_KEY)?;
        }
        Ok(())
    }
}

impl From<&HeadAt> for RemoteHead {
    fn from(h: &HeadAt) -> RemoteHead {
        RemoteHead { branch: h.branch.clone(), short_id: h.short_id.clone() }
    }
}

impl From<&RemoteHead> for HeadAt {
    fn from(h: &RemoteHead) -> HeadAt {
        HeadAt { branch: h.branch.clone(), short_id: h.short_id.clone() }
    }
}

impl From<&HeadPosition> for RemoteHeadPosition {
    fn from(p: &HeadPosition) -> RemoteHeadPosition {
        RemoteHeadPosition { reflog_offset: p.reflog_offset, head: p.head.as_ref().map(RemoteHead::from) }
    }
}

impl From<&RemoteHeadPosition> for HeadPosition {
    fn from(p: &RemoteHeadPosition) -> HeadPosition {
        HeadPosition { reflog_offset: p.reflog_offset, head: p.head.as_ref().map(HeadAt::from) }
    }
}

impl RemoteHeadMove {
    /// The move as the workspace's event says it (the kind checked by [`HeadReport::check`]).
    pub fn head_move(&self) -> HeadMove {
        HeadMove {
            kind: HeadMoveKind::parse(&self.kind).unwrap_or(HeadMoveKind::Other),
            from: HeadAt::from(&self.from),
            to: HeadAt::from(&self.to),
        }
    }

    pub fn of(observed: &sessionwatch_upstream::workspace::ObservedMove) -> RemoteHeadMove {
        RemoteHeadMove {
            kind: observed.moved.kind.as_str().to_string(),
            from: RemoteHead::from(&observed.moved.from),
            to: RemoteHead::from(&observed.moved.to),
            dedupe_key: observed.dedupe_key.clone(),
            moved_at_ms: observed.moved_at_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(paths: &[&str], git_dir: Option<&str>) -> HookWorkspace {
        HookWorkspace {
            name: "app".into(),
            hash: "1a2b3c4d".into(),
            git_dir: git_dir.map(str::to_string),
            paths: paths.iter().map(|p| p.to_string()).collect(),
            head: None,
        }
    }

    #[test]
    fn a_node_s_workspace_is_names_and_relative_paths_only() {
        assert_eq!(hook(&["src/a.rs", "b c.md"], Some("/home/u/app/.git")).check(), Ok(()));
        assert_eq!(hook(&[], Some("C:\\u\\app\\.git")).check(), Ok(()));
        for bad in ["/etc/passwd", "../x", "src/../../x", "\\\\host\\x", "C:\\x", ".git/config", "", "a\nb"] {
            assert!(hook(&[bad], None).check().is_err(), "{bad:?}");
        }
        for bad in ["relative/.git", "/a/../b/.git", "/a/./b", "/a\u{7}"] {
            assert!(hook(&[], Some(bad)).check().is_err(), "{bad:?}");
        }
        let too_many: Vec<&str> = vec!["a"; MAX_HOOK_PATHS + 1];
        assert!(hook(&too_many, None).check().is_err());
        let mut h = hook(&[], None);
        h.hash = "XYZ".into();
        assert!(h.check().is_err());
        h.hash = "1a2b3c4d".into();
        h.name = "x".repeat(MAX_NAME + 1);
        assert!(h.check().is_err());
    }

    #[test]
    fn a_head_report_names_known_kinds_and_hex_ids() {
        let at = |b: &str, id: &str| RemoteHead { branch: Some(b.into()), short_id: id.into() };
        let report = |kind: &str, id: &str| HeadReport {
            workspace_key: "agent:main:workspace@n:app-1a2b3c4d".into(),
            from: None,
            to: RemoteHeadPosition { reflog_offset: 10, head: Some(at("x", id)) },
            moved: Some(RemoteHeadMove {
                kind: kind.into(),
                from: at("main", "1a2b3c4"),
                to: at("x", id),
                dedupe_key: "head-moved:1a2b3c4d:a:b:1 +0000".into(),
                moved_at_ms: None,
            }),
        };
        assert_eq!(report("checkout", "1a2b3c4").check(), Ok(()));
        assert!(report("teleport", "1a2b3c4").check().is_err());
        assert!(report("checkout", "not hex").check().is_err());
    }
}
