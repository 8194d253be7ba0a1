//! Watch cursors: registration, acknowledgement, the start-up sweep, reconciliation and clean-up.
//! Every read-modify-write of a cursor holds its row lock (`FOR UPDATE`), and rows are locked in
//! (watcher, target) order, so concurrent gateways neither lose updates nor deadlock.

use super::{PostgresStore, execute, i, query, query_opt, u};
use crate::rows::{CURSOR_COLUMNS, EDGE_CURSOR_COLUMNS};
use crate::{Acknowledged, RegisterOutcome, Result, StoreError, WatchEdge, WatchRequest};
use deadpool_postgres::GenericClient;
use sessionwatch_core::{
    AgentSessionKey, Cursor, EventKind, Millis, Notice, Provenance, RegisterDecision, policy,
};
use tokio_postgres::Row;

fn cursor_from_row(r: &Row, at: usize) -> Result<Cursor> {
    let provenance: String = r.try_get(at + 3)?;
    Ok(Cursor {
        last_seen: u(r.try_get(at)?),
        notified: u(r.try_get(at + 1)?),
        material: u(r.try_get(at + 2)?),
        provenance: Provenance::parse(&provenance)
            .ok_or_else(|| StoreError::InvalidData(format!("unknown provenance {provenance:?}")))?,
        store_path: r.try_get(at + 4)?,
        updated_at: r.try_get(at + 5)?,
    })
}

pub(crate) async fn load_cursor<C: GenericClient + Sync>(
    c: &C,
    watcher: &str,
    target: &str,
    for_update: bool,
) -> Result<Option<Cursor>> {
    let lock = if for_update { " FOR UPDATE" } else { "" };
    query_opt(
        c,
        &format!(
            "SELECT {CURSOR_COLUMNS} FROM session_watch_cursors \
             WHERE watcher_session_key = $1 AND target_session_key = $2{lock}"
        ),
        &[&watcher, &target],
    )
    .await?
    .map(|r| cursor_from_row(&r, 0))
    .transpose()
}

/// The cursor as the L/N/M machine has it: a pending cursor's M is derived from the log
/// ([`policy::settle_material`]; appends do not write a pending cursor). Reads the newest material
/// events after the stored M, a page at a time, until one counts.
pub(crate) async fn settle<C: GenericClient + Sync>(
    c: &C,
    watcher: &str,
    target: &str,
    cursor: Cursor,
) -> Result<Cursor> {
    const PAGE: i64 = 64;
    if !policy::needs_settling(&cursor) {
        return Ok(cursor);
    }
    let Some(agent) = AgentSessionKey::parse(target).map(|k| k.agent_id().to_string()) else {
        return Ok(cursor);
    };
    let kinds: Vec<&str> = policy::material_kinds();
    let mut below = i64::MAX;
    loop {
        let rows = query(
            c,
            "SELECT sequence, kind, actor_id, occurred_at FROM session_state_events \
             WHERE session_key = $1 AND agent_id = $2 AND sequence > $3 AND sequence < $4 AND kind = ANY($5) \
             ORDER BY sequence DESC LIMIT $6",
            &[&target, &agent, &i(cursor.material), &below, &kinds, &PAGE],
        )
        .await?;
        let newer: Vec<_> = rows.iter().filter_map(|r| logged_event(r, 0)).collect();
        if let Some(settled) = policy::settle_material(&cursor, watcher, newer) {
            return Ok(settled);
        }
        if (rows.len() as i64) < PAGE {
            return Ok(cursor);
        }
        below = rows.last().map_or(0, |r| r.get::<_, i64>(0));
    }
}

/// `sequence, kind, actor_id, occurred_at` from column `at` on; `None` for a kind this version does not know.
fn logged_event(r: &Row, at: usize) -> Option<policy::LoggedEvent> {
    let kind = EventKind::parse(r.get::<_, &str>(at + 1))?;
    Some((u(r.get(at)), kind, r.get(at + 2), r.get(at + 3)))
}

