//! A `sessionwatch serve` process on a big database against one on a small one: its time from process
//! start to the first answered request (over many cursors, a thousand of them pending), and its peak
//! RSS after the same requests (over many sessions).

use super::{Sizes, ratio};
use crate::sqlite_fixtures::Loader;
use crate::{Figure, progress_bar};
use serde_json::json;
use sessionwatch_core::AgentSessionKey;
use sessionwatch_core::{Clock, SystemClock};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The store identity of a gateway serving a SQLite file: cursors bound to it are swept at its start.
const SERVE_IDENTITY: &str = "sessionwatch";
/// Targets per watcher in the cursor fixtures.
const TARGETS: u64 = 100;

/// A running `sessionwatch serve` on `db` (its own data dir and an empty `HOME`), stopped when dropped.
struct Served {
    child: Child,
    base: String,
    _home: tempfile::TempDir,
}

impl Served {
    /// Starts it and waits for its first answered request; answers it and the time that took.
    async fn start(exe: &Path, db: &Path) -> anyhow::Result<(Served, Duration)> {
        let home = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut command = Command::new(exe);
        command
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--auth", "none", "--database"])
            .arg(db)
            .arg("--data-dir")
            .arg(home.path().join("data"))
            .env("HOME", home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for var in ["SESSIONWATCH_CONFIG", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_DATA_HOME", "OPENCODE_DB"]
        {
            command.env_remove(var);
        }
        let started = Instant::now();
        let child = command.spawn()?;
        let served = Served { child, base: format!("http://127.0.0.1:{port}"), _home: home };
        let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build()?;
        let deadline = started + Duration::from_secs(300);
        loop {
            match client.get(format!("{}/healthz", served.base)).send().await {
                Ok(r) if r.status().is_success() => return Ok((served, started.elapsed())),
                Ok(r) => anyhow::bail!("serve answered /healthz with {}", r.status()),
                Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(1)).await,
                Err(e) => anyhow::bail!("serve never answered: {e}"),
            }
        }
    }

    fn peak_rss_mb(&self) -> f64 {
        crate::peak_rss_mb_of(&format!("/proc/{}/status", self.child.id()))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // SIGTERM: a clean shutdown checkpoints the WAL, so the next start-up does not replay it.
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fresh(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

/// A database of `n` cursors (watchers of [`TARGETS`] targets each), `pending` of them pending, spread
/// evenly over the first `small` (the rest settled); answers its path and size in bytes.
fn cursor_db(dir: &Path, name: &str, n: u64, small: u64, pending: u64) -> anyhow::Result<(PathBuf, u64)> {
    let path = fresh(dir, name);
    let mut loader = Loader::open(&path).map_err(anyhow::Error::msg)?;
    let every = (small / pending.max(1)).max(1);
    let cursors = (0..n).map(move |i| {
        let (l, n, m) = if i < small && i % every == 0 { (3, 4, 5) } else { (5, 5, 5) };
        (
            AgentSessionKey::build(&format!("w{}", i / TARGETS), "main"),
            AgentSessionKey::build_subagent("main", &format!("t{}", i % TARGETS)),
            l,
            n,
            m,
        )
    });
    let pb = progress_bar(n, name);
    loader
        .fill_cursors(cursors, SERVE_IDENTITY, SystemClock.now_ms(), &|n| pb.set_position(n))
        .map_err(anyhow::Error::msg)?;
    pb.finish_and_clear();
    let bytes = loader.database_bytes().map_err(anyhow::Error::msg)?;
    Ok((path, bytes))
}

/// Start-up over `sz.big_cursors` against `sz.small_cursors` cursors, `sz.pending_cursors` pending in
/// each, in alternating runs (medians); and the database bytes per cursor.
pub(super) async fn startup(exe: &Path, dir: &Path, sz: &Sizes) -> anyhow::Result<Vec<Figure>> {
    let p = sz.pending_cursors;
    let (small_db, small_bytes) =
        cursor_db(dir, "scale-cursors-small.db", sz.small_cursors, sz.small_cursors, p)?;
    let (big_db, big_bytes) = cursor_db(dir, "scale-cursors-big.db", sz.big_cursors, sz.small_cursors, p)?;
    let (mut small, mut big) = (vec![], vec![]);
    for _ in 0..sz.startups {
        small.push(Served::start(exe, &small_db).await?.1);
        big.push(Served::start(exe, &big_db).await?.1);
    }
    small.sort();
    big.sort();
    let ms = |v: &[Duration]| v[v.len() / 2].as_secs_f64() * 1e3;
    let (small_ms, big_ms) = (ms(&small), ms(&big));
    for db in [&small_db, &big_db] {
        let _ = std::fs::remove_file(db);
    }
    Ok(vec![
        Figure::new("cursors_small", sz.small_cursors as f64, "cursors"),
        Figure::new("cursors_big", sz.big_cursors as f64, "cursors"),
        Figure::new("cursors_pending", p as f64, "cursors"),
        Figure::new("startup_ms_10k_cursors", small_ms, "ms"),
        Figure::new("startup_ms_1m_cursors", big_ms, "ms"),
        Figure::new("startup_1m_vs_10k_cursors_ratio", ratio(big_ms, small_ms), "x"),
        Figure::new(
            "db_bytes_per_cursor",
            ratio(big_bytes.saturating_sub(small_bytes) as f64, (sz.big_cursors - sz.small_cursors) as f64),
            "bytes",
        ),
    ])
}

fn session_key(i: u64) -> String {
    AgentSessionKey::build("bench", &format!("bench:s{i:07}"))
}

fn sessions_db(dir: &Path, name: &str, n: u64) -> anyhow::Result<PathBuf> {
    let path = fresh(dir, name);
    let mut loader = Loader::open(&path).map_err(anyhow::Error::msg)?;
    let pb = progress_bar(n, name);
    loader
        .fill_sessions((0..n).map(session_key), SystemClock.now_ms(), &|n| pb.set_position(n))
        .map_err(anyhow::Error::msg)?;
    pb.finish_and_clear();
    Ok(path)
}

/// The same requests on any size: a human turn into, and a `session_status` page of, each of
/// `touched` sessions spread over the `n`, and the dashboard's first and last overview pages.
async fn workload(served: &Served, n: u64, touched: u64) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let post = |path: String, body: serde_json::Value| {
        let client = client.clone();
        let url = format!("{}{path}", served.base);
        async move {
            let r = client.post(url).json(&body).send().await?;
            anyhow::ensure!(r.status().is_success(), "{path} answered {}", r.status());
            r.bytes().await?;
            anyhow::Ok(())
        }
    };
    for j in 0..touched {
        let key = session_key(j * 7_919 % n);
        let inbound = format!("/v1/sessions/{}/inbound", key.replace(':', "%3A"));
        post(
            inbound,
            json!({ "text": format!("turn {j}"), "channel": "bench", "actor": { "type": "human" } }),
        )
        .await?;
        let status = json!({ "tool": "session_status", "sessionKey": "agent:bench:main",
            "args": { "sessionKey": key, "changesSince": 0, "limit": 200 } });
        post("/tools/invoke".into(), status).await?;
    }
    for page in ["/".to_string(), format!("/?page={}", n / 50)] {
        let r = client.get(format!("{}{page}", served.base)).send().await?;
        anyhow::ensure!(r.status().is_success(), "{page} answered {}", r.status());
        r.bytes().await?;
    }
    Ok(())
}

/// Peak RSS of a gateway serving `sz.big_sessions` against `sz.small_sessions` sessions after the same
/// [`workload`].
pub(super) async fn peak_rss(exe: &Path, dir: &Path, sz: &Sizes) -> anyhow::Result<Vec<Figure>> {
    let mut out = vec![];
    let mut rss = vec![];
    for (n, name) in
        [(sz.small_sessions, "scale-sessions-small.db"), (sz.big_sessions, "scale-sessions-big.db")]
    {
        let db = sessions_db(dir, name, n)?;
        let (served, _) = Served::start(exe, &db).await?;
        workload(&served, n, sz.touched_sessions.min(n)).await?;
        rss.push(served.peak_rss_mb());
        drop(served);
        let _ = std::fs::remove_file(&db);
    }
    out.push(Figure::new("sessions_small", sz.small_sessions as f64, "sessions"));
    out.push(Figure::new("sessions_big", sz.big_sessions as f64, "sessions"));
    out.push(Figure::new("peak_rss_mb_10k_sessions", rss[0], "MiB"));
    out.push(Figure::new("peak_rss_mb_1m_sessions", rss[1], "MiB"));
    out.push(Figure::new("peak_rss_1m_vs_10k_sessions_ratio", ratio(rss[1], rss[0]), "x"));
    Ok(out)
}
