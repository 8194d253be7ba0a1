//! `/metrics` in the Prometheus text format.

use sessionwatch_kernel::Kernel;
use sessionwatch_store::Store;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const BUCKETS_SECONDS: [f64; 10] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0];

/// `sessionwatch_notices_reopened_total`: acknowledging through the present never reopens a notice.
static NEVER_REOPENED: AtomicU64 = AtomicU64::new(0);

/// Request latency histogram. A request counts in the first bucket that holds it, and the buckets are
/// summed into Prometheus's cumulative ones when rendered: counting it in every bucket above too was up
/// to ten atomic adds a request on cache lines every worker shares.
#[derive(Default)]
pub struct HttpMetrics {
    /// Requests by the first bucket that holds them (not cumulative).
    buckets: [AtomicU64; 10],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl HttpMetrics {
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = BUCKETS_SECONDS.iter().position(|b| secs <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(d.as_micros() as u64, Ordering::Relaxed);
    }

    /// The latency histogram in the Prometheus text format (cumulative buckets).
    fn render_histogram(&self, out: &mut String) {
        let name = "sessionwatch_http_request_duration_seconds";
        let _ = writeln!(out, "# HELP {name} HTTP request latency.\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (b, n) in BUCKETS_SECONDS.iter().zip(&self.buckets) {
            cumulative += n.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum {}", self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {count}");
    }

    pub fn render<S: Store>(&self, kernel: &Kernel<S>) -> String {
        let m = kernel.metrics();
        let mut out = String::new();
        let counters = [
            ("sessionwatch_events_recorded_total", "Events appended to the signal log.", &m.events_recorded),
            (
                "sessionwatch_events_not_recorded_total",
                "Appends that failed (best effort).",
                &m.events_not_recorded,
            ),
            ("sessionwatch_notices_queued_total", "Stale-state notices queued.", &m.notices_queued),
            (
                "sessionwatch_notices_acknowledged_total",
                "Notices acknowledged on drain.",
                &m.notices_acknowledged,
            ),
            (
                "sessionwatch_notices_reopened_total",
                "Notices re-opened for interleaved work: none since a drain acknowledges through the present \
                 (kept for dashboards and alerts that read it).",
                &NEVER_REOPENED,
            ),
            (
                "sessionwatch_notice_claims_failed_total",
                "Drained notices put back in the queue undelivered because the store could not claim them.",
                &m.notices_claim_failed,
            ),
            (
                "sessionwatch_notices_dropped_stale_total",
                "Drained notices not delivered: already delivered by another gateway, or the watch is gone.",
                &m.notices_dropped_stale,
            ),
            ("sessionwatch_wakes_total", "Wake signals sent to main-session watchers.", &m.wakes),
        ];
        let group = kernel.group_commits();
        let store_counters = [
            (
                "sessionwatch_store_group_commits_total",
                "Write transactions of the store's group commit.",
                group.commits,
            ),
            (
                "sessionwatch_store_group_commit_writes_total",
                "Writes carried by them (SQLite: every write; PostgreSQL: the batched appends).",
                group.writes,
            ),
        ];
        let values =
            counters.iter().map(|(n, h, v)| (*n, *h, v.load(Ordering::Relaxed))).chain(store_counters);
        for (name, help, v) in values {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        }
        let depths = kernel.queue_depths();
        let _ = writeln!(out, "# HELP sessionwatch_queue_depth Queued system events per session.");
        let _ = writeln!(out, "# TYPE sessionwatch_queue_depth gauge");
        for (session, depth) in &depths {
            let label = session.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = writeln!(out, "sessionwatch_queue_depth{{session=\"{label}\"}} {depth}");
        }
        let total: usize = depths.iter().map(|(_, d)| d).sum();
        let _ = writeln!(out, "# HELP sessionwatch_queue_depth_total Queued system events in all sessions.");
        let _ = writeln!(
            out,
            "# TYPE sessionwatch_queue_depth_total gauge\nsessionwatch_queue_depth_total {total}"
        );
        self.render_histogram(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latency_buckets_are_rendered_cumulative() {
        let m = HttpMetrics::default();
        for d in [
            Duration::from_micros(100),
            Duration::from_millis(3),
            Duration::from_millis(3),
            Duration::from_secs(2),
        ] {
            m.observe(d);
        }
        let mut out = String::new();
        m.render_histogram(&mut out);
        let bucket = |le: &str| {
            let prefix = format!("sessionwatch_http_request_duration_seconds_bucket{{le=\"{le}\"}} ");
            out.lines().find_map(|l| l.strip_prefix(prefix.as_str())).map(str::to_string)
        };
        assert_eq!(bucket("0.0005").as_deref(), Some("1"));
        assert_eq!(bucket("0.0025").as_deref(), Some("1"));
        assert_eq!(bucket("0.005").as_deref(), Some("3"));
        assert_eq!(bucket("1").as_deref(), Some("3"), "2 s is over every bucket but +Inf");
        assert_eq!(bucket("+Inf").as_deref(), Some("4"));
        assert!(out.contains("sessionwatch_http_request_duration_seconds_count 4"));
    }
}
