//! Command-line interface.

mod bench_gateway;
mod client;
mod db;
mod demo;
mod embedded;
mod serve;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "sessionwatch", version, about = "Session state awareness for multi-agent AI gateways")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway.
    Serve(serve::ServeArgs),
    /// Tell the demo story on a temporary gateway: a spawn, twenty human turns, one notice, a reconcile.
    Demo {
        /// Print the machine-readable wire shapes only.
        #[arg(long)]
        json: bool,
    },
    /// Benchmarks; one JSON object per figure with --json.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// Work on a signal-log database directly (no gateway needed).
    Db(db::DbArgs),
    /// Talk to a running gateway: tools and host calls.
    #[command(flatten)]
    Client(client::ClientCommand),
}

#[derive(Subcommand)]
enum BenchWhat {
    /// The signal log, watches and notices on SQLite (or PostgreSQL), against a bare commit loop.
    Kernel {
        #[arg(long)]
        json: bool,
        /// Small sizes (a smoke test).
        #[arg(long)]
        quick: bool,
        /// Where the bench databases go (default: a temporary dir).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// `postgres://…`: run on this PostgreSQL database instead (fresh schemas, dropped afterwards).
        #[arg(long, value_name = "URL")]
        database: Option<String>,
    },
    /// The gateway over loopback HTTP with 16 concurrent clients.
    Gateway {
        #[arg(long)]
        json: bool,
        /// Small sizes (a smoke test).
        #[arg(long)]
        quick: bool,
    },
}

fn print_figures(figures: &[(String, f64, &str)], json: bool) {
    for (name, value, unit) in figures {
        if json {
            println!("{}", serde_json::json!({ "name": name, "value": value, "unit": unit }));
        } else {
            println!("{name:<40} {value:>14.2} {unit}");
        }
    }
}

async fn bench(what: BenchWhat) -> anyhow::Result<ExitCode> {
    match what {
        BenchWhat::Kernel { json, quick, dir, database } => {
            let tmp = tempfile::tempdir()?;
            let dir = dir.unwrap_or_else(|| tmp.path().to_path_buf());
            let figures = match database {
                Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                    sessionwatch_kernel::bench::run_kernel_bench_postgres(&url, quick)
                        .await
                        .map_err(|e| anyhow::anyhow!("bench kernel on PostgreSQL: {e}"))?
                }
                Some(other) => anyhow::bail!("--database must be a postgres:// URL, got {other:?}"),
                None => sessionwatch_kernel::bench::run_kernel_bench(&dir, quick).await,
            };
            let rows: Vec<_> = figures.into_iter().map(|f| (f.name.to_string(), f.value, f.unit)).collect();
            print_figures(&rows, json);
        }
        BenchWhat::Gateway { json, quick } => {
            let figures = bench_gateway::run(quick).await?;
            let rows: Vec<_> = figures.into_iter().map(|f| (f.name, f.value, f.unit)).collect();
            print_figures(&rows, json);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Demo { json } => demo::run(json).await,
            Command::Bench { what } => bench(what).await,
            Command::Db(args) => db::run(args).await,
            Command::Client(c) => client::run(c).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr (stdout carries results and, for MCP, the protocol).
pub fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SESSIONWATCH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

pub fn default_data_dir() -> PathBuf {
    sessionwatch_server::config::default_data_dir()
}
