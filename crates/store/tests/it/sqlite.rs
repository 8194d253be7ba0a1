//! The conformance suite on the embedded SQLite store, one fresh database file per test.

use crate::conformance::Harness;
use rusqlite::types::FromSql;
use sessionwatch_store::{SessionStore, SignalLog, SqliteOptions, SqliteStore, WatchRequest};
use std::path::PathBuf;
use tempfile::TempDir;

fn make() -> (Harness<SqliteStore>, TempDir) {
    make_with(SqliteOptions::default(), true)
}

/// Options that fold the staging table into the log every `rows` appends.
fn folding_every(rows: u32) -> SqliteOptions {
    SqliteOptions { staged_rows: rows, ..SqliteOptions::default() }
}

/// `locked`: opened holding the gateway lock, as the product opens it (session rows and recent pages
/// served from memory); else as a tool sharing the file would, every read checked against the file.
fn make_with(options: SqliteOptions, locked: bool) -> (Harness<SqliteStore>, TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let store = if locked {
        let lock = sessionwatch_store::sqlite::GatewayLock::acquire(&path).expect("lock");
        SqliteStore::open_locked(lock, options).expect("open")
    } else {
        SqliteStore::open(&path, options).expect("open")
    };
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
    let fail_appends = Box::new(|s: &SqliteStore| {
        let conn = rusqlite::Connection::open(s.path()).expect("open raw");
        conn.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        conn.execute_batch(
            "CREATE TRIGGER fail_appends BEFORE INSERT ON session_state_events_staged \
             BEGIN SELECT RAISE(ABORT, 'appends fail'); END",
        )
        .expect("install the failing trigger");
    });
    (Harness { store, make_legacy, fail_appends }, dir)
}

crate::conformance_suite!(make);

/// The suite again with the staging table folded into the log every other append, so every check
/// meets events on both sides of a fold (by default its few events all stay staged), on a store opened
/// without the lock (nothing served from memory unchecked).
mod folding_every_other_append {
    use super::{Harness, SqliteStore, TempDir};

    fn make() -> (Harness<SqliteStore>, TempDir) {
        super::make_with(super::folding_every(2), false)
    }

    crate::conformance_suite!(make);
}

const KEY: &str = "agent:main:a";

/// Two stores on one database file, as two processes sharing it would have them.
fn two_processes() -> (SqliteStore, SqliteStore, TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let here = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    let other = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    (here, other, dir)
}

/// Every row of `sql`, three columns each, read on a connection of its own.
fn rows3<A: FromSql, B: FromSql, C: FromSql>(path: &std::path::Path, sql: &str) -> Vec<(A, B, C)> {
    let c = rusqlite::Connection::open(path).unwrap();
    let mut st = c.prepare(sql).unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
}

fn human(key: &str) -> sessionwatch_store::AppendRequest {
    crate::conformance::req(sessionwatch_core::NewEvent::human_message(key, "main", "telegram", None))
}

/// The tail cache answers recent windows from memory; another process sharing the file (two embedded
/// MCP servers, `sessionwatch db prune`) writes behind its back, and a page must still be the log's.
#[tokio::test]
async fn a_cached_tail_never_hides_another_processs_writes() {
    use sessionwatch_core::Limit;
    use sessionwatch_store::RetentionPolicy;
    let (here, other, _dir) = two_processes();
    for i in 0..3 {
        here.append(human(KEY), 1_000 + i).await.unwrap();
    }
    let limit = Limit::new(200).unwrap();
    let seqs = |p: &sessionwatch_core::ChangesPage| p.events.iter().map(|e| e.sequence).collect::<Vec<_>>();
    assert_eq!(seqs(&here.changes_since(KEY.into(), "main".into(), 0, limit).await.unwrap()), vec![1, 2, 3]);

    other.append(human(KEY), 2_000).await.unwrap();
    let page = here.changes_since(KEY.into(), "main".into(), 0, limit).await.unwrap();
    assert_eq!(seqs(&page), vec![1, 2, 3, 4], "the other process's append is in the page");

    here.append(human(KEY), 3_000).await.unwrap(); // not the continuation of what `here` holds
    let page = here.changes_since(KEY.into(), "main".into(), 2, limit).await.unwrap();
    assert_eq!(seqs(&page), vec![3, 4, 5]);

    let policy = RetentionPolicy { max_rows: 2, ..RetentionPolicy::default() };
    other.prune(policy, 4_000).await.unwrap();
    let page = here.changes_since(KEY.into(), "main".into(), 0, limit).await.unwrap();
    assert!(page.history_gap, "pruned by the other process: {page:?}");
    assert_eq!(page.earliest_available_sequence, 4);
    assert_eq!(seqs(&page), vec![4, 5]);
}

