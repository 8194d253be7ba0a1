//! Storage faults: a full disk and damaged database files.

use crate::common::{Env, NOW, STORE, all_sequences};
use sessionwatch_core::RecordPolicy;
use sessionwatch_core::{Limit, ManualClock, NewEvent};
use sessionwatch_kernel::{Kernel, KernelConfig, RecordOutcome};
use sessionwatch_store::{SqliteOptions, SqliteStore, StoreError};
use std::path::Path;
use std::sync::Arc;

const T: &str = "agent:main:subagent:t";

fn event(i: usize) -> NewEvent {
    // A varied channel makes rows of realistic size.
    NewEvent::human_message(T, "main", &format!("channel-{i:06}-{}", "x".repeat(40)), None)
}

async fn start(store: SqliteStore) -> Kernel<SqliteStore> {
    let config = KernelConfig { store_identity: STORE.into(), ..KernelConfig::default() };
    Kernel::start(store, Arc::new(ManualClock::new(NOW)), config).await
}

/// `PRAGMA max_page_count` makes SQLite answer SQLITE_FULL deterministically.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_full_fails_the_append_but_not_the_store() {
    let env = Env::new();
    let limited = SqliteOptions { max_page_count: Some(40), ..SqliteOptions::default() };
    let k = start(SqliteStore::open(env.db(), limited.clone()).unwrap()).await;
    let mut recorded = 0u64;
    let reason = loop {
        match k.record(event(recorded as usize), RecordPolicy::always()).await {
            RecordOutcome::Recorded(e) => {
                recorded += 1;
                assert_eq!(e.sequence, recorded);
            }
            RecordOutcome::NotRecorded(reason) => break reason,
            other => panic!("unexpected {other:?}"),
        }
        assert!(recorded < 100_000, "the page limit never hit");
    };
    assert!(recorded > 10, "some appends fit before the disk filled ({recorded})");
    assert_eq!(reason, StoreError::Full.to_string(), "a typed, clear error");
    assert_eq!(k.metrics().events_not_recorded.load(std::sync::atomic::Ordering::Relaxed), 1);
    // The failed append left no trace: the head is unchanged, again after a second failure.
    assert_eq!(k.head(T, "main").await.expect("head").head, recorded);
    assert!(matches!(k.record(event(0), RecordPolicy::always()).await, RecordOutcome::NotRecorded(_)));
    assert_eq!(k.head(T, "main").await.expect("head").head, recorded);
    // Reads still work and see exactly 1..=head.
    assert_eq!(all_sequences(&k, T).await, (1..=recorded).collect::<Vec<_>>());
    drop(k);

    // Still full after a restart with the same limit.
    let k = start(SqliteStore::open(env.db(), limited).unwrap()).await;
    assert!(matches!(k.record(event(0), RecordPolicy::always()).await, RecordOutcome::NotRecorded(_)));
    drop(k);
    // Make room: the next append gets exactly head + 1.
    let roomy = SqliteOptions { max_page_count: Some(100_000), ..SqliteOptions::default() };
    let store = SqliteStore::open(env.db(), roomy).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    let k = start(store).await;
    match k.record(event(0), RecordPolicy::always()).await {
        RecordOutcome::Recorded(e) => assert_eq!(e.sequence, recorded + 1),
        other => panic!("expected Recorded after making room, got {other:?}"),
    }
}

/// A healthy sessionwatch database with some history, closed (checkpointed into the main file).
fn healthy_db(path: &Path, events: usize) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let k = start(SqliteStore::open(path, SqliteOptions::default()).unwrap()).await;
        for i in 0..events {
            assert!(matches!(k.record(event(i), RecordPolicy::always()).await, RecordOutcome::Recorded(_)));
        }
        // The store closes (and checkpoints) with the kernel's last handle: the start-up prune's.
        k.background_prune_done().await;
    });
    assert!(
        !path.with_extension("db-wal").exists()
            || std::fs::metadata(path.with_extension("db-wal")).unwrap().len() == 0
    );
}

/// Opens `path`, expects a refusal, and checks the file's bytes did not change.
fn assert_refused(path: &Path, what: &str) -> StoreError {
    let before = std::fs::read(path).unwrap();
    let err = match SqliteStore::open(path, SqliteOptions::default()) {
        Ok(_) => panic!("{what}: the store opened a damaged or foreign database"),
        Err(e) => e,
    };
    let after = std::fs::read(path).unwrap();
    assert!(before == after, "{what}: the file was modified by the refused open");
    let msg = err.to_string();
    assert!(!msg.is_empty());
    // A second attempt refuses the same way (nothing was "repaired" into an empty database).
    assert!(SqliteStore::open(path, SqliteOptions::default()).is_err(), "{what}: refused again");
    assert!(std::fs::read(path).unwrap() == before, "{what}: still untouched");
    err
}

fn assert_corrupt(err: &StoreError, path: &Path, what: &str) {
    match err {
        StoreError::Corrupt { path: p, reason } => {
            assert_eq!(p, &path.display().to_string(), "{what}: the error names the file");
            assert!(!reason.is_empty());
            assert!(err.to_string().contains("is not a usable sessionwatch database"), "{what}: {err}");
        }
        other => panic!("{what}: expected Corrupt, got {other:?} ({other})"),
    }
}

