//! `sessionwatch bench kernel|gateway|upstream [--json] [--quick]`.
//!
//! - kernel: the signal log, watches and notices, against a bare commit loop of the same row;
//! - gateway: loopback HTTP with 16 concurrent clients, and the latency to a watcher's wake;
//! - hooks: one `sessionwatch hook` process per Claude/Codex hook, beside the binary's bare start-up;
//! - upstream: classifier throughput per source against a plain read-and-count-newlines pass over the
//!   same file in the same run (the limit any scanner can reach), plus the OpenCode check rate.
//!
//! Output: one figure per line; with `--json`, one object `{"name","value","unit"}` per line.

use super::upstream::progress_bar;
use clap::{Args, Subcommand};
use serde_json::json;
use sessionwatch_upstream::CatalogId;
use sessionwatch_upstream::bench as ub;
use std::process::ExitCode;
use std::time::Duration;

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
    },
    /// The gateway over loopback HTTP with 16 concurrent clients, and the wake latency.
    Gateway {
        #[arg(long)]
        json: bool,
        /// Small sizes (a smoke test).
        #[arg(long)]
        quick: bool,
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
}

pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: &'static str,
}

fn print(figures: Vec<Figure>, json: bool) {
    for f in figures {
        if json {
            // Keys in the documented order: name, value, unit.
            println!(
                "{{\"name\":{},\"value\":{},\"unit\":{}}}",
                json!(f.name),
                json!(round(f.value)),
                json!(f.unit)
            );
        } else {
            println!("{:<40} {:>14.3} {}", f.name, f.value, f.unit);
        }
    }
}

const MB: f64 = 1_000_000.0;

pub async fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.what {
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
            print(
                figures
                    .into_iter()
                    .map(|f| Figure { name: f.name.into(), value: f.value, unit: f.unit })
                    .collect(),
                json,
            );
        }
        BenchWhat::Gateway { json, quick } => {
            let mut figures = super::bench_gateway::run(quick).await?;
            figures.extend(super::bench_dashboard::run(quick).await?);
            print(figures, json)
        }
        BenchWhat::Hooks { json, quick } => print(super::bench_hooks::run(quick).await?, json),
        BenchWhat::Upstream { json, quick } => {
            let (bytes, messages) = if quick { (8_000_000, 5_000) } else { (200_000_000, 100_000) };
            let figures = tokio::task::spawn_blocking(move || upstream(bytes, messages)).await??;
            print(figures, json);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Generates the inputs (with a progress bar), then measures.
fn upstream(bytes: u64, messages: usize) -> anyhow::Result<Vec<Figure>> {
    let dir = tempfile::tempdir()?;
    let sources = [CatalogId::Claude, CatalogId::Codex, CatalogId::Pi];
    let mut out = Vec::new();
    let (mut total_bytes, mut total_read_secs) = (0u64, 0f64);
    for c in sources {
        let path = dir.path().join(format!("{}.jsonl", c.as_str()));
        generate_with_progress(c, &path, bytes)?;
        let r = ub::scan_file(c, &path)?;
        std::fs::remove_file(&path)?;
        let scan = r.bytes as f64 / MB / r.classify_secs.max(1e-9);
        let read = r.bytes as f64 / MB / r.newline_secs.max(1e-9);
        total_bytes += r.bytes;
        total_read_secs += r.newline_secs;
        let n = c.as_str();
        out.push(Figure { name: format!("{n}_transcript_mb"), value: r.bytes as f64 / MB, unit: "MB" });
        out.push(Figure { name: format!("{n}_scan_mb_per_s"), value: scan, unit: "MB/s" });
        out.push(Figure { name: format!("{n}_read_only_mb_per_s"), value: read, unit: "MB/s" });
        out.push(Figure {
            name: format!("{n}_scan_vs_read_only"),
            value: scan / read.max(1e-9),
            unit: "ratio",
        });
    }
    out.push(Figure {
        name: "read_only_mb_per_s".into(),
        value: total_bytes as f64 / MB / total_read_secs.max(1e-9),
        unit: "MB/s",
    });
    let pb = progress_bar(messages as u64, "opencode db");
    pb.enable_steady_tick(Duration::from_millis(200));
    let o = ub::opencode_rate(messages).map_err(anyhow::Error::msg)?;
    pb.finish_and_clear();
    out.push(Figure { name: "opencode_messages".into(), value: o.messages as f64, unit: "messages" });
    out.push(Figure {
        name: "opencode_check_messages_per_s".into(),
        value: o.messages as f64 / o.check_secs.max(1e-9),
        unit: "messages/s",
    });
    out.push(Figure { name: "opencode_full_check_ms".into(), value: o.check_secs * 1000.0, unit: "ms" });
    out.push(Figure {
        name: "opencode_indicator_tick_ms".into(),
        value: o.indicator_only_secs * 1000.0,
        unit: "ms",
    });
    Ok(out)
}

/// Writes the transcript while a bar follows the file's size.
fn generate_with_progress(c: CatalogId, path: &std::path::Path, bytes: u64) -> anyhow::Result<()> {
    let pb = progress_bar(bytes, &format!("gen {}", c.as_str()));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (pb, done, path) = (pb.clone(), done.clone(), path.to_path_buf());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(m) = std::fs::metadata(&path) {
                    pb.set_position(m.len().min(bytes));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let result = ub::generate_transcript(c, path, bytes);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watcher.join();
    pb.finish_and_clear();
    result?;
    Ok(())
}
