//! Smoke test of the kernel benchmark in quick mode: it runs end to end and every figure is there.

use sessionwatch_bench::kernel::run_kernel_bench;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_bench_reports_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    let figures = run_kernel_bench(dir.path(), true).await;
    let names: Vec<&str> = figures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "append_single_session_sequential_per_s",
            "append_single_session_per_s",
            "append_100_sessions_per_s",
            "append_16_writers_per_s",
            "raw_sqlite_batched_16_per_s",
            "append_16_writers_vs_raw_batched_16_ratio",
            "append_16_writers_per_commit",
            "append_16_writers_sustained_per_s",
            "append_1_watcher_per_s",
            "append_100_watchers_per_s",
            "append_100_watchers_vs_1_ratio",
            "changes_since_200_p50_us",
            "changes_since_200_p99_us",
            "changes_since_200_recent_p50_us",
            "changes_since_200_cold_p50_us",
            "prune_62k_to_50k_ms",
            "sweep_100k_cursors_ms",
            "raw_sqlite_commit_per_s",
            "append_vs_raw_ratio",
            "append_sequential_vs_raw_ratio",
            "peak_rss_mb",
        ]
    );
    for f in &figures {
        assert!(f.value.is_finite() && f.value > 0.0, "{} = {} {}", f.name, f.value, f.unit);
        assert!(!f.unit.is_empty());
    }
    let p50 = figures.iter().find(|f| f.name == "changes_since_200_p50_us").unwrap().value;
    let p99 = figures.iter().find(|f| f.name == "changes_since_200_p99_us").unwrap().value;
    assert!(p50 <= p99);
}
