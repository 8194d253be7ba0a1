//! The PostgreSQL store: several gateways sharing one state database.
//!
//! Same behaviour as the SQLite store (the decision logic comes from `sessionwatch-core`; only SQL
//! differs). Per-session sequences are allocated under a row lock on the session's head row (never a
//! database sequence), so commit order is sequence order and numbers are contiguous; cursor
//! read-modify-writes run under `FOR UPDATE`; pruning runs under a transaction advisory lock (one pruner
//! at a time, the others skip). Cross-gateway push uses LISTEN/NOTIFY as a wake-up only (see
//! [`listen`](PostgresStore::listen)).

mod append;
mod batch;
mod links;
mod listen;
mod log;
mod nodes;
mod prune;
mod runs;
mod schema;
mod sessions;
#[cfg(feature = "testing")]
pub mod testing;
mod tls;
pub use tls::connector as tls_connector;
mod turn;
mod watch;

pub use schema::{SCHEMA_VERSION, drop_schema};

use crate::{
    Acknowledged, AppendOutcome, AppendRequest, FinishRun, FinishRunRequest, GroupCommits, Head, HostSignal,
    InboxItem, LinkUpsert, Links, NewMessage, NewSession, NodeRow, PruneReport, RegisterOutcome, Result,
    RetentionPolicy, RunRow, SessionFilter, SessionRow, SessionStore, SignalLog, StoreError,
    TranscriptMessage, Turn, TurnOutcome, UpstreamLinkRow, WatchEdge, WatchedLinks,
};
use crate::{LinkVersion, SessionActivity, WatchRequest};
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use sessionwatch_core::{AgentSessionKey, ChangesPage, Cursor, Limit, Millis, Notice};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

#[derive(Clone, Debug)]
pub struct PostgresOptions {
    /// The schema holding the tables (created if missing); `None` uses the server's search path.
    /// Lower-case letters, digits and `_`, starting with a letter or `_`.
    pub schema: Option<String>,
    /// Pooled connections.
    pub pool_size: usize,
    pub connect_timeout: Duration,
    /// `application_name` of the pooled connections (the listener adds `-listen:<host>`).
    pub application_name: String,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: None,
            pool_size: 8,
            connect_timeout: Duration::from_secs(10),
            application_name: "sessionwatch".into(),
        }
    }
}

struct Inner {
    pool: Pool,
    /// The configuration of the pooled connections (the listener connects with it too).
    config: tokio_postgres::Config,
    /// The schema the tables live in (`current_schema()` after connecting).
    schema: String,
    identity: String,
    application_name: String,
    /// Recent events of active sessions (`tail.rs`), each page served only while the durable head row
    /// still says what the entry says, so another gateway's writes are never hidden.
    tail: crate::tail::Tail,
    /// Appends waiting for the next group commit (`batch.rs`).
    appends: batch::AppendQueue,
}

/// Cheap to clone: clones share the pool.
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("identity", &self.inner.identity).finish()
    }
}

/// A schema name nobody else uses: `prefix` + pid + time + counter.
pub fn unique_schema_name(prefix: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64 & 0xffff_ffff_ffff);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}_{}_{nanos:x}_{n}", std::process::id())
}

