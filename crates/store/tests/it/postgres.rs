//! The conformance suite on the PostgreSQL store, one fresh schema per test (dropped afterwards).
//! Skipped (with a `SKIPPED` line) when no server answers, unless `SESSIONWATCH_REQUIRE_PG=1`.

use crate::conformance::Harness;
use sessionwatch_store::PostgresStore;
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
        Some((Harness { store, make_legacy }, schema))
    })
}

crate::conformance_suite!(make);
