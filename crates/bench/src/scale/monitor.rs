//! The upstream monitor at scale: an idle tick over many adopted sessions of the four sources against
//! a bare `stat()` of their files, and a tick after one new turn against the idle tick plus one
//! classification. The Claude, Codex and Pi files are copies of the real transcripts in the upstream
//! crate's fixtures (each under a thread id of its own); the OpenCode sessions share one database
//! written by [`build_opencode_db`](crate::upstream::build_opencode_db).

use super::{Sizes, ratio};
use crate::{Figure, progress_bar};
use sessionwatch_core::Provenance;
use sessionwatch_server::embedded::Embedded;
use sessionwatch_store::{Links, SqliteStore, WatchedLinks};
use sessionwatch_upstream::{CatalogId, Homes, Probe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The embedded gateway the monitor's figures are taken on.
type Gateway = sessionwatch_server::Gateway<SqliteStore>;

const CLAUDE: &str = include_str!(
    "../../../upstream/tests/fixtures/claude/home/.claude/projects/-home-user-work-demo/5ae04bcf-dcae-4d38-b508-e94477a366c6.jsonl"
);

/// A real transcript of one file-based source, copied once per adopted session of that source.
struct Transcript {
    catalog: CatalogId,
    text: &'static str,
    /// The fixture's thread id (a UUID): each copy's thread keeps its first four groups.
    id: &'static str,
    /// Where the source keeps a thread's file under the home: this, the thread id, `.jsonl`.
    file_prefix: &'static str,
}

/// The file-based sources, in the order [`write_sources`] deals sessions to them (OpenCode comes last).
const TRANSCRIPTS: [Transcript; 3] = [
    Transcript {
        catalog: CatalogId::Claude,
        text: CLAUDE,
        id: "5ae04bcf-dcae-4d38-b508-e94477a366c6",
        file_prefix: ".claude/projects/-bench/",
    },
    Transcript {
        catalog: CatalogId::Codex,
        text: include_str!(
            "../../../upstream/tests/fixtures/codex/home/.codex/sessions/2026/12/02/rollout-2026-12-02T09-34-20-01a2361a-df64-7aa1-a8f6-d12f148e569f.jsonl"
        ),
        id: "01a2361a-df64-7aa1-a8f6-d12f148e569f",
        file_prefix: ".codex/sessions/2026/12/02/rollout-2026-12-02T09-34-20-",
    },
    Transcript {
        catalog: CatalogId::Pi,
        text: include_str!(
            "../../../upstream/tests/fixtures/pi/home/.pi/agent/sessions/--home-user-work-demo--/2026-12-02T09-35-23-040Z_01a2361b-d39f-759d-9272-bf2c2772ea6a.jsonl"
        ),
        id: "01a2361b-d39f-759d-9272-bf2c2772ea6a",
        file_prefix: ".pi/agent/sessions/--bench--/2026-12-02T09-35-23-040Z_",
    },
];

/// The session watching every adopted one.
const WATCHER: &str = "agent:main:main";
/// Messages in each generated OpenCode session.
const OPENCODE_MESSAGES: usize = 20;

/// One adopted session's source: where its catalog finds it.
struct Source {
    catalog: CatalogId,
    thread: String,
    path: PathBuf,
}

impl Transcript {
    /// The `i`th copy under `home`: the fixture's file under a thread id of its own (the UUID's last group
    /// is `i`).
    fn copy(&self, home: &Path, i: usize) -> anyhow::Result<Source> {
        let uuid_head = &self.id[..self.id.rfind('-').expect("a UUID") + 1];
        let thread = format!("{uuid_head}{i:012x}");
        let path = home.join(format!("{}{thread}.jsonl", self.file_prefix));
        std::fs::create_dir_all(path.parent().expect("a file in a directory"))?;
        std::fs::write(&path, self.text.replace(self.id, &thread))?;
        Ok(Source { catalog: self.catalog, thread, path })
    }
}

/// `n` sessions, a quarter per source, under `home`.
fn write_sources(home: &Path, n: usize) -> anyhow::Result<Vec<Source>> {
    let pb = progress_bar(n as u64, "adopted files");
    let opencode_db = home.join(".local/share/opencode/opencode.db");
    std::fs::create_dir_all(opencode_db.parent().expect("a dir"))?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let source = match TRANSCRIPTS.get(i % (TRANSCRIPTS.len() + 1)) {
            Some(transcript) => transcript.copy(home, i)?,
            None => {
                let thread = format!("ses_bench{i:021}");
                crate::upstream::build_opencode_db(&opencode_db, &thread, OPENCODE_MESSAGES)?;
                Source { catalog: CatalogId::OpenCode, thread, path: opencode_db.clone() }
            }
        };
        out.push(source);
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(out)
}

/// A new human turn at the end of a Claude transcript: the fixture's first prompt typed into the TUI
/// again, as a new row (the `n`th of the run: its ids are its own).
fn append_claude_turn(path: &Path, n: usize) -> anyhow::Result<()> {
    use std::io::Write;
    let line = CLAUDE
        .lines()
        .find(|l| l.contains("Hello from the keyboard"))
        .ok_or_else(|| anyhow::anyhow!("the Claude fixture has no human prompt"))?;
    let mut row: serde_json::Value = serde_json::from_str(line)?;
    row["uuid"] = format!("0b0b0b0b-0000-4000-8000-{:012x}", 2 * n + 1).into();
    row["promptId"] = format!("0b0b0b0b-0000-4000-8000-{:012x}", 2 * n + 2).into();
    row["timestamp"] = "2026-12-02T09:40:00.000Z".into();
    row["message"]["content"] = "One more turn, typed by a human during the bench.".into();
    let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
    writeln!(file, "{row}")?;
    Ok(())
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

/// What a tick reads from the store before any source is checked, alone, the median of `runs` each: an
/// idle tick's question whether the watched links changed since the version it holds (it reads nothing
/// per link), and the read of every watched link that a tick after a change makes.
async fn link_reads_ms(gateway: &Gateway, runs: usize) -> anyhow::Result<(f64, f64)> {
    let store = gateway.store();
    let WatchedLinks::Read { version: Some(version), .. } = store.watched_links_since(None).await? else {
        anyhow::bail!("SQLite answered the watched links without a version");
    };
    let (mut idle, mut full) = (vec![], vec![]);
    for _ in 0..runs {
        let start = Instant::now();
        let answer = store.watched_links_since(Some(version)).await?;
        idle.push(start.elapsed());
        anyhow::ensure!(answer == WatchedLinks::Unchanged, "the links changed while idle");
        let start = Instant::now();
        std::hint::black_box(store.watched_links().await?);
        full.push(start.elapsed());
    }
    Ok((median(idle), median(full)))
}

pub(super) async fn ticks(dir: &Path, sz: &Sizes) -> anyhow::Result<Vec<Figure>> {
    let home = dir.join("scale-home");
    let _ = std::fs::remove_dir_all(&home);
    let sources = write_sources(&home, sz.adopted)?;
    let gw = Embedded::start().await?;
    let gateway = gw.gateway.clone();
    gateway.set_homes(Homes::with_home(&home));
    adopt_and_watch(&gateway, &sources).await?;
    let (idle_ms, stat_ms) = idle_ticks(&gateway, &sources, sz.ticks).await?;
    let (idle_reads_ms, full_reads_ms) = link_reads_ms(&gateway, sz.ticks).await?;
    let (turn_ms, one_ms) = turn_ticks(&gateway, &sources, sz.ticks).await?;
    gw.stop().await?;
    let _ = std::fs::remove_dir_all(&home);
    Ok(vec![
        Figure::new("adopted_sessions", sources.len() as f64, "sessions"),
        Figure::new("monitor_idle_tick_ms_1000_sessions", idle_ms, "ms"),
        Figure::new("bare_stat_ms_1000_sessions", stat_ms, "ms"),
        Figure::new("monitor_idle_tick_vs_bare_stat_ratio", ratio(idle_ms, stat_ms), "x"),
        Figure::new("monitor_link_reads_ms_1000_sessions", idle_reads_ms, "ms"),
        Figure::new("monitor_full_link_read_ms_1000_sessions", full_reads_ms, "ms"),
        Figure::new("monitor_turn_tick_ms_1000_sessions", turn_ms, "ms"),
        Figure::new("one_classification_ms", one_ms, "ms"),
        Figure::new(
            "monitor_turn_tick_vs_idle_tick_plus_one_classification_ratio",
            ratio(turn_ms, idle_ms + one_ms),
            "x",
        ),
    ])
}

/// Adopts every source's session and watches it (the monitor checks the links of watched sessions only).
async fn adopt_and_watch(gateway: &Gateway, sources: &[Source]) -> anyhow::Result<()> {
    let pb = progress_bar(sources.len() as u64, "adopting");
    for s in sources {
        let adopted = gateway
            .continue_catalog(s.catalog.as_str(), &s.thread, None, None)
            .await
            .map_err(|e| anyhow::anyhow!("adopting {} {}: {e:?}", s.catalog.as_str(), s.thread))?;
        let watch =
            gateway.kernel().register_watch(WATCHER, &adopted.session_key, Provenance::Explicit).await;
        anyhow::ensure!(watch.is_watching(), "watching {}: {watch:?}", adopted.session_key);
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(())
}

/// Medians of `ticks` idle ticks and of as many bare `stat()`s of every source's file, in ms.
async fn idle_ticks(gateway: &Gateway, sources: &[Source], ticks: usize) -> anyhow::Result<(f64, f64)> {
    let first = gateway.monitor_tick().await; // untimed: warms the caches a running monitor has warm
    anyhow::ensure!(
        first.checked == sources.len(),
        "the first tick checked {} links: {first:?}",
        first.checked
    );
    let (mut tick, mut stat) = (vec![], vec![]);
    for _ in 0..ticks {
        let start = Instant::now();
        let report = gateway.monitor_tick().await;
        tick.push(start.elapsed());
        anyhow::ensure!(report.events == 0, "an idle tick recorded events: {report:?}");
        let start = Instant::now();
        for s in sources {
            std::hint::black_box(std::fs::metadata(&s.path)?);
        }
        stat.push(start.elapsed());
    }
    Ok((median(tick), median(stat)))
}

/// One new turn in one Claude session per sample: the tick classifies it, records it and advances the
/// link; one classification of the same rows alone beside it. A different session each time, so each
/// tick finds exactly one new row. Medians (a single sample swung 1.5–2.5× between runs), in ms.
async fn turn_ticks(gateway: &Gateway, sources: &[Source], ticks: usize) -> anyhow::Result<(f64, f64)> {
    let claude: Vec<&Source> = sources.iter().filter(|s| s.catalog == CatalogId::Claude).collect();
    let links = gateway.store().watched_links().await?;
    let (mut turn, mut one) = (vec![], vec![]);
    for (n, changed) in claude.iter().take(ticks.max(1)).enumerate() {
        let link = links
            .iter()
            .find(|l| l.thread_id == changed.thread)
            .ok_or_else(|| anyhow::anyhow!("no link for {}", changed.thread))?;
        append_claude_turn(&changed.path, n)?;
        let start = Instant::now();
        let report = gateway.monitor_tick().await;
        turn.push(start.elapsed());
        anyhow::ensure!(
            report.events == 1,
            "the tick after one turn recorded {} events: {report:?}",
            report.events
        );
        let probe = Probe {
            reference_json: &link.reference_json,
            marker_json: &link.marker_json,
            own_recent_user_texts: &[],
        };
        let start = Instant::now();
        std::hint::black_box(sessionwatch_upstream::check(CatalogId::Claude, &probe));
        one.push(start.elapsed());
    }
    Ok((median(turn), median(one)))
}