/// Whether `s` is a schema name we accept (a plain lower-case identifier, no quoting needed).
pub fn valid_schema_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && s.len() <= 63
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user@host:port/db`), creating `schema` if given, and applies the
    /// migrations under an advisory lock. A database written by a newer version is refused
    /// ([`StoreError::TooNew`]).
    pub async fn connect(url: &str, schema: Option<&str>) -> Result<PostgresStore> {
        let options = PostgresOptions { schema: schema.map(str::to_string), ..PostgresOptions::default() };
        PostgresStore::connect_with(url, options).await
    }

    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<PostgresStore> {
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|e| StoreError::Config(format!("invalid PostgreSQL URL: {e}")))?;
        if let Some(schema) = &options.schema {
            if !valid_schema_name(schema) {
                return Err(StoreError::Config(format!(
                    "invalid schema name {schema:?}: use lower-case letters, digits and '_'"
                )));
            }
            let opts = match config.get_options() {
                Some(o) if !o.trim().is_empty() => format!("{o} -c search_path={schema}"),
                _ => format!("-c search_path={schema}"),
            };
            config.options(opts);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        config.application_name(&options.application_name);
        let manager = Manager::from_config(
            config.clone(),
            tls::connector(),
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| StoreError::Config(format!("connection pool: {e}")))?;
        let mut client = pool.get().await?;
        schema::migrate(&mut client, options.schema.as_deref()).await?;
        let schema: String = client.query_one("SELECT current_schema()", &[]).await?.get(0);
        drop(client);
        let identity = identity(&config, &schema);
        Ok(PostgresStore {
            inner: Arc::new(Inner {
                pool,
                config,
                schema,
                identity,
                application_name: options.application_name,
                tail: crate::tail::Tail::default(),
                appends: batch::AppendQueue::default(),
            }),
        })
    }

    /// Whether a connection of the pool is encrypted (TLS), as `sslmode` in the URL asked.
    pub async fn connection_encrypted(&self) -> Result<bool> {
        let client = self.client().await?;
        let row = query_opt(&client, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).await?;
        Ok(row.is_some_and(|r| r.get::<_, bool>(0)))
    }

    /// The schema the tables live in.
    pub fn schema(&self) -> &str {
        &self.inner.schema
    }

    /// A credential-free name of this physical store (`postgres://host:port/db#schema`): every gateway
    /// sharing the database gets the same one, so it is the right cursor store binding.
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// The NOTIFY channel of the gateway `host_id` (scoped to this schema; a plain identifier).
    pub fn channel_for_host(&self, host_id: &str) -> String {
        channel_name(&self.inner.schema, host_id)
    }

    /// The `application_name` of `host_id`'s LISTEN connection (tests terminate it to simulate a loss).
    pub fn listener_application_name(&self, host_id: &str) -> String {
        let name = format!("{}-listen:{}:{host_id}", self.inner.application_name, self.inner.schema);
        name.chars().take(63).collect()
    }

    pub(crate) async fn client(&self) -> Result<Object> {
        Ok(self.inner.pool.get().await?)
    }

    /// Runs one statement on a pooled connection, outside any transaction: whether it changed a row.
    pub(crate) async fn changed(&self, sql: &str, params: Params<'_>) -> Result<bool> {
        Ok(execute(&self.client().await?, sql, params).await? > 0)
    }

    /// Every row one query on a pooled connection answers, each read by `read`.
    pub(crate) async fn read_all<T>(
        &self,
        sql: &str,
        params: Params<'_>,
        read: fn(&Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        query(&self.client().await?, sql, params).await?.iter().map(read).collect()
    }
}

fn identity(config: &tokio_postgres::Config, schema: &str) -> String {
    let host = config.get_hosts().first().map_or_else(
        || "localhost".to_string(),
        |h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            #[cfg(unix)]
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        },
    );
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().or(config.get_user()).unwrap_or("postgres");
    format!("postgres://{host}:{port}/{db}#{schema}")
}