/// A clean close is recorded, so that the next open may skip reading every page; that open takes the
/// record away, so a crash while the store is open leaves none and the open after it checks the file.
/// (The damaged and truncated files below were closed cleanly before they were damaged.)
#[test]
fn a_clean_close_is_recorded_and_taken_away_by_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    healthy_db(&path, 10);
    let record = dir.path().join("state.db-clean");
    assert!(record.exists(), "the close was recorded");
    let store = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    assert!(!record.exists(), "the open took the record away");
    // A crash: the store is never closed.
    std::mem::forget(store);
    assert!(!record.exists());
}

/// Makes a file with `make` where the database goes, and checks that the store refuses it as corrupt and
/// leaves it untouched; answers the error, and the file's directory for what a case checks after.
fn refused_as_corrupt(what: &str, make: impl FnOnce(&Path)) -> (StoreError, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    make(&path);
    let err = assert_refused(&path, what);
    assert_corrupt(&err, &path, what);
    (err, dir)
}

#[test]
fn truncated_database_is_refused_untouched() {
    refused_as_corrupt("truncated", |path| {
        healthy_db(path, 3000);
        let bytes = std::fs::read(path).unwrap();
        assert!(bytes.len() > 64 * 1024, "big enough to cut: {}", bytes.len());
        std::fs::write(path, &bytes[..bytes.len() / 2]).unwrap();
    });
}

#[test]
fn garbage_bytes_are_refused_untouched() {
    refused_as_corrupt("garbage", |path| {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let garbage: Vec<u8> = (0..16 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        std::fs::write(path, &garbage).unwrap();
    });
}

#[test]
fn damaged_pages_inside_a_database_are_refused_untouched() {
    refused_as_corrupt("damaged pages", |path| {
        healthy_db(path, 3000);
        // No free pages, so the damage lands on pages in use: a fold frees the staging table's pages, and
        // where they lie depends on when the idle folds ran (a free page's bytes are never read).
        let c = rusqlite::Connection::open(path).unwrap();
        c.execute_batch("VACUUM").unwrap();
        let free: i64 = c.query_row("PRAGMA freelist_count", [], |r| r.get(0)).unwrap();
        assert_eq!(free, 0);
        drop(c);
        let mut bytes = std::fs::read(path).unwrap();
        // Overwrite a run of bytes in the middle of the file, past the header page.
        let mid = bytes.len() / 2;
        for (i, b) in bytes[mid..mid + 8192].iter_mut().enumerate() {
            *b = (i * 31 % 251) as u8;
        }
        std::fs::write(path, &bytes).unwrap();
    });
}

#[test]
fn zero_length_file_is_refused_untouched() {
    let (err, _dir) = refused_as_corrupt("zero length", |path| std::fs::write(path, b"").unwrap());
    assert!(err.to_string().contains("empty"), "{err}");
}

#[test]
fn someone_elses_sqlite_database_is_refused_untouched() {
    let (err, dir) = refused_as_corrupt("foreign schema", |path| {
        rusqlite::Connection::open(path)
            .unwrap()
            .execute_batch(
                "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);
                 INSERT INTO users (name) VALUES ('ada'), ('grace');",
            )
            .unwrap();
    });
    assert!(err.to_string().contains("users"), "the error says what it found: {err}");
    // The other program's data is intact.
    let c = rusqlite::Connection::open(dir.path().join("state.db")).unwrap();
    let n: i64 = c.query_row("SELECT COUNT(*) FROM users", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 2);
}

#[test]
fn database_from_a_newer_version_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    healthy_db(&path, 10);
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", sessionwatch_store::sqlite::SCHEMA_VERSION + 1).unwrap();
    }
    let err = assert_refused(&path, "newer user_version");
    match err {
        StoreError::TooNew { found, supported } => {
            assert_eq!(
                (found, supported),
                (sessionwatch_store::sqlite::SCHEMA_VERSION + 1, sessionwatch_store::sqlite::SCHEMA_VERSION)
            );
            assert!(err.to_string().contains("upgrade sessionwatch"));
        }
        other => panic!("expected TooNew, got {other:?}"),
    }
}