/// Heads are derived from the log, so a session another process deleted and appended to again, up to the
/// same head, is told from the one this process's tail holds by its head event (its id and time).
#[tokio::test]
async fn a_cached_tail_never_answers_for_a_session_another_process_deleted_and_refilled() {
    use sessionwatch_core::Limit;
    let (here, other, _dir) = two_processes();
    for i in 0..3 {
        here.append(human(KEY), 1_000 + i).await.unwrap();
    }
    other.delete_session_state(KEY.into(), "main".into()).await.unwrap();
    for i in 0..3 {
        other.append(human(KEY), 5_000 + i).await.unwrap();
    }
    let page = here.changes_since(KEY.into(), "main".into(), 0, Limit::new(200).unwrap()).await.unwrap();
    let times: Vec<_> = page.events.iter().map(|e| (e.sequence, e.occurred_at)).collect();
    assert_eq!(times, vec![(1, 5_000), (2, 5_001), (3, 5_002)], "the refilled log, not the cached one");
}

/// Every append moves its session's head row (the head is read from it alone); retention raises the
/// floor in it, so a session pruned to nothing keeps its head.
#[tokio::test]
async fn every_append_moves_its_head_row_and_retention_its_floor() {
    use sessionwatch_store::RetentionPolicy;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    for i in 0..3 {
        store.append(human("agent:main:a"), 1_000 + i).await.unwrap();
        store.append(human("agent:main:b"), 1_000 + i).await.unwrap();
    }
    let heads = || -> Vec<(String, i64, i64)> {
        rows3(&path, "SELECT session_key, head, floor FROM session_state_heads ORDER BY 1")
    };
    assert_eq!(heads(), vec![("agent:main:a".into(), 3, 0), ("agent:main:b".into(), 3, 0)]);
    let head_events: Vec<(String, i64, i64)> =
        rows3(&path, "SELECT session_key, head_id, head_at FROM session_state_heads ORDER BY 1");
    assert_eq!(head_events, vec![("agent:main:a".into(), 5, 1_002), ("agent:main:b".into(), 6, 1_002)]);
    let policy = RetentionPolicy { max_rows: 3, ..RetentionPolicy::default() };
    store.prune(policy, 2_000).await.unwrap();
    assert_eq!(heads(), vec![("agent:main:a".into(), 3, 2), ("agent:main:b".into(), 3, 1)]);
    let policy = RetentionPolicy { max_rows: 0, ..RetentionPolicy::default() };
    store.prune(policy, 2_000).await.unwrap();
    assert_eq!(
        heads(),
        vec![("agent:main:a".into(), 3, 3), ("agent:main:b".into(), 3, 3)],
        "pruned to nothing"
    );
    let head = store.head("agent:main:a".into(), "main".into()).await.unwrap();
    assert_eq!((head.head, head.floor), (3, 3));
}

