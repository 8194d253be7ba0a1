//! Upstream links of adopted sessions.

use super::SqliteStore;
use crate::rows::{LINK_COLUMNS, link_columns_of_l, link_from_row};
use crate::{LinkUpsert, LinkVersion, Result, UpstreamLinkRow, WatchedLinks};
use rusqlite::{Connection, OptionalExtension, Row, params};
use sessionwatch_core::Millis;

fn link_from_row(r: &Row<'_>) -> rusqlite::Result<UpstreamLinkRow> {
    Ok(link_from_row!(r, get))
}

fn load_link(c: &Connection, key: &str, agent: &str) -> Result<Option<UpstreamLinkRow>> {
    Ok(c.prepare_cached(&format!(
        "SELECT {LINK_COLUMNS} FROM session_upstream_links WHERE session_key = ?1 AND agent_id = ?2"
    ))?
    .query_row(params![key, agent], link_from_row)
    .optional()?)
}

fn watched_links(c: &Connection) -> Result<Vec<UpstreamLinkRow>> {
    let cols = link_columns_of_l();
    Ok(c.prepare_cached(&format!(
        "SELECT {cols} FROM session_upstream_links l WHERE EXISTS \
         (SELECT 1 FROM session_watch_cursors c WHERE c.target_session_key = l.session_key) \
         ORDER BY l.catalog_id, l.session_key, l.agent_id"
    ))?
    .query_map([], link_from_row)?
    .collect::<rusqlite::Result<_>>()?)
}

/// What the triggers of schema 10 move with every change [`watched_links`] could see.
pub(crate) fn watched_links_version(c: &Connection) -> Result<i64> {
    Ok(c.prepare_cached("SELECT version FROM watched_links_version WHERE id = 1")?
        .query_row([], |r| r.get(0))?)
}

impl SqliteStore {
    pub(crate) fn upsert_link_op(tx: &Connection, link: &UpstreamLinkRow) -> Result<LinkUpsert> {
        let existing = load_link(tx, &link.session_key, &link.agent_id)?;
        let outcome = LinkUpsert::of(existing.as_ref(), link);
        if outcome == LinkUpsert::Kept {
            return Ok(outcome);
        }
        tx.execute(
            &format!(
                "INSERT OR REPLACE INTO session_upstream_links ({LINK_COLUMNS}) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, 0, ?9, ?10)"
            ),
            params![
                link.session_key,
                link.agent_id,
                link.catalog_id,
                link.host_id,
                link.thread_id,
                link.upstream_kind,
                link.reference_json,
                link.marker_json,
                existing.as_ref().map_or(link.created_at, |o| o.created_at),
                link.updated_at
            ],
        )?;
        Ok(outcome)
    }

    pub(crate) fn get_link_sync(&self, key: &str, agent: &str) -> Result<Option<UpstreamLinkRow>> {
        self.read(|c| load_link(c, key, agent))
    }

    /// [`get_link_sync`](Self::get_link_sync) on a never-waiting reader ([`SqliteStore::read_now`]).
    pub(crate) fn get_link_now(&self, key: &str, agent: &str) -> Option<Option<UpstreamLinkRow>> {
        self.read_now(|c| load_link(c, key, agent))
    }

    pub(crate) fn watched_links_sync(&self) -> Result<Vec<UpstreamLinkRow>> {
        self.read(watched_links)
    }

    pub(crate) fn watched_links_since_sync(&self, known: Option<i64>) -> Result<WatchedLinks> {
        self.read(|c| {
            // The version first: a write committed before the links' read moves it past this answer's.
            let version = watched_links_version(c)?;
            if known == Some(version) {
                return Ok(WatchedLinks::Unchanged);
            }
            Ok(WatchedLinks::Read { links: watched_links(c)?, version: Some(version) })
        })
    }

    pub(crate) fn links_of_host_sync(&self, host_id: &str) -> Result<Vec<UpstreamLinkRow>> {
        self.read(|c| {
            Ok(c.prepare_cached(&format!(
                "SELECT {LINK_COLUMNS} FROM session_upstream_links WHERE host_id = ?1 ORDER BY session_key, agent_id"
            ))?
            .query_map([host_id], link_from_row)?
            .collect::<rusqlite::Result<_>>()?)
        })
    }

    pub(crate) fn advance_link_marker_op(
        tx: &Connection,
        link: &LinkVersion,
        marker: &str,
        now: Millis,
    ) -> Result<bool> {
        Ok(tx.execute(
            "UPDATE session_upstream_links SET last_marker_json = ?4, last_scanned_at = ?5, updated_at = ?5, \
             missing_streak = 0 WHERE session_key = ?1 AND agent_id = ?2 AND updated_at = ?3",
            params![link.session_key, link.agent_id, link.updated_at, marker, now],
        )? > 0)
    }

    pub(crate) fn set_link_missing_streak_op(
        tx: &Connection,
        link: &LinkVersion,
        streak: u32,
    ) -> Result<bool> {
        Ok(tx.execute(
            "UPDATE session_upstream_links SET missing_streak = ?4 \
             WHERE session_key = ?1 AND agent_id = ?2 AND updated_at = ?3",
            params![link.session_key, link.agent_id, link.updated_at, streak as i64],
        )? > 0)
    }

    pub(crate) fn delete_link_op(tx: &Connection, key: &str, agent: &str) -> Result<bool> {
        Ok(tx.execute(
            "DELETE FROM session_upstream_links WHERE session_key = ?1 AND agent_id = ?2",
            params![key, agent],
        )? > 0)
    }
}
