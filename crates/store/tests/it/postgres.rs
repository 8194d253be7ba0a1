//! The conformance suite on the PostgreSQL store, one fresh schema per test (dropped afterwards).
//! Skipped (with a `SKIPPED` line) when no server answers, unless `SESSIONWATCH_REQUIRE_PG=1`.

use crate::conformance::Harness;
use sessionwatch_store::PostgresStore;
use sessionwatch_store::SignalLog;
use sessionwatch_store::postgres::testing::{TestSchema, admin_client};

/// The suite calls `make` synchronously inside its (multi-threaded) tokio test.
fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

fn make() -> Option<(Harness<PostgresStore>, TestSchema)> {
    block_on(async {
        let schema = TestSchema::create("store conformance on PostgreSQL").await?;
        let store = schema.store().await;
        let (url, name) = (schema.url().to_string(), schema.schema().to_string());
        let make_legacy = Box::new(move |_: &PostgresStore, watcher: &str, target: &str| {
            block_on(async {
                let admin = admin_client(&url).await.expect("admin connection");
                let n = admin
                    .execute(
                        &format!(
                            "UPDATE {name}.session_watch_cursors SET watcher_store_path = NULL \
                             WHERE watcher_session_key = $1 AND target_session_key = $2"
                        ),
                        &[&watcher, &target],
                    )
                    .await
                    .expect("make legacy");
                assert_eq!(n, 1, "the cursor to make legacy exists");
            })
        });
        let (url, name) = (schema.url().to_string(), schema.schema().to_string());
        let fail_appends = Box::new(move |_: &PostgresStore| {
            block_on(async {
                let admin = admin_client(&url).await.expect("admin connection");
                admin
                    .batch_execute(&format!(
                        "CREATE FUNCTION {name}.fail_appends() RETURNS trigger LANGUAGE plpgsql AS \
                         $$ BEGIN RAISE EXCEPTION 'appends fail'; END $$; \
                         CREATE TRIGGER fail_appends BEFORE INSERT ON {name}.session_state_events \
                         FOR EACH ROW EXECUTE FUNCTION {name}.fail_appends()"
                    ))
                    .await
                    .expect("install the failing trigger");
            })
        });
        Some((Harness { store, make_legacy, fail_appends }, schema))
    })
}

crate::conformance_suite!(make);

