//! Upstream links of adopted sessions.

use super::{PostgresStore, execute, query_opt};
use crate::rows::{LINK_COLUMNS, link_columns_of_l, link_from_row};
use crate::{LinkUpsert, LinkVersion, Result, UpstreamLinkRow};
use deadpool_postgres::GenericClient;
use sessionwatch_core::Millis;
use tokio_postgres::Row;

fn link_from_row(r: &Row) -> Result<UpstreamLinkRow> {
    Ok(link_from_row!(r, try_get))
}

pub(crate) async fn load_link<C: GenericClient + Sync>(
    c: &C,
    key: &str,
    agent: &str,
    for_update: bool,
) -> Result<Option<UpstreamLinkRow>> {
    let lock = if for_update { " FOR UPDATE" } else { "" };
    query_opt(
        c,
        &format!(
            "SELECT {LINK_COLUMNS} FROM session_upstream_links WHERE session_key = $1 AND agent_id = $2{lock}"
        ),
        &[&key, &agent],
    )
    .await?
    .map(|r| link_from_row(&r))
    .transpose()
}

impl PostgresStore {
    pub(crate) async fn upsert_link_pg(&self, link: &UpstreamLinkRow) -> Result<LinkUpsert> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let existing = load_link(&tx, &link.session_key, &link.agent_id, true).await?;
        let outcome = LinkUpsert::of(existing.as_ref(), link);
        if outcome == LinkUpsert::Kept {
            return Ok(outcome);
        }
        let created_at = existing.as_ref().map_or(link.created_at, |o| o.created_at);
        execute(
            &tx,
            &format!(
                "INSERT INTO session_upstream_links ({LINK_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL, 0, $9, $10) \
                 ON CONFLICT (session_key, agent_id) DO UPDATE SET catalog_id = EXCLUDED.catalog_id, \
                 host_id = EXCLUDED.host_id, thread_id = EXCLUDED.thread_id, \
                 upstream_kind = EXCLUDED.upstream_kind, upstream_ref_json = EXCLUDED.upstream_ref_json, \
                 last_marker_json = EXCLUDED.last_marker_json, last_scanned_at = NULL, missing_streak = 0, \
                 created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at"
            ),
            &[
                &link.session_key,
                &link.agent_id,
                &link.catalog_id,
                &link.host_id,
                &link.thread_id,
                &link.upstream_kind,
                &link.reference_json,
                &link.marker_json,
                &created_at,
                &link.updated_at,
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(outcome)
    }

    pub(crate) async fn links_of_host_pg(&self, host_id: &str) -> Result<Vec<UpstreamLinkRow>> {
        self.read_all(
            &format!(
                "SELECT {LINK_COLUMNS} FROM session_upstream_links WHERE host_id = $1 \
                 ORDER BY session_key COLLATE \"C\", agent_id COLLATE \"C\""
            ),
            &[&host_id],
            link_from_row,
        )
        .await
    }

    pub(crate) async fn watched_links_pg(&self) -> Result<Vec<UpstreamLinkRow>> {
        let cols = link_columns_of_l();
        self.read_all(
            &format!(
                "SELECT {cols} FROM session_upstream_links l WHERE EXISTS \
                 (SELECT 1 FROM session_watch_cursors c WHERE c.target_session_key = l.session_key) \
                 ORDER BY l.catalog_id COLLATE \"C\", l.session_key COLLATE \"C\", l.agent_id COLLATE \"C\""
            ),
            &[],
            link_from_row,
        )
        .await
    }

    pub(crate) async fn advance_link_marker_pg(
        &self,
        link: &LinkVersion,
        marker: &str,
        now: Millis,
    ) -> Result<bool> {
        self.changed(
            "UPDATE session_upstream_links SET last_marker_json = $4, last_scanned_at = $5, updated_at = $5, \
             missing_streak = 0 WHERE session_key = $1 AND agent_id = $2 AND updated_at = $3",
            &[&link.session_key, &link.agent_id, &link.updated_at, &marker, &now],
        )
        .await
    }

    pub(crate) async fn set_link_missing_streak_pg(&self, link: &LinkVersion, streak: u32) -> Result<bool> {
        self.changed(
            "UPDATE session_upstream_links SET missing_streak = $4 \
             WHERE session_key = $1 AND agent_id = $2 AND updated_at = $3",
            &[&link.session_key, &link.agent_id, &link.updated_at, &(streak as i64)],
        )
        .await
    }

    pub(crate) async fn delete_link_pg(&self, key: &str, agent: &str) -> Result<bool> {
        self.changed(
            "DELETE FROM session_upstream_links WHERE session_key = $1 AND agent_id = $2",
            &[&key, &agent],
        )
        .await
    }
}
