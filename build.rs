//! Names the commit in `sessionwatch --version`: `git rev-parse --short HEAD` of this checkout, else
//! `SESSIONWATCH_BUILD_COMMIT` (a packager building from a tarball), else "unknown commit".

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SESSIONWATCH_BUILD_COMMIT");
    let commit = std::env::var("SESSIONWATCH_BUILD_COMMIT")
        .ok()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown commit".into());
    println!("cargo:rustc-env=SESSIONWATCH_COMMIT={commit}");
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn git_commit() -> Option<String> {
    // Only this package's own checkout: a tarball unpacked inside another repository is not that commit.
    let top = git(&["rev-parse", "--show-toplevel"])?;
    let here = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    if Path::new(&top).canonicalize().ok()? != Path::new(&here).canonicalize().ok()? {
        return None;
    }
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    // Rebuild when HEAD moves: HEAD (a checkout), the branch it names (a commit), packed refs. `--git-path`
    // finds them in a linked worktree too; a path that does not exist is not watched (cargo would rerun
    // the script on every build).
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]).filter(|p| Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    Some(commit)
}
