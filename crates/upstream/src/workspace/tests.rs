use super::git_fixture::{git, init_with_commit};
use super::*;
use serde_json::json;

/// A work tree whose `.git` is only HEAD (on `main`) and an empty reflog, written by hand: the tests
/// write the reflog lines git would. Answers the temp dir and the git dir.
fn bare_git_dir_on_main() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let git_dir = std::fs::canonicalize(t.path()).unwrap().join(".git");
    std::fs::create_dir_all(git_dir.join("logs")).unwrap();
    std::fs::write(git_dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(git_dir.join("logs/HEAD"), "").unwrap();
    (t, git_dir)
}

/// The branches a move went from and to.
fn branches(moved: &HeadMove) -> (Option<&str>, Option<&str>) {
    (moved.from.branch.as_deref(), moved.to.branch.as_deref())
}

fn repo() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(t.path()).unwrap().join("my-repo");
    std::fs::create_dir_all(root.join("src/deep")).unwrap();
    init_with_commit(&root, "a.txt", "secret commit message");
    (t, root)
}

#[test]
fn a_directory_resolves_to_its_worktree_and_linked_worktrees_are_their_own() {
    let (t, root) = repo();
    let top = resolve(&root);
    assert_eq!((top.top.clone(), top.name.as_str()), (root.clone(), "my-repo"));
    assert_eq!(top.git_dir(), Some(root.join(".git").as_path()));
    assert_eq!(top.hash.len(), 8);
    assert_eq!(resolve(&root.join("src/deep")), top, "a subdirectory is the same workspace");

    let linked = t.path().join("linked");
    git(&root, &["worktree", "add", "-q", linked.to_str().unwrap(), "-b", "side"]);
    let other = resolve(&linked);
    assert_eq!(other.top, std::fs::canonicalize(&linked).unwrap());
    assert_ne!(other.hash, top.hash, "another worktree of the same repository is another workspace");
    assert_eq!(
        other.git.as_ref().map(|g| &g.common),
        top.git.as_ref().map(|g| &g.dir),
        "it shares the repository's refs"
    );
    assert_eq!(other.head().unwrap().branch.as_deref(), Some("side"));

    let outside = tempfile::tempdir().unwrap();
    let plain = resolve(outside.path());
    assert_eq!(
        (plain.git.clone(), plain.top.clone()),
        (None, std::fs::canonicalize(outside.path()).unwrap())
    );
    assert!(plain.head().is_none());
}

#[test]
fn paths_are_made_relative_to_the_top() {
    let (_t, root) = repo();
    let ws = resolve(&root);
    let deep = root.join("src/deep");
    assert_eq!(ws.relative("x.rs", &deep).as_deref(), Some("src/deep/x.rs"));
    assert_eq!(ws.relative(root.join("a.txt").to_str().unwrap(), &deep).as_deref(), Some("a.txt"));
    assert_eq!(ws.relative("../../b/./c.rs", &deep).as_deref(), Some("b/c.rs"));
    assert_eq!(ws.relative("/etc/passwd", &deep), None, "outside the worktree");
    assert_eq!(ws.relative(".git/config", &root), None);
}

#[test]
fn the_follower_reports_each_move_once_without_the_commit_message() {
    let (_t, root) = repo();
    let mut f = HeadFollower::start(resolve(&root));
    assert_eq!(f.poll(), None, "what happened before is not a change");

    git(&root, &["checkout", "-q", "-b", "feature"]);
    let m = f.poll().expect("a checkout");
    assert_eq!(m.moved.kind, HeadMoveKind::Checkout);
    assert_eq!(
        sessionwatch_core::NewEvent::head_moved("w", "main", sessionwatch_core::Actor::human(None), &m.moved)
            .summary,
        "branch main → feature"
    );
    assert_eq!(f.poll(), None, "once");

    std::fs::write(root.join("b.txt"), "two").unwrap();
    git(&root, &["add", "."]);
    git(&root, &["commit", "-qm", "secret commit message"]);
    let c = f.poll().expect("a commit");
    assert_eq!(c.moved.kind, HeadMoveKind::Commit);
    assert_eq!(c.moved.from.branch.as_deref(), Some("feature"));
    assert_ne!(c.moved.from.short_id, c.moved.to.short_id);
    assert!(!format!("{c:?}").contains("secret"), "no commit message is kept");

    git(&root, &["reset", "-q", "--hard", "HEAD~1"]);
    let r = f.poll().expect("a reset");
    assert_eq!(
        (r.moved.kind, r.moved.to.short_id.clone()),
        (HeadMoveKind::Reset, c.moved.from.short_id.clone())
    );
    assert_ne!(r.dedupe_key, c.dedupe_key);

    git(&root, &["checkout", "-q", "main"]);
    git(&root, &["checkout", "-q", "feature"]);
    let both = f.poll().expect("two checkouts read at once are one move");
    assert_eq!(branches(&both.moved), (Some("feature"), Some("feature")));
}

