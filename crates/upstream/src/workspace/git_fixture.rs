//! Real git repositories for tests: this crate's (`workspace/tests.rs`) and the binary's (`tests/it`,
//! which includes this file by path).

use std::path::Path;

/// Runs `git args` in `dir` with a fixed identity and `main` as the first branch; panics with git's
/// stderr when it fails.
pub fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Makes `dir` (which must exist) a repository on `main` whose one commit, `message`, adds `file`.
pub fn init_with_commit(dir: &Path, file: &str, message: &str) {
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join(file), "x").unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", message]);
}
