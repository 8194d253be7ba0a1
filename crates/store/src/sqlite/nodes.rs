//! Remote nodes: their names and the SHA-256 of their tokens (never the token).

use super::SqliteStore;
use crate::{NodeRow, Result};
use rusqlite::{Connection, OptionalExtension, Row, params};
use sessionwatch_core::Millis;

fn node_from_row(r: &Row<'_>) -> rusqlite::Result<NodeRow> {
    Ok(NodeRow { name: r.get(0)?, created_at: r.get(1)?, last_seen_at: r.get(2)? })
}

impl SqliteStore {
    pub(crate) fn create_node_op(
        tx: &Connection,
        name: &str,
        token_sha256: &str,
        now: Millis,
    ) -> Result<bool> {
        Ok(tx.execute(
            "INSERT INTO session_nodes (name, token_sha256, created_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (name) DO NOTHING",
            params![name, token_sha256, now],
        )? > 0)
    }

    pub(crate) fn revoke_node_op(tx: &Connection, name: &str) -> Result<bool> {
        Ok(tx.execute("DELETE FROM session_nodes WHERE name = ?1", [name])? > 0)
    }

    pub(crate) fn touch_node_op(tx: &Connection, name: &str, now: Millis) -> Result<bool> {
        Ok(tx.execute("UPDATE session_nodes SET last_seen_at = ?2 WHERE name = ?1", params![name, now])? > 0)
    }

    pub(crate) fn node_by_token_sync(&self, token_sha256: &str) -> Result<Option<NodeRow>> {
        self.read(|c| {
            Ok(c.prepare_cached(
                "SELECT name, created_at, last_seen_at FROM session_nodes WHERE token_sha256 = ?1",
            )?
            .query_row([token_sha256], node_from_row)
            .optional()?)
        })
    }

    pub(crate) fn list_nodes_sync(&self) -> Result<Vec<NodeRow>> {
        self.read(|c| {
            Ok(c.prepare_cached("SELECT name, created_at, last_seen_at FROM session_nodes ORDER BY name")?
                .query_map([], node_from_row)?
                .collect::<rusqlite::Result<_>>()?)
        })
    }
}