/// Pages read from the database (another store on the file, whose tail cache holds nothing) are the
/// same whichever side of a fold their events are on: every window of a session whose events are
/// partly in the log and partly staged, with another session's staged rows between them.
#[tokio::test]
async fn pages_are_whole_across_the_log_and_the_staging_table() {
    use sessionwatch_core::Limit;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let writer = SqliteStore::open(&path, folding_every(5)).unwrap();
    for i in 0..8 {
        writer.append(human(KEY), 1_000 + i).await.unwrap(); // ids 1, 3, 5, ... 15
        writer.append(human("agent:main:b"), 1_000 + i).await.unwrap();
    }
    // These appends ran on this thread, so the folds they found due (at ids 5, 10 or 15, the oldest
    // staged row 5 ids old) are the writer's idle work's, done when it gets to them: wait for the first
    // and for the writer to settle (what stays staged below a fold's worth stays until more comes).
    let staged_of = |key: &str| -> Vec<i64> {
        let sql = format!("SELECT id, 0, 0 FROM session_state_events_staged WHERE session_key = '{key}'");
        rows3::<i64, i64, i64>(&path, &sql).into_iter().map(|r| r.0).collect()
    };
    let logged = || rows3::<i64, i64, i64>(&path, "SELECT COUNT(*), 0, 0 FROM session_state_events")[0].0;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = -1;
    while (logged() < 5 || logged() != seen) && std::time::Instant::now() < until {
        seen = logged();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    writer.append(human("agent:main:b"), 2_000).await.unwrap(); // id 17: staged
    writer.append(human(KEY), 2_000).await.unwrap(); // id 18, sequence 9: staged
    let staged = staged_of(KEY);
    assert_eq!(staged.last(), Some(&18), "sequence 9 staged");
    assert!(staged.len() < 9, "some of the session's events folded into the log: {staged:?}");
    let reader = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    for since in 0..=9 {
        for limit in 1..=10i64 {
            let page = reader
                .changes_since(KEY.into(), "main".into(), since, Limit::new(limit).unwrap())
                .await
                .unwrap();
            let want: Vec<u64> = (since + 1..=9).take(limit as usize).collect();
            let got: Vec<u64> = page.events.iter().map(|e| e.sequence).collect();
            assert_eq!(got, want, "since {since}, limit {limit}");
            assert_eq!(page.truncated, since + (limit as u64) < 9, "since {since}, limit {limit}");
            assert_eq!(page.head, 9);
        }
    }
}

/// A burst of appends leaves its rows staged for the writer to fold once it is idle, in a transaction of
/// its own, instead of making the append whose id ends a staging round wait for the copy; a few rows
/// left after a burst stay staged until more come. Pages read the same before and after.
#[tokio::test]
async fn a_bursts_staged_rows_are_folded_when_the_writer_is_idle() {
    use sessionwatch_core::Limit;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    let staged =
        || rows3::<i64, i64, i64>(&path, "SELECT COUNT(*), 0, 0 FROM session_state_events_staged")[0].0;
    let logged = || rows3::<i64, i64, i64>(&path, "SELECT COUNT(*), 0, 0 FROM session_state_events")[0].0;
    let settle = |want_staged: i64| async move {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while staged() != want_staged && std::time::Instant::now() < until {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    };
    for i in 0..10 {
        store.append(human(KEY), 1_000 + i).await.unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!((staged(), logged()), (10, 0), "too few rows to fold: they wait");
    let burst: Vec<_> = (0..300).map(|i| store.append(human(KEY), 2_000 + i)).collect();
    for appended in futures_util::future::join_all(burst).await {
        appended.unwrap();
    }
    settle(0).await;
    assert_eq!((staged(), logged()), (0, 310), "folded after the burst, though no id reached the fold's");
    let reader = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    for since in [0, 200] {
        let page = reader.changes_since(KEY.into(), "main".into(), since, Limit::MAX).await.unwrap();
        let want: Vec<u64> = (since + 1..=310).take(200).collect();
        assert_eq!(page.events.iter().map(|e| e.sequence).collect::<Vec<_>>(), want);
        assert_eq!(page.head, 310);
    }
}

/// A database file as version `version` of sessionwatch left it (its migrations and nothing else), with
/// `sql` run on it, then opened by this version, which upgrades it: the store, the file's path and its
/// directory.
fn opened_from_schema(version: i64, sql: &str) -> (SqliteStore, PathBuf, TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let mut c = rusqlite::Connection::open(&path).unwrap();
    sessionwatch_store::sqlite::migrate_to(&mut c, version).unwrap();
    c.execute_batch(sql).unwrap();
    drop(c);
    let store = SqliteStore::open(&path, SqliteOptions::default())
        .unwrap_or_else(|e| panic!("a schema {version} file opens: {e}"));
    assert_eq!(opened_version(&path), sessionwatch_store::sqlite::SCHEMA_VERSION, "upgraded");
    (store, path, dir)
}

/// An event row in every layout the log has had: (session, sequence, id, dedupe key).
fn old_event(key: &str, sequence: u64, id: u64, dedupe: Option<&str>) -> String {
    format!(
        "INSERT INTO session_state_events (session_key, agent_id, sequence, id, kind, actor_type, occurred_at, \
         summary, dedupe_key) VALUES ('{key}', 'main', {sequence}, {id}, 'human_direct_message', 'human', \
         {id}000, 'human message via telegram', {});",
        dedupe.map_or("NULL".to_string(), |d| format!("'{d}'"))
    )
}

fn opened_version(path: &std::path::Path) -> i64 {
    let c = rusqlite::Connection::open(path).unwrap();
    c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap()
}

/// A database written at schema 3 (heads written by every append) opens and numbers on: its stored
/// heads are exact, so the derived head is the same.
#[tokio::test]
async fn a_schema_3_database_numbers_on_from_its_stored_heads() {
    // As schema 3 left a session whose log retention emptied: head 7, floor 7, no rows.
    let (store, _path, _dir) =
        opened_from_schema(3, "INSERT INTO session_state_heads VALUES ('agent:main:a', 'main', 7, 7, 1000);");
    let sequence = match store.append(human(KEY), 2_000).await.unwrap() {
        sessionwatch_store::AppendOutcome::Recorded { event, .. } => event.sequence,
        other => panic!("{other:?}"),
    };
    assert_eq!(sequence, 8);
}

/// A schema 4 log (clustered by session) is rewritten ordered by id when opened: every event, its
/// sequence and id kept, its dedupe key still found, and appends number on from both.
#[tokio::test]
async fn a_schema_4_log_is_reordered_by_id_with_every_event_kept() {
    use sessionwatch_core::{Limit, NewEvent};
    use sessionwatch_store::AppendOutcome;
    let other = "agent:main:b";
    let rows = [
        old_event(KEY, 1, 1, None),
        old_event(other, 1, 2, Some("turn-1")),
        old_event(KEY, 2, 3, None),
        old_event(other, 2, 4, None),
        old_event(KEY, 3, 5, Some("turn-9")),
    ];
    let (store, path, _dir) = opened_from_schema(4, &rows.concat());
    let page = |key: &'static str| {
        let store = store.clone();
        async move { store.changes_since(key.into(), "main".into(), 0, Limit::new(200).unwrap()).await.unwrap() }
    };
    let seqs = |p: &sessionwatch_core::ChangesPage| p.events.iter().map(|e| e.sequence).collect::<Vec<_>>();
    assert_eq!(seqs(&page(KEY).await), vec![1, 2, 3]);
    assert_eq!(seqs(&page(other).await), vec![1, 2]);
    assert_eq!(page(KEY).await.events[2].dedupe_key.as_deref(), Some("turn-9"));

    let mut again = NewEvent::human_message(KEY, "main", "telegram", None);
    again.dedupe_key = Some("turn-9".into());
    match store.append(crate::conformance::req(again), 9_000).await.unwrap() {
        AppendOutcome::Duplicate(existing) => assert_eq!(existing.sequence, 3),
        other => panic!("the dedupe key is still found: {other:?}"),
    }
    match store.append(human(other), 9_000).await.unwrap() {
        AppendOutcome::Recorded { event, .. } => assert_eq!(event.sequence, 3),
        other => panic!("{other:?}"),
    }
    drop(store);
    let ids: Vec<(String, i64, i64)> = rows3(
        &path,
        "SELECT session_key, sequence, id FROM session_state_events UNION ALL \
         SELECT session_key, sequence, id FROM session_state_events_staged ORDER BY id",
    );
    let expected: Vec<(String, i64, i64)> =
        [(KEY, 1, 1), (other, 1, 2), (KEY, 2, 3), (other, 2, 4), (KEY, 3, 5), (other, 3, 6)]
            .into_iter()
            .map(|(k, s, i)| (k.to_string(), s, i))
            .collect();
    assert_eq!(ids, expected, "every row kept with its id, the next append's id one more");
    let logged: Vec<(i64, i64, i64)> =
        rows3(&path, "SELECT rowid, id, 0 FROM session_state_events ORDER BY rowid");
    assert_eq!(
        logged,
        (1..=5).map(|i| (i, i, 0)).collect::<Vec<_>>(),
        "the log in id order, the id its rowid"
    );
    let c = rusqlite::Connection::open(&path).unwrap();
    let check: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
}

/// Regression: an append whose id was a multiple of `staged_rows` folded whatever was staged, so a short
/// burst after the idle fold had emptied the table folded inline wherever its ids crossed a multiple, and
/// every write queued behind it waited for the copy. A burst folds only once `staged_rows` ids' worth
/// wait, which still bounds the table. (These appends, each alone, run on the caller's thread, so the
/// fold they find due is the idle work's, asked for at once, beside the burst's last appends.)
#[tokio::test]
async fn a_burst_after_an_idle_fold_folds_inline_only_once_a_staging_rounds_worth_waits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let store = SqliteStore::open(&path, folding_every(512)).unwrap();
    let counts = || {
        let c =
            |table: &str| rows3::<i64, i64, i64>(&path, &format!("SELECT COUNT(*), 0, 0 FROM {table}"))[0].0;
        (c("session_state_events_staged"), c("session_state_events"))
    };
    let burst = |from: i64, n: i64| {
        let store = &store;
        async move {
            let appends: Vec<_> = (from..from + n).map(|i| store.append(human(KEY), i)).collect();
            for appended in futures_util::future::join_all(appends).await {
                appended.unwrap();
            }
        }
    };
    burst(0, 300).await;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while counts() != (0, 300) && std::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(counts(), (0, 300), "the idle fold emptied the staging table");
    // Ids 301..=550 cross 512; fewer rows than the idle fold's least wait afterwards.
    burst(1_000, 250).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(counts(), (250, 300), "no inline fold: 250 ids staged, not 512");
    // Ids 551..=1050: at 1024 the oldest staged row (301) is 512 ids old or more.
    burst(2_000, 500).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let (staged, folded) = counts();
    assert_eq!(staged + folded, 1_050);
    assert!(folded >= 1_024, "folded once 512 ids' worth waited, at id 1024: {staged} staged");
}

/// Regression: a fold that fails (here a trigger refuses every row into the log; in life a disk with room
/// for one append but not for the copy) failed the append that triggered it, and every append after it,
/// which took the same id and tried the same fold. The appends are recorded, staged, and read back whole.
#[tokio::test]
async fn a_fold_that_fails_leaves_its_append_recorded_and_the_rows_staged() {
    use sessionwatch_core::Limit;
    use sessionwatch_store::AppendOutcome;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let store = SqliteStore::open(&path, folding_every(2)).unwrap();
    store.append(human(KEY), 1_000).await.unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON session_state_events \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
        )
        .unwrap();
    for (i, want) in (2..=5).enumerate() {
        match store.append(human(KEY), 2_000 + i as i64).await {
            Ok(AppendOutcome::Recorded { event, .. }) => assert_eq!(event.sequence, want),
            other => panic!("append {want}: {other:?}"),
        }
    }
    let staged: Vec<(i64, i64, i64)> =
        rows3(&path, "SELECT COUNT(*), MIN(id), MAX(id) FROM session_state_events_staged");
    assert_eq!(staged, vec![(5, 1, 5)], "nothing was folded");
    rusqlite::Connection::open(&path).unwrap().execute_batch("DROP TRIGGER refuse").unwrap();
    let reader = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    let page = reader.changes_since(KEY.into(), "main".into(), 1, Limit::new(200).unwrap()).await.unwrap();
    assert_eq!(page.events.iter().map(|e| e.sequence).collect::<Vec<_>>(), vec![2, 3, 4, 5]);
}

