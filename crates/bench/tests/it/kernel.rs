//! Smoke test of the kernel benchmark in quick mode: it runs end to end and every figure is there.

use sessionwatch_bench::Figure;
use sessionwatch_bench::kernel::{Part, run_kernel_bench};

/// The kernel bench's figure names on `backend` (`sqlite` or `postgres`, in the bare baselines' names),
/// in order: the appends and page reads, then `after_reads`, the prune, sweep and baseline ratios, then
/// `last`.
pub fn kernel_figure_names(backend: &str, after_reads: &[&str], last: &[&str]) -> Vec<String> {
    let reads = [
        "append_single_session_sequential_per_s",
        format!("raw_{backend}_commit_per_s").as_str(),
        "append_sequential_vs_raw_ratio",
        "append_single_session_per_s",
        "append_100_sessions_per_s",
        "append_16_writers_per_s",
        format!("raw_{backend}_batched_16_per_s").as_str(),
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
    ]
    .map(str::to_string);
    let rest = ["prune_62k_to_50k_ms", "sweep_100k_cursors_ms", "append_vs_raw_ratio", "peak_rss_mb"]
        .map(str::to_string);
    let strings = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    [reads.to_vec(), strings(after_reads), rest.to_vec(), strings(last)].concat()
}

/// Checks that the figures are `names`, in order, each a positive number with a unit; answers a lookup
/// of a figure's value by name.
pub fn check_figures<'a>(figures: &'a [Figure], names: &[String]) -> impl Fn(&str) -> f64 + use<'a> {
    let got: Vec<&str> = figures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(got, names);
    for f in figures {
        assert!(f.value.is_finite() && f.value > 0.0, "{} = {} {}", f.name, f.value, f.unit);
        assert!(!f.unit.is_empty());
    }
    |n: &str| figures.iter().find(|f| f.name == n).unwrap().value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_bench_reports_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    let figures = run_kernel_bench(dir.path(), true, &Part::ALL).await;
    let value = check_figures(&figures, &kernel_figure_names("sqlite", &[], &[]));
    assert!(value("changes_since_200_p50_us") <= value("changes_since_200_p99_us"));
}

/// `bench kernel --part`: only the parts asked for run, each with its own baseline; the ratio that needs
/// two parts is left out when one of them did not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_runs_alone_with_its_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let figures = run_kernel_bench(dir.path(), true, &[Part::Sweep, Part::Sequential]).await;
    let names = [
        "sweep_100k_cursors_ms",
        "append_single_session_sequential_per_s",
        "raw_sqlite_commit_per_s",
        "append_sequential_vs_raw_ratio",
        "peak_rss_mb",
    ];
    // The lookup it answers is not needed here: the names and values are what is checked.
    let _ = check_figures(&figures, &names.map(str::to_string));
}
