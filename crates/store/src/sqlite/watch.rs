//! Watch cursors: registration, acknowledgement, the start-up sweep and clean-up.

use super::SqliteStore;
use super::transaction::WriteTx;
use crate::rows::{CURSOR_COLUMNS, EDGE_CURSOR_COLUMNS};
use crate::{Acknowledged, RegisterOutcome, Result, StoreError, WatchEdge, WatchRequest};
use rusqlite::{Connection, OptionalExtension, params};
use sessionwatch_core::{
    AgentSessionKey, Cursor, EventKind, Millis, Notice, Provenance, RegisterDecision, policy,
};
use std::sync::LazyLock;

fn cursor_from_row(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Cursor> {
    let provenance: String = r.get(at + 3)?;
    Ok(Cursor {
        last_seen: r.get::<_, i64>(at)? as u64,
        notified: r.get::<_, i64>(at + 1)? as u64,
        material: r.get::<_, i64>(at + 2)? as u64,
        provenance: Provenance::parse(&provenance).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                at + 3,
                rusqlite::types::Type::Text,
                format!("unknown provenance {provenance:?}").into(),
            )
        })?,
        store_path: r.get(at + 4)?,
        updated_at: r.get(at + 5)?,
    })
}

pub(crate) fn load_cursor(c: &Connection, watcher: &str, target: &str) -> Result<Option<Cursor>> {
    Ok(c.prepare_cached(&format!(
        "SELECT {CURSOR_COLUMNS} FROM session_watch_cursors WHERE watcher_session_key = ?1 AND target_session_key = ?2"
    ))?
    .query_row(params![watcher, target], |r| cursor_from_row(r, 0))
    .optional()?)
}

/// The cursor as the L/N/M machine has it: a pending cursor's M is derived from the log
/// ([`policy::settle_material`]; appends do not write a pending cursor). One descending range scan
/// that stops at the first event that counts.
pub(crate) fn settle(c: &Connection, watcher: &str, target: &str, cursor: Cursor) -> Result<Cursor> {
    if !policy::needs_settling(&cursor) {
        return Ok(cursor);
    }
    let Some(agent) = AgentSessionKey::parse(target).map(|k| k.agent_id().to_string()) else {
        return Ok(cursor);
    };
    let head_id = super::log::head_row(c, target, &agent)?.head_id;
    let (mut staged, mut logged) = (c.prepare_cached(&SETTLE_STAGED)?, c.prepare_cached(&SETTLE_LOGGED)?);
    let mut failed = None;
    let row = |r: &rusqlite::Row<'_>| {
        Ok((r.get::<_, i64>(0)? as u64, r.get::<_, String>(1)?, r.get(2)?, r.get(3)?))
    };
    // Newest first and lazily: the staged rows (the newest), then the log's; the first event that
    // counts ends the scan.
    let newer = staged
        .query_map(params![target, agent, cursor.material as i64, head_id], row)?
        .chain(logged.query_map(params![target, agent, cursor.material as i64], row)?)
        .map_while(|row| row.map_err(|e| failed = Some(e)).ok())
        .filter_map(|(seq, kind, actor, at)| Some((seq, EventKind::parse(&kind)?, actor, at)));
    let settled = policy::settle_material(&cursor, watcher, newer);
    if let Some(e) = failed {
        return Err(e.into());
    }
    Ok(settled.unwrap_or(cursor))
}

/// The target's material events after a position, newest first ([`settle`]): in the staging table from
/// the head event (`?4`, its id) down, and in the log.
static SETTLE_STAGED: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| settle_sql("session_state_events_staged", "AND id <= ?4 ORDER BY id DESC"));
static SETTLE_LOGGED: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| settle_sql("session_state_events", "ORDER BY sequence DESC"));

fn settle_sql(table: &str, order: &str) -> String {
    let kinds: Vec<String> = policy::material_kinds().iter().map(|k| format!("'{k}'")).collect();
    format!(
        "SELECT sequence, kind, actor_id, occurred_at FROM {table} \
         WHERE session_key = ?1 AND agent_id = ?2 AND sequence > ?3 AND kind IN ({}) {order}",
        kinds.join(", ")
    )
}