/// A schema 5 file (heads derived from the log, written only by retention) gets a head row for every
/// session in its log, naming the last event, and numbers on: from the log's last sequence, from a
/// stored head above an emptied log, and across a raised floor.
#[tokio::test]
async fn a_schema_5_file_gets_head_rows_from_its_log_and_numbers_on() {
    use sessionwatch_core::{Limit, NewEvent};
    use sessionwatch_store::AppendOutcome;
    let (b, c) = ("agent:main:b", "agent:main:c");
    let rows = [
        old_event(KEY, 1, 1, None),
        old_event(KEY, 2, 3, None),
        old_event(b, 2, 4, None),
        old_event(KEY, 3, 5, Some("turn-9")),
        // b pruned up to 1, c to nothing, as retention left them.
        format!("INSERT INTO session_state_heads VALUES ('{b}', 'main', 1, 1, 900);"),
        format!("INSERT INTO session_state_heads VALUES ('{c}', 'main', 7, 7, 1000);"),
    ];
    let (store, path, _dir) = opened_from_schema(5, &rows.concat());
    let heads: Vec<(String, i64, i64)> = rows3(
        &path,
        "SELECT session_key, head * 10 + floor, head_id * 10000 + head_at FROM session_state_heads ORDER BY 1",
    );
    let want = [(KEY, 30, 55_000), (b, 21, 44_000), (c, 77, 0)];
    assert_eq!(heads, want.map(|(k, h, e)| (k.to_string(), h, e)).to_vec());

    let mut again = NewEvent::human_message(KEY, "main", "telegram", None);
    again.dedupe_key = Some("turn-9".into());
    match store.append(crate::conformance::req(again), 9_000).await.unwrap() {
        AppendOutcome::Duplicate(existing) => assert_eq!(existing.sequence, 3),
        other => panic!("the dedupe key is still found: {other:?}"),
    }
    for (key, next) in [(KEY, 4), (b, 3), (c, 8)] {
        match store.append(human(key), 9_000).await.unwrap() {
            AppendOutcome::Recorded { event, .. } => assert_eq!(event.sequence, next, "{key}"),
            other => panic!("{other:?}"),
        }
    }
    let page = store.changes_since(b.into(), "main".into(), 0, Limit::new(200).unwrap()).await.unwrap();
    let seqs: Vec<u64> = page.events.iter().map(|e| e.sequence).collect();
    assert_eq!((seqs, page.history_gap, page.head), (vec![2, 3], true, 3));
}

