//! `sessionwatch bench gateway`, the dashboard's part: the overview's first page and a busy session's
//! page over loopback HTTP on a gateway holding 10,000 sessions and 50,000 watch cursors.

use crate::{Figure, percentile};
use sessionwatch_core::{AgentSessionKey, Provenance};
use sessionwatch_server::embedded::Embedded;
use sessionwatch_store::{NewSession, SessionStore, SignalLog, WatchRequest};
use std::time::{Duration, Instant};

const SESSIONS: usize = 10_000;
/// Watchers per session: 5 × 10,000 = 50,000 cursors.
const WATCHERS_EACH: usize = 5;

fn key(i: usize) -> String {
    AgentSessionKey::build("main", &format!("bench:s{i:05}"))
}

/// Fills the embedded gateway's store directly (the HTTP path is not what this measures).
async fn populate(gw: &Embedded, sessions: usize) -> anyhow::Result<()> {
    let store = gw.gateway.store();
    let now = gw.gateway.kernel().now();
    for chunk in (0..sessions).collect::<Vec<_>>().chunks(256) {
        let writes = chunk.iter().map(|&i| {
            let new = NewSession {
                session_key: key(i),
                agent_id: "main".into(),
                session_id: format!("sid-{i}"),
                kind: "other".into(),
                channel: Some("bench".into()),
                ..NewSession::default()
            };
            store.ensure_session(new, now + i as i64)
        });
        for r in futures::future::join_all(writes).await {
            r?;
        }
    }
    let pairs: Vec<(usize, usize)> = (0..sessions)
        .flat_map(|t| (1..=WATCHERS_EACH).map(move |k| ((t + k * 7919) % sessions, t)))
        .collect();
    for chunk in pairs.chunks(512) {
        let writes = chunk.iter().map(|&(w, t)| {
            let (w, t) = (AgentSessionKey::parse(&key(w)).unwrap(), AgentSessionKey::parse(&key(t)).unwrap());
            store.register_watch(WatchRequest::new(w, t, Provenance::Explicit, "sessionwatch"), now)
        });
        for r in futures::future::join_all(writes).await {
            r?;
        }
    }
    Ok(())
}

async fn page_latencies(gw: &Embedded, path: &str, n: usize) -> anyhow::Result<Vec<Duration>> {
    let http = gw.http();
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let resp = http.request(reqwest::Method::GET, path).send().await?;
        anyhow::ensure!(resp.status().is_success(), "{path} answered {}", resp.status());
        let body = resp.text().await?;
        lat.push(t.elapsed());
        anyhow::ensure!(body.contains("</html>"), "{path}: not a whole page");
    }
    lat.sort();
    Ok(lat)
}

pub async fn run(quick: bool) -> anyhow::Result<Vec<Figure>> {
    let gw = Embedded::start().await?;
    let sessions = if quick { 500 } else { SESSIONS };
    populate(&gw, sessions).await?;
    let samples = if quick { 5 } else { 50 };
    let mut figures = vec![];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let first = page_latencies(&gw, "/", samples).await?;
    figures.push(Figure {
        name: "dashboard_overview_first_page_p50_ms".into(),
        value: ms(percentile(&first, 0.5)),
        unit: "ms",
    });
    figures.push(Figure {
        name: "dashboard_overview_first_page_p99_ms".into(),
        value: ms(percentile(&first, 0.99)),
        unit: "ms",
    });
    let deep = page_latencies(&gw, &format!("/?page={}", sessions / 50 - 1), samples).await?;
    figures.push(Figure {
        name: "dashboard_overview_last_page_p50_ms".into(),
        value: ms(percentile(&deep, 0.5)),
        unit: "ms",
    });
    let busy = sessionwatch_server::dashboard::chat_path(&key(0));
    let session = page_latencies(&gw, &busy, samples).await?;
    figures.push(Figure {
        name: "dashboard_session_page_p50_ms".into(),
        value: ms(percentile(&session, 0.5)),
        unit: "ms",
    });
    gw.stop().await?;
    Ok(figures)
}
