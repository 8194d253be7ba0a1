//! `sessionwatch bench gateway`: the gateway over loopback HTTP with 16 concurrent clients, beside a bare
//! axum router answering a body of the same size.

use crate::Figure;
use crate::percentile;
use futures::StreamExt;
use serde_json::{Value, json};
use sessionwatch_core::AgentSessionKey;
use sessionwatch_server::embedded::{Embedded, GatewayHttp};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: usize = 16;

/// A pause after a block of inbound turns: longer than the writer's quiet time (5 ms) and the fold of the
/// block's staged events that follows it (some 2,100 rows, 9–13 ms on this kind of machine). Without it,
/// that fold ran on the second core during the first few milliseconds of the next bare block.
const SETTLE: Duration = Duration::from_millis(100);

struct Target(GatewayHttp);

impl Target {
    async fn send(&self, path: &str, body: &Value) -> anyhow::Result<reqwest::Response> {
        let resp = self.0.post(path, body).await?;
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

/// The CPU time this process has used, all its threads (client, server and writer alike).
fn process_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_SELF).map_or(Duration::ZERO, |u| {
        let (user, system) = (u.user_time(), u.system_time());
        let micros = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e6 + t.tv_usec() as f64;
        Duration::from_micros((micros(user) + micros(system)) as u64)
    })
}

/// One block of requests: how long it took, the process's CPU time meanwhile, each request's latency.
struct Block {
    seconds: f64,
    cpu: Duration,
    latencies: Vec<Duration>,
}

/// Runs `CLIENTS` loops of `op` for `per_client` requests each.
async fn load<F, Fut>(per_client: usize, op: F) -> anyhow::Result<Block>
where
    F: Fn(usize, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let op = Arc::new(op);
    let (started, cpu) = (Instant::now(), process_cpu());
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
    let (seconds, cpu) = (started.elapsed().as_secs_f64(), process_cpu().saturating_sub(cpu));
    Ok(Block { seconds, cpu, latencies: all })
}

/// Requests, CPU time and latencies of several blocks of one measurement.
#[derive(Default)]
struct Runs {
    seconds: f64,
    cpu: Duration,
    latencies: Vec<Duration>,
}

/// What the blocks of one measurement came to.
struct Measured {
    per_s: f64,
    /// The process's CPU time per request: the client's, the server's and the writer's together.
    cpu_us_per_request: f64,
    /// CPU time over wall time: how many of the machine's cores the load kept busy.
    cores_busy: f64,
    /// Sorted.
    latencies: Vec<Duration>,
}

impl Runs {
    fn add(&mut self, block: Block) {
        self.seconds += block.seconds;
        self.cpu += block.cpu;
        self.latencies.extend(block.latencies);
    }

    fn finish(mut self) -> Measured {
        self.latencies.sort();
        let requests = self.latencies.len().max(1) as f64;
        Measured {
            per_s: self.latencies.len() as f64 / self.seconds.max(1e-9),
            cpu_us_per_request: self.cpu.as_secs_f64() * 1e6 / requests,
            cores_busy: self.cpu.as_secs_f64() / self.seconds.max(1e-9),
            latencies: self.latencies,
        }
    }
}

/// A middleware-free axum router on the same runtime, answering every POST with a fixed JSON body.
struct BareServer {
    base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl BareServer {
    async fn start(body: bytes::Bytes) -> anyhow::Result<BareServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let answer = move || {
            let body = body.clone();
            async move { ([(axum::http::header::CONTENT_TYPE, "application/json")], body) }
        };
        let app = axum::Router::new().route("/tools/invoke", axum::routing::post(answer));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
        });
        Ok(BareServer { base, stop, task })
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// One part of `bench gateway` (`--part`); `status` and `inbound` run in alternating blocks with the bare
/// router, their baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// `session_status` with a recent `changesSince` page.
    Status,
    /// Inbound human turns to one watched session.
    Inbound,
    /// From an inbound turn to the watcher's wake on its stream.
    Wake,
    /// The dashboard's pages (`crate::dashboard`).
    Dashboard,
}

