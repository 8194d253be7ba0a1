//! Remote nodes: their names and the SHA-256 of their tokens (never the token).

use super::{PostgresStore, query_opt};
use crate::{NodeRow, Result};
use sessionwatch_core::Millis;
use tokio_postgres::Row;

fn node_from_row(r: &Row) -> Result<NodeRow> {
    Ok(NodeRow { name: r.try_get(0)?, created_at: r.try_get(1)?, last_seen_at: r.try_get(2)? })
}

impl PostgresStore {
    pub(crate) async fn create_node_pg(&self, name: &str, token_sha256: &str, now: Millis) -> Result<bool> {
        self.changed(
            "INSERT INTO session_nodes (name, token_sha256, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO NOTHING",
            &[&name, &token_sha256, &now],
        )
        .await
    }

    pub(crate) async fn revoke_node_pg(&self, name: &str) -> Result<bool> {
        self.changed("DELETE FROM session_nodes WHERE name = $1", &[&name]).await
    }

    pub(crate) async fn touch_node_pg(&self, name: &str, now: Millis) -> Result<bool> {
        self.changed("UPDATE session_nodes SET last_seen_at = $2 WHERE name = $1", &[&name, &now]).await
    }

    pub(crate) async fn node_by_token_pg(&self, token_sha256: &str) -> Result<Option<NodeRow>> {
        let client = self.client().await?;
        query_opt(
            &client,
            "SELECT name, created_at, last_seen_at FROM session_nodes WHERE token_sha256 = $1",
            &[&token_sha256],
        )
        .await?
        .as_ref()
        .map(node_from_row)
        .transpose()
    }

    pub(crate) async fn list_nodes_pg(&self) -> Result<Vec<NodeRow>> {
        self.read_all(
            "SELECT name, created_at, last_seen_at FROM session_nodes ORDER BY name COLLATE \"C\"",
            &[],
            node_from_row,
        )
        .await
    }
}
