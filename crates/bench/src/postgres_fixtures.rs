//! Big PostgreSQL fixtures fast, the bench's schemas, and the bare-PostgreSQL baselines.
//!
//! Every bench runs in a fresh schema of its own ([`unique_schema_name`], dropped with [`drop_schema`]);
//! a store created on it ([`PostgresStore::connect`](sessionwatch_store::PostgresStore::connect))
//! migrates it. The loaders and baselines then use bare connections of their own to that schema
//! ([`connect`]). Fills keep the store's invariants exactly like the SQLite loader's: sequences continue
//! from the head row and stay contiguous, heads end at the last sequence.

use futures::future::try_join_all;
use sessionwatch_core::AgentSessionKey;
use sessionwatch_core::Millis;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio_postgres::{AsyncMessage, Client};

pub type Result<T> = std::result::Result<T, String>;

fn pg(e: tokio_postgres::Error) -> String {
    format!("postgres: {e}")
}

fn i(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub use sessionwatch_store::postgres::{drop_schema, unique_schema_name};

/// A bare connection to the database at `url`, its search path `schema` when given; its driver runs on
/// a task of its own. Notifications are dropped. Encrypted as the store's own connections are (the URL's
/// `sslmode`; `prefer` by default, so TLS whenever the server offers it, loopback included): a baseline
/// in plain text beside a store on TLS measured the encryption (`sslmode=disable` on both sides: the
/// sequential ratio 0.88 / 0.94; the store on TLS, the baseline not: 0.77 / 0.84).
pub async fn connect(url: &str, schema: Option<&str>) -> Result<Client> {
    let (client, mut connection) =
        configured(url, schema)?.connect(sessionwatch_store::postgres::tls_connector()).await.map_err(pg)?;
    tokio::spawn(async move {
        while let Some(m) = futures::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if m.is_err() {
                break;
            }
        }
    });
    Ok(client)
}

fn configured(url: &str, schema: Option<&str>) -> Result<tokio_postgres::Config> {
    let mut config = url.parse::<tokio_postgres::Config>().map_err(pg)?;
    if let Some(schema) = schema {
        config.options(format!("-c search_path={schema}"));
    }
    Ok(config)
}

/// Appends `per_session` human-message rows to each of `sessions` (key, agent; no duplicates),
/// round-robin (so row ids interleave the sessions as a live log's would), in one transaction,
/// continuing each session's sequence from its head.
pub async fn fill_events(
    client: &mut Client,
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
    let tx = client.transaction().await.map_err(pg)?;
    // Move (and lock) every head first: appends to these sessions wait for this transaction.
    let rows = tx
        .query(
            "INSERT INTO session_state_heads (session_key, agent_id, head, floor, updated_at) \
             SELECT k, a, $3, 0, $4 FROM unnest($1::text[], $2::text[]) AS s(k, a) \
             ON CONFLICT (session_key, agent_id) DO UPDATE \
             SET head = session_state_heads.head + EXCLUDED.head, updated_at = EXCLUDED.updated_at \
             RETURNING session_key, agent_id, head",
            &[&keys, &agents, &n, &occurred_at],
        )
        .await
        .map_err(pg)?;
    let new_heads: HashMap<(String, String), i64> =
        rows.iter().map(|r| ((r.get(0), r.get(1)), r.get(2))).collect();
    let mut bases = Vec::with_capacity(sessions.len());
    for s in sessions {
        let head = new_heads.get(s).ok_or_else(|| format!("fill: no head for {s:?}"))?;
        bases.push(head - n);
    }
    tx.execute(
        "INSERT INTO session_state_events (session_key, agent_id, sequence, session_id, kind, actor_type, \
         actor_id, run_id, occurred_at, summary, payload_json, dedupe_key) \
         SELECT s.k, s.a, s.b + g.n, NULL, 'human_direct_message', 'human', NULL, NULL, $5, \
         'human message via bench', '{\"channel\":\"bench\"}', NULL \
         FROM generate_series(1::bigint, $4::bigint) AS g(n) \
         CROSS JOIN unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS s(k, a, b, ord) \
         ORDER BY g.n, s.ord",
        &[&keys, &agents, &bases, &n, &occurred_at],
    )
    .await
    .map_err(pg)?;
    tx.commit().await.map_err(pg)
}