/// [`settle`] for many cursors at once (the start-up sweep): one query reads, per cursor that needs it,
/// the newest material events after its stored M (up to a page each); a cursor whose page held only
/// events it caused itself falls back to [`settle`].
pub(crate) async fn settle_many<C: GenericClient + Sync>(
    c: &C,
    rows: &mut [(String, String, Cursor)],
) -> Result<()> {
    const PAGE: i64 = 8;
    let mut at = vec![];
    let (mut targets, mut agents, mut materials) = (vec![], vec![], vec![]);
    for (n, (_, target, cursor)) in rows.iter().enumerate() {
        let Some(agent) = AgentSessionKey::parse(target).map(|k| k.agent_id().to_string()) else { continue };
        if policy::needs_settling(cursor) {
            at.push(n);
            targets.push(target.as_str());
            agents.push(agent);
            materials.push(i(cursor.material));
        }
    }
    if at.is_empty() {
        return Ok(());
    }
    let kinds: Vec<&str> = policy::material_kinds();
    let found = query(
        c,
        "SELECT v.n, e.sequence, e.kind, e.actor_id, e.occurred_at \
         FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS v(target, agent, material, n) \
         CROSS JOIN LATERAL (SELECT sequence, kind, actor_id, occurred_at FROM session_state_events e \
             WHERE e.session_key = v.target AND e.agent_id = v.agent AND e.sequence > v.material \
             AND e.kind = ANY($4) ORDER BY e.sequence DESC LIMIT $5) e \
         ORDER BY v.n, e.sequence DESC",
        &[&targets, &agents, &materials, &kinds, &PAGE],
    )
    .await?;
    let mut newer: std::collections::BTreeMap<usize, Vec<policy::LoggedEvent>> = Default::default();
    for r in &found {
        let Some(event) = logged_event(r, 1) else { continue };
        let slot = at[(r.get::<_, i64>(0) - 1) as usize];
        newer.entry(slot).or_default().push(event);
    }
    for (slot, events) in newer {
        let (watcher, target, cursor) = &rows[slot];
        let full_page = events.len() as i64 == PAGE;
        let settled = match policy::settle_material(cursor, watcher, events) {
            Some(s) => s,
            None if full_page => settle(c, watcher, target, cursor.clone()).await?,
            None => continue,
        };
        rows[slot].2 = settled;
    }
    Ok(())
}

/// Writes many cursors' positions in one statement.
pub(crate) async fn save_many<C: GenericClient + Sync>(
    c: &C,
    writes: &[(String, String, Cursor)],
) -> Result<()> {
    if writes.is_empty() {
        return Ok(());
    }
    let watchers: Vec<&str> = writes.iter().map(|(w, _, _)| w.as_str()).collect();
    let targets: Vec<&str> = writes.iter().map(|(_, t, _)| t.as_str()).collect();
    let last_seen: Vec<i64> = writes.iter().map(|(_, _, c)| i(c.last_seen)).collect();
    let notified: Vec<i64> = writes.iter().map(|(_, _, c)| i(c.notified)).collect();
    let material: Vec<i64> = writes.iter().map(|(_, _, c)| i(c.material)).collect();
    let updated: Vec<i64> = writes.iter().map(|(_, _, c)| c.updated_at).collect();
    execute(
        c,
        "UPDATE session_watch_cursors AS c SET last_seen_sequence = v.l, notified_sequence = v.n, \
         material_sequence = v.m, updated_at = v.u \
         FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[]) \
         AS v(w, t, l, n, m, u) WHERE c.watcher_session_key = v.w AND c.target_session_key = v.t",
        &[&watchers, &targets, &last_seen, &notified, &material, &updated],
    )
    .await?;
    Ok(())
}