/// The database, its WAL and shared-memory files hold transcript text: owner-only, like the token file,
/// and a file an older version left readable by others is tightened once it passed the checks.
#[cfg(unix)]
#[tokio::test]
async fn database_files_are_readable_by_their_owner_only() {
    use crate::conformance::req;
    use sessionwatch_core::NewEvent;
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

/// Fan-out per burst: a burst of changes to a target with many watchers writes each watcher's cursor once,
/// on the transition to pending (the stored M stays at that event); every read answers the M the L/N/M
/// machine has (the newest material event by another actor), and the acknowledgement goes through it
/// exactly as if M had been written on every event.
#[tokio::test]
async fn a_burst_writes_each_pending_cursor_once_and_reads_derive_m() {
    use crate::conformance::req;
    use sessionwatch_core::{Actor, AgentSessionKey, GoalChange, NewEvent, Provenance};
    let dir = tempfile::tempdir().expect("tempdir");
    let s = SqliteStore::open(dir.path().join("state.db"), SqliteOptions::default()).expect("open");
    let target = "agent:main:subagent:t";
    let watchers: Vec<String> = (0..50).map(|i| format!("agent:w{i}:main")).collect();
    for w in &watchers {
        let (w, t) = (AgentSessionKey::parse(w).unwrap(), AgentSessionKey::parse(target).unwrap());
        s.register_watch(WatchRequest::new(w, t, Provenance::Explicit, "store"), 1).await.unwrap();
    }
    let append = |e: NewEvent| {
        let mut r = req(e);
        r.watcher_store = "store".into();
        s.append(r, 10)
    };
    for _ in 0..20 {
        append(NewEvent::human_message(target, "main", "telegram", None)).await.unwrap();
    }
    // The last change is the first watcher's own: it does not count for that watcher.
    append(NewEvent::goal_changed(target, "main", &GoalChange::Updated, Actor::agent(watchers[0].clone())))
        .await
        .unwrap();
    let stored: Vec<(i64, i64, i64)> = rows3(
        s.path(),
        "SELECT last_seen_sequence, notified_sequence, material_sequence FROM session_watch_cursors",
    );
    assert_eq!(stored.len(), 50);
    assert!(stored.iter().all(|lnm| *lnm == (0, 1, 1)), "written once, at the first event: {stored:?}");
    let lnm = |c: sessionwatch_core::Cursor| (c.last_seen, c.notified, c.material);
    assert_eq!(lnm(s.cursor(watchers[0].clone(), target.into()).await.unwrap().unwrap()), (0, 1, 20));
    assert_eq!(lnm(s.cursor(watchers[1].clone(), target.into()).await.unwrap().unwrap()), (0, 1, 21));
    let acknowledge = |watcher: &str| {
        let watcher = AgentSessionKey::parse(watcher).unwrap();
        s.acknowledge(watcher, vec![AgentSessionKey::parse(target).unwrap()], "store".into(), 20)
    };
    let ack = acknowledge(&watchers[1]).await.unwrap();
    assert_eq!(ack.delivered.iter().map(|n| n.since).collect::<Vec<_>>(), vec![0]);
    assert_eq!(lnm(s.cursor(watchers[1].clone(), target.into()).await.unwrap().unwrap()), (21, 21, 21));
    let own = acknowledge(&watchers[0]).await.unwrap();
    assert_eq!(own.delivered.iter().map(|n| n.since).collect::<Vec<_>>(), vec![0]);
    assert_eq!(
        lnm(s.cursor(watchers[0].clone(), target.into()).await.unwrap().unwrap()),
        (20, 20, 20),
        "through the newest change by another actor; its own change never notifies it"
    );
}

/// A database written at schema 2 (before the settled-cursor index) is upgraded in place when opened:
/// its data kept, the index added, `user_version` raised.
#[tokio::test]
async fn a_schema_2_database_gains_the_settled_cursor_index() {
    use sessionwatch_core::Limit;
    let (store, path, _dir) = opened_from_schema(2, &old_event(KEY, 1, 1, None));
    let page = store.changes_since(KEY.into(), "main".into(), 0, Limit::new(200).unwrap()).await.unwrap();
    assert_eq!(page.events.len(), 1, "the data is kept");
    let c = rusqlite::Connection::open(&path).unwrap();
    let indexes: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'idx_cursors_settled_target'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(indexes, 1);
}

/// A start reads the pending cursors only: a schema 8 database gains the index on them when opened, and
/// SQLite reads the pending cursors through it rather than scanning every cursor (`bench scale`'s start-up
/// over 1M cursors, 1k pending, was 16-20x one over 10k when it scanned).
#[tokio::test]
async fn pending_cursors_are_read_through_their_own_index() {
    let (_store, path, _dir) = opened_from_schema(8, &old_event(KEY, 1, 1, None));
    let c = rusqlite::Connection::open(&path).unwrap();
    let plan: Vec<String> = c
        .prepare(
            "EXPLAIN QUERY PLAN SELECT watcher_session_key, target_session_key FROM session_watch_cursors c \
             WHERE material_sequence > last_seen_sequence ORDER BY watcher_session_key, target_session_key",
        )
        .unwrap()
        .query_map([], |r| r.get::<_, String>(3))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(plan.iter().any(|p| p.contains("idx_cursors_pending")), "{plan:?}");
    assert!(!plan.iter().any(|p| p.starts_with("SCAN c") && !p.contains("INDEX")), "{plan:?}");
}

/// Regression: with the WAL checkpoint moved off the writer, steady concurrent writes never let the WAL
/// restart (the checkpoint thread was always a few frames behind) and the file grew by ~100 MB/s. The
/// WAL file never shrinks, so its size at the end is the largest it ever was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_concurrent_writes_keep_the_wal_bounded() {
    use crate::conformance::req;
    use sessionwatch_core::NewEvent;
    const PRODUCERS: usize = 8;
    const APPENDS: usize = 2_000; // each: ~2.5 WAL pages (sessions spread over 1,000 pages)
    // A threshold below the default's 16,000 pages, so that a test-sized run writes several WALs' worth.
    const THRESHOLD: u32 = 4_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let options = SqliteOptions { wal_checkpoint_pages: THRESHOLD, ..SqliteOptions::default() };
    let store = SqliteStore::open(&path, options).expect("open");
    let mut tasks = vec![];
    for p in 0..PRODUCERS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..APPENDS {
                let key = format!("agent:main:s{}", (i * PRODUCERS + p) % 1_000);
                let event = req(NewEvent::human_message(&key, "main", "telegram", None));
                store.append(event, 1_000).await.expect("append");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let page_size: i64 =
        rusqlite::Connection::open(&path).unwrap().query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    let frames = std::fs::metadata(dir.path().join("state.db-wal")).unwrap().len() / (page_size as u64 + 24);
    let written: u64 = (PRODUCERS * APPENDS) as u64 * 2;
    assert!(written > 4 * u64::from(THRESHOLD), "the test writes several WALs' worth");
    assert!(
        frames <= 2 * u64::from(THRESHOLD),
        "the WAL reached {frames} frames (checkpoint threshold {THRESHOLD})"
    );
}

/// The transcript is trimmed in steps (not on every append), but its rows stay within a step of the cap.
#[tokio::test]
async fn a_transcript_keeps_at_most_a_trim_step_past_the_cap() {
    use crate::conformance::message;
    use sessionwatch_store::TRANSCRIPT_CAP;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    let raw = rusqlite::Connection::open(&path).unwrap();
    let rows =
        || -> i64 { raw.query_row("SELECT COUNT(*) FROM session_messages", [], |r| r.get(0)).unwrap() };
    let mut most = 0;
    for i in 0..3 * TRANSCRIPT_CAP {
        store
            .append_message("agent:main:a".into(), "main".into(), message(format!("m{i}")), 1_000 + i)
            .await
            .unwrap();
        most = most.max(rows());
    }
    assert!(most > TRANSCRIPT_CAP, "trimmed in steps, not on every append");
    assert!(most <= TRANSCRIPT_CAP + 64, "at most a step past the cap: {most}");
}

/// Fills three sessions with `rows` events, interleaved, through concurrent appends.
async fn fill_three(s: &SqliteStore, rows: usize) -> [&'static str; 3] {
    let keys = ["agent:main:subagent:p0", "agent:main:subagent:p1", "agent:main:subagent:p2"];
    let writers = (0..8).map(|w| async move {
        for i in (w..rows).step_by(8) {
            s.append(human(keys[i % 3]), 1_000 + i as i64).await.unwrap();
        }
    });
    futures_util::future::join_all(writers).await;
    keys
}

/// A prune much larger than one slice ends as one prune would: each session keeps exactly its newest
/// rows, its floor the highest pruned sequence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prune_over_many_slices_keeps_exactly_the_newest_rows() {
    use sessionwatch_core::Limit;
    use sessionwatch_store::RetentionPolicy;
    let (h, _dir) = make();
    let s = &h.store;
    let keys = fill_three(s, 4_500).await;
    let report =
        s.prune(RetentionPolicy { max_rows: 300, ..RetentionPolicy::default() }, 10_000).await.unwrap();
    assert_eq!(report.events_by_cap, 4_200);
    let mut kept = 0;
    for key in keys {
        let page = s.changes_since(key.into(), "main".into(), 0, Limit::MAX).await.unwrap();
        let head = s.head(key.into(), "main".into()).await.unwrap();
        assert_eq!(head.head, 1_500, "{key}: the head never moves back");
        assert_eq!(page.earliest_available_sequence, head.floor + 1, "{key}: history is (floor, head]");
        let seqs: Vec<u64> = page.events.iter().map(|e| e.sequence).collect();
        assert_eq!(seqs, (head.floor + 1..=1_500).collect::<Vec<_>>(), "{key}: no hole in what is kept");
        kept += seqs.len();
    }
    assert_eq!(kept, 300);
}

