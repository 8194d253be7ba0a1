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