/// Inside the prune transaction, before history is deleted: writes the derived M of every pending
/// cursor whose target moved past its stored M. Per target, its head row is locked before its cursors,
/// the order appends take.
pub(crate) async fn settle_pending<C: GenericClient + Sync>(c: &C) -> Result<()> {
    let targets: Vec<String> = query(
        c,
        "SELECT DISTINCT c.target_session_key FROM session_watch_cursors c \
         JOIN session_state_heads h ON h.session_key = c.target_session_key \
         WHERE c.material_sequence > c.last_seen_sequence AND h.head > c.material_sequence \
         ORDER BY 1",
        &[],
    )
    .await?
    .iter()
    .map(|r| r.get(0))
    .collect();
    for target in targets {
        query(c, "SELECT 1 FROM session_state_heads WHERE session_key = $1 FOR UPDATE", &[&target]).await?;
        for (watcher, cursor) in lock_cursors_on(c, &target).await? {
            let settled = settle(c, &watcher, &target, cursor.clone()).await?;
            if settled != cursor {
                save_cursor(c, &watcher, &target, &settled).await?;
            }
        }
    }
    Ok(())
}

/// Writes a cursor, or overwrites the one there: ($1 watcher, $2 target, $3 L, $4 N, $5 M, $6 provenance,
/// $7 store path, $8 updated at).
const UPSERT_CURSOR: &str = "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
     last_seen_sequence, notified_sequence, material_sequence, provenance, watcher_store_path, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
     ON CONFLICT (watcher_session_key, target_session_key) DO UPDATE SET \
     last_seen_sequence = $3, notified_sequence = $4, material_sequence = $5, provenance = $6, \
     watcher_store_path = $7, updated_at = $8";

/// Writes a cursor unless one is there (the parameters of [`UPSERT_CURSOR`]).
const INSERT_CURSOR_IF_ABSENT: &str = "INSERT INTO session_watch_cursors (watcher_session_key, \
     target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, \
     watcher_store_path, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING";

pub(crate) async fn save_cursor<C: GenericClient + Sync>(
    c: &C,
    watcher: &str,
    target: &str,
    cur: &Cursor,
) -> Result<()> {
    write_cursor(c, UPSERT_CURSOR, watcher, target, cur).await?;
    Ok(())
}

/// Runs `sql` ([`UPSERT_CURSOR`] or [`INSERT_CURSOR_IF_ABSENT`]) on `cur`: answers the rows written.
async fn write_cursor<C: GenericClient + Sync>(
    c: &C,
    sql: &str,
    watcher: &str,
    target: &str,
    cur: &Cursor,
) -> Result<u64> {
    let (l, n, m) = (i(cur.last_seen), i(cur.notified), i(cur.material));
    execute(
        c,
        sql,
        &[&watcher, &target, &l, &n, &m, &cur.provenance.as_str(), &cur.store_path, &cur.updated_at],
    )
    .await
}

/// Whether any cursor is on `$1`.
pub(crate) const IS_WATCHED: &str =
    "SELECT 1 FROM session_watch_cursors WHERE target_session_key = $1 LIMIT 1";

pub(crate) async fn is_watched<C: GenericClient + Sync>(c: &C, target: &str) -> Result<bool> {
    Ok(query_opt(c, IS_WATCHED, &[&target]).await?.is_some())
}

/// Every cursor on the targets `$1` (an array), locked, by target then watcher (the lock order every
/// writer uses): its target, its watcher, the cursor, and last, `with_hosts`, the gateway hosting its
/// watcher (its first hosted agent's; NULL when none, and always NULL without `with_hosts`).
pub(crate) fn lock_cursors_sql(with_hosts: bool) -> String {
    let host = if with_hosts {
        "(SELECT s.host_id FROM sessions s WHERE s.session_key = c.watcher_session_key \
           AND s.host_id IS NOT NULL ORDER BY s.agent_id LIMIT 1)"
    } else {
        "NULL::text"
    };
    format!(
        "SELECT c.target_session_key, c.watcher_session_key, {EDGE_CURSOR_COLUMNS}, {host} \
         FROM session_watch_cursors c WHERE c.target_session_key = ANY($1) \
         ORDER BY c.target_session_key COLLATE \"C\", c.watcher_session_key COLLATE \"C\" FOR UPDATE OF c"
    )
}

/// A locked cursor: its target, its watcher and itself, and the gateway hosting the watcher if known.
pub(crate) type HostedCursor = (String, (String, Cursor), Option<String>);

