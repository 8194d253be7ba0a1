//! The signal log at scale: cold pages in a big log against a small one, and appends while a big prune
//! runs against idle ones.

use super::{Sizes, ratio};
use crate::sqlite_fixtures::Loader;
use crate::{Figure, percentile, progress_bar};
use sessionwatch_core::AgentSessionKey;
use sessionwatch_core::{Clock, Limit, NewEvent, RecordPolicy, SystemClock};
use sessionwatch_kernel::{Kernel, KernelConfig, RecordOutcome};
use sessionwatch_store::{RetentionPolicy, SignalLog, SqliteOptions, SqliteStore};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The session whose pages are read; it has [`page_session_events`] events in both logs.
const PAGED: &str = "agent:main:subagent:paged";
/// Sessions the rest of the big log is spread over.
const FILLER_SESSIONS: u64 = 1_000;

/// Events of the paged session: enough for random full pages, a tenth of the small log at most.
fn page_session_events(sz: &Sizes) -> u64 {
    (sz.small_events / 10).clamp(400, 1_000)
}

fn fresh(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

fn sessions(prefix: &str, n: u64) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (AgentSessionKey::build_subagent("main", &format!("{prefix}{i}")), "main".to_string()))
        .collect()
}

/// Fills `per_session` events into each of `sessions` with a progress bar.
fn fill(
    loader: &mut Loader,
    sessions: &[(String, String)],
    per_session: u64,
    what: &str,
) -> anyhow::Result<()> {
    let pb = progress_bar(sessions.len() as u64 * per_session, what);
    loader
        .fill_events(sessions, per_session, SystemClock.now_ms(), &|n| pb.set_position(n))
        .map_err(anyhow::Error::msg)?;
    pb.finish_and_clear();
    Ok(())
}

/// The small log: the paged session's events interleaved with filler sessions' (the same count each),
/// `sz.small_events` in all. The big log is the same file with the rest spread over
/// [`FILLER_SESSIONS`] more sessions after it: the paged session's rows are where they were, only the
/// log around them grew.
pub(super) async fn changes_since(dir: &Path, sz: &Sizes) -> anyhow::Result<Vec<Figure>> {
    let path = fresh(dir, "scale-log.db");
    let per = page_session_events(sz);
    let mut loader = Loader::open(&path).map_err(anyhow::Error::msg)?;
    let empty = loader.database_bytes().map_err(anyhow::Error::msg)?;
    let mut first = vec![(PAGED.to_string(), "main".to_string())];
    first.extend(sessions("early", (sz.small_events / per).saturating_sub(1)));
    fill(&mut loader, &first, per, "small log")?;
    let small_rows = first.len() as u64 * per;
    let small_bytes = loader.database_bytes().map_err(anyhow::Error::msg)?;
    let small = cold_page_p50_us(&path, per, sz.page_queries).await?;

    let rest = sz.big_events.saturating_sub(small_rows);
    fill(&mut loader, &sessions("late", FILLER_SESSIONS), rest / FILLER_SESSIONS, "big log")?;
    let big_rows = small_rows + rest / FILLER_SESSIONS * FILLER_SESSIONS;
    let big_bytes = loader.database_bytes().map_err(anyhow::Error::msg)?;
    drop(loader);
    let big = cold_page_p50_us(&path, per, sz.page_queries).await?;
    let _ = std::fs::remove_file(&path);
    Ok(vec![
        Figure::new("log_events_small", small_rows as f64, "events"),
        Figure::new("log_events_big", big_rows as f64, "events"),
        Figure::new("changes_since_cold_p50_us_100k_events", small, "us"),
        Figure::new("changes_since_cold_p50_us_10m_events", big, "us"),
        Figure::new("changes_since_cold_10m_vs_100k_ratio", ratio(big, small), "x"),
        Figure::new("db_bytes_per_event", ratio((big_bytes - empty) as f64, big_rows as f64), "bytes"),
        Figure::new(
            "db_bytes_per_event_marginal",
            ratio(big_bytes.saturating_sub(small_bytes) as f64, (big_rows - small_rows) as f64),
            "bytes",
        ),
    ])
}