/// `sessionwatch_` + 16 hex digits of FNV-1a over schema and host: a valid identifier under 63 bytes
/// that both sides compute alike, whatever characters the host id holds.
fn channel_name(schema: &str, host_id: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in schema.bytes().chain([0u8]).chain(host_id.bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("sessionwatch_{h:016x}")
}

pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

pub(crate) async fn query<C: GenericClient + Sync>(c: &C, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
    let st = c.prepare_cached(sql).await?;
    Ok(c.query(&st, params).await?)
}

pub(crate) async fn query_opt<C: GenericClient + Sync>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Option<Row>> {
    let st = c.prepare_cached(sql).await?;
    Ok(c.query_opt(&st, params).await?)
}

pub(crate) async fn query_one<C: GenericClient + Sync>(c: &C, sql: &str, params: Params<'_>) -> Result<Row> {
    let st = c.prepare_cached(sql).await?;
    Ok(c.query_one(&st, params).await?)
}

pub(crate) async fn execute<C: GenericClient + Sync>(c: &C, sql: &str, params: Params<'_>) -> Result<u64> {
    let st = c.prepare_cached(sql).await?;
    Ok(c.execute(&st, params).await?)
}

/// Sequences and counters are `BIGINT`; negative values never occur.
pub(crate) fn u(v: i64) -> u64 {
    v.max(0) as u64
}

pub(crate) fn i(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

impl SignalLog for PostgresStore {
    async fn append(&self, req: AppendRequest, now: Millis) -> Result<AppendOutcome> {
        if batch::batchable(&req) {
            self.append_batched(req, now).await
        } else {
            self.append_pg(req, now).await
        }
    }

    async fn register_watch(&self, req: WatchRequest, now: Millis) -> Result<RegisterOutcome> {
        self.register_watch_pg(&req, now).await
    }

    async fn unwatch(&self, watcher: String, target: String) -> Result<bool> {
        self.unwatch_pg(&watcher, &target).await
    }

    async fn acknowledge(
        &self,
        watcher: AgentSessionKey,
        targets: Vec<AgentSessionKey>,
        watcher_store: String,
        now: Millis,
    ) -> Result<Acknowledged> {
        self.acknowledge_pg(&watcher, targets, &watcher_store, now).await
    }

    async fn sweep(&self, watcher_store: String, now: Millis) -> Result<Vec<Notice>> {
        self.sweep_pg(&watcher_store, None, now).await
    }

    async fn sweep_for_host(
        &self,
        watcher_store: String,
        host_id: Option<String>,
        now: Millis,
    ) -> Result<Vec<Notice>> {
        self.sweep_pg(&watcher_store, host_id.as_deref(), now).await
    }

    async fn pending_notices_for_host(
        &self,
        watcher_store: String,
        host_id: Option<String>,
        watcher: Option<String>,
    ) -> Result<Vec<Notice>> {
        let client = self.client().await?;
        let pending = watch::pending_cursors(&client, host_id.as_deref(), watcher.as_deref(), false).await?;
        Ok(pending
            .iter()
            .filter_map(|(w, t, c)| sessionwatch_core::policy::pending_notice(w, t, c, &watcher_store))
            .collect())
    }

    fn listen_host(&self, host_id: String) -> Option<tokio::sync::mpsc::Receiver<HostSignal>> {
        Some(self.listen(&host_id))
    }

    async fn changes_since(
        &self,
        session_key: String,
        agent_id: String,
        since: u64,
        limit: Limit,
    ) -> Result<ChangesPage> {
        self.changes_since_pg(&session_key, &agent_id, since, limit).await
    }

    async fn head(&self, session_key: String, agent_id: String) -> Result<Head> {
        let client = self.client().await?;
        log::head(&client, &session_key, &agent_id).await
    }

    fn group_commits(&self) -> GroupCommits {
        self.inner.appends.group_commits()
    }

    async fn state_versions(
        &self,
        sessions: Vec<(String, String)>,
    ) -> Result<HashMap<(String, String), u64>> {
        self.state_versions_pg(sessions).await
    }

    async fn prune(&self, policy: RetentionPolicy, now: Millis) -> Result<PruneReport> {
        let report = self.prune_pg(policy, now).await;
        self.inner.tail.clear();
        report
    }

    async fn cursor(&self, watcher: String, target: String) -> Result<Option<Cursor>> {
        let client = self.client().await?;
        match watch::load_cursor(&client, &watcher, &target, false).await? {
            Some(c) => Ok(Some(watch::settle(&client, &watcher, &target, c).await?)),
            None => Ok(None),
        }
    }

    async fn cursors_of_watcher(&self, watcher: String) -> Result<Vec<(String, Cursor)>> {
        self.cursors_of_watcher_pg(&watcher).await
    }

    async fn watch_edges(&self, keys: Vec<String>, limit: u32) -> Result<Vec<WatchEdge>> {
        self.watch_edges_pg(&keys, limit).await
    }

    async fn clear_watcher(&self, watcher: String) -> Result<Vec<String>> {
        self.clear_watcher_pg(&watcher).await
    }

    async fn delete_session_state(&self, session_key: String, agent_id: String) -> Result<()> {
        let out = self.delete_session_state_pg(&session_key, &agent_id).await;
        self.inner.tail.forget(&session_key, &agent_id);
        out
    }
}

impl SessionStore for PostgresStore {
    async fn ensure_session(&self, new: NewSession, now: Millis) -> Result<(SessionRow, bool)> {
        self.ensure_session_pg(&new, now).await
    }

    async fn get_session(&self, key: String, agent: String) -> Result<Option<SessionRow>> {
        let client = self.client().await?;
        sessions::load_session(&client, &key, &agent).await
    }

    async fn list_sessions(&self, filter: SessionFilter) -> Result<Vec<SessionRow>> {
        self.list_sessions_pg(&filter).await
    }

    async fn update_goal(
        &self,
        key: String,
        agent: String,
        objective: Option<String>,
        status: Option<String>,
        now: Millis,
    ) -> Result<Option<SessionRow>> {
        self.update_goal_pg(&key, &agent, objective.as_deref(), status.as_deref(), now).await
    }

    async fn reset_session(&self, key: String, agent: String, new_id: String, now: Millis) -> Result<bool> {
        let out = self.reset_session_pg(&key, &agent, &new_id, now).await;
        self.inner.tail.forget(&key, &agent);
        out
    }

    async fn set_native_state(
        &self,
        key: String,
        agent: String,
        cwd: Option<String>,
        state: Option<String>,
    ) -> Result<bool> {
        self.set_native_state_pg(&key, &agent, cwd.as_deref(), state.as_deref()).await
    }

    async fn touch_session(
        &self,
        key: String,
        agent: String,
        host: Option<String>,
        now: Millis,
    ) -> Result<()> {
        sessions::touch_session(&self.client().await?, &key, &agent, host.as_deref(), now).await
    }

    async fn append_message(
        &self,
        key: String,
        agent: String,
        message: NewMessage,
        now: Millis,
    ) -> Result<i64> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let id = sessions::append_message(&tx, &key, &agent, &message, now).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn messages(&self, key: String, agent: String, limit: u32) -> Result<Vec<TranscriptMessage>> {
        self.messages_pg(&key, &agent, limit).await
    }

    async fn push_inbox(&self, key: String, agent: String, item: InboxItem) -> Result<i64> {
        sessions::push_inbox(&self.client().await?, &key, &agent, &item).await
    }

    async fn pending_inbox(&self, key: String, agent: String) -> Result<Vec<InboxItem>> {
        self.pending_inbox_pg(&key, &agent).await
    }

    async fn session_activity(
        &self,
        sessions: Vec<(String, String)>,
    ) -> Result<HashMap<(String, String), SessionActivity>> {
        self.session_activity_pg(&sessions).await
    }

    async fn take_inbox(&self, key: String, agent: String) -> Result<Vec<InboxItem>> {
        self.take_inbox_pg(&key, &agent).await
    }

    async fn create_run(&self, run: RunRow) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        runs::create_run(&tx, &run).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_run(&self, run_id: String) -> Result<Option<RunRow>> {
        let client = self.client().await?;
        runs::load_run(&client, &run_id, false).await
    }

    async fn finish_run(&self, request: FinishRunRequest, now: Millis) -> Result<FinishRun> {
        self.finish_run_pg(&request, now).await
    }

    async fn record_turn(&self, turn: Turn, now: Millis) -> Result<TurnOutcome> {
        self.record_turn_pg(turn, now).await
    }
}

impl Links for PostgresStore {
    async fn upsert_link(&self, link: UpstreamLinkRow) -> Result<LinkUpsert> {
        self.upsert_link_pg(&link).await
    }

    async fn get_link(&self, key: String, agent: String) -> Result<Option<UpstreamLinkRow>> {
        let client = self.client().await?;
        links::load_link(&client, &key, &agent, false).await
    }

    async fn watched_links(&self) -> Result<Vec<UpstreamLinkRow>> {
        self.watched_links_pg().await
    }

    async fn watched_links_since(&self, _known: Option<i64>) -> Result<WatchedLinks> {
        // No version here: several gateways write links and cursors, and an exact version would be a row
        // that every such transaction locks until it commits (serializing them across gateways, a lock
        // outside the store's lock order). Every call reads the links.
        Ok(WatchedLinks::Read { links: self.watched_links_pg().await?, version: None })
    }

    async fn links_of_host(&self, host_id: String) -> Result<Vec<UpstreamLinkRow>> {
        self.links_of_host_pg(&host_id).await
    }

    async fn delete_link(&self, key: String, agent: String) -> Result<bool> {
        self.delete_link_pg(&key, &agent).await
    }

    async fn advance_link_marker(&self, link: LinkVersion, marker: String, now: Millis) -> Result<bool> {
        self.advance_link_marker_pg(&link, &marker, now).await
    }

    async fn set_link_missing_streak(&self, link: LinkVersion, streak: u32) -> Result<bool> {
        self.set_link_missing_streak_pg(&link, streak).await
    }

    async fn create_node(&self, name: String, token_sha256: String, now: Millis) -> Result<bool> {
        self.create_node_pg(&name, &token_sha256, now).await
    }

    async fn revoke_node(&self, name: String) -> Result<bool> {
        self.revoke_node_pg(&name).await
    }

    async fn touch_node(&self, name: String, now: Millis) -> Result<bool> {
        self.touch_node_pg(&name, now).await
    }

    async fn node_by_token(&self, token_sha256: String) -> Result<Option<NodeRow>> {
        self.node_by_token_pg(&token_sha256).await
    }

    async fn list_nodes(&self) -> Result<Vec<NodeRow>> {
        self.list_nodes_pg().await
    }
}