/// An append that finds no other in flight runs on its caller's task (a batch of one). Cancelled with its
/// caller while it waits inside its transaction, it must hand the appends queued behind it to a driver
/// instead of leaving them waiting, and its own transaction must leave nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_lone_append_strands_no_append_queued_behind_it() {
    use sessionwatch_core::{Limit, NewEvent};
    use sessionwatch_store::{AppendOutcome, AppendRequest};
    use std::time::Duration;
    const T: &str = "agent:main:subagent:locked";
    const T2: &str = "agent:main:subagent:free";
    let Some(schema) = TestSchema::create("a_cancelled_lone_append_strands_no_append_queued_behind_it").await
    else {
        return;
    };
    let store = schema.store().await;
    let human = |key: &str| AppendRequest::new(NewEvent::human_message(key, "main", "web", None), "s");
    store.append(human(T), 1_000).await.unwrap();
    // Another connection holds T's head row: the next append to T waits for it inside its transaction.
    let mut blocker = admin_client(schema.url()).await.unwrap();
    let lock = blocker.transaction().await.unwrap();
    let sql =
        format!("SELECT 1 FROM {}.session_state_heads WHERE session_key = $1 FOR UPDATE", schema.schema());
    assert_eq!(lock.execute(&sql, &[&T]).await.unwrap(), 1);
    let lone = tokio::spawn({
        let store = store.clone();
        async move { store.append(human(T), 2_000).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let queued = tokio::spawn({
        let store = store.clone();
        async move { store.append(human(T2), 3_000).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!queued.is_finished(), "the append to T2 waits behind the one to T");
    lone.abort();
    let outcome = tokio::time::timeout(Duration::from_secs(10), queued)
        .await
        .expect("the append queued behind the cancelled one is driven, though T is still locked")
        .unwrap()
        .unwrap();
    assert!(
        matches!(outcome, AppendOutcome::Recorded { ref event, .. } if event.sequence == 1),
        "{outcome:?}"
    );
    lock.rollback().await.unwrap();
    // The cancelled append's connection was discarded, its transaction rolled back: T is 1..=head.
    store.append(human(T), 4_000).await.unwrap();
    let page = store.changes_since(T.into(), "main".into(), 0, Limit::MAX).await.unwrap();
    let sequences: Vec<u64> = page.events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, (1..=page.head).collect::<Vec<_>>());
    assert_eq!(page.head, 2, "the cancelled append recorded nothing");
}

/// Regression: the model test on PostgreSQL hung CI for 85 minutes. It runs on a current-thread runtime,
/// and a background prune was still inside its transaction when the case ended; dropping the test schema
/// blocked that runtime's only thread, so the transaction's connection could never roll back and
/// `DROP SCHEMA` waited for its locks forever. The drop must end anyway.
#[test]
fn a_schema_is_dropped_while_a_transaction_nobody_can_finish_holds_locks_on_it() {
    use std::time::Duration;
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let test = "a_schema_is_dropped_while_a_transaction_nobody_can_finish_holds_locks_on_it";
            let Some(schema) = TestSchema::create(test).await else {
                return done.send(false).unwrap();
            };
            drop(schema.store().await); // creates and migrates the schema
            // A connection driven by this runtime, left inside a transaction that holds a lock in the schema.
            let mut client = admin_client(schema.url()).await.unwrap();
            let open = client.transaction().await.unwrap();
            open.batch_execute(&format!("SELECT 1 FROM {}.session_state_heads", schema.schema()))
                .await
                .unwrap();
            drop(schema); // blocks this runtime's only thread until the schema is gone
            done.send(true).unwrap();
            drop(open);
        });
    });
    match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(true) => {}
        Ok(false) => {} // skipped: no server (TestSchema::create printed SKIPPED)
        Err(_) => panic!("dropping the test schema never finished"),
    }
}

/// The watcher and the target of the failure tests below.
const FAIL_W: &str = "agent:main:main";
const FAIL_T: &str = "agent:main:subagent:t";

/// A fresh schema, its store (`options`) with one explicit watch of `FAIL_W` on `FAIL_T`, and that cursor.
async fn one_watch(
    test: &str,
    options: sessionwatch_store::PostgresOptions,
) -> Option<(TestSchema, PostgresStore, Option<sessionwatch_core::Cursor>)> {
    use sessionwatch_core::{AgentSessionKey, Provenance};
    let schema = TestSchema::create(test).await?;
    let store = schema.store_with(options).await;
    let key = |k: &str| AgentSessionKey::parse(k).unwrap();
    let watch = sessionwatch_store::WatchRequest::new(key(FAIL_W), key(FAIL_T), Provenance::Explicit, "s");
    assert!(store.register_watch(watch, 1_000).await.unwrap().registered);
    let cursor = store.cursor(FAIL_W.into(), FAIL_T.into()).await.unwrap();
    Some((schema, store, cursor))
}

/// Makes every `BEFORE {event}` row of the schema's `table` fail, until the trigger `fail` is dropped;
/// answers the connection that installed it.
async fn fail_every(schema: &TestSchema, event: &str, table: &str) -> Failing {
    let admin = admin_client(schema.url()).await.unwrap();
    let name = schema.schema();
    admin
        .batch_execute(&format!(
            "CREATE FUNCTION {name}.fail() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'this write fails'; END $$; \
             CREATE TRIGGER fail BEFORE {event} ON {name}.{table} FOR EACH ROW EXECUTE FUNCTION {name}.fail()"
        ))
        .await
        .unwrap();
    Failing { admin, on: format!("{name}.{table}") }
}

