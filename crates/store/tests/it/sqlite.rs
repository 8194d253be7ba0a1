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

/// The tail cache answers recent windows from memory; another process sharing the file (two embedded
/// MCP servers, `sessionwatch db prune`) writes behind its back, and a page must still be the log's.
#[tokio::test]
async fn a_cached_tail_never_hides_another_processs_writes() {
    use crate::conformance::req;
    use sessionwatch_core::{Limit, NewEvent};
    use sessionwatch_store::{RetentionPolicy, Store};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let here = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    let other = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    let key = "agent:main:a";
    let human = || req(NewEvent::human_message(key, "main", "telegram", None));
    for i in 0..3 {
        here.append(human(), 1_000 + i).await.unwrap();
    }
    let limit = Limit::new(200).unwrap();
    let seqs = |p: &sessionwatch_core::ChangesPage| p.events.iter().map(|e| e.sequence).collect::<Vec<_>>();
    assert_eq!(seqs(&here.changes_since(key.into(), "main".into(), 0, limit).await.unwrap()), vec![1, 2, 3]);

    other.append(human(), 2_000).await.unwrap();
    let page = here.changes_since(key.into(), "main".into(), 0, limit).await.unwrap();
    assert_eq!(seqs(&page), vec![1, 2, 3, 4], "the other process's append is in the page");

    here.append(human(), 3_000).await.unwrap(); // not the continuation of what `here` holds
    let page = here.changes_since(key.into(), "main".into(), 2, limit).await.unwrap();
    assert_eq!(seqs(&page), vec![3, 4, 5]);

    let policy = RetentionPolicy { max_rows: 2, ..RetentionPolicy::default() };
    other.prune(policy, 4_000).await.unwrap();
    let page = here.changes_since(key.into(), "main".into(), 0, limit).await.unwrap();
    assert!(page.history_gap, "pruned by the other process: {page:?}");
    assert_eq!(page.earliest_available_sequence, 4);
    assert_eq!(seqs(&page), vec![4, 5]);
}

/// The database, its WAL and shared-memory files hold transcript text: owner-only, like the token file,
/// and a file an older version left readable by others is tightened once it passed the checks.
#[cfg(unix)]
#[tokio::test]
async fn database_files_are_readable_by_their_owner_only() {
    use crate::conformance::req;
    use sessionwatch_core::NewEvent;
    use sessionwatch_store::Store;
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    store.append(req(NewEvent::human_message("agent:main:a", "main", "telegram", None)), 1).await.unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let file = dir.path().join(format!("state.db{suffix}"));
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    drop(store);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let _store = SqliteStore::open(&path, SqliteOptions::default()).expect("reopen");
    assert_eq!(mode(&path), 0o600, "tightened on open");
}

/// Two gateways on one file would split notices between their in-memory queues: the second one is
/// refused while the first holds the lock, and the lock goes with its holder.
#[test]
fn a_second_gateway_lock_on_one_database_is_refused() {
    use sessionwatch_store::sqlite::GatewayLock;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let first = GatewayLock::acquire(&path).expect("first");
    let err = GatewayLock::acquire(&path).expect_err("second");
    let msg = err.to_string();
    assert!(msg.contains("another sessionwatch gateway"), "{msg}");
    assert!(msg.contains(&format!("pid {}", std::process::id())), "names the holder: {msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    drop(first);
    GatewayLock::acquire(&path).expect("free again once the holder is gone");
}
