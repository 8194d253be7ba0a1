//! `sessionwatch bench scale`: how the costs grow with the work, on SQLite. Each figure is measured on a
//! big fixture and on a small one in the same run, and printed with their ratio:
//!
//! - a cold `changesSince(200)` page (older than anything cached) in a log of 10M events against 100k
//!   ([`log`]); the database bytes per event;
//! - a `sessionwatch serve` process's time from its start to its first answered request over 1M cursors
//!   against 10k (1k pending in each), and its peak RSS over 1M sessions against 10k ([`serve`]); the
//!   database bytes per cursor;
//! - the p99 of appends while a prune deletes 1M rows against idle appends ([`log`]);
//! - an idle monitor tick over 1,000 adopted sessions of the four sources (real-format files) against a
//!   bare `stat()` of the same files, and a tick after one new turn against the idle tick plus one
//!   classification ([`monitor`]).
//!
//! The fixtures are written by [`crate::sqlite_fixtures::Loader`] (progress on stderr) outside the
//! timed parts. `--quick` shrinks every size so a smoke test runs it in seconds; its numbers mean
//! nothing.

mod log;
mod monitor;
mod serve;

use crate::Figure;
use std::path::Path;

/// The sizes of one run. The figures keep their names (`…_10m_events`, `…_1m_cursors`) whatever the
/// sizes; the sizes are printed beside them.
#[derive(Clone, Debug)]
pub struct Sizes {
    /// Events in the big log and in the small one.
    pub big_events: u64,
    pub small_events: u64,
    /// Cold pages read in each log.
    pub page_queries: usize,
    /// Cursors in the big and small databases, and how many of them are pending in each.
    pub big_cursors: u64,
    pub small_cursors: u64,
    pub pending_cursors: u64,
    /// Start-ups timed on each database (alternating).
    pub startups: usize,
    /// Sessions in the big and small databases, and how many of them the RSS workload touches.
    pub big_sessions: u64,
    pub small_sessions: u64,
    pub touched_sessions: u64,
    /// Rows the prune deletes, rows retention keeps, and appends timed idle (enough that their p99 is not
    /// a handful of start-up outliers: with 2,000 it read 29 µs in one run and 192 µs in the next).
    pub prune_rows: u64,
    pub retained_rows: u64,
    pub appends: usize,
    /// Adopted sessions (a quarter per source) and idle ticks timed (enough that the median is a
    /// steady tick: the first few after the adoptions pay for their writes settling, 4–12 ms against 2.3),
    /// and as many ticks after one new turn each.
    pub adopted: usize,
    pub ticks: usize,
}

impl Sizes {
    pub const FULL: Sizes = Sizes {
        big_events: 10_000_000,
        small_events: 100_000,
        page_queries: 2_000,
        big_cursors: 1_000_000,
        small_cursors: 10_000,
        pending_cursors: 1_000,
        startups: 3,
        big_sessions: 1_000_000,
        small_sessions: 10_000,
        touched_sessions: 2_000,
        prune_rows: 1_000_000,
        retained_rows: 10_000,
        appends: 20_000,
        adopted: 1_000,
        ticks: 15,
    };

    pub const QUICK: Sizes = Sizes {
        big_events: 20_000,
        small_events: 4_000,
        page_queries: 50,
        big_cursors: 20_000,
        small_cursors: 1_000,
        pending_cursors: 100,
        startups: 1,
        big_sessions: 5_000,
        small_sessions: 500,
        touched_sessions: 50,
        prune_rows: 5_000,
        retained_rows: 1_000,
        appends: 50,
        adopted: 40,
        ticks: 2,
    };

    /// `n` events in the big log; the small one gets a hundredth (at least 2,000, at most `n`).
    pub fn with_events(mut self, n: u64) -> Sizes {
        self.big_events = n.max(2_000);
        self.small_events = (n / 100).clamp(2_000, self.big_events);
        self
    }
}

/// `a / b`, and 0 when `b` is 0.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// One part of the run (`bench scale --part`), each with its own fixtures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// Cold pages in a big log against a small one.
    Pages,
    /// A serve process's start-up over many cursors against few.
    Startup,
    /// A serve process's peak RSS over many sessions against few.
    Rss,
    /// Appends during a big prune against idle ones.
    Prune,
    /// The monitor's idle tick against a bare stat().
    Monitor,
}

impl Part {
    pub const ALL: [Part; 5] = [Part::Pages, Part::Startup, Part::Rss, Part::Prune, Part::Monitor];
}

/// Runs `parts` (in their order) in `dir` (database files, fixture homes; several GB at full size) and
/// answers the figures. `exe` is the `sessionwatch` binary whose `serve` is timed.
pub async fn run(exe: &Path, dir: &Path, sizes: &Sizes, parts: &[Part]) -> anyhow::Result<Vec<Figure>> {
    std::fs::create_dir_all(dir)?;
    let mut out = vec![];
    for part in parts {
        out.extend(match part {
            Part::Pages => log::changes_since(dir, sizes).await?,
            Part::Startup => serve::startup(exe, dir, sizes).await?,
            Part::Rss => serve::peak_rss(exe, dir, sizes).await?,
            Part::Prune => log::appends_during_prune(dir, sizes).await?,
            Part::Monitor => monitor::ticks(dir, sizes).await?,
        });
    }
    Ok(out)
}
