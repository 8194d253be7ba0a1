//! What the writer's hot statements compile to.

use super::SqliteStore;
use crate::{AppendRequest, NewSession, SessionStore, SignalLog, SqliteOptions, Turn, WatchRequest};
use rusqlite::{Connection, ffi};
use sessionwatch_core::{AgentSessionKey, NewEvent, Provenance, RecordPolicy};
use std::ffi::CStr;

const STORE: &str = "/tmp/sessionwatch-test-store";

/// The SQL of every statement prepared (and kept) on `conn`.
fn prepared(conn: &Connection) -> Vec<String> {
    let mut out = vec![];
    // SAFETY: the handle is live while `conn` is borrowed, nothing prepares or finalizes a statement on it
    // meanwhile (the caller holds the writer's connection), and each SQL text is copied before the next
    // step.
    unsafe {
        let db = conn.handle();
        let mut stmt = ffi::sqlite3_next_stmt(db, std::ptr::null_mut());
        while !stmt.is_null() {
            let sql = ffi::sqlite3_sql(stmt);
            if !sql.is_null() {
                out.push(CStr::from_ptr(sql).to_string_lossy().into_owned());
            }
            stmt = ffi::sqlite3_next_stmt(db, stmt);
        }
    }
    out
}

/// Creates the session `key` (agent `main`, session id `<key>-1`).
async fn create_session(store: &SqliteStore, key: &str) {
    let new = NewSession {
        session_key: key.into(),
        agent_id: "main".into(),
        session_id: format!("{key}-1"),
        kind: "main".into(),
        chat_type: None,
        channel: None,
        label: None,
        spawned_by: None,
        created_via: None,
        host_id: None,
    };
    store.ensure_session(new, 1).await.unwrap();
}

/// No statement that appends, delivers a turn, moves a cursor or takes an inbox builds a temporary
/// B-tree: each one's pages are allocated and freed as the statement ends, and glibc handed them back to
/// the kernel with a TLB flush on every core (an `IN` list in a CHECK, twice per cursor upsert;
/// `RETURNING`, on every transcript message, inbox item and drain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writers_hot_statements_build_no_temporary_btree() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db"), SqliteOptions::default()).unwrap();
    let (main, child) = ("agent:main:main", "agent:main:subagent:c");
    for key in [main, child] {
        create_session(&store, key).await;
    }
    let watch = WatchRequest::new(
        AgentSessionKey::parse(main).unwrap(),
        AgentSessionKey::parse(child).unwrap(),
        Provenance::Explicit,
        STORE,
    );
    store.register_watch(watch, 2).await.unwrap();
    // A spawn seeds the producer's watcher; each turn's event fans out to it (the first moves it).
    let spawned = NewEvent::child_spawned(child, "main", main, "run-1");
    let seed = AppendRequest { policy: RecordPolicy::spawned_by(main), ..AppendRequest::new(spawned, STORE) };
    store.append(seed, 3).await.unwrap();
    for (i, text) in ["one", "two", "three"].into_iter().enumerate() {
        let human = NewEvent::human_message(child, "main", "telegram", None);
        let turn = Turn {
            session_key: child.into(),
            agent_id: "main".into(),
            session_id: format!("{child}-1"),
            text: text.into(),
            run_id: None,
            from_session: None,
            run: None,
            event: Some(AppendRequest::new(human, STORE)),
            touch: true,
            host_id: Some("gw".into()),
        };
        store.record_turn(turn, 10 + i as i64).await.unwrap();
    }
    assert_eq!(store.take_inbox(child.into(), "main".into()).await.unwrap().len(), 3);
    assert!(store.take_inbox(child.into(), "main".into()).await.unwrap().is_empty());
    store.inner.writer.with_connection(|conn| {
        let statements = prepared(conn);
        assert!(statements.iter().any(|s| s.contains("INSERT INTO session_watch_cursors")), "{statements:?}");
        assert!(statements.iter().any(|s| s.contains("INSERT INTO session_messages")), "{statements:?}");
        assert!(statements.iter().any(|s| s.contains("DELETE FROM session_inbox")), "{statements:?}");
        for sql in statements.iter().filter(|s| !s.trim_start().starts_with("SELECT")) {
            let mut explain = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
            let mut rows = explain.raw_query(); // the parameters stay unbound: EXPLAIN does not run it
            let mut ops = vec![];
            while let Some(row) = rows.next().unwrap() {
                ops.push(row.get::<_, String>(1).unwrap());
            }
            assert!(!ops.iter().any(|op| op == "OpenEphemeral"), "a temporary B-tree in {sql}");
        }
    });
}

/// The writer's statement journals and sub-journals stay in memory: past 64 KiB SQLite spills them to a
/// temporary file, and a fold (a multi-row statement under a savepoint, after earlier appends of its batch
/// wrote the pages it touches) wrote every page it changed there first, a `pwrite` each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writers_journals_stay_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db"), SqliteOptions::default()).unwrap();
    let temp_store: i64 =
        store.inner.writer.with_connection(|c| c.query_row("PRAGMA temp_store", [], |r| r.get(0)).unwrap());
    assert_eq!(temp_store, 2, "MEMORY");
}

/// A turn's touch of its session patches the kept row instead of dropping it: every inbound turn
/// touches its session, and reading the row again after each one was a tenth of the turn's cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_touched_session_row_stays_kept_as_touched() {
    let dir = tempfile::tempdir().unwrap();
    let lock = super::GatewayLock::acquire(&dir.path().join("state.db")).unwrap();
    let store = SqliteStore::open_locked(lock, SqliteOptions::default()).unwrap();
    let key = "agent:main:subagent:c";
    create_session(&store, key).await;
    store.get_session(key.into(), "main".into()).await.unwrap().expect("the row");
    assert!(store.inner.sessions.get(key, "main").is_some(), "kept once read");
    let turn = Turn {
        session_key: key.into(),
        agent_id: "main".into(),
        session_id: format!("{key}-1"),
        text: "hello".into(),
        run_id: None,
        from_session: None,
        run: None,
        event: None,
        touch: true,
        host_id: Some("gw-a".into()),
    };
    store.record_turn(turn, 5).await.unwrap();
    let kept = store.inner.sessions.get(key, "main").expect("still kept after the turn's touch");
    assert_eq!((kept.updated_at, kept.host_id.as_deref()), (5, Some("gw-a")));
    let read = store.get_session(key.into(), "main".into()).await.unwrap().unwrap();
    assert_eq!(read, kept);
}