/// The rows of [`lock_cursors_sql`].
pub(crate) fn hosted_cursors_from_rows(rows: &[Row]) -> Result<Vec<HostedCursor>> {
    rows.iter().map(|r| Ok((r.try_get(0)?, (r.try_get(1)?, cursor_from_row(r, 2)?), r.try_get(8)?))).collect()
}

/// Every cursor on `target`, locked, in watcher order: one round trip.
pub(crate) async fn lock_cursors_on<C: GenericClient + Sync>(
    c: &C,
    target: &str,
) -> Result<Vec<(String, Cursor)>> {
    let rows = query(c, &lock_cursors_sql(false), &[&vec![target]]).await?;
    Ok(hosted_cursors_from_rows(&rows)?.into_iter().map(|(_, cursor, _)| cursor).collect())
}

/// Moves the positions of existing cursors on `$1`: watchers `$2`, `L`, `N`, `M` and `updated_at` in
/// parallel arrays.
pub(crate) const SAVE_POSITIONS: &str = "UPDATE session_watch_cursors AS c SET last_seen_sequence = v.l, \
     notified_sequence = v.n, material_sequence = v.m, updated_at = v.u \
     FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[]) AS v(w, l, n, m, u) \
     WHERE c.target_session_key = $1 AND c.watcher_session_key = v.w";

/// Writes the positions of many existing cursors on `target` in one statement.
pub(crate) async fn save_positions<C: GenericClient + Sync>(
    c: &C,
    target: &str,
    cursors: &[(String, Cursor)],
) -> Result<()> {
    if cursors.is_empty() {
        return Ok(());
    }
    let watchers: Vec<&str> = cursors.iter().map(|(w, _)| w.as_str()).collect();
    let last_seen: Vec<i64> = cursors.iter().map(|(_, c)| i(c.last_seen)).collect();
    let notified: Vec<i64> = cursors.iter().map(|(_, c)| i(c.notified)).collect();
    let material: Vec<i64> = cursors.iter().map(|(_, c)| i(c.material)).collect();
    let updated: Vec<i64> = cursors.iter().map(|(_, c)| c.updated_at).collect();
    execute(c, SAVE_POSITIONS, &[&target, &watchers, &last_seen, &notified, &material, &updated]).await?;
    Ok(())
}

/// Pending cursors (`M > L`) of existing watchers (hosted by `host` when given; only `watcher` when
/// given), by watcher then target, as stored: [`sessionwatch_core::policy`] decides which count.
/// `for_update` locks them.
pub(crate) async fn pending_cursors<C: GenericClient + Sync>(
    c: &C,
    host: Option<&str>,
    watcher: Option<&str>,
    for_update: bool,
) -> Result<Vec<(String, String, Cursor)>> {
    // One statement per filter present, not `$n IS NULL OR …`: PostgreSQL plans such a statement afresh
    // at every execution (a generic plan cannot use the filter), which was half of a reconcile's time
    // on the server (`bind` 0.12 ms of the cross-gateway notice's read, `log_min_duration_statement`).
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = Vec::with_capacity(2);
    let watcher_filter = match &watcher {
        Some(w) => {
            params.push(w);
            format!(" AND watcher_session_key = ${}", params.len())
        }
        None => String::new(),
    };
    let host_filter = match &host {
        Some(h) => {
            params.push(h);
            format!(" AND s.host_id = ${}", params.len())
        }
        None => String::new(),
    };
    let lock = if for_update { " FOR UPDATE OF c" } else { "" };
    query(
        c,
        &format!(
            "SELECT watcher_session_key, target_session_key, {CURSOR_COLUMNS} FROM session_watch_cursors c \
             WHERE material_sequence > last_seen_sequence{watcher_filter} \
             AND EXISTS (SELECT 1 FROM sessions s WHERE s.session_key = c.watcher_session_key{host_filter}) \
             ORDER BY watcher_session_key COLLATE \"C\", target_session_key COLLATE \"C\"{lock}"
        ),
        &params,
    )
    .await?
    .iter()
    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, cursor_from_row(r, 2)?)))
    .collect()
}

