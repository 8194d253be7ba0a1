//! TLS to PostgreSQL as the URL asks (`sslmode`), against the test server's own (self-signed)
//! certificate, as libpq's `require` accepts it.

use sessionwatch_store::postgres::testing::admin_client;
use sessionwatch_store::{Links, PostgresOptions, PostgresStore};

fn with_sslmode(url: &str, mode: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}sslmode={mode}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_url_chooses_tls() {
    let schema = crate::pg_schema!("tls");
    let ssl_on: String =
        admin_client(schema.url()).await.unwrap().query_one("SHOW ssl", &[]).await.unwrap().get(0);
    if ssl_on != "on" {
        eprintln!("SKIPPED: the_url_chooses_tls (the PostgreSQL server has ssl = off)");
        return;
    }
    let options =
        || PostgresOptions { schema: Some(schema.schema().to_string()), ..PostgresOptions::default() };
    let required =
        PostgresStore::connect_with(&with_sslmode(schema.url(), "require"), options()).await.unwrap();
    assert!(required.connection_encrypted().await.unwrap(), "sslmode=require encrypts");
    let disabled =
        PostgresStore::connect_with(&with_sslmode(schema.url(), "disable"), options()).await.unwrap();
    assert!(!disabled.connection_encrypted().await.unwrap(), "sslmode=disable does not");
    // The store works over TLS.
    assert!(required.list_nodes().await.unwrap().is_empty());
}
