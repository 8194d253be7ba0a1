//! "Tell the user once per outage": when a hook cannot reach the gateway, the CLI's user is shown one
//! line, the first time per session; the marks are cleared as soon as any hook reaches the gateway again.
//!
//! One empty file per session under `<data dir>/hook-outage/`, created with `O_EXCL`: of several hooks of
//! one session failing at once (both CLIs run matching hooks concurrently), exactly one creates it and
//! speaks. Mode 0600 in a 0700 directory: a session id is nobody else's business.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

const DIR: &str = "hook-outage";

fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join(DIR)
}

/// A file name for `<cli>:<session id>`: the id itself when it is plain, else a hash of it (ids come
/// from the hook's stdin and must never name a path).
fn mark_name(cli: &str, session_id: &str) -> String {
    let plain = |s: &str| {
        !s.is_empty()
            && s.len() <= 128
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if plain(cli) && plain(session_id) {
        return format!("{cli}-{session_id}");
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = foldhash::fast::FixedState::with_seed(0x5e55_1011).build_hasher();
    h.write(cli.as_bytes());
    h.write_u8(0);
    h.write(session_id.as_bytes());
    format!("h-{:016x}", h.finish())
}

/// Marks the session as told about the outage; true when this call is the first since the gateway last
/// answered (the caller then shows the line). An error marking it also answers true: better a repeated
/// line than a silent outage.
pub fn first_report(data_dir: &Path, cli: &str, session_id: &str) -> bool {
    let dir = dir(data_dir);
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    if builder.create(&dir).is_err() {
        return true;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(dir.join(mark_name(cli, session_id))) {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => false,
        Err(_) => true,
    }
}

/// The gateway answered: the outage is over for every session (the next one is reported again).
pub fn clear(data_dir: &Path) {
    let dir = dir(data_dir);
    // The common case, a gateway that never went away, costs one failed stat.
    if dir.exists() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_per_session_per_outage() {
        let d = tempfile::tempdir().unwrap();
        assert!(first_report(d.path(), "claude", "s1"));
        assert!(!first_report(d.path(), "claude", "s1"), "the same outage is told once");
        assert!(first_report(d.path(), "claude", "s2"), "another session is told too");
        assert!(first_report(d.path(), "codex", "s1"), "the same id in another CLI is another session");
        clear(d.path());
        assert!(first_report(d.path(), "claude", "s1"), "a new outage is told again");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&d.path().join(DIR)), 0o700);
            assert_eq!(mode(&d.path().join(DIR).join("claude-s1")), 0o600);
        }
    }

    #[test]
    fn odd_session_ids_never_name_a_path() {
        let d = tempfile::tempdir().unwrap();
        for id in ["../../etc/passwd", "a/b", "", &"x".repeat(300)] {
            assert!(first_report(d.path(), "claude", id), "{id:?}");
            assert!(!first_report(d.path(), "claude", id), "{id:?}");
        }
        let names: Vec<String> = std::fs::read_dir(d.path().join(DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| n.starts_with("h-") && !n.contains('/')), "{names:?}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1, "nothing outside the mark dir");
    }
}
