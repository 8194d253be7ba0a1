//! `sessionwatch bench gateway`: the gateway over loopback HTTP with 16 concurrent clients.

use super::bench::Figure;
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: usize = 16;

struct Target {
    client: reqwest::Client,
    base: String,
    token: String,
}

impl Target {
    async fn send(&self, path: &str, body: &Value) -> anyhow::Result<reqwest::Response> {
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await?;
        anyhow::ensure!(resp.status().is_success(), "{path} answered {}", resp.status());
        Ok(resp)
    }

    async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        Ok(self.send(path, body).await?.json().await?)
    }

    /// A measured request: the whole answer is read but not parsed, so the load generator (in this
    /// process, on the same cores) takes as little as it can of the CPU the gateway is measured on.
    async fn post_unparsed(&self, path: &str, body: &Value) -> anyhow::Result<()> {
        self.send(path, body).await?.bytes().await?;
        Ok(())
    }
}

pub(super) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Runs `CLIENTS` loops of `op` for `per_client` requests each; answers (requests/s, sorted latencies).
async fn load<F, Fut>(per_client: usize, op: F) -> anyhow::Result<(f64, Vec<Duration>)>
where
    F: Fn(usize, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let op = Arc::new(op);
    let started = Instant::now();
    let mut tasks = vec![];
    for c in 0..CLIENTS {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per_client);
            for i in 0..per_client {
                let t = Instant::now();
                op(c, i).await?;
                lat.push(t.elapsed());
            }
            anyhow::Ok(lat)
        }));
    }
    let mut all = vec![];
    for t in tasks {
        all.extend(t.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    Ok((all.len() as f64 / elapsed, all))
}

pub async fn run(quick: bool) -> anyhow::Result<Vec<Figure>> {
    let gateway = super::embedded::Embedded::start().await?;
    let t = Arc::new(Target {
        client: reqwest::Client::new(),
        base: gateway.base.clone(),
        token: gateway.token.clone(),
    });
    let per_client = if quick { 20 } else { 1500 };
    let mut figures = vec![];
    let mut fig =
        |name: &str, value: f64, unit: &'static str| figures.push(Figure { name: name.into(), value, unit });

    // A watched child with some history.
    let main = "agent:main:main";
    let spawned = t
        .post(
            "/tools/invoke",
            &json!({ "tool": "sessions_spawn", "args": { "task": "bench" }, "sessionKey": main }),
        )
        .await?;
    let child = spawned["result"]["details"]["childSessionKey"].as_str().unwrap_or_default().to_string();
    let child_path = format!("/v1/sessions/{}/inbound", child.replace(':', "%3A"));
    for i in 0..40 {
        t.post(
            &child_path,
            &json!({ "text": format!("warm {i}"), "channel": "bench", "actor": { "type": "human" } }),
        )
        .await?;
    }

    let status_body = Arc::new(json!({ "tool": "session_status", "sessionKey": main,
        "args": { "sessionKey": child, "changesSince": 30, "limit": 200 } }));
    let (rps, lat) = {
        let t = t.clone();
        load(per_client, move |_, _| {
            let t = t.clone();
            let body = status_body.clone();
            async move { t.post_unparsed("/tools/invoke", &body).await }
        })
        .await?
    };
    fig("session_status_changes_since_per_s", rps, "req/s");
    fig("session_status_changes_since_p50_us", percentile(&lat, 0.5).as_secs_f64() * 1e6, "us");
    fig("session_status_changes_since_p99_us", percentile(&lat, 0.99).as_secs_f64() * 1e6, "us");

    let inbound_per_client = if quick { 10 } else { 400 };
    let (rps, lat) = {
        let t = t.clone();
        let path = Arc::new(child_path.clone());
        load(inbound_per_client, move |c, i| {
            let t = t.clone();
            let path = path.clone();
            async move {
                let body = json!({ "text": format!("client {c} turn {i}"), "channel": "bench", "actor": { "type": "human" } });
                t.post_unparsed(&path, &body).await
            }
        })
        .await?
    };
    fig("inbound_human_turn_per_s", rps, "req/s");
    fig("inbound_human_turn_p50_us", percentile(&lat, 0.5).as_secs_f64() * 1e6, "us");
    fig("inbound_human_turn_p99_us", percentile(&lat, 0.99).as_secs_f64() * 1e6, "us");

    // Wake latency: a fresh main watcher per sample (wakes coalesce per watcher for 20 s).
    let samples = if quick { 10 } else { 200 };
    let mut wakes = Vec::with_capacity(samples);
    for i in 0..samples {
        let watcher = format!("agent:w{i}:main");
        let r = t
            .post(
                "/tools/invoke",
                &json!({ "tool": "sessions_spawn", "args": { "task": "x" }, "sessionKey": watcher }),
            )
            .await?;
        let target = r["result"]["details"]["childSessionKey"].as_str().unwrap_or_default().to_string();
        let resp = t
            .client
            .get(format!("{}/v1/stream?sessionKey={}", t.base, watcher.replace(':', "%3A")))
            .bearer_auth(&t.token)
            .send()
            .await?;
        let mut body = resp.bytes_stream();
        let mut buf = String::new();
        // Wait for the stream's ready comment so the subscription is live.
        while !buf.contains(":") {
            match body.next().await {
                Some(chunk) => buf.push_str(&String::from_utf8_lossy(&chunk?)),
                None => anyhow::bail!("the stream closed"),
            }
        }
        buf.clear();
        let started = Instant::now();
        t.post(
            &format!("/v1/sessions/{}/inbound", target.replace(':', "%3A")),
            &json!({ "text": "wake up", "channel": "bench", "actor": { "type": "human" } }),
        )
        .await?;
        let waited = tokio::time::timeout(Duration::from_secs(5), async {
            while !buf.contains("event: wake") {
                match body.next().await {
                    Some(Ok(chunk)) => buf.push_str(&String::from_utf8_lossy(&chunk)),
                    _ => return false,
                }
            }
            true
        })
        .await;
        anyhow::ensure!(matches!(waited, Ok(true)), "no wake within 5 s");
        wakes.push(started.elapsed());
    }
    wakes.sort();
    fig("wake_latency_p50_ms", percentile(&wakes, 0.5).as_secs_f64() * 1e3, "ms");
    fig("wake_latency_p99_ms", percentile(&wakes, 0.99).as_secs_f64() * 1e3, "ms");

    gateway.stop().await?;
    Ok(figures)
}
