//! Helpers for benchmarks (and tests) that need big fixtures fast, plus the bare-PostgreSQL baseline.
//!
//! The fill helpers write with a few batched statements in one transaction while keeping the store's
//! invariants (contiguous per-session sequences continuing from the head, heads moved to the last
//! sequence), exactly like the SQLite ones: a benchmark builds a 50,000-row log or 100,000 cursors in a
//! moment, and the operations being measured go through the real code paths.

use super::{PostgresStore, execute, i, log, query, query_opt};
use crate::{Result, StoreError};
use sessionwatch_core::Millis;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The row an appended human message writes (the same constants as the SQLite bench helpers).
const INSERT_EVENT: &str = "INSERT INTO session_state_events (session_key, agent_id, sequence, session_id, kind, \
     actor_type, actor_id, run_id, occurred_at, summary, payload_json, dedupe_key) \
     VALUES ($1, $2, $3, NULL, 'human_direct_message', 'human', NULL, NULL, $4, 'human message via bench', \
     '{\"channel\":\"bench\"}', NULL)";

impl PostgresStore {
    /// Appends `per_session` human-message rows to each of `sessions` (key, agent; no duplicates),
    /// round-robin (so row ids interleave the sessions as a live log would), in one transaction,
    /// continuing each session's sequence from its head.
    pub async fn bench_fill_events(
        &self,
        sessions: &[(String, String)],
        per_session: u64,
        occurred_at: Millis,
    ) -> Result<()> {
        if sessions.is_empty() || per_session == 0 {
            return Ok(());
        }
        let keys: Vec<&str> = sessions.iter().map(|(k, _)| k.as_str()).collect();
        let agents: Vec<&str> = sessions.iter().map(|(_, a)| a.as_str()).collect();
        let n = i(per_session);
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // Move (and lock) every head first: appends to these sessions wait for this transaction.
        let rows = query(
            &tx,
            "INSERT INTO session_state_heads (session_key, agent_id, head, floor, updated_at) \
             SELECT k, a, $3, 0, $4 FROM unnest($1::text[], $2::text[]) AS s(k, a) \
             ON CONFLICT (session_key, agent_id) DO UPDATE \
             SET head = session_state_heads.head + EXCLUDED.head, updated_at = EXCLUDED.updated_at \
             RETURNING session_key, agent_id, head",
            &[&keys, &agents, &n, &occurred_at],
        )
        .await?;
        let new_heads: HashMap<(String, String), i64> =
            rows.iter().map(|r| ((r.get(0), r.get(1)), r.get(2))).collect();
        let mut bases = Vec::with_capacity(sessions.len());
        for s in sessions {
            let head = new_heads
                .get(s)
                .ok_or_else(|| StoreError::InvalidData(format!("bench fill: no head for {s:?}")))?;
            bases.push(head - n);
        }
        execute(
            &tx,
            "INSERT INTO session_state_events (session_key, agent_id, sequence, session_id, kind, actor_type, \
             actor_id, run_id, occurred_at, summary, payload_json, dedupe_key) \
             SELECT s.k, s.a, s.b + g.n, NULL, 'human_direct_message', 'human', NULL, NULL, $5, \
             'human message via bench', '{\"channel\":\"bench\"}', NULL \
             FROM generate_series(1::bigint, $4::bigint) AS g(n) \
             CROSS JOIN unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS s(k, a, b, ord) \
             ORDER BY g.n, s.ord",
            &[&keys, &agents, &bases, &n, &occurred_at],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Writes explicit cursors `(watcher, target, L, N, M)` bound to `store_path` (replacing existing
    /// ones), and a session row for every watcher, in one transaction.
    pub async fn bench_fill_cursors(
        &self,
        cursors: &[(String, String, u64, u64, u64)],
        store_path: &str,
        now: Millis,
    ) -> Result<()> {
        let watchers: Vec<&str> = cursors.iter().map(|c| c.0.as_str()).collect();
        let targets: Vec<&str> = cursors.iter().map(|c| c.1.as_str()).collect();
        let seen: Vec<i64> = cursors.iter().map(|c| i(c.2)).collect();
        let notified: Vec<i64> = cursors.iter().map(|c| i(c.3)).collect();
        let material: Vec<i64> = cursors.iter().map(|c| i(c.4)).collect();
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        execute(
            &tx,
            "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, \
             notified_sequence, material_sequence, provenance, watcher_store_path, updated_at) \
             SELECT w, t, l, n, m, 'explicit', $6, $7 \
             FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS c(w, t, l, n, m) \
             ON CONFLICT (watcher_session_key, target_session_key) DO UPDATE SET \
             last_seen_sequence = EXCLUDED.last_seen_sequence, notified_sequence = EXCLUDED.notified_sequence, \
             material_sequence = EXCLUDED.material_sequence, provenance = EXCLUDED.provenance, \
             watcher_store_path = EXCLUDED.watcher_store_path, updated_at = EXCLUDED.updated_at",
            &[&watchers, &targets, &seen, &notified, &material, &store_path, &now],
        )
        .await?;
        execute(
            &tx,
            "INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at, updated_at) \
             SELECT DISTINCT w, 'bench', w, 'other', $2::bigint, $2::bigint FROM unnest($1::text[]) AS s(w) \
             ON CONFLICT DO NOTHING",
            &[&watchers, &now],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The bare-PostgreSQL baseline on this store's schema: on one pooled connection, `rows` ×
    /// (`BEGIN`; one `INSERT` of the same row an appended human message writes; `COMMIT`) with a
    /// prepared statement, the bare log's sequence continuing after `first` (so blocks of a run can share
    /// one schema). Answers the elapsed time.
    pub async fn bench_raw_commit_loop(&self, first: u64, rows: u64) -> Result<Duration> {
        let mut client = self.client().await?;
        let insert = client.prepare_cached(INSERT_EVENT).await?;
        let start = Instant::now();
        for n in first..first + rows {
            let tx = client.transaction().await?;
            tx.execute(&insert, &[&"agent:main:subagent:raw", &"main", &i(n + 1), &1_750_000_000_000i64])
                .await?;
            tx.commit().await?;
        }
        Ok(start.elapsed())
    }

    /// The bare read a recent `changesSince` page from the tail pays: the durable head row of `key`
    /// through the pool. Answers its latency.
    pub async fn bench_head_row_read(&self, key: &str, agent: &str) -> Result<Duration> {
        let start = Instant::now();
        let client = self.client().await?;
        query_opt(&client, log::DURABLE_HEAD_ROW, &[&key, &agent])
            .await?
            .ok_or_else(|| StoreError::InvalidData(format!("bench: no head row for {key}")))?;
        drop(client);
        Ok(start.elapsed())
    }
}
