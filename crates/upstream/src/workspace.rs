//! Workspaces: which git worktree a working directory lies in, where its HEAD is, and how it moved.
//!
//! Resolution runs no subprocess: walk up from the directory to the first `.git`. A `.git` directory is
//! the git dir; a `.git` file (`gitdir: X`) names a linked worktree's own git dir, whose `commondir`
//! names the shared one. The worktree's top is the directory holding `.git`; a directory outside git is
//! a workspace of its own. Two `git worktree`s of one repository have two git dirs, so two workspaces.
//!
//! HEAD moves are read from the worktree's reflog (`<git dir>/logs/HEAD`), which git appends on every
//! move with the old and new ids and a message (`checkout: moving from main to x`, `commit: …`,
//! `reset: moving to …`, `rebase (finish): …`, `merge …`). Only the message's kind is kept, never the
//! rest of it (a commit message is the user's text). Without a reflog, HEAD itself is compared.
//!
//! Also the hooks' file-writing tool calls: which tools write files, and the paths they name (never the
//! content they carry).

use serde_json::Value;
use sessionwatch_core::{HeadAt, HeadMove, HeadMoveKind};
use sha2::{Digest, Sha256};
use std::path::{Component, Path, PathBuf};

/// One worktree (or a directory outside git).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Workspace {
    /// The directory holding `.git` (or the directory itself, outside git).
    pub top: PathBuf,
    /// Its git dirs: both inside git, neither outside it.
    pub git: Option<GitDirs>,
    /// The worktree's directory name: the readable part of the workspace key.
    pub name: String,
    /// 8 hex characters of SHA-256 over the git dir (or the directory, outside git).
    pub hash: String,
}

/// A worktree's git dirs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GitDirs {
    /// This worktree's git dir (`.git`, or `<common>/worktrees/<name>` for a linked worktree).
    pub dir: PathBuf,
    /// The repository's shared git dir (refs, packed-refs); the git dir itself for the main worktree.
    pub common: PathBuf,
}

/// Resolves the workspace `cwd` lies in. `cwd` is made canonical first when it exists (symlinks), so
/// two spellings of one directory are one workspace.
pub fn resolve(cwd: &Path) -> Workspace {
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| normalize(cwd));
    for dir in cwd.ancestors() {
        let dot_git = dir.join(".git");
        let Ok(meta) = std::fs::metadata(&dot_git) else { continue };
        let git_dir = if meta.is_dir() {
            Some(dot_git)
        } else {
            std::fs::read_to_string(&dot_git).ok().and_then(|t| {
                let target = t.lines().next()?.strip_prefix("gitdir:")?.trim().to_string();
                let p = dir.join(target); // an absolute target replaces `dir`
                Some(std::fs::canonicalize(&p).unwrap_or_else(|_| normalize(&p)))
            })
        };
        let Some(git_dir) = git_dir else { continue };
        let common_dir = std::fs::read_to_string(git_dir.join("commondir"))
            .ok()
            .map(|c| {
                let p = git_dir.join(c.trim());
                std::fs::canonicalize(&p).unwrap_or_else(|_| normalize(&p))
            })
            .unwrap_or_else(|| git_dir.clone());
        return Workspace {
            top: dir.to_path_buf(),
            hash: short_hash(&git_dir),
            name: dir_name(dir),
            git: Some(GitDirs { dir: git_dir, common: common_dir }),
        };
    }
    Workspace { hash: short_hash(&cwd), name: dir_name(&cwd), top: cwd, git: None }
}

/// The workspace of a git dir named by its path (a remote node follows the git dirs its hooks
/// resolved): `None` unless `git_dir` is an absolute, canonical path holding a `HEAD` file. Only HEAD,
/// the refs and the reflog are ever read from it; `top` is the directory holding it.
pub fn of_git_dir(git_dir: &Path) -> Option<Workspace> {
    if !git_dir.is_absolute() || std::fs::canonicalize(git_dir).ok()? != git_dir {
        return None;
    }
    if !std::fs::metadata(git_dir.join("HEAD")).ok()?.is_file() {
        return None;
    }
    let common_dir = std::fs::read_to_string(git_dir.join("commondir"))
        .ok()
        .and_then(|c| std::fs::canonicalize(git_dir.join(c.trim())).ok())
        .unwrap_or_else(|| git_dir.to_path_buf());
    let top = git_dir.parent().unwrap_or(git_dir).to_path_buf();
    Some(Workspace {
        name: dir_name(&top),
        hash: short_hash(git_dir),
        top,
        git: Some(GitDirs { dir: git_dir.to_path_buf(), common: common_dir }),
    })
}

