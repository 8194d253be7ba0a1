//! `sessionwatch bench hooks --quick --json` runs real hook processes against a gateway, the notice
//! reaching the manager's next prompt each round, and prints every figure (not its timings).

#[test]
fn bench_hooks_quick_prints_every_figure_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let figures = crate::support::bench_figures(&["hooks", "--quick"], dir.path());
    let value = |name: &str| {
        figures
            .iter()
            .find(|f| f["name"] == name)
            .and_then(|f| f["value"].as_f64())
            .unwrap_or_else(|| panic!("no figure {name} in {figures:?}"))
    };
    assert_eq!(value("hook_runs"), 20.0);
    for name in [
        "hook_user_prompt_submit_p50_ms",
        "hook_user_prompt_submit_p99_ms",
        "hook_user_prompt_submit_notice_p50_ms",
        "hook_user_prompt_submit_notice_p99_ms",
        "process_start_p50_ms",
        "hook_vs_process_start_p50",
    ] {
        assert!(value(name) > 0.0, "{name} is not positive: {figures:?}");
    }
}