/// Issue 11 item 1: a file with an unrelated table and `user_version` 1, or holding only a view, was
/// opened, switched to WAL and given our schema. Every object and the version must be ours.
#[test]
fn sqlite_files_that_are_not_ours_are_refused_untouched() {
    let ours = |c: &rusqlite::Connection| {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ours.db");
        drop(SqliteStore::open(&p, SqliteOptions::default()).unwrap());
        let src = rusqlite::Connection::open(&p).unwrap();
        let ddl: Vec<String> = src
            .prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for sql in ddl {
            c.execute_batch(&sql).unwrap();
        }
        c.pragma_update(None, "user_version", sessionwatch_store::sqlite::SCHEMA_VERSION).unwrap();
    };
    type MakeFile<'a> = &'a dyn Fn(&rusqlite::Connection);
    let cases: &[(&str, MakeFile, &str)] = &[
        (
            "a foreign table with user_version 1",
            &|c| {
                c.execute_batch("CREATE TABLE users (id INTEGER PRIMARY KEY); PRAGMA user_version = 1;")
                    .unwrap()
            },
            "users",
        ),
        ("only a view", &|c| c.execute_batch("CREATE VIEW v AS SELECT 1 AS one;").unwrap(), "view \"v\""),
        ("a negative user_version", &|c| c.execute_batch("PRAGMA user_version = -3;").unwrap(), "-3"),
        (
            "our schema plus a foreign table",
            &|c| {
                ours(c);
                c.execute_batch("CREATE TABLE extra (x);").unwrap();
            },
            "extra",
        ),
        (
            "our schema plus a trigger",
            &|c| {
                ours(c);
                c.execute_batch(
                    "CREATE TRIGGER t AFTER INSERT ON session_inbox BEGIN DELETE FROM session_inbox; END;",
                )
                .unwrap();
            },
            "trigger \"t\"",
        ),
        (
            "our version with a table missing",
            &|c| {
                ours(c);
                c.execute_batch("DROP TABLE session_runs;").unwrap();
            },
            "session_runs",
        ),
    ];
    for (what, make, named) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        {
            let c = rusqlite::Connection::open(&path).unwrap();
            make(&c);
        }
        let err = assert_refused(&path, what);
        assert_corrupt(&err, &path, what);
        assert!(err.to_string().contains(named), "{what}: the error names what it found: {err}");
        assert!(!path.with_extension("db-wal").exists(), "{what}: no WAL file was created");
    }
}

/// Another connection to the same database file (the store's own connections keep working on it).
fn side_connection(env: &Env) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(env.db()).expect("open a side connection");
    c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    c
}

/// Issue 33 item 3: a read the store cannot answer is an error, never an empty page at head 0 (a
/// reconciling agent would be told "nothing changed").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_read_is_an_error_not_an_empty_page() {
    let env = Env::new();
    let k = env.start().await;
    for i in 0..3 {
        assert!(matches!(k.record(event(i), RecordPolicy::always()).await, RecordOutcome::Recorded(_)));
    }
    assert_eq!(k.changes_since(T, "main", 0, Limit::MAX).await.expect("page").head, 3);
    let side = side_connection(&env);
    side.execute_batch("ALTER TABLE session_state_heads RENAME TO heads_away;").unwrap();
    assert!(k.changes_since(T, "main", 0, Limit::MAX).await.is_err(), "a page without its head is no page");
    assert!(k.changes_since(T, "main", 2, Limit::MAX).await.is_err(), "not even a recent one from memory");
    assert!(k.head(T, "main").await.is_err());
    assert!(k.state_versions(vec![(T.into(), "main".into())]).await.is_err());
    side.execute_batch("ALTER TABLE heads_away RENAME TO session_state_heads;").unwrap();
    let page = k.changes_since(T, "main", 0, Limit::MAX).await.expect("answers again");
    assert_eq!((page.head, page.events.len()), (3, 3));
}

/// Issue 33 item 4: when the store cannot claim a drained notice, the turn gets no notice (delivering it
/// unclaimed would repeat it at every drain point until the store answers); it stays queued and its
/// cursor pending, and the first drain after the store recovers delivers it exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_claim_delivers_nothing_and_keeps_the_notice() {
    use crate::common::{human_turn, notices, watching};
    use sessionwatch_core::QueuedEvent;
    const W: &str = "agent:main:main";
    let (env, k) = watching(W, T).await;
    let human = || human_turn(&k, T);
    human().await;
    let other = QueuedEvent::other("Home created", "home:test");
    assert!(k.enqueue(W, other, false));
    let side = side_connection(&env);
    side.execute_batch(
        "CREATE TRIGGER fail_claim BEFORE UPDATE ON session_watch_cursors BEGIN SELECT RAISE(ABORT, 'injected'); END;",
    )
    .unwrap();
    let drained = k.drain(W).await;
    assert_eq!(drained.len(), 1, "other system events still pass through: {drained:?}");
    assert!(drained[0].notice.is_none());
    assert_eq!(notices(&k.peek(W)), vec![(T.to_string(), 0)], "the notice stays queued");
    assert!(k.drain(W).await.is_empty(), "and is not delivered by the next drain point either");
    assert_eq!(k.metrics().notices_claim_failed.load(std::sync::atomic::Ordering::Relaxed), 2);
    let c = k.cursor(W, T).await.unwrap().unwrap();
    assert!(c.is_pending(), "the cursor is still pending: a restart's sweep would deliver it");
    side.execute_batch("DROP TRIGGER fail_claim;").unwrap();
    human().await;
    assert_eq!(notices(&k.drain(W).await), vec![(T.to_string(), 0)], "once the store answers: exactly once");
    assert!(k.drain(W).await.is_empty());
    let c = k.cursor(W, T).await.unwrap().unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (2, 2, 2));
}