fn short_hash(p: &Path) -> String {
    let digest = Sha256::digest(p.as_os_str().as_encoded_bytes());
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

fn dir_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "root".into())
}

/// `a/./b/../c` → `a/c`, lexically (for paths that do not exist).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

impl Workspace {
    /// This worktree's git dir (`None` outside git).
    pub fn git_dir(&self) -> Option<&Path> {
        self.git.as_ref().map(|g| g.dir.as_path())
    }

    /// `path` (absolute, or relative to `cwd`) relative to the worktree's top; `None` when it lies
    /// outside the worktree or inside its `.git`.
    pub fn relative(&self, path: &str, cwd: &Path) -> Option<String> {
        let raw = Path::new(path);
        let full = if raw.is_absolute() { raw.to_path_buf() } else { cwd.join(raw) };
        let full = normalize(&full);
        // The top is canonical; a symlinked cwd's spelling is canonicalized through its nearest
        // existing ancestor.
        let full = canonical_prefix(&full);
        let rel = full.strip_prefix(&self.top).ok()?;
        if rel.as_os_str().is_empty() || rel.starts_with(".git") {
            return None;
        }
        Some(rel.to_string_lossy().into_owned())
    }

    /// Where HEAD is now: its branch and the commit's short id (empty before the first commit).
    pub fn head(&self) -> Option<HeadAt> {
        let head = std::fs::read_to_string(self.git_dir()?.join("HEAD")).ok()?;
        let head = head.trim();
        Some(match head.strip_prefix("ref:") {
            Some(r) => {
                let r = r.trim();
                let id = self.resolve_ref(r).unwrap_or_default();
                HeadAt {
                    branch: Some(r.strip_prefix("refs/heads/").unwrap_or(r).to_string()),
                    short_id: short(&id),
                }
            }
            None => HeadAt { branch: None, short_id: short(head) },
        })
    }

    /// A ref's id: a loose ref in this worktree's git dir or the common one, else `packed-refs`.
    fn resolve_ref(&self, name: &str) -> Option<String> {
        let git = self.git.as_ref()?;
        for d in [&git.dir, &git.common] {
            if let Ok(id) = std::fs::read_to_string(d.join(name)) {
                return Some(id.trim().to_string());
            }
        }
        let packed = std::fs::read_to_string(git.common.join("packed-refs")).ok()?;
        packed.lines().find_map(|l| {
            let (id, r) = l.split_once(' ')?;
            (r.trim() == name).then(|| id.to_string())
        })
    }

    fn reflog_path(&self) -> Option<PathBuf> {
        Some(self.git_dir()?.join("logs").join("HEAD"))
    }
}