/// The trigger [`fail_every`] put on a table.
struct Failing {
    admin: tokio_postgres::Client,
    /// The table, schema-qualified.
    on: String,
}

impl Failing {
    /// Drops the trigger: the writes succeed again.
    async fn stop(self) {
        self.admin.batch_execute(&format!("DROP TRIGGER fail ON {}", self.on)).await.unwrap();
    }
}

/// Nothing of the failed append is left: no head moved, no event, the cursor as it was.
async fn nothing_written(store: &PostgresStore, cursor_before: &Option<sessionwatch_core::Cursor>) {
    use sessionwatch_core::Limit;
    assert_eq!(store.head(FAIL_T.into(), "main".into()).await.unwrap().head, 0, "no head moved");
    let page = store.changes_since(FAIL_T.into(), "main".into(), 0, Limit::MAX).await.unwrap();
    assert!(page.events.is_empty(), "no event");
    assert_eq!(&store.cursor(FAIL_W.into(), FAIL_T.into()).await.unwrap(), cursor_before, "no cursor moved");
}

/// A watched human turn takes the single path, whose statements go in two pipelined groups, the second
/// ending with `COMMIT`. On a connection that has not prepared them yet, a failure inside that group
/// must still leave nothing written: each group is prepared before it is sent, so the `COMMIT` cannot
/// run ahead of the writes it closes (the head move committed, the event refused after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_path_append_failing_on_a_fresh_connection_writes_nothing() {
    use sessionwatch_core::{HumanTurnSource, NewEvent, RecordPolicy};
    use sessionwatch_store::{AppendOutcome, AppendRequest, PostgresOptions};
    let test = "a_single_path_append_failing_on_a_fresh_connection_writes_nothing";
    // One connection, which the watch's registration uses without preparing any append statement.
    let options = PostgresOptions { pool_size: 1, ..PostgresOptions::default() };
    let Some((schema, store, cursor_before)) = one_watch(test, options).await else {
        return;
    };
    let failing = fail_every(&schema, "INSERT", "session_state_events").await;
    let turn = AppendRequest {
        policy: RecordPolicy::human_turn(HumanTurnSource::Gateway, None),
        ..AppendRequest::new(NewEvent::human_message(FAIL_T, "main", "web", None), "s")
    };
    assert!(store.append(turn.clone(), 2_000).await.is_err(), "the event's insert fails");
    nothing_written(&store, &cursor_before).await;
    // The connection went back to the pool usable: with the trigger gone the same turn is recorded.
    failing.stop().await;
    let recorded = store.append(turn, 3_000).await.unwrap();
    assert!(
        matches!(recorded, AppendOutcome::Recorded { ref event, .. } if event.sequence == 1),
        "{recorded:?}"
    );
}

/// A batch's last round trip sends the cursors' positions and `COMMIT` together. When the positions
/// fail, the `COMMIT` behind them answers without error but rolls the transaction back: the append must
/// be reported not recorded (after its retry alone fails the same way), never recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_cursor_write_fails_records_nothing_and_says_so() {
    use sessionwatch_core::NewEvent;
    use sessionwatch_store::{AppendOutcome, AppendRequest, PostgresOptions};
    let test = "a_batch_whose_cursor_write_fails_records_nothing_and_says_so";
    let Some((schema, store, cursor_before)) = one_watch(test, PostgresOptions::default()).await else {
        return;
    };
    let failing = fail_every(&schema, "UPDATE", "session_watch_cursors").await;
    // A human message recorded always (an adopted session's turn): the batched path.
    let human = AppendRequest::new(NewEvent::human_message(FAIL_T, "main", "web", None), "s");
    assert!(store.append(human.clone(), 2_000).await.is_err(), "the cursor write fails");
    nothing_written(&store, &cursor_before).await;
    failing.stop().await;
    let recorded = store.append(human, 3_000).await.unwrap();
    let moved = matches!(recorded, AppendOutcome::Recorded { ref event, ref notices }
        if event.sequence == 1 && notices.len() == 1);
    assert!(moved, "{recorded:?}");
}