/// Writes the derived M of every pending cursor whose target moved past its stored M (retention is
/// about to delete the events it is derived from). Run after a fold: it looks in the log alone.
/// Writes the derived M of the pending cursors that have events after it, on `target` or on every
/// target: before a prune deletes history (M is read from it), and before it expires untouched cursors
/// (settling moves a cursor's time to its newest material event).
pub(crate) fn settle_pending(c: &Connection, target: Option<&str>) -> Result<()> {
    // Two texts, not `?1 IS NULL OR …`: a plan kept for every binding could not use the target's index.
    let on = if target.is_some() { "target_session_key = ?1 AND" } else { "?1 IS NULL AND" };
    let pending: Vec<(String, String, Cursor)> = c
        .prepare_cached(&format!(
            "SELECT watcher_session_key, target_session_key, {CURSOR_COLUMNS} FROM session_watch_cursors c \
             WHERE {on} material_sequence > last_seen_sequence AND EXISTS (SELECT 1 FROM \
             session_state_events e WHERE e.session_key = c.target_session_key AND e.sequence > c.material_sequence)"
        ))?
        .query_map([target], |r| Ok((r.get(0)?, r.get(1)?, cursor_from_row(r, 2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (watcher, target, cursor) in pending {
        let settled = settle(c, &watcher, &target, cursor.clone())?;
        if settled != cursor {
            save_cursor(c, &watcher, &target, &settled)?;
        }
    }
    Ok(())
}

pub(crate) fn save_cursor(c: &Connection, watcher: &str, target: &str, cur: &Cursor) -> Result<()> {
    c.prepare_cached(
        "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, \
         notified_sequence, material_sequence, provenance, watcher_store_path, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
         ON CONFLICT (watcher_session_key, target_session_key) DO UPDATE SET \
         last_seen_sequence = ?3, notified_sequence = ?4, material_sequence = ?5, provenance = ?6, \
         watcher_store_path = ?7, updated_at = ?8",
    )?
    .execute(params![
        watcher,
        target,
        cur.last_seen as i64,
        cur.notified as i64,
        cur.material as i64,
        cur.provenance.as_str(),
        cur.store_path,
        cur.updated_at
    ])
    .map_err(StoreError::classify)?;
    Ok(())
}

pub(crate) fn is_watched(c: &Connection, target: &str) -> Result<bool> {
    Ok(c.prepare_cached("SELECT EXISTS (SELECT 1 FROM session_watch_cursors WHERE target_session_key = ?1)")?
        .query_row([target], |r| r.get(0))?)
}

/// Read by every append that notifies: its text is built once.
static SETTLED_CURSORS_ON: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT watcher_session_key, {CURSOR_COLUMNS} FROM session_watch_cursors \
         INDEXED BY idx_cursors_settled_target \
         WHERE target_session_key = ?1 AND material_sequence <= last_seen_sequence"
    )
});

/// The cursors held on `target` with nothing pending (`M = L`), the only ones an append moves
/// ([`policy::fan_out`]); in no particular order: the single writer needs no lock order, and it orders
/// every append with every claim, so the pending ones need not be read.
pub(crate) fn settled_cursors_on(tx: &WriteTx<'_>, target: &str) -> Result<Vec<(String, Cursor)>> {
    tx.with(SETTLED_CURSORS_ON.as_str(), |st| {
        Ok(st
            .query_map([target], |r| Ok((r.get(0)?, cursor_from_row(r, 1)?)))?
            .collect::<rusqlite::Result<_>>()?)
    })
}

/// Pending watchers that no gateway hosts yet are claimed for `host`, so exactly one gateway recovers them.
fn claim_unhosted_watchers(c: &Connection, host: &str) -> Result<()> {
    c.prepare_cached(
        "UPDATE sessions SET host_id = ?1 WHERE host_id IS NULL AND EXISTS (SELECT 1 FROM session_watch_cursors c \
         WHERE c.watcher_session_key = sessions.session_key AND c.material_sequence > c.last_seen_sequence)",
    )?
    .execute([host])?;
    Ok(())
}

/// Pending cursors (`M > L`) of existing watchers (hosted by `host` when given; only `watcher` when
/// given), by watcher then target, as stored: [`sessionwatch_core::policy`] decides which count.
fn pending_cursors(
    c: &Connection,
    host: Option<&str>,
    watcher: Option<&str>,
) -> Result<Vec<(String, String, Cursor)>> {
    Ok(c.prepare_cached(&format!(
        "SELECT watcher_session_key, target_session_key, {CURSOR_COLUMNS} FROM session_watch_cursors c \
         WHERE material_sequence > last_seen_sequence AND (?2 IS NULL OR watcher_session_key = ?2) \
         AND EXISTS (SELECT 1 FROM sessions s WHERE s.session_key = c.watcher_session_key \
                     AND (?1 IS NULL OR s.host_id = ?1)) \
         ORDER BY watcher_session_key, target_session_key"
    ))?
    .query_map(params![host, watcher], |r| Ok((r.get(0)?, r.get(1)?, cursor_from_row(r, 2)?)))?
    .collect::<rusqlite::Result<_>>()?)
}

impl SqliteStore {
    pub(crate) fn register_watch_op(
        tx: &Connection,
        req: &WatchRequest,
        now: Millis,
    ) -> Result<RegisterOutcome> {
        let (watcher, target) = (&req.watcher, &req.target);
        let existing = load_cursor(tx, watcher.as_str(), target.as_str())?;
        let head = super::log::head(tx, target.as_str(), target.agent_id())?.head;
        let decision = req.decide(existing.as_ref(), head, now);
        match &decision {
            RegisterDecision::Refused(_) | RegisterDecision::Keep => {}
            RegisterDecision::UpgradeToExplicit => {
                tx.prepare_cached(
                    "UPDATE session_watch_cursors SET provenance = 'explicit', updated_at = ?3 \
                     WHERE watcher_session_key = ?1 AND target_session_key = ?2",
                )?
                .execute(params![watcher.as_str(), target.as_str(), now])?;
            }
            RegisterDecision::Seed(c) => save_cursor(tx, watcher.as_str(), target.as_str(), c)?,
        }
        Ok(RegisterOutcome { registered: !matches!(decision, RegisterDecision::Refused(_)), decision })
    }

    pub(crate) fn unwatch_op(tx: &Connection, watcher: &str, target: &str) -> Result<bool> {
        Ok(tx.execute(
            "DELETE FROM session_watch_cursors WHERE watcher_session_key = ?1 AND target_session_key = ?2",
            params![watcher, target],
        )? > 0)
    }

    pub(crate) fn acknowledge_op(
        tx: &Connection,
        watcher: &AgentSessionKey,
        targets: &[AgentSessionKey],
        store: &str,
        now: Millis,
    ) -> Result<Acknowledged> {
        let mut rows = Vec::with_capacity(targets.len());
        for target in targets {
            let cursor = load_cursor(tx, watcher.as_str(), target.as_str())?
                .map(|c| settle(tx, watcher.as_str(), target.as_str(), c))
                .transpose()?;
            rows.push((target.clone(), cursor));
        }
        let (writes, out) = policy::acknowledge(watcher, rows, store, now);
        for (target, cursor) in &writes {
            save_cursor(tx, watcher.as_str(), target.as_str(), cursor)?;
        }
        Ok(out)
    }

    pub(crate) fn sweep_op(
        tx: &Connection,
        store: &str,
        host: Option<&str>,
        now: Millis,
    ) -> Result<Vec<Notice>> {
        if let Some(host) = host {
            claim_unhosted_watchers(tx, host)?;
        }
        let mut pending = pending_cursors(tx, host, None)?;
        for (watcher, target, cursor) in &mut pending {
            *cursor = settle(tx, watcher, target, cursor.clone())?;
        }
        let (writes, notices) = policy::sweep(pending, store, now);
        for (watcher, target, cursor) in &writes {
            save_cursor(tx, watcher, target, cursor)?;
        }
        Ok(notices)
    }

    pub(crate) fn pending_notices_sync(
        &self,
        store: &str,
        host: Option<&str>,
        watcher: Option<&str>,
    ) -> Result<Vec<Notice>> {
        self.read(|c| {
            Ok(pending_cursors(c, host, watcher)?
                .iter()
                .filter_map(|(w, t, cursor)| policy::pending_notice(w, t, cursor, store))
                .collect())
        })
    }

    pub(crate) fn cursors_of_watcher_sync(&self, watcher: &str) -> Result<Vec<(String, Cursor)>> {
        self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT target_session_key, {CURSOR_COLUMNS} FROM session_watch_cursors \
                 WHERE watcher_session_key = ?1 ORDER BY target_session_key"
            ))?
            .query_map([watcher], |r| Ok((r.get::<_, String>(0)?, cursor_from_row(r, 1)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?
            .into_iter()
            .map(|(target, cursor)| Ok((target.clone(), settle(c, watcher, &target, cursor)?)))
            .collect()
        })
    }

    pub(crate) fn watch_edges_sync(&self, keys: &[String], limit: u32) -> Result<Vec<WatchEdge>> {
        self.read(|c| {
            // Two indexed lookups per key (primary key by watcher, `idx_cursors_target` by target).
            let select = |by: &str| {
                format!(
                    "SELECT c.watcher_session_key, c.target_session_key, {EDGE_CURSOR_COLUMNS}, \
                     EXISTS (SELECT 1 FROM sessions s WHERE s.session_key = c.target_session_key \
                             AND s.spawned_by = c.watcher_session_key) \
                     FROM session_watch_cursors c WHERE c.{by} = ?1"
                )
            };
            let mut by_watcher = c.prepare_cached(&select("watcher_session_key"))?;
            let mut by_target = c.prepare_cached(&select("target_session_key"))?;
            let row = |r: &rusqlite::Row<'_>| {
                Ok(WatchEdge {
                    watcher: r.get(0)?,
                    target: r.get(1)?,
                    cursor: cursor_from_row(r, 2)?,
                    spawned: r.get(8)?,
                })
            };
            let mut edges = std::collections::BTreeMap::new();
            for key in keys {
                for stmt in [&mut by_watcher, &mut by_target] {
                    for edge in stmt.query_map([key], row)? {
                        let edge = edge?;
                        edges.insert((edge.watcher.clone(), edge.target.clone()), edge);
                    }
                }
            }
            edges
                .into_values()
                .take(limit as usize)
                .map(|e| Ok(WatchEdge { cursor: settle(c, &e.watcher, &e.target, e.cursor.clone())?, ..e }))
                .collect()
        })
    }

    pub(crate) fn clear_watcher_op(tx: &Connection, watcher: &str) -> Result<Vec<String>> {
        Ok(tx
            .prepare_cached("DELETE FROM session_watch_cursors WHERE watcher_session_key = ?1 RETURNING target_session_key")?
            .query_map([watcher], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?)
    }

    pub(crate) fn delete_session_state_op(tx: &Connection, key: &str, agent: &str) -> Result<()> {
        for table in ["session_state_events", "session_state_events_staged"] {
            tx.execute(
                &format!("DELETE FROM {table} WHERE session_key = ?1 AND agent_id = ?2"),
                params![key, agent],
            )?;
        }
        tx.execute(
            "DELETE FROM session_state_heads WHERE session_key = ?1 AND agent_id = ?2",
            params![key, agent],
        )?;
        tx.execute(
            "DELETE FROM session_watch_cursors WHERE watcher_session_key = ?1 OR target_session_key = ?1",
            [key],
        )?;
        for table in
            ["sessions", "session_messages", "session_inbox", "session_runs", "session_upstream_links"]
        {
            tx.execute(
                &format!("DELETE FROM {table} WHERE session_key = ?1 AND agent_id = ?2"),
                params![key, agent],
            )?;
        }
        Ok(())
    }
}
