//! `bench gateway --part`: the parts asked for run, each beside the bare router when it is a rate.

use sessionwatch_bench::gateway::{Part, run};

fn names(figures: &[sessionwatch_bench::Figure]) -> Vec<&str> {
    figures.iter().map(|f| f.name.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_runs_alone_beside_its_baseline() {
    let inbound = run(true, &[Part::Inbound]).await.unwrap();
    assert_eq!(
        names(&inbound),
        [
            "bare_http_per_s",
            "bare_http_p99_us",
            "bare_http_cpu_us_per_request",
            "bare_http_cores_busy",
            "inbound_human_turn_per_s",
            "inbound_human_turn_p50_us",
            "inbound_human_turn_p99_us",
            "inbound_human_turn_cpu_us_per_request",
            "inbound_human_turn_cores_busy",
            "inbound_human_turn_vs_bare_ratio",
            "inbound_human_turn_p99_vs_bare_p99",
        ]
    );
    let status_and_wake = run(true, &[Part::Status, Part::Wake]).await.unwrap();
    assert_eq!(
        names(&status_and_wake),
        [
            "bare_http_per_s",
            "bare_http_p99_us",
            "bare_http_cpu_us_per_request",
            "bare_http_cores_busy",
            "session_status_changes_since_per_s",
            "session_status_changes_since_p50_us",
            "session_status_changes_since_p99_us",
            "session_status_cpu_us_per_request",
            "session_status_cores_busy",
            "session_status_vs_bare_ratio",
            "wake_latency_p50_ms",
            "wake_latency_p99_ms",
        ]
    );
    for f in inbound.iter().chain(&status_and_wake) {
        assert!(f.value.is_finite() && f.value > 0.0, "{} = {}", f.name, f.value);
    }
}
