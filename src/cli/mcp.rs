//! `sessionwatch mcp`: an MCP server on stdio, for one caller session (`--session`) or, without it, for
//! the Claude Code / Codex session that started it (the same session its hooks act for).
//!
//! It talks to a running gateway (`--url`, `SESSIONWATCH_URL`, or the one found by its runtime file, the
//! config or the default URL when it answers there) or, when no gateway runs, to a gateway embedded in
//! this process on the data dir's database, holding that database's lock like `serve` (never a second
//! writer). stdout carries the protocol; logs go to stderr only.

use anyhow::Context;
use clap::Args;
use sessionwatch_core::SystemClock;
use sessionwatch_server::Gateway;
use sessionwatch_server::discovery::{ClientContext, RuntimeFile, UrlSource};
use sessionwatch_server::mcp::{self, EmbeddedBackend, RemoteBackend};
use sessionwatch_store::sqlite::GatewayLock;
use sessionwatch_store::{SqliteOptions, SqliteStore, StoreError};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct McpArgs {
    /// The caller session: tools run as this session and its notices are delivered in tool results.
    /// Default: the Claude Code or Codex session that runs this server (`agent:<agent>:claude|codex:<id>`,
    /// from the CLI's tool-call metadata and environment), else `main`.
    #[arg(long, env = "SESSIONWATCH_SESSION")]
    pub session: Option<String>,
    /// The agent that owns the native sessions when --session is not given (default main).
    #[arg(long, default_value = "main")]
    pub agent_id: String,
    /// Gateway URL. Without it (or SESSIONWATCH_URL), the running gateway found by its runtime file in
    /// the data dir, the config's listen address or the default URL is used if it answers; else an
    /// embedded gateway on the data dir's database, unless a gateway holds that database.
    #[arg(long)]
    pub url: Option<String>,
    /// Bearer token (default: read from the data dir).
    #[arg(long, env = "SESSIONWATCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Data dir (the token; the embedded gateway's database).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// TOML config file (its listen address and data dir find the gateway; the embedded gateway's config).
    #[arg(long, env = "SESSIONWATCH_CONFIG")]
    pub config: Option<PathBuf>,
    /// Embedded gateway only: the SQLite database (default: the data dir's).
    #[arg(long)]
    pub database: Option<String>,
    /// Never start an embedded gateway: fail if no gateway answers.
    #[arg(long)]
    pub remote_only: bool,
    /// Always use an embedded gateway on the database (ignores --url and a gateway at the default URL).
    #[arg(long, conflicts_with = "remote_only")]
    pub embedded: bool,
}

pub async fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    super::init_tracing("warn");
    let caller = match &args.session {
        Some(s) if s.trim().is_empty() => anyhow::bail!("--session must not be empty"),
        Some(s) => mcp::CallerRule::Fixed(s.trim().into()),
        None => {
            let agent = args.agent_id.trim().to_ascii_lowercase();
            if !sessionwatch_core::is_valid_agent_id(&agent) {
                anyhow::bail!("--agent-id {agent:?} is not a valid agent id");
            }
            mcp::CallerRule::Native {
                agent: agent.into(),
                claude_session: std::env::var("CLAUDE_CODE_SESSION_ID").ok().map(Into::into),
                gemini: std::env::var("GEMINI_CLI").is_ok_and(|v| v == "1"),
            }
        }
    };
    let found = super::resolve_gateway(ClientContext {
        flag: args.url.clone().map(|u| (u, "--url".to_string())),
        data_dir: args.data_dir.clone(),
        config: args.config.clone(),
    });
    let data_dir = found.data_dir.clone();
    let token = match &args.token {
        Some(t) => Some(t.clone()),
        None => sessionwatch_server::auth::read_token(&data_dir).context("cannot read the gateway token")?,
    };
    let remote = RemoteBackend::new(&found.url.url, token);
    // A URL the user named is used or fails; one found is used if it answers.
    let named = matches!(found.url.source, UrlSource::Flag(_) | UrlSource::Env(_));
    let use_remote =
        !args.embedded && (named || args.remote_only || remote.is_up(Duration::from_millis(500)).await);
    if use_remote {
        remote.check().await.map_err(|e| anyhow::anyhow!("{e}"))?;
        tracing::info!(url = %remote.base_url(), source = %found.url.source, caller = ?caller, "MCP on stdio, tools of the gateway");
        mcp::serve_stdio(Arc::new(remote), caller).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let serve_args = super::serve::ServeArgs {
        config: args.config.clone(),
        database: args.database.clone(),
        data_dir: Some(data_dir),
        ..Default::default()
    };
    let config = super::serve::load_config(&serve_args)?;
    if config.postgres_url().is_some() {
        anyhow::bail!("PostgreSQL support is not built into this version yet; use a SQLite path");
    }
    let path = config.sqlite_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // One writer per database: held while this process serves it; a gateway holding it is named.
    let lock = match GatewayLock::acquire(&path) {
        Ok(lock) => lock,
        Err(StoreError::Locked(held)) => anyhow::bail!("{}", held_by(&config.data_dir, &path, &held)),
        Err(e) => return Err(e).context("cannot lock the database"),
    };
    let store = SqliteStore::open_locked(lock, SqliteOptions::default())
        .with_context(|| format!("cannot open the database {}", path.display()))?;
    let gateway = Gateway::start(store, config, Arc::new(SystemClock)).await;
    tracing::info!(database = %path.display(), caller = ?caller, "MCP on stdio, embedded gateway");
    mcp::serve_stdio(Arc::new(EmbeddedBackend::new(gateway)), caller).await?;
    Ok(ExitCode::SUCCESS)
}

/// Why no embedded gateway starts: the database's lock is held. Names the gateway from its runtime file
/// when it is the holder (it runs but did not answer), else the lock's own words.
fn held_by(data_dir: &Path, db: &Path, lock_message: &str) -> String {
    match RuntimeFile::read(data_dir) {
        Ok(Some(gw)) if gw.is_live() => format!(
            "the sessionwatch gateway at {} (pid {}, started {}) serves {} but did not answer; this process \
             will not open a second writer on it. Check that gateway (or pass --url), then restart this MCP \
             server.",
            gw.url,
            gw.pid,
            gw.started_at,
            db.display()
        ),
        _ => format!(
            "{lock_message}. It may be another `sessionwatch mcp` running its own embedded gateway: run \
             `sessionwatch serve` once so every client shares one gateway."
        ),
    }
}
