//! `sessionwatch bench scale --quick --json` runs end to end and prints every figure (not its timings).

#[test]
fn bench_scale_quick_prints_every_figure_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let figures = crate::support::bench_figures(
        &["scale", "--quick", "--dir", dir.path().to_str().unwrap()],
        dir.path(),
    );
    let names: Vec<&str> = figures.iter().map(|f| f["name"].as_str().unwrap()).collect();
    for name in [
        "changes_since_cold_p50_us_100k_events",
        "changes_since_cold_p50_us_10m_events",
        "changes_since_cold_10m_vs_100k_ratio",
        "db_bytes_per_event",
        "startup_ms_10k_cursors",
        "startup_ms_1m_cursors",
        "startup_1m_vs_10k_cursors_ratio",
        "db_bytes_per_cursor",
        "peak_rss_mb_10k_sessions",
        "peak_rss_mb_1m_sessions",
        "peak_rss_1m_vs_10k_sessions_ratio",
        "append_p99_us_idle",
        "append_p99_us_during_prune",
        "append_p99_during_prune_vs_idle_ratio",
        "monitor_idle_tick_ms_1000_sessions",
        "bare_stat_ms_1000_sessions",
        "monitor_idle_tick_vs_bare_stat_ratio",
        "monitor_link_reads_ms_1000_sessions",
        "monitor_full_link_read_ms_1000_sessions",
        "monitor_turn_tick_ms_1000_sessions",
        "one_classification_ms",
        "monitor_turn_tick_vs_idle_tick_plus_one_classification_ratio",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    for f in &figures {
        assert!(f["value"].is_number() && f["unit"].is_string(), "{f}");
    }
    let value = |n: &str| figures.iter().find(|f| f["name"] == n).unwrap()["value"].as_f64().unwrap();
    assert!(value("prune_rows_deleted") >= 5_000.0, "the prune deleted what retention let go");
    assert_eq!(value("adopted_sessions"), 40.0);
}