/// A remote node follows a git dir by its path, from the position the gateway kept: a fresh follower
/// resumed there reports what happened since, once, with the reflog's time.
#[test]
fn a_follower_resumed_from_a_kept_position_reports_what_happened_since() {
    let (_t, root) = repo();
    let ws = resolve(&root);
    let git_dir = ws.git_dir().unwrap().to_path_buf();
    let by_path = of_git_dir(&git_dir).expect("a git dir");
    assert_eq!((by_path.hash.as_str(), by_path.name.as_str()), (ws.hash.as_str(), "my-repo"));
    assert_eq!(of_git_dir(&root), None, "a worktree's top is not a git dir");
    assert_eq!(of_git_dir(Path::new("relative/.git")), None);
    assert_eq!(of_git_dir(&root.join("src/../.git")), None, "only the canonical spelling");

    let kept = HeadFollower::start(by_path.clone()).position().clone();
    git(&root, &["checkout", "-q", "-b", "feature"]);
    let mut resumed = HeadFollower::resume(by_path, kept.clone());
    let m = resumed.poll().expect("the move since the kept position");
    assert_eq!(m.moved.to.branch.as_deref(), Some("feature"));
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!(m.moved_at_ms.is_some_and(|t| (now_ms - t).abs() < 60_000), "{m:?}");
    assert_ne!(resumed.position(), &kept);
    assert_eq!(resumed.poll(), None, "once");
}

/// Regression: two checkouts of new branches at one commit within one second have the same ids and
/// time in the reflog; read by two polls, they were one dedupe key, so the second move was dropped.
#[test]
fn two_moves_between_the_same_ids_in_one_second_are_two_moves() {
    let (_t, git_dir) = bare_git_dir_on_main();
    let mut f = HeadFollower::start(resolve(git_dir.parent().unwrap()));
    let id = "1".repeat(40);
    let append = |to: &str| {
        use std::io::Write;
        std::fs::write(git_dir.join("HEAD"), format!("ref: refs/heads/{to}\n")).unwrap();
        let mut log = std::fs::OpenOptions::new().append(true).open(git_dir.join("logs/HEAD")).unwrap();
        writeln!(log, "{id} {id} t <t@t> 1765000000 +0000\tcheckout: moving from main to {to}").unwrap();
    };
    append("a");
    let first = f.poll().expect("checkout -b a");
    append("b");
    let second = f.poll().expect("checkout -b b");
    assert_eq!(second.moved.to.branch.as_deref(), Some("b"));
    assert_ne!(first.dedupe_key, second.dedupe_key);
}

/// Regression: git appends a checkout's reflog line before it renames HEAD into place; a poll in
/// between read HEAD on the old branch and reported `branch main → main`.
#[test]
fn a_checkout_read_before_head_is_renamed_names_its_target() {
    let (_t, git_dir) = bare_git_dir_on_main();
    let mut f = HeadFollower::start(resolve(git_dir.parent().unwrap()));
    let id = "1".repeat(40);
    let line = format!("{id} {id} t <t@t> 1765000000 +0000\tcheckout: moving from main to feature\n");
    std::fs::write(git_dir.join("logs/HEAD"), line).unwrap(); // HEAD not renamed yet
    let m = f.poll().expect("the checkout");
    assert_eq!(branches(&m.moved), (Some("main"), Some("feature")));
}