/// A prune is written in slices: appends queued behind one slice are committed before the next, so an
/// append waits for a slice, not for the whole prune (one write job held the writer for all of it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_are_committed_between_the_slices_of_a_prune() {
    use sessionwatch_store::RetentionPolicy;
    let (h, _dir) = make();
    let s = h.store.clone();
    fill_three(&s, 20_000).await;
    let pruning = {
        let s = s.clone();
        tokio::spawn(async move {
            s.prune(RetentionPolicy { max_rows: 100, ..RetentionPolicy::default() }, 30_000).await
        })
    };
    let mut during = 0;
    while !pruning.is_finished() {
        s.append(human("agent:main:subagent:appender"), 30_000).await.unwrap();
        during += 1;
    }
    let report = pruning.await.unwrap().unwrap();
    assert!(report.events_by_cap >= 19_900, "{report:?}");
    assert!(during >= 8, "only {during} appends were committed while the slices ran");
}

/// The tables' CHECK constraints, as a database at schema `version` has them: (table, opcodes of a
/// compiled insert of its defaults, which evaluates every CHECK).
fn insert_programs(version: i64) -> Vec<(String, Vec<String>)> {
    let mut c = rusqlite::Connection::open_in_memory().unwrap();
    sessionwatch_store::sqlite::migrate_to(&mut c, version).unwrap();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    tables
        .into_iter()
        .map(|t| {
            let ops = c
                .prepare(&format!("EXPLAIN INSERT INTO \"{t}\" DEFAULT VALUES"))
                .unwrap()
                .query_map([], |r| r.get::<_, String>(1))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            (t, ops)
        })
        .collect()
}

