//! Versioned migrations under an advisory lock; newer and foreign databases are refused.

use crate::pg_schema;
use sessionwatch_store::postgres::testing::admin_client;
use sessionwatch_store::{PostgresStore, StoreError, postgres::SCHEMA_VERSION};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateways_starting_together_migrate_once() {
    let schema = pg_schema!("gateways_starting_together_migrate_once");
    let url = schema.url().to_string();
    let mut tasks = vec![];
    for _ in 0..4 {
        let (url, name) = (url.clone(), schema.schema().to_string());
        tasks.push(tokio::spawn(async move { PostgresStore::connect(&url, Some(&name)).await.map(|_| ()) }));
    }
    for t in tasks {
        t.await.unwrap().expect("every gateway starts");
    }
    let admin = admin_client(&url).await.unwrap();
    let v: String = admin
        .query_one(
            &format!("SELECT value FROM {}.sessionwatch_meta WHERE key = 'schema_version'", schema.schema()),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, SCHEMA_VERSION.to_string());
    // Reopening an up-to-date database changes nothing.
    PostgresStore::connect(&url, Some(schema.schema())).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_database_is_refused() {
    let schema = pg_schema!("a_newer_database_is_refused");
    schema.store().await;
    let admin = admin_client(schema.url()).await.unwrap();
    admin
        .execute(
            &format!(
                "UPDATE {}.sessionwatch_meta SET value = '99' WHERE key = 'schema_version'",
                schema.schema()
            ),
            &[],
        )
        .await
        .unwrap();
    let err = PostgresStore::connect(schema.url(), Some(schema.schema())).await.unwrap_err();
    assert!(matches!(err, StoreError::TooNew { found: 99, supported: SCHEMA_VERSION }), "{err:?}");
    assert!(err.to_string().contains("newer than this sessionwatch understands"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_without_a_version_are_refused() {
    let schema = pg_schema!("tables_without_a_version_are_refused");
    let admin = admin_client(schema.url()).await.unwrap();
    admin
        .batch_execute(&format!("CREATE SCHEMA {s}; CREATE TABLE {s}.sessions (x int);", s = schema.schema()))
        .await
        .unwrap();
    let err = PostgresStore::connect(schema.url(), Some(schema.schema())).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_schema_names_are_refused() {
    let schema = pg_schema!("invalid_schema_names_are_refused");
    for bad in ["", "Upper", "a;drop", "1abc", "a b"] {
        let err = PostgresStore::connect(schema.url(), Some(bad)).await.unwrap_err();
        assert!(matches!(err, StoreError::Config(_)), "{bad:?}: {err:?}");
    }
}

/// A cursor write that moves L and M (the transition to pending, an acknowledge) rewrites the row on its
/// page without touching an index: it was an insert into all three indexes while an index predicate
/// named those columns (the start-up sweep of 100k cursors spent most of its time there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursor_writes_are_heap_only_updates() {
    let schema = pg_schema!("cursor_writes_are_heap_only_updates");
    schema.store().await;
    let mut admin = admin_client(schema.url()).await.unwrap();
    let table = format!("{}.session_watch_cursors", schema.schema());
    admin
        .execute(
            &format!(
                "INSERT INTO {table} (watcher_session_key, target_session_key, updated_at) \
                 VALUES ('agent:main:main', 'agent:main:subagent:a', 0)"
            ),
            &[],
        )
        .await
        .unwrap();
    let tx = admin.transaction().await.unwrap();
    for (l, m) in [(0i64, 5i64), (5, 5), (5, 9)] {
        tx.execute(
            &format!("UPDATE {table} SET last_seen_sequence = $1, material_sequence = $2, updated_at = 1"),
            &[&l, &m],
        )
        .await
        .unwrap();
    }
    let (updated, heap_only): (i64, i64) = {
        let row = tx
            .query_one(
                "SELECT pg_stat_get_xact_tuples_updated($1::text::regclass), \
                 pg_stat_get_xact_tuples_hot_updated($1::text::regclass)",
                &[&table],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!((updated, heap_only), (3, 3), "every cursor write is a heap-only update");
}
