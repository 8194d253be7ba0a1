//! The upstream bench runs on small inputs.

use sessionwatch_bench::upstream;

#[test]
fn the_upstream_bench_runs_on_small_inputs() {
    let rates = upstream::jsonl_rates(2).unwrap();
    assert_eq!(rates.len(), 3);
    for r in &rates {
        assert!(r.bytes >= 2 * 1024 * 1024 && r.humans > 0, "{r:?}");
    }
    let o = upstream::opencode_rate(200).unwrap();
    assert_eq!(o.human_turns, 100);
    let figures = upstream::run(1_000_000, 50).unwrap();
    let names: Vec<&str> = figures.iter().map(|f| f.name.as_str()).collect();
    for name in
        ["claude_scan_mb_per_s", "codex_scan_vs_read_only", "pi_read_only_mb_per_s", "opencode_full_check_ms"]
    {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
}