impl Part {
    pub const ALL: [Part; 4] = [Part::Status, Part::Inbound, Part::Wake, Part::Dashboard];
}

/// Runs the gateway parts of `parts` (all but [`Part::Dashboard`], which has a gateway of its own).
pub async fn run(quick: bool, parts: &[Part]) -> anyhow::Result<Vec<Figure>> {
    let gateway = Embedded::start().await?;
    let t = Arc::new(Target(gateway.http()));
    let mut figures = vec![];
    let (status, inbound) = (parts.contains(&Part::Status), parts.contains(&Part::Inbound));
    if status || inbound {
        figures.extend(throughput(&t, quick, status, inbound).await?);
    }
    if parts.contains(&Part::Wake) {
        figures.extend(wake_latency(&t, quick).await?);
    }
    gateway.stop().await?;
    Ok(figures)
}

/// `session_status` and inbound turns (those asked for) against the bare router, in alternating blocks.
async fn throughput(
    t: &Arc<Target>,
    quick: bool,
    status: bool,
    inbound: bool,
) -> anyhow::Result<Vec<Figure>> {
    let per_client = if quick { 20 } else { 1500 };
    let mut figures = vec![];
    let mut fig = |name: &str, value: f64, unit: &'static str| figures.push(Figure::new(name, value, unit));
    let (status_body, turns_path) = loaded_sessions(t).await?;
    // The baseline: the same axum stack, runtime and client answering a fixed body of the page's size.
    let page = t.send("/tools/invoke", &status_body).await?.bytes().await?;
    let bare = BareServer::start(page).await?;
    let bare_target = Arc::new(Target(t.0.at(&bare.base)));
    let status_op = |t: Arc<Target>, body: Arc<Value>| {
        move |_: usize, _: usize| {
            let (t, body) = (t.clone(), body.clone());
            async move { t.post_unparsed("/tools/invoke", &body).await }
        }
    };
    let inbound_op = |t: Arc<Target>, path: Arc<String>| {
        move |c: usize, i: usize| {
            let (t, path) = (t.clone(), path.clone());
            async move {
                let body = json!({ "text": format!("client {c} turn {i}"), "channel": "bench", "actor": { "type": "human" } });
                t.post_unparsed(&path, &body).await
            }
        }
    };
    // Alternating blocks, so whatever the machine does meanwhile weighs on each side of a ratio alike.
    let blocks = 3;
    let inbound_per_client = if quick { 10 } else { 400 };
    let path = Arc::new(turns_path);
    let (mut bare_runs, mut status_runs, mut inbound_runs) =
        (Runs::default(), Runs::default(), Runs::default());
    for _ in 0..blocks {
        bare_runs.add(load(per_client / blocks, status_op(bare_target.clone(), status_body.clone())).await?);
        if status {
            status_runs.add(load(per_client / blocks, status_op(t.clone(), status_body.clone())).await?);
        }
        if inbound {
            inbound_runs.add(load(inbound_per_client / blocks, inbound_op(t.clone(), path.clone())).await?);
            // Untimed: the writer's idle work after the turns (the staging table's fold, once it has been
            // quiet for 5 ms) is done before the next bare block, not on the other core beside it.
            tokio::time::sleep(SETTLE).await;
        }
    }
    bare.stop().await;
    let bare = bare_runs.finish();
    let bare_p99 = percentile(&bare.latencies, 0.99).as_secs_f64();
    fig("bare_http_per_s", bare.per_s, "req/s");
    fig("bare_http_p99_us", bare_p99 * 1e6, "us");
    cpu_figures(&mut fig, "bare_http", &bare);
    if status {
        let m = status_runs.finish();
        fig("session_status_changes_since_per_s", m.per_s, "req/s");
        fig("session_status_changes_since_p50_us", percentile(&m.latencies, 0.5).as_secs_f64() * 1e6, "us");
        fig("session_status_changes_since_p99_us", percentile(&m.latencies, 0.99).as_secs_f64() * 1e6, "us");
        cpu_figures(&mut fig, "session_status", &m);
        fig("session_status_vs_bare_ratio", m.per_s / bare.per_s.max(1e-9), "ratio");
    }
    if !inbound {
        return Ok(figures);
    }
    let m = inbound_runs.finish();
    let inbound_p99 = percentile(&m.latencies, 0.99).as_secs_f64();
    fig("inbound_human_turn_per_s", m.per_s, "req/s");
    fig("inbound_human_turn_p50_us", percentile(&m.latencies, 0.5).as_secs_f64() * 1e6, "us");
    fig("inbound_human_turn_p99_us", inbound_p99 * 1e6, "us");
    cpu_figures(&mut fig, "inbound_human_turn", &m);
    fig("inbound_human_turn_vs_bare_ratio", m.per_s / bare.per_s.max(1e-9), "ratio");
    fig("inbound_human_turn_p99_vs_bare_p99", inbound_p99 / bare_p99.max(1e-9), "x");
    Ok(figures)
}