#[test]
fn reflog_lines_classify_by_their_first_word() {
    let id = |c: char| c.to_string().repeat(40);
    let line = |msg: &str| format!("{} {} A <a@b> 1765000000 +0000\t{msg}\n", id('1'), id('2'));
    let cases = [
        ("commit (initial): x", HeadMoveKind::Commit),
        ("commit (amend): x", HeadMoveKind::Commit),
        ("commit (merge): x", HeadMoveKind::Merge),
        ("merge feature: Fast-forward", HeadMoveKind::Merge),
        ("reset: moving to HEAD~1", HeadMoveKind::Reset),
        ("rebase (finish): returning to refs/heads/f", HeadMoveKind::Rebase),
        ("rebase -i (start): checkout main", HeadMoveKind::Rebase),
        ("pull: Fast-forward", HeadMoveKind::Other),
        ("checkout: moving from main to x", HeadMoveKind::Checkout),
    ];
    for (msg, kind) in cases {
        let (entries, used) = parse_reflog(line(msg).as_bytes());
        assert_eq!((entries.len(), entries[0].kind), (1, kind), "{msg}");
        assert_eq!(used, line(msg).len());
        assert_eq!(entries[0].when, "1765000000 +0000");
    }
    let partial = format!("{}{}", line("commit: a"), &line("commit: b")[..30]);
    let (entries, used) = parse_reflog(partial.as_bytes());
    assert_eq!((entries.len(), used), (1, line("commit: a").len()), "a partial line waits");
    assert!(parse_reflog(b"not a reflog\n").0.is_empty());
}

#[test]
fn write_tools_name_their_paths_and_nothing_else() {
    let p = |tool: &str, input: Value| written_paths(tool, Some(&input));
    assert_eq!(
        p("Edit", json!({"file_path": "/r/a.rs", "old_string": "x", "new_string": "y"})),
        Some(vec!["/r/a.rs".into()])
    );
    assert_eq!(p("Write", json!({"file_path": "b.rs", "content": "SECRET"})), Some(vec!["b.rs".into()]));
    assert_eq!(p("MultiEdit", json!({"file_path": "c.rs", "edits": []})), Some(vec!["c.rs".into()]));
    assert_eq!(p("NotebookEdit", json!({"notebook_path": "n.ipynb"})), Some(vec!["n.ipynb".into()]));
    assert_eq!(p("write_file", json!({"file_path": "g.rs", "content": "SECRET"})), Some(vec!["g.rs".into()]));
    let patch = "*** Begin Patch\n*** Add File: new.rs\n+SECRET\n*** Update File: src/old.rs\n*** Move to: src/moved.rs\n@@\n-a\n+b\n*** Delete File: gone.rs\n*** End Patch\n";
    assert_eq!(
        p("apply_patch", json!({"command": patch})),
        Some(vec!["new.rs".into(), "src/old.rs".into(), "src/moved.rs".into(), "gone.rs".into()])
    );
    assert_eq!(p("apply_patch", json!({"command": ["apply_patch", patch]})).unwrap().len(), 4);
    // What the OpenCode plugin and the Pi extension send for their edit/write tools: the path only.
    assert_eq!(p("edit", json!({"filePath": "/r/o.rs"})), Some(vec!["/r/o.rs".into()]));
    assert_eq!(p("write", json!({"path": "p.rs"})), Some(vec!["p.rs".into()]));
    assert_eq!(p("write", json!({})), Some(vec![]));
    assert_eq!(p("Bash", json!({"command": "echo"})), None);
    assert_eq!(p("bash", json!({"command": "echo"})), None);
    assert_eq!(p("Read", json!({"file_path": "a.rs"})), None);
    assert!(
        is_shell_tool("Bash")
            && is_shell_tool("bash")
            && is_shell_tool("run_shell_command")
            && !is_shell_tool("Edit")
    );
}
