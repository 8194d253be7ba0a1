//! How the gateway's process runs, beside what it answers.

use crate::support::Server;

/// The first touch of a transparent huge page zeroes 2 MiB in one fault on the thread that touched it:
/// the gateway turns them off for its process (a kernel in THP `always` mode gives them unasked).
#[cfg(target_os = "linux")]
#[test]
fn the_gateway_runs_without_transparent_huge_pages() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    // `THP_enabled` is in the status file since Linux 5.0.
    let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) else {
        eprintln!(
            "SKIPPED the_gateway_runs_without_transparent_huge_pages: no THP_enabled in /proc/<pid>/status"
        );
        return;
    };
    assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
}
