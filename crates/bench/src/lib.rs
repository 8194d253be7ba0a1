//! The benchmarks behind `sessionwatch bench kernel|gateway|hooks|upstream|scale`.
//!
//! Every measured operation goes through a library's public API (the kernel, the store traits, the
//! gateway over loopback HTTP, the upstream classifiers, the `sessionwatch` binary itself). Big fixtures
//! are written straight into the databases by this crate's loaders ([`sqlite_fixtures`],
//! [`postgres_fixtures`]) outside the timed parts, keeping the store's invariants (contiguous
//! per-session sequences, head rows at the last sequence). Each figure that has a target is printed next
//! to a baseline measured in the same run, and their ratio.

pub mod cross_gateway;
pub mod dashboard;
pub mod gateway;
pub mod hooks;
pub mod kernel;
mod kernel_backends;
pub mod postgres_fixtures;
pub mod scale;
pub mod sqlite_fixtures;
pub mod upstream;

use std::time::Duration;

/// One measured figure: `{"name","value","unit"}` in `--json` output.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: &'static str,
}

impl Figure {
    pub fn new(name: impl Into<String>, value: f64, unit: &'static str) -> Figure {
        Figure { name: name.into(), value, unit }
    }
}

/// The `p` quantile (0..=1) of `sorted`, nearest rank; zero when empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Peak resident set size (`VmHWM`) of the process whose `/proc/<pid>/status` is at `status`, in MiB.
pub fn peak_rss_mb_of(status: &str) -> f64 {
    std::fs::read_to_string(status)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub fn progress_bar(len: u64, what: &str) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::io::IsTerminal;
    let pb = ProgressBar::new(len);
    if std::io::stderr().is_terminal() {
        pb.set_draw_target(ProgressDrawTarget::stderr());
    } else {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    if let Ok(style) = ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len} ({elapsed})") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}