/// No write checks a constraint by building a temporary B-tree (an `IN` list does: twice per cursor
/// upsert, and glibc handed its freed pages back to the kernel with a TLB flush on every core).
#[test]
fn no_tables_check_builds_a_temporary_btree_on_a_write() {
    let ephemeral = |version| -> Vec<String> {
        let mut tables: Vec<String> = insert_programs(version)
            .into_iter()
            .filter(|(_, ops)| ops.iter().any(|op| op == "OpenEphemeral"))
            .map(|(t, _)| t)
            .collect();
        tables.sort();
        tables
    };
    assert_eq!(
        ephemeral(10),
        ["session_watch_cursors", "sessions"],
        "schema 10 had the IN lists (the check can see them)"
    );
    assert_eq!(ephemeral(sessionwatch_store::sqlite::SCHEMA_VERSION), Vec::<String>::new());
}

/// A schema 10 database keeps its cursors and sessions (every column) through the rebuild that spells
/// their CHECKs with `OR`, and the CHECKs still refuse what they refused.
#[tokio::test]
async fn a_schema_10_database_keeps_its_cursors_and_sessions_and_their_checks() {
    let (store, path, _dir) = opened_from_schema(
        10,
        "INSERT INTO sessions (session_key, agent_id, session_id, kind, label, host_id, created_at, updated_at,
           cwd, native_state) VALUES ('agent:main:a', 'main', 'sid-a', 'main', 'lbl', 'h1', 1, 2, '/w', 'waiting');
         INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence,
           notified_sequence, material_sequence, provenance, watcher_store_path, updated_at)
           VALUES ('agent:main:main', 'agent:main:a', 1, 2, 3, 'workspace', '/s', 9);",
    );
    let row = store.get_session(KEY.into(), "main".into()).await.unwrap().expect("kept");
    assert_eq!(
        (row.session_id.as_str(), row.label.as_deref(), row.cwd.as_deref(), row.native_state.as_deref()),
        ("sid-a", Some("lbl"), Some("/w"), Some("waiting"))
    );
    let cursor = store.cursor("agent:main:main".into(), KEY.into()).await.unwrap().expect("kept");
    assert_eq!((cursor.last_seen, cursor.notified, cursor.material), (1, 2, 3));
    assert_eq!(cursor.provenance.as_str(), "workspace");
    drop(store);
    let c = rusqlite::Connection::open(&path).unwrap();
    let refused = |sql: &str| c.execute(sql, []).is_err();
    assert!(refused(
        "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, provenance, updated_at)
         VALUES ('w', 't', 'implicit', 1)"
    ));
    assert!(refused("UPDATE sessions SET native_state = 'asleep'"));
    assert!(!refused("UPDATE sessions SET native_state = 'idle'"));
}

