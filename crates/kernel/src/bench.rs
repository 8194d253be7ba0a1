//! The kernel benchmark behind `sessionwatch bench kernel`: every figure is measured in one run, on the
//! embedded SQLite store in `dir`, through the real code paths (`Kernel::record`, `changes_since`,
//! `prune_now`, `sweep`). Big fixtures are written with the store's batched fill helpers first.
//!
//! `quick` shrinks every size so CI can smoke-test the whole run in a few seconds; its numbers are not
//! meaningful.

use crate::{Kernel, KernelConfig, RecordOutcome};
use sessionwatch_core::{Clock, Limit, NewEvent, Provenance, SystemClock};
use sessionwatch_store::sqlite::bench::raw_commit_loop;
use sessionwatch_store::{RetentionPolicy, SqliteOptions, SqliteStore};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One measured figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub name: &'static str,
    pub value: f64,
    pub unit: &'static str,
}

struct Sizes {
    appends: u64,
    watcher_appends: u64,
    log_rows: u64,
    queries: usize,
    prune_from: u64,
    prune_to: u64,
    cursors: u64,
}

const FULL: Sizes = Sizes {
    appends: 20_000,
    watcher_appends: 5_000,
    log_rows: 50_000,
    queries: 5_000,
    prune_from: 62_000,
    prune_to: 50_000,
    cursors: 100_000,
};

const QUICK: Sizes = Sizes {
    appends: 200,
    watcher_appends: 50,
    log_rows: 2_000,
    queries: 200,
    prune_from: 1_200,
    prune_to: 1_000,
    cursors: 2_000,
};

const STORE_IDENTITY: &str = "bench";

fn config(retention: RetentionPolicy) -> KernelConfig {
    KernelConfig { store_identity: STORE_IDENTITY.into(), retention, ..KernelConfig::default() }
}

fn big_retention() -> RetentionPolicy {
    RetentionPolicy { max_rows: u64::MAX / 2, ..RetentionPolicy::default() }
}

async fn kernel(dir: &Path, name: &str, retention: RetentionPolicy) -> Kernel<SqliteStore> {
    let path = dir.join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("bench: open the store");
    Kernel::start(store, Arc::new(SystemClock), config(retention)).await
}

fn per_second(n: u64, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64().max(1e-9)
}

async fn append(k: &Kernel<SqliteStore>, key: &str) {
    let ev = NewEvent::human_message(key, "main", "bench", None);
    match k.record(ev, vec![], false).await {
        RecordOutcome::Recorded(_) => {}
        other => panic!("bench: append failed: {other:?}"),
    }
}

/// Concurrent producers, as in a gateway serving many turns at once: their appends share group commits,
/// and each producer waits for its own commit before its next append.
pub const PRODUCERS: u64 = 16;

/// `total` appends from [`PRODUCERS`] tasks; `key_of(i)` names the session of the i-th append.
async fn append_concurrently(
    k: &Kernel<SqliteStore>,
    total: u64,
    key_of: impl Fn(u64) -> String + Send + Sync + 'static,
) -> Duration {
    let key_of = Arc::new(key_of);
    let start = Instant::now();
    let mut tasks = vec![];
    for p in 0..PRODUCERS {
        let k = k.clone();
        let key_of = key_of.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = p;
            while i < total {
                append(&k, &key_of(i)).await;
                i += PRODUCERS;
            }
        }));
    }
    for t in tasks {
        t.await.expect("bench: producer task");
    }
    start.elapsed()
}

fn percentile(sorted: &[Duration], pct: usize) -> Duration {
    sorted[(sorted.len() * pct / 100).min(sorted.len() - 1)]
}

