//! The conformance suite on the embedded SQLite store, one fresh database file per test.

use crate::conformance::Harness;
use sessionwatch_store::{SqliteOptions, SqliteStore};
use tempfile::TempDir;

fn make() -> (Harness<SqliteStore>, TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path().join("state.db"), SqliteOptions::default()).expect("open");
    let make_legacy = Box::new(|s: &SqliteStore, watcher: &str, target: &str| {
        let conn = rusqlite::Connection::open(s.path()).expect("open raw");
        conn.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        let n = conn
            .execute(
                "UPDATE session_watch_cursors SET watcher_store_path = NULL \
                 WHERE watcher_session_key = ?1 AND target_session_key = ?2",
                [watcher, target],
            )
            .expect("make legacy");
        assert_eq!(n, 1, "the cursor to make legacy exists");
    });
    (Harness { store, make_legacy }, dir)
}

crate::conformance_suite!(make);