/// Writes explicit cursors `(watcher, target, L, N, M)` bound to `store_path` (replacing existing
/// ones), and a session row for every watcher, in one transaction.
pub async fn fill_cursors(
    client: &mut Client,
    cursors: &[(String, String, u64, u64, u64)],
    store_path: &str,
    now: Millis,
) -> Result<()> {
    let watchers: Vec<&str> = cursors.iter().map(|c| c.0.as_str()).collect();
    let targets: Vec<&str> = cursors.iter().map(|c| c.1.as_str()).collect();
    let seen: Vec<i64> = cursors.iter().map(|c| i(c.2)).collect();
    let notified: Vec<i64> = cursors.iter().map(|c| i(c.3)).collect();
    let material: Vec<i64> = cursors.iter().map(|c| i(c.4)).collect();
    let tx = client.transaction().await.map_err(pg)?;
    tx.execute(
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
    .await
    .map_err(pg)?;
    tx.execute(
        "INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at, updated_at) \
         SELECT DISTINCT w, 'bench', w, 'other', $2::bigint, $2::bigint FROM unnest($1::text[]) AS s(w) \
         ON CONFLICT DO NOTHING",
        &[&watchers, &now],
    )
    .await
    .map_err(pg)?;
    tx.commit().await.map_err(pg)
}

/// The row an appended human message writes (the same constants as the SQLite loader's).
const INSERT_EVENT: &str = "INSERT INTO session_state_events (session_key, agent_id, sequence, session_id, kind, \
     actor_type, actor_id, run_id, occurred_at, summary, payload_json, dedupe_key) \
     VALUES ($1, $2, $3, NULL, 'human_direct_message', 'human', NULL, NULL, $4, 'human message via bench', \
     '{\"channel\":\"bench\"}', NULL)";

/// Moves a session's head row to the row just inserted, as an append does: (key, agent, head, now).
const MOVE_HEAD: &str = "INSERT INTO session_state_heads (session_key, agent_id, head, floor, updated_at) \
     VALUES ($1, $2, $3, 0, $4) ON CONFLICT (session_key, agent_id) DO UPDATE \
     SET head = EXCLUDED.head, updated_at = EXCLUDED.updated_at";

const AT: i64 = 1_750_000_000_000;

/// The bare-PostgreSQL commit baseline on a store's schema: on one connection, `rows` × (`BEGIN`; one
/// `INSERT` of the same row an appended human message writes; `COMMIT`) with a prepared statement, the
/// bare log's sequence continuing after `first` (so blocks of a run can share one schema). Answers the
/// elapsed time.
pub async fn raw_commit_loop(client: &mut Client, first: u64, rows: u64) -> Result<Duration> {
    let insert = client.prepare(INSERT_EVENT).await.map_err(pg)?;
    let start = Instant::now();
    for n in first..first + rows {
        let tx = client.transaction().await.map_err(pg)?;
        tx.execute(&insert, &[&"agent:main:subagent:raw", &"main", &i(n + 1), &AT]).await.map_err(pg)?;
        tx.commit().await.map_err(pg)?;
    }
    Ok(start.elapsed())
}

/// The bare baseline of 16 writers on PostgreSQL: `writers` connections, each committing `per_tx` rows
/// per transaction (the row an append writes and its head-row update, pipelined), over sessions of its
/// own (`sessions` in all, round-robin), so no two transactions wait for each other's row locks: what
/// concurrent writers could at best do. Blocks continue the sessions' sequences.
pub struct RawBatches {
    writers: Vec<(Client, Vec<(String, i64)>)>,
    per_tx: usize,
}

impl RawBatches {
    pub async fn connect(
        url: &str,
        schema: &str,
        writers: usize,
        sessions: usize,
        per_tx: usize,
    ) -> Result<Self> {
        let mut out = Vec::with_capacity(writers);
        for w in 0..writers {
            let client = connect(url, Some(schema)).await?;
            let own = (w..sessions)
                .step_by(writers)
                .map(|s| (AgentSessionKey::build_subagent("main", &format!("raw-{s}")), 0i64))
                .collect();
            out.push((client, own));
        }
        Ok(RawBatches { writers: out, per_tx })
    }

    /// `rows` rows spread evenly over the writers, concurrently. Answers the elapsed time.
    pub async fn run(&mut self, rows: u64) -> Result<Duration> {
        let writers = self.writers.len() as u64;
        let per_tx = self.per_tx;
        let start = Instant::now();
        try_join_all(self.writers.iter_mut().enumerate().map(|(w, (client, sessions))| async move {
            let per_writer = rows / writers + u64::from((w as u64) < rows % writers);
            let insert = client.prepare(INSERT_EVENT).await.map_err(pg)?;
            let head = client.prepare(MOVE_HEAD).await.map_err(pg)?;
            let (mut done, mut next) = (0u64, 0usize);
            while done < per_writer {
                let tx = client.transaction().await.map_err(pg)?;
                let n = (per_tx as u64).min(per_writer - done) as usize;
                let mut rows = Vec::with_capacity(n);
                let owned = sessions.len();
                for _ in 0..n {
                    let (key, seq) = &mut sessions[next % owned];
                    *seq += 1;
                    rows.push((key.clone(), *seq));
                    next += 1;
                }
                let writes = rows.iter().map(|(key, seq)| {
                    let (tx, insert, head) = (&tx, &insert, &head);
                    async move {
                        tx.execute(insert, &[key, &"main", seq, &AT]).await?;
                        tx.execute(head, &[key, &"main", seq, &AT]).await
                    }
                });
                try_join_all(writes).await.map_err(pg)?;
                tx.commit().await.map_err(pg)?;
                done += n as u64;
            }
            Ok::<(), String>(())
        }))
        .await?;
        Ok(start.elapsed())
    }
}

/// The one-row select a recent page cannot skip (the session's durable head row), prepared on a bare
/// connection: `raw_postgres_select_p50_us`.
pub struct RawSelect {
    client: Client,
    statement: tokio_postgres::Statement,
}

impl RawSelect {
    pub async fn connect(url: &str, schema: &str) -> Result<RawSelect> {
        let client = connect(url, Some(schema)).await?;
        let statement = client
            .prepare("SELECT head, floor, updated_at FROM session_state_heads WHERE session_key = $1 AND agent_id = $2")
            .await
            .map_err(pg)?;
        Ok(RawSelect { client, statement })
    }

    /// One round trip; fails if the row is not there.
    pub async fn once(&self, key: &str, agent: &str) -> Result<Duration> {
        let start = Instant::now();
        let row = self.client.query_opt(&self.statement, &[&key, &agent]).await.map_err(pg)?;
        let took = start.elapsed();
        row.map(|_| took).ok_or_else(|| format!("no head row for {key}"))
    }
}

/// A bare `NOTIFY` → `LISTEN` round trip between two connections: `raw_postgres_notify_p99_ms`.
pub struct NotifyProbe {
    sender: Client,
    channel: String,
    heard: tokio::sync::mpsc::UnboundedReceiver<String>,
    _listener: Client,
}

impl NotifyProbe {
    pub async fn connect(url: &str) -> Result<NotifyProbe> {
        let channel = unique_schema_name("swbench_notify");
        let (listener, mut connection) = configured(url, None)?
            .connect(sessionwatch_store::postgres::tls_connector())
            .await
            .map_err(pg)?;
        let (tx, heard) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(m) = futures::future::poll_fn(|cx| connection.poll_message(cx)).await {
                match m {
                    Ok(AsyncMessage::Notification(n)) => {
                        if tx.send(n.payload().to_string()).is_err() {
                            break;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        });
        listener.batch_execute(&format!("LISTEN {channel}")).await.map_err(pg)?;
        let sender = connect(url, None).await?;
        Ok(NotifyProbe { sender, channel, heard, _listener: listener })
    }

    /// One `NOTIFY` (its own transaction) until the listening connection hears it.
    pub async fn once(&mut self, n: u64) -> Result<Duration> {
        let payload = n.to_string();
        let start = Instant::now();
        self.sender.execute("SELECT pg_notify($1, $2)", &[&self.channel, &payload]).await.map_err(pg)?;
        loop {
            match tokio::time::timeout(Duration::from_secs(5), self.heard.recv()).await {
                Ok(Some(p)) if p == payload => return Ok(start.elapsed()),
                Ok(Some(_)) => {}
                Ok(None) => return Err("the listening connection closed".into()),
                Err(_) => return Err("no notification within 5 s".into()),
            }
        }
    }
}