/// Peak resident set size of this process (VmHWM), in MiB.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs every kernel benchmark in `dir` (which it fills with database files) and answers the figures.
pub async fn run_kernel_bench(dir: &Path, quick: bool) -> Vec<Figure> {
    let sz = if quick { &QUICK } else { &FULL };
    std::fs::create_dir_all(dir).expect("bench: create the bench dir");
    let mut out = vec![];
    let mut fig = |name, value, unit| out.push(Figure { name, value, unit });

    // Appends to one session, each durably committed before the next (one producer).
    let sequential_per_s = {
        let k = kernel(dir, "append-sequential", big_retention()).await;
        let start = Instant::now();
        for _ in 0..sz.appends {
            append(&k, "agent:main:subagent:single").await;
        }
        per_second(sz.appends, start.elapsed())
    };
    fig("append_single_session_sequential_per_s", sequential_per_s, "appends/s");

    // The same with concurrent producers: appends share group commits.
    let single_per_s = {
        let k = kernel(dir, "append-single", big_retention()).await;
        let elapsed = append_concurrently(&k, sz.appends, |_| "agent:main:subagent:single".to_string()).await;
        per_second(sz.appends, elapsed)
    };
    fig("append_single_session_per_s", single_per_s, "appends/s");

    // Appends spread over 100 sessions.
    {
        let k = kernel(dir, "append-100-sessions", big_retention()).await;
        let elapsed =
            append_concurrently(&k, sz.appends, |i| format!("agent:main:subagent:s{}", i % 100)).await;
        fig("append_100_sessions_per_s", per_second(sz.appends, elapsed), "appends/s");
    }

    // One target watched by 100 sessions: every append moves 100 cursors and queues 100 notices.
    {
        let k = kernel(dir, "append-100-watchers", big_retention()).await;
        let target = "agent:main:subagent:watched";
        for i in 0..100 {
            assert!(k.register_watch(&format!("agent:w{i}:main"), target, Provenance::Explicit).await);
        }
        let elapsed = append_concurrently(&k, sz.watcher_appends, move |_| target.to_string()).await;
        fig("append_100_watchers_per_s", per_second(sz.watcher_appends, elapsed), "appends/s");
    }

    // changesSince(limit 200) at random positions of a big log.
    {
        let k = kernel(dir, "changes-since", big_retention()).await;
        let key = "agent:main:subagent:log";
        k.store()
            .bench_fill_events(&[(key.into(), "main".into())], sz.log_rows, SystemClock.now_ms())
            .expect("bench: fill the log");
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut lat = Vec::with_capacity(sz.queries);
        for _ in 0..sz.queries {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let since = x % (sz.log_rows - 200);
            let start = Instant::now();
            let page = k.changes_since(key, "main", since, Limit::MAX).await;
            lat.push(start.elapsed());
            assert_eq!(page.events.len(), 200, "bench: a full page");
        }
        lat.sort();
        fig("changes_since_200_p50_us", percentile(&lat, 50).as_secs_f64() * 1e6, "us");
        fig("changes_since_200_p99_us", percentile(&lat, 99).as_secs_f64() * 1e6, "us");
    }

    // Retention by row count: 62k rows over 100 sessions down to 50k.
    {
        let retention = RetentionPolicy { max_rows: sz.prune_to, ..RetentionPolicy::default() };
        let k = kernel(dir, "prune", retention).await;
        let sessions: Vec<(String, String)> =
            (0..100).map(|i| (format!("agent:main:subagent:p{i}"), "main".to_string())).collect();
        k.store()
            .bench_fill_events(&sessions, sz.prune_from / 100, SystemClock.now_ms())
            .expect("bench: fill for pruning");
        let start = Instant::now();
        let report = k.prune_now().await.expect("bench: prune");
        let elapsed = start.elapsed();
        assert_eq!(report.events_by_cap, sz.prune_from - sz.prune_to, "bench: pruned the excess");
        fig("prune_62k_to_50k_ms", elapsed.as_secs_f64() * 1e3, "ms");
    }

    // The start-up sweep over 100k cursors (1,000 watchers × 100 targets), a tenth of them pending.
    {
        let k = kernel(dir, "sweep", big_retention()).await;
        let watchers = sz.cursors / 100;
        let mut cursors = Vec::with_capacity(sz.cursors as usize);
        for w in 0..watchers {
            for t in 0..100u64 {
                let pending = (w * 100 + t) % 10 == 0;
                let (l, n, m) = if pending { (3, 4, 5) } else { (5, 5, 5) };
                cursors.push((format!("agent:w{w}:main"), format!("agent:main:subagent:t{t}"), l, n, m));
            }
        }
        k.store()
            .bench_fill_cursors(&cursors, STORE_IDENTITY, SystemClock.now_ms())
            .expect("bench: fill cursors");
        drop(cursors);
        let start = Instant::now();
        let reopened = k.sweep().await;
        let elapsed = start.elapsed();
        assert_eq!(reopened as u64, sz.cursors / 10, "bench: every pending cursor swept");
        fig("sweep_100k_cursors_ms", elapsed.as_secs_f64() * 1e3, "ms");
    }

    // The bare-SQLite baseline with the same row, schema and pragmas.
    let raw_per_s = {
        let path = dir.join("raw.db");
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let elapsed = raw_commit_loop(&path, sz.appends, &SqliteOptions::default()).expect("bench: raw loop");
        per_second(sz.appends, elapsed)
    };
    fig("raw_sqlite_commit_per_s", raw_per_s, "commits/s");
    fig("append_vs_raw_ratio", single_per_s / raw_per_s, "ratio");
    fig("append_sequential_vs_raw_ratio", sequential_per_s / raw_per_s, "ratio");
    fig("peak_rss_mb", peak_rss_mb(), "MiB");
    out
}
