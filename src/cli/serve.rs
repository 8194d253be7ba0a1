//! `sessionwatch serve`.

use anyhow::Context;
use clap::Args;
use sessionwatch_core::SystemClock;
use sessionwatch_server::config::AuthMode;
use sessionwatch_server::discovery::RuntimeFile;
use sessionwatch_server::{AppState, Config, Gateway, auth};
use sessionwatch_store::sqlite::GatewayLock;
use sessionwatch_store::{PostgresStore, SqliteOptions, SqliteStore, Store};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// TOML config file.
    #[arg(long, env = "SESSIONWATCH_CONFIG")]
    pub config: Option<PathBuf>,
    /// Listen address (default 127.0.0.1:7420).
    #[arg(long)]
    pub listen: Option<String>,
    /// Database: a SQLite path (default: the data dir) or postgres://…
    #[arg(long)]
    pub database: Option<String>,
    /// token (default) or none (loopback only).
    #[arg(long)]
    pub auth: Option<String>,
    /// Data dir (token, default database).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

/// Config: file, then environment, then flags.
pub fn load_config(args: &ServeArgs) -> anyhow::Result<Config> {
    let mut config = match &args.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    config.apply_env()?;
    if let Some(v) = &args.listen {
        config.set("gateway.listen", v)?;
    }
    if let Some(v) = &args.database {
        config.set("gateway.database", v)?;
    }
    if let Some(v) = &args.auth {
        config.set("gateway.auth", v)?;
    }
    if let Some(v) = &args.data_dir {
        config.data_dir = v.clone();
    }
    config.validate()?;
    Ok(config)
}

pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    super::init_tracing("info");
    let config = load_config(&args)?;
    // A service's default soft fd limit (often 1024) would cap the connections it can hold.
    sessionwatch_server::connections::raise_fd_limit();
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let token = match config.auth {
        AuthMode::Token => {
            Some(auth::load_or_create_token(&config.data_dir).context("cannot create the token")?)
        }
        AuthMode::None => None,
    };
    match config.postgres_url() {
        Some(url) => {
            let store = PostgresStore::connect(url, None)
                .await
                .with_context(|| "cannot open the PostgreSQL state database".to_string())?;
            let identity = store.identity().to_string();
            let host = host_id(&config.data_dir)?;
            tracing::info!(host = %host, "sharing state through PostgreSQL");
            let gateway =
                Gateway::start_shared(store, config.clone(), Arc::new(SystemClock), identity, Some(host))
                    .await;
            serve(listener, gateway, token, &config, "postgres").await
        }
        None => {
            let path = config.sqlite_path();
            // Held by the store until we exit: a second gateway on this file refuses to start.
            let store = SqliteStore::open_locked(GatewayLock::acquire(&path)?, SqliteOptions::default())?;
            let gateway = Gateway::start(store, config.clone(), Arc::new(SystemClock)).await;
            serve(listener, gateway, token, &config, &path.display().to_string()).await
        }
    }
}

async fn serve<S: Store>(
    listener: tokio::net::TcpListener,
    gateway: Arc<Gateway<S>>,
    token: Option<String>,
    config: &Config,
    database: &str,
) -> anyhow::Result<ExitCode> {
    let addr = listener.local_addr()?;
    // Upstream monitor of adopted Claude Code / Codex / OpenCode / Pi sessions.
    let monitor = gateway.spawn_monitor(
        Duration::from_secs(config.monitor_first_tick_secs),
        Duration::from_secs(config.monitor_interval_secs),
    );
    let state = Arc::new(AppState::new(gateway, token));
    // Clients on this machine find us here (no URL in hook commands or MCP configs); removed on a clean
    // exit, and ignored by clients once this pid is gone.
    let runtime_file = RuntimeFile::for_this_process(addr)
        .publish(&config.data_dir)
        .with_context(|| format!("cannot write the runtime file in {}", config.data_dir.display()))?;
    tracing::info!(%addr, database, auth = ?config.auth, runtime_file = %runtime_file.path().display(), "sessionwatch gateway listening");
    // Printed for scripts that start the gateway on port 0.
    println!("listening on http://{addr}");
    sessionwatch_server::run(listener, state, shutdown_signal()).await?;
    monitor.abort();
    drop(runtime_file);
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// This gateway's host id for a shared database: kept in the data dir so it survives restarts (a
/// restarted gateway still hosts its sessions and gets their pending notices back).
fn host_id(data_dir: &std::path::Path) -> anyhow::Result<String> {
    let path = data_dir.join("host-id");
    if let Ok(id) = std::fs::read_to_string(&path)
        && !id.trim().is_empty()
    {
        return Ok(id.trim().to_string());
    }
    std::fs::create_dir_all(data_dir)?;
    let id = format!("gw-{}", uuid::Uuid::new_v4().simple());
    std::fs::write(&path, format!("{id}\n")).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(id)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down: finishing in-flight requests");
}