/// p50 of `queries` `changesSince(limit 200)` pages at random positions of the paged session (`events`
/// long), on a store just opened on `path`: every page is older than anything its cache holds.
async fn cold_page_p50_us(path: &Path, events: u64, queries: usize) -> anyhow::Result<f64> {
    let store = SqliteStore::open(path, SqliteOptions::default())?;
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut lat = Vec::with_capacity(queries);
    for _ in 0..queries {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let since = x % (events - 200);
        let start = Instant::now();
        let page = store.changes_since(PAGED.into(), "main".into(), since, Limit::MAX).await?;
        lat.push(start.elapsed());
        anyhow::ensure!(page.events.len() == 200, "a full page at {since}: {} events", page.events.len());
    }
    lat.sort();
    Ok(percentile(&lat, 0.5).as_secs_f64() * 1e6)
}

const APPENDER: &str = "agent:main:subagent:appender";

async fn append(k: &Kernel<SqliteStore>) -> anyhow::Result<Duration> {
    let start = Instant::now();
    match k.record(NewEvent::human_message(APPENDER, "main", "bench", None), RecordPolicy::always()).await {
        RecordOutcome::Recorded(_) => Ok(start.elapsed()),
        other => anyhow::bail!("an append failed: {other:?}"),
    }
}

/// Appends, one at a time, idle and then while a prune deletes `sz.prune_rows` rows (retention keeps
/// `sz.retained_rows`); their p99s.
pub(super) async fn appends_during_prune(dir: &Path, sz: &Sizes) -> anyhow::Result<Vec<Figure>> {
    let path = fresh(dir, "scale-prune.db");
    let retention = RetentionPolicy { max_rows: sz.retained_rows, ..RetentionPolicy::default() };
    let config = KernelConfig { store_identity: "bench".into(), retention, ..KernelConfig::default() };
    let store = SqliteStore::open(&path, SqliteOptions::default())?;
    // Started on the empty file (its start-up prune has nothing to do), filled behind it.
    let k = Kernel::start(store, Arc::new(SystemClock), config).await;
    k.background_prune_done().await;
    let pruned = sessions("pruned", 100);
    let mut loader = Loader::open(&path).map_err(anyhow::Error::msg)?;
    fill(&mut loader, &pruned, (sz.prune_rows + sz.retained_rows) / 100, "prune fixture")?;
    drop(loader);

    let mut idle = Vec::with_capacity(sz.appends);
    for _ in 0..sz.appends {
        idle.push(append(&k).await?);
    }
    let pruning = {
        let k = k.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            k.prune_now().await.map(|r| (r, start.elapsed()))
        })
    };
    let mut during = vec![];
    while !pruning.is_finished() {
        during.push(append(&k).await?);
    }
    let (report, prune_took) = pruning.await??;
    drop(k);
    let _ = std::fs::remove_file(&path);
    idle.sort();
    during.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (idle_p99, during_p99) = (us(percentile(&idle, 0.99)), us(percentile(&during, 0.99)));
    Ok(vec![
        Figure::new("prune_rows_deleted", report.events_by_cap as f64, "rows"),
        Figure::new("prune_ms", prune_took.as_secs_f64() * 1e3, "ms"),
        Figure::new("appends_during_prune", during.len() as f64, "appends"),
        Figure::new("append_p99_us_idle", idle_p99, "us"),
        Figure::new("append_p50_us_during_prune", us(percentile(&during, 0.5)), "us"),
        Figure::new("append_p90_us_during_prune", us(percentile(&during, 0.9)), "us"),
        Figure::new("append_p99_us_during_prune", during_p99, "us"),
        Figure::new("append_p99_during_prune_vs_idle_ratio", ratio(during_p99, idle_p99), "x"),
        // The longest wait: how long the prune held the writer in one piece.
        Figure::new("append_max_us_during_prune", us(during.last().copied().unwrap_or_default()), "us"),
    ])
}