impl PostgresStore {
    pub(crate) async fn register_watch_pg(&self, req: &WatchRequest, now: Millis) -> Result<RegisterOutcome> {
        let (watcher, target) = (&req.watcher, &req.target);
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // Lock order, as in appends: the target's head row, then the cursor row.
        let head = super::log::head_for_share(&tx, target.as_str(), target.agent_id()).await?.head;
        let mut existing = load_cursor(&tx, watcher.as_str(), target.as_str(), true).await?;
        if existing.is_none() {
            let decision = req.decide(None, head, now);
            let RegisterDecision::Seed(seed) = &decision else {
                tx.rollback().await?;
                return Ok(RegisterOutcome { registered: false, decision });
            };
            // No row to lock yet: insert only if still absent, so a concurrent registration from another
            // gateway is never overwritten (the loser sees the winner's cursor below).
            let inserted =
                write_cursor(&tx, INSERT_CURSOR_IF_ABSENT, watcher.as_str(), target.as_str(), seed).await?;
            if inserted == 1 {
                tx.commit().await?;
                return Ok(RegisterOutcome { registered: true, decision });
            }
            existing = load_cursor(&tx, watcher.as_str(), target.as_str(), true).await?;
        }
        let decision = req.decide(existing.as_ref(), head, now);
        match &decision {
            RegisterDecision::Refused(_) | RegisterDecision::Keep => {}
            RegisterDecision::UpgradeToExplicit => {
                execute(
                    &tx,
                    "UPDATE session_watch_cursors SET provenance = 'explicit', updated_at = $3 \
                     WHERE watcher_session_key = $1 AND target_session_key = $2",
                    &[&watcher.as_str(), &target.as_str(), &now],
                )
                .await?;
            }
            RegisterDecision::Seed(c) => save_cursor(&tx, watcher.as_str(), target.as_str(), c).await?,
        }
        tx.commit().await?;
        Ok(RegisterOutcome { registered: !matches!(decision, RegisterDecision::Refused(_)), decision })
    }

    pub(crate) async fn unwatch_pg(&self, watcher: &str, target: &str) -> Result<bool> {
        self.changed(
            "DELETE FROM session_watch_cursors WHERE watcher_session_key = $1 AND target_session_key = $2",
            &[&watcher, &target],
        )
        .await
    }