fn canonical_prefix(p: &Path) -> PathBuf {
    let mut existing = p;
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(existing) {
            let mut out = c;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// Short ids are 7 characters; the all-zero id (no commit) is empty.
fn short(id: &str) -> String {
    let id = id.trim();
    if id.is_empty() || id.bytes().all(|b| b == b'0') { String::new() } else { id.chars().take(7).collect() }
}

fn is_object_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One reflog line, with only what we keep: the ids, the kind, a checkout's branch names, and the time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReflogEntry {
    pub old: String,
    pub new: String,
    pub kind: HeadMoveKind,
    /// `checkout: moving from A to B`: A and B (ids when detached).
    pub checkout: Option<(String, String)>,
    /// The entry's committer time and zone, as written (`1765000000 +0000`).
    pub when: String,
}

/// Parses the complete lines of `bytes` (a trailing partial line is left for the next read); answers
/// the entries and how many bytes they used.
pub fn parse_reflog(bytes: &[u8]) -> (Vec<ReflogEntry>, usize) {
    let used = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let text = String::from_utf8_lossy(&bytes[..used]);
    (text.lines().filter_map(parse_reflog_line).collect(), used)
}

fn parse_reflog_line(line: &str) -> Option<ReflogEntry> {
    let (head, message) = line.split_once('\t').unwrap_or((line, ""));
    let mut parts = head.splitn(3, ' ');
    let (old, new, who) = (parts.next()?, parts.next()?, parts.next().unwrap_or(""));
    if !is_object_id(old) || !is_object_id(new) {
        return None;
    }
    let when: Vec<&str> = who.rsplitn(3, ' ').take(2).collect();
    let when = when.into_iter().rev().collect::<Vec<_>>().join(" ");
    let (kind, checkout) = classify_message(message);
    Some(ReflogEntry { old: old.into(), new: new.into(), kind, checkout, when })
}

fn classify_message(message: &str) -> (HeadMoveKind, Option<(String, String)>) {
    if let Some(rest) = message.strip_prefix("checkout: moving from ")
        && let Some((from, to)) = rest.rsplit_once(" to ")
    {
        return (HeadMoveKind::Checkout, Some((from.trim().to_string(), to.trim().to_string())));
    }
    let word = message.split([':', ' ', '(']).next().unwrap_or("");
    let kind = match word {
        "commit" if message.starts_with("commit (merge)") => HeadMoveKind::Merge,
        "commit" => HeadMoveKind::Commit,
        "reset" => HeadMoveKind::Reset,
        "rebase" => HeadMoveKind::Rebase,
        "merge" => HeadMoveKind::Merge,
        "checkout" | "switch" => HeadMoveKind::Checkout,
        _ => HeadMoveKind::Other,
    };
    (kind, None)
}

/// Folds the entries read at once into one move: from the first entry's old position to where HEAD is
/// now, named by the strongest kind (a rebase's many lines are one rebase). `before` is where HEAD was
/// last seen; `now` where it is.
pub fn fold_moves(
    entries: &[ReflogEntry],
    before: Option<&HeadAt>,
    now: Option<&HeadAt>,
) -> Option<HeadMove> {
    let (first, last) = (entries.first()?, entries.last()?);
    let kind = entries.iter().fold(first.kind, |k, e| k.stronger(e.kind));
    let named = |n: &str| (!is_object_id(n)).then(|| n.to_string());
    let from_branch = match (&first.checkout, before) {
        (Some((from, _)), _) => named(from),
        (None, Some(b)) => b.branch.clone(),
        (None, None) => None,
    };
    // A checkout's line names where it went: git appends it before it renames HEAD into place, so a
    // read between the two would find HEAD still on the old branch.
    let to_branch = match (&last.checkout, now) {
        (Some((_, to)), _) => named(to),
        (None, Some(n)) => n.branch.clone(),
        (None, None) => None,
    };
    // A move back and forth within one read (checkout x, checkout main) still says what happened.
    Some(HeadMove {
        kind,
        from: HeadAt { branch: from_branch, short_id: short(&first.old) },
        to: HeadAt { branch: to_branch, short_id: short(&last.new) },
    })
}

/// Follows one worktree's HEAD: the reflog's new lines since the last read, or HEAD itself without one.
#[derive(Debug)]
pub struct HeadFollower {
    workspace: Workspace,
    position: HeadPosition,
}

/// How far a [`HeadFollower`] has read: the reflog's length and HEAD as last seen. A remote node's
/// follower resumes from the position the gateway keeps, so a node holds no state of its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeadPosition {
    pub reflog_offset: u64,
    pub head: Option<HeadAt>,
}

/// A move, with the dedupe key naming its last reflog entry (or the new HEAD).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedMove {
    pub moved: HeadMove,
    pub dedupe_key: String,
    /// When git wrote the move's last reflog line (its committer time, whole seconds), in ms since the
    /// epoch; `None` without a reflog.
    pub moved_at_ms: Option<i64>,
}

impl HeadFollower {
    /// Starts at the present: what happened before is not a change.
    pub fn start(workspace: Workspace) -> HeadFollower {
        let reflog_offset =
            workspace.reflog_path().and_then(|p| std::fs::metadata(p).ok()).map_or(0, |m| m.len());
        let head = workspace.head();
        HeadFollower { workspace, position: HeadPosition { reflog_offset, head } }
    }

    /// Goes on from `position` (what happened since is reported by the next poll).
    pub fn resume(workspace: Workspace, position: HeadPosition) -> HeadFollower {
        HeadFollower { workspace, position }
    }

    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    pub fn position(&self) -> &HeadPosition {
        &self.position
    }

