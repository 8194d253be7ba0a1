//! The PostgreSQL benches in quick mode: they run end to end and every figure is there. Each test
//! runs against the test server (`SESSIONWATCH_TEST_PG_URL`); `SKIPPED` without one unless
//! `SESSIONWATCH_REQUIRE_PG=1`.

use crate::kernel::{check_figures, kernel_figure_names};
use sessionwatch_store::postgres::testing::TestSchema;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cross_gateway_bench_runs() {
    let Some(schema) = TestSchema::create("the_cross_gateway_bench_runs").await else { return };
    let figures = sessionwatch_bench::cross_gateway::cross_gateway_notice_ms(schema.url(), 20).await.unwrap();
    let get = |n: &str| figures.iter().find(|f| f.name == n).map(|f| f.value).unwrap();
    assert_eq!(get("cross_gateway_notice_samples"), 20.0);
    assert!(get("cross_gateway_notice_p50_ms") < 1000.0, "{figures:?}");
    assert!(get("cross_gateway_notice_p50_ms") <= get("cross_gateway_notice_p99_ms"));
    assert!(get("raw_postgres_notify_p50_ms") <= get("raw_postgres_notify_p99_ms"));
}

/// The kernel benchmark in quick mode on PostgreSQL: it runs end to end and every figure is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_kernel_bench_on_postgres_reports_every_figure() {
    let Some(schema) = TestSchema::create("quick_kernel_bench_on_postgres_reports_every_figure").await else {
        return;
    };
    let figures = sessionwatch_bench::kernel::run_kernel_bench_postgres(
        schema.url(),
        true,
        &sessionwatch_bench::kernel::Part::ALL,
    )
    .await
    .expect("the PostgreSQL kernel bench runs");
    let names = kernel_figure_names(
        "postgres",
        &[
            "raw_postgres_select_p50_us",
            "durable_head_read_p50_us",
            "changes_since_200_recent_vs_raw_select_ratio",
            "changes_since_200_recent_vs_head_read_ratio",
        ],
        &[
            "cross_gateway_notice_p50_ms",
            "cross_gateway_notice_p99_ms",
            "raw_postgres_notify_p50_ms",
            "raw_postgres_notify_p99_ms",
            "cross_gateway_notice_p99_vs_notify_p99_ratio",
        ],
    );
    let value = check_figures(&figures, &names);
    assert!(value("changes_since_200_p50_us") <= value("changes_since_200_p99_us"));
    assert!(value("cross_gateway_notice_p50_ms") <= value("cross_gateway_notice_p99_ms"));
    assert_eq!(
        value("raw_postgres_select_p50_us"),
        value("durable_head_read_p50_us"),
        "one measurement, two names"
    );
}