    pub(crate) async fn acknowledge_pg(
        &self,
        watcher: &AgentSessionKey,
        targets: Vec<AgentSessionKey>,
        store: &str,
        now: Millis,
    ) -> Result<Acknowledged> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // Lock the cursors in (watcher, target) order, like appends; then process in the caller's order.
        let names: Vec<&str> = targets.iter().map(AgentSessionKey::as_str).collect();
        query(
            &tx,
            "SELECT 1 FROM session_watch_cursors WHERE watcher_session_key = $1 AND target_session_key = ANY($2) \
             ORDER BY target_session_key COLLATE \"C\" FOR UPDATE",
            &[&watcher.as_str(), &names],
        )
        .await?;
        // The row locks make a claim exclusive: a gateway draining the same notice concurrently waits,
        // then finds it settled and delivers nothing.
        let mut rows = Vec::with_capacity(targets.len());
        for target in targets {
            let cursor = match load_cursor(&tx, watcher.as_str(), target.as_str(), true).await? {
                Some(c) => Some(settle(&tx, watcher.as_str(), target.as_str(), c).await?),
                None => None,
            };
            rows.push((target, cursor));
        }
        let (writes, out) = policy::acknowledge(watcher, rows, store, now);
        for (target, cursor) in &writes {
            save_cursor(&tx, watcher.as_str(), target.as_str(), cursor).await?;
        }
        tx.commit().await?;
        Ok(out)
    }

    pub(crate) async fn sweep_pg(&self, store: &str, host: Option<&str>, now: Millis) -> Result<Vec<Notice>> {
        let mut client = self.client().await?;
        if let Some(host) = host {
            // Pending watchers no gateway hosts yet: claimed here (in its own transaction: session rows
            // are locked after cursor rows elsewhere), so exactly one gateway recovers them.
            execute(
                &client,
                "UPDATE sessions SET host_id = $1 WHERE host_id IS NULL AND EXISTS (SELECT 1 FROM \
                 session_watch_cursors c WHERE c.watcher_session_key = sessions.session_key \
                 AND c.material_sequence > c.last_seen_sequence)",
                &[&host],
            )
            .await?;
        }
        let tx = client.transaction().await?;
        // A handful of round trips however many cursors: lock, settle, write back at once.
        let mut pending = pending_cursors(&tx, host, None, true).await?;
        settle_many(&tx, &mut pending).await?;
        let (writes, notices) = policy::sweep(pending, store, now);
        save_many(&tx, &writes).await?;
        tx.commit().await?;
        Ok(notices)
    }

    pub(crate) async fn cursors_of_watcher_pg(&self, watcher: &str) -> Result<Vec<(String, Cursor)>> {
        let client = self.client().await?;
        let rows = query(
            &client,
            &format!(
                "SELECT target_session_key, {CURSOR_COLUMNS} FROM session_watch_cursors \
                 WHERE watcher_session_key = $1 ORDER BY target_session_key COLLATE \"C\""
            ),
            &[&watcher],
        )
        .await?
        .iter()
        .map(|r| Ok((r.get::<_, String>(0), cursor_from_row(r, 1)?)))
        .collect::<Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(rows.len());
        for (target, cursor) in rows {
            let cursor = settle(&client, watcher, &target, cursor).await?;
            out.push((target, cursor));
        }
        Ok(out)
    }

    pub(crate) async fn watch_edges_pg(&self, keys: &[String], limit: u32) -> Result<Vec<WatchEdge>> {
        let client = self.client().await?;
        let edges = query(
            &client,
            &format!(
                "SELECT c.watcher_session_key, c.target_session_key, {EDGE_CURSOR_COLUMNS}, \
                 EXISTS (SELECT 1 FROM sessions s WHERE s.session_key = c.target_session_key \
                         AND s.spawned_by = c.watcher_session_key) \
                 FROM session_watch_cursors c \
                 WHERE c.watcher_session_key = ANY($1) OR c.target_session_key = ANY($1) \
                 ORDER BY c.watcher_session_key COLLATE \"C\", c.target_session_key COLLATE \"C\" LIMIT $2"
            ),
            &[&keys, &(limit as i64)],
        )
        .await?
        .iter()
        .map(|r| {
            Ok(WatchEdge {
                watcher: r.get(0),
                target: r.get(1),
                cursor: cursor_from_row(r, 2)?,
                spawned: r.get(8),
            })
        })
        .collect::<Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(edges.len());
        for e in edges {
            let cursor = settle(&client, &e.watcher, &e.target, e.cursor.clone()).await?;
            out.push(WatchEdge { cursor, ..e });
        }
        Ok(out)
    }

    pub(crate) async fn clear_watcher_pg(&self, watcher: &str) -> Result<Vec<String>> {
        let client = self.client().await?;
        let mut targets: Vec<String> = query(
            &client,
            "DELETE FROM session_watch_cursors WHERE watcher_session_key = $1 RETURNING target_session_key",
            &[&watcher],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
        // In key order, as SQLite answers (it deletes along the primary key).
        targets.sort();
        Ok(targets)
    }

    pub(crate) async fn delete_session_state_pg(&self, key: &str, agent: &str) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // The head row first (the lock appends take), then the rest.
        execute(
            &tx,
            "DELETE FROM session_state_heads WHERE session_key = $1 AND agent_id = $2",
            &[&key, &agent],
        )
        .await?;
        execute(
            &tx,
            "DELETE FROM session_state_events WHERE session_key = $1 AND agent_id = $2",
            &[&key, &agent],
        )
        .await?;
        execute(
            &tx,
            "DELETE FROM session_watch_cursors WHERE watcher_session_key = $1 OR target_session_key = $1",
            &[&key],
        )
        .await?;
        for table in
            ["sessions", "session_messages", "session_inbox", "session_runs", "session_upstream_links"]
        {
            execute(
                &tx,
                &format!("DELETE FROM {table} WHERE session_key = $1 AND agent_id = $2"),
                &[&key, &agent],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