    /// The move since the last poll, if HEAD moved. A reflog that shrank (expired, rewritten) restarts
    /// at its end without reporting anything.
    pub fn poll(&mut self) -> Option<ObservedMove> {
        use std::io::{Read, Seek, SeekFrom};
        let now = self.workspace.head();
        let path = self.workspace.reflog_path()?;
        let moved = match std::fs::File::open(&path) {
            Ok(mut f) => {
                let len = f.metadata().ok()?.len();
                let offset = &mut self.position.reflog_offset;
                if len < *offset {
                    *offset = len;
                }
                let mut buf = Vec::new();
                f.seek(SeekFrom::Start(*offset)).ok()?;
                f.take(len - *offset).read_to_end(&mut buf).ok()?;
                let (entries, used) = parse_reflog(&buf);
                *offset += used as u64;
                fold_moves(&entries, self.position.head.as_ref(), now.as_ref()).map(|m| {
                    let last = entries.last().expect("a move has entries");
                    // The entry's end in the reflog tells apart two moves between the same ids in
                    // one second (`checkout -b a`, then `checkout -b b`); two readers of one reflog
                    // still name one move alike.
                    let key = format!(
                        "head-moved:{}:{}:{}:{}:{}",
                        self.workspace.hash, offset, last.old, last.new, last.when
                    );
                    let moved_at_ms = last
                        .when
                        .split(' ')
                        .next()
                        .and_then(|t| t.parse::<i64>().ok())
                        .map(|secs| secs.saturating_mul(1000));
                    ObservedMove { moved: m, dedupe_key: key, moved_at_ms }
                })
            }
            // No reflog (core.logAllRefUpdates off): HEAD itself, compared with what was seen.
            Err(_) => match (&self.position.head, &now) {
                (Some(before), Some(after)) if before != after => {
                    let kind = if before.branch != after.branch {
                        HeadMoveKind::Checkout
                    } else {
                        HeadMoveKind::Other
                    };
                    let key =
                        format!("head-moved:{}:{}:{}", self.workspace.hash, before.label(), after.label());
                    Some(ObservedMove {
                        moved: HeadMove { kind, from: before.clone(), to: after.clone() },
                        dedupe_key: key,
                        moved_at_ms: None,
                    })
                }
                _ => None,
            },
        };
        if now.is_some() {
            self.position.head = now;
        }
        moved
    }
}

/// Whether a tool call runs shell commands (which may move HEAD): Claude's and Codex's `Bash`, Codex's
/// `shell` / `exec_command` / `local_shell`, Gemini's `run_shell_command`.
pub fn is_shell_tool(tool_name: &str) -> bool {
    matches!(
        tool_name,
        "Bash" | "bash" | "shell" | "exec_command" | "local_shell" | "unified_exec" | "run_shell_command"
    )
}

/// The paths a file-writing tool call names, as given (absolute or relative to the session's cwd);
/// `None` for a tool that writes no file. Claude `Edit`/`Write`/`MultiEdit`/`NotebookEdit`, Codex
/// `apply_patch` (the patch's file headers), Gemini `write_file`/`replace`, OpenCode `edit`/`write`
/// (`filePath`) and Pi `edit`/`write` (`path`; their plugin and extension send only that field).
pub fn written_paths(tool_name: &str, tool_input: Option<&Value>) -> Option<Vec<String>> {
    let field = |k: &str| tool_input.and_then(|i| i.get(k)).and_then(Value::as_str).map(str::to_string);
    match tool_name {
        "Edit" | "Write" | "MultiEdit" | "write_file" | "replace" => {
            Some(field("file_path").into_iter().collect())
        }
        "NotebookEdit" => Some(field("notebook_path").into_iter().collect()),
        "edit" | "write" => Some(field("filePath").or_else(|| field("path")).into_iter().collect()),
        "apply_patch" | "ApplyPatch" => {
            let mut texts = Vec::new();
            collect_strings(tool_input?, &mut texts);
            let paths: Vec<String> = texts.iter().flat_map(|t| patch_paths(t)).collect();
            Some(paths)
        }
        _ => None,
    }
}

fn collect_strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(o) => o.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// The files a Codex patch touches: its `*** Add File:`, `*** Update File:`, `*** Delete File:` and
/// `*** Move to:` headers (the hunks, which are file content, are not read).
pub fn patch_paths(patch: &str) -> Vec<String> {
    const HEADERS: [&str; 4] = ["*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"];
    patch
        .lines()
        .filter_map(|l| HEADERS.iter().find_map(|h| l.strip_prefix(h)).map(|p| p.trim().to_string()))
        .filter(|p| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod git_fixture;
#[cfg(test)]
mod tests;
