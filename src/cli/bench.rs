//! `sessionwatch bench kernel|gateway|hooks|upstream|scale [--json] [--quick] [--part …]`: the command line of the
//! benchmarks in `sessionwatch-bench`.
//!
//! - kernel: the signal log, watches and notices, against bare commit loops of the same rows;
//! - gateway: loopback HTTP with 16 concurrent clients, and the latency to a watcher's wake;
//! - hooks: one `sessionwatch hook` process per Claude/Codex hook, beside the binary's bare start-up;
//! - upstream: classifier throughput per source against a plain read-and-count-newlines pass over the
//!   same file in the same run (the limit any scanner can reach), plus the OpenCode check rate;
//! - scale: how the costs grow with the work (big against small fixtures, in one run).
//!
//! Output: one figure per line; with `--json`, one object `{"name","value","unit"}` per line.

use clap::{Args, Subcommand};
use sessionwatch_bench::Figure;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchWhat,
}

#[derive(Subcommand, Debug)]
pub enum BenchWhat {
    /// The signal log, watches and notices on SQLite, against a bare SQLite commit loop.
    Kernel {
        #[arg(long)]
        json: bool,
        /// Small sizes (a smoke test).
        #[arg(long)]
        quick: bool,
        /// Where the bench databases go (default: a temporary dir).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// `postgres://…`: run on this PostgreSQL database instead (fresh schemas, dropped afterwards).
        #[arg(long, value_name = "URL")]
        database: Option<String>,
        /// Run only these parts, each with its baseline (repeatable; default: all, in this order).
        #[arg(long = "part", value_enum, value_name = "PART")]
        parts: Vec<sessionwatch_bench::kernel::Part>,
    },
    /// The gateway over loopback HTTP with 16 concurrent clients, and the wake latency.
    Gateway {
        #[arg(long)]
        json: bool,
        /// Small sizes (a smoke test).
        #[arg(long)]
        quick: bool,
        /// Run only these parts (repeatable; default: all). `status` and `inbound` each run beside the
        /// bare router, their baseline.
        #[arg(long = "part", value_enum, value_name = "PART")]
        parts: Vec<sessionwatch_bench::gateway::Part>,
    },
    /// One `sessionwatch hook UserPromptSubmit` process against a running gateway (p50/p99), with and
    /// without a pending notice, beside the binary's bare start-up.
    Hooks {
        #[arg(long)]
        json: bool,
        /// 20 runs instead of 200.
        #[arg(long)]
        quick: bool,
    },
    /// Upstream scan rates: Claude, Codex and Pi transcripts (200 MB each) and an OpenCode database
    /// (100,000 messages).
    Upstream {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// Small inputs (8 MB transcripts, 5,000 OpenCode messages) for a smoke run.
        #[arg(long)]
        quick: bool,
    },
    /// How the costs grow on SQLite: cold pages at 10M against 100k events, start-up at 1M against 10k
    /// cursors, peak RSS at 1M against 10k sessions, appends during a 1M-row prune against idle ones,
    /// the monitor's idle tick over 1,000 adopted sessions against a bare stat() of their files.
    Scale {
        #[arg(long)]
        json: bool,
        /// Small sizes (a smoke test in seconds; its numbers are not meaningful).
        #[arg(long)]
        quick: bool,
        /// Events in the big log (default 10,000,000; the small one has a hundredth, at least 1,000).
        #[arg(long, value_name = "N")]
        events: Option<u64>,
        /// Where the bench databases and files go (default: a temporary dir).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// Run only these parts (repeatable; default: all, in this order).
        #[arg(long = "part", value_enum, value_name = "PART")]
        parts: Vec<sessionwatch_bench::scale::Part>,
    },
}

fn print(figures: Vec<Figure>, json: bool) {
    for f in figures {
        if json {
            // Keys in the documented order: name, value, unit.
            #[derive(serde::Serialize)]
            struct FigureJson<'a> {
                name: &'a str,
                value: f64,
                unit: &'a str,
            }
            let line = FigureJson { name: &f.name, value: round(f.value), unit: f.unit };
            println!("{}", serde_json::to_string(&line).unwrap_or_default());
        } else {
            println!("{:<40} {:>14.3} {}", f.name, f.value, f.unit);
        }
    }
}

pub async fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.what {
        BenchWhat::Kernel { json, quick, dir, database, parts } => {
            let parts = if parts.is_empty() { sessionwatch_bench::kernel::Part::ALL.to_vec() } else { parts };
            let tmp = tempfile::tempdir()?;
            let dir = dir.unwrap_or_else(|| tmp.path().to_path_buf());
            let figures = match database {
                Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                    sessionwatch_bench::kernel::run_kernel_bench_postgres(&url, quick, &parts)
                        .await
                        .map_err(|e| anyhow::anyhow!("bench kernel on PostgreSQL: {e}"))?
                }
                Some(other) => anyhow::bail!("--database must be a postgres:// URL, got {other:?}"),
                None => sessionwatch_bench::kernel::run_kernel_bench(&dir, quick, &parts).await,
            };
            print(figures, json);
        }
        BenchWhat::Gateway { json, quick, parts } => {
            use sessionwatch_bench::gateway::Part;
            let parts = if parts.is_empty() { Part::ALL.to_vec() } else { parts };
            let mut figures = sessionwatch_bench::gateway::run(quick, &parts).await?;
            if parts.contains(&Part::Dashboard) {
                figures.extend(sessionwatch_bench::dashboard::run(quick).await?);
            }
            print(figures, json)
        }
        BenchWhat::Hooks { json, quick } => {
            print(sessionwatch_bench::hooks::run(&std::env::current_exe()?, quick).await?, json)
        }
        BenchWhat::Upstream { json, quick } => {
            let (bytes, messages) = if quick { (8_000_000, 5_000) } else { (200_000_000, 100_000) };
            let figures =
                tokio::task::spawn_blocking(move || sessionwatch_bench::upstream::run(bytes, messages))
                    .await??;
            print(figures, json);
        }
        BenchWhat::Scale { json, quick, events, dir, parts } => {
            let tmp = tempfile::tempdir()?;
            let dir = dir.unwrap_or_else(|| tmp.path().to_path_buf());
            let mut sizes = if quick {
                sessionwatch_bench::scale::Sizes::QUICK
            } else {
                sessionwatch_bench::scale::Sizes::FULL
            };
            if let Some(n) = events {
                sizes = sizes.with_events(n);
            }
            let exe = std::env::current_exe()?;
            let parts: Vec<_> =
                if parts.is_empty() { sessionwatch_bench::scale::Part::ALL.to_vec() } else { parts };
            print(sessionwatch_bench::scale::run(&exe, &dir, &sizes, &parts).await?, json);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