/// A turn whose append fails after its first write (here its head row refuses to move; in life a full
/// disk) is not recorded at all: no event, inbox item or message of it is left, the caller hears an
/// error, and the next turn numbers on from the last recorded event.
#[tokio::test]
async fn a_turn_whose_append_fails_half_done_is_not_recorded() {
    use sessionwatch_core::Limit;
    use sessionwatch_store::{AppendOutcome, Turn};
    let (store, path, _dir) = opened_from_schema(sessionwatch_store::sqlite::SCHEMA_VERSION, "");
    let turn = |text: &str| Turn {
        session_key: KEY.into(),
        agent_id: "main".into(),
        session_id: "sid".into(),
        text: text.into(),
        run_id: None,
        from_session: None,
        run: None,
        event: Some(human(KEY)),
        touch: false,
        host_id: None,
    };
    store.record_turn(turn("first"), 1_000).await.expect("recorded");
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch(
        "CREATE TRIGGER refuse BEFORE UPDATE ON session_state_heads \
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
    )
    .unwrap();
    assert!(store.record_turn(turn("second"), 2_000).await.is_err(), "the turn fails with its append");
    let counts: Vec<(i64, i64, i64)> = rows3(
        &path,
        "SELECT (SELECT COUNT(*) FROM session_state_events_staged), (SELECT COUNT(*) FROM session_inbox), \
         (SELECT COUNT(*) FROM session_messages)",
    );
    assert_eq!(counts, vec![(1, 1, 1)], "only the first turn is left");
    raw.execute_batch("DROP TRIGGER refuse").unwrap();
    let third = store.record_turn(turn("third"), 3_000).await.expect("recorded");
    match third.event {
        Some(Ok(AppendOutcome::Recorded { event, .. })) => assert_eq!(event.sequence, 2),
        other => panic!("{other:?}"),
    }
    let page = store.changes_since(KEY.into(), "main".into(), 0, Limit::new(10).unwrap()).await.unwrap();
    assert_eq!(page.events.iter().map(|e| e.sequence).collect::<Vec<_>>(), vec![1, 2]);
}