/// Where a measurement's rate comes from: its CPU time per request, and how busy it kept the cores (a
/// closed loop whose requests wait on the writer leaves cores idle that the bare router keeps busy).
fn cpu_figures(fig: &mut impl FnMut(&str, f64, &'static str), name: &str, m: &Measured) {
    fig(&format!("{name}_cpu_us_per_request"), m.cpu_us_per_request, "us");
    fig(&format!("{name}_cores_busy"), m.cores_busy, "cores");
}

/// A watched child with some history, read by `session_status` (answers that call's body), and a second
/// watched child the inbound turns go to (answers its inbound path), so the page read stays the same
/// recent page whichever block runs first.
async fn loaded_sessions(t: &Arc<Target>) -> anyhow::Result<(Arc<Value>, String)> {
    let main = "agent:main:main";
    let spawn = || async {
        let spawned = t
            .post(
                "/tools/invoke",
                &json!({ "tool": "sessions_spawn", "args": { "task": "bench" }, "sessionKey": main }),
            )
            .await?;
        anyhow::Ok(spawned["result"]["details"]["childSessionKey"].as_str().unwrap_or_default().to_string())
    };
    let child = spawn().await?;
    let child_path = format!("/v1/sessions/{}/inbound", child.replace(':', "%3A"));
    let turns_child = spawn().await?;
    let turns_path = format!("/v1/sessions/{}/inbound", turns_child.replace(':', "%3A"));
    for i in 0..40 {
        t.post(
            &child_path,
            &json!({ "text": format!("warm {i}"), "channel": "bench", "actor": { "type": "human" } }),
        )
        .await?;
    }

    let status_body = Arc::new(json!({ "tool": "session_status", "sessionKey": main,
        "args": { "sessionKey": child, "changesSince": 30, "limit": 200 } }));
    Ok((status_body, turns_path))
}

/// Wake latency: a fresh main watcher per sample (wakes coalesce per watcher for 20 s).
async fn wake_latency(t: &Arc<Target>, quick: bool) -> anyhow::Result<Vec<Figure>> {
    let samples = if quick { 10 } else { 200 };
    let mut wakes = Vec::with_capacity(samples);
    for i in 0..samples {
        let watcher = AgentSessionKey::build(&format!("w{i}"), "main");
        let r = t
            .post(
                "/tools/invoke",
                &json!({ "tool": "sessions_spawn", "args": { "task": "x" }, "sessionKey": watcher }),
            )
            .await?;
        let target = r["result"]["details"]["childSessionKey"].as_str().unwrap_or_default().to_string();
        let stream = format!("/v1/stream?sessionKey={}", watcher.replace(':', "%3A"));
        let resp = t.0.request(reqwest::Method::GET, &stream).send().await?;
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
    Ok(vec![
        Figure::new("wake_latency_p50_ms", percentile(&wakes, 0.5).as_secs_f64() * 1e3, "ms"),
        Figure::new("wake_latency_p99_ms", percentile(&wakes, 0.99).as_secs_f64() * 1e3, "ms"),
    ])
}
