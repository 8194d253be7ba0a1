//! Cross-gateway figures on PostgreSQL: two kernels (two pools, two host ids) share one fresh schema;
//! a human turn recorded through gateway `a` on a target watched by a session hosted on gateway `b`
//! is timed until `b` emits the watcher's wake (NOTIFY at commit, LISTEN, read-only reconcile, queue,
//! wake). Each sample is drained (acknowledged) on `b` before the next one. Beside each sample, the
//! baseline: a bare `NOTIFY` → `LISTEN` round trip between two connections of the same server.

use crate::Figure;
use crate::postgres_fixtures::{NotifyProbe, drop_schema, unique_schema_name};
use sessionwatch_core::HumanTurnSource;
use sessionwatch_core::NewEvent;
use sessionwatch_core::RecordPolicy;
use sessionwatch_core::{Clock, Provenance, SystemClock};
use sessionwatch_kernel::{Kernel, KernelConfig, Signal};
use sessionwatch_store::PostgresStore;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const WATCHER: &str = "agent:main:main";
const TARGET: &str = "agent:main:dashboard:bench";

type Result<T> = std::result::Result<T, String>;

/// `cross_gateway_notice_p50_ms`, `…_p99_ms`, `…_max_ms`, `…_samples`, the bare round trip's
/// `raw_postgres_notify_p50_ms` and `…_p99_ms`, and `cross_gateway_notice_p99_vs_notify_p99_ratio`.
/// Runs in a temporary schema of the database at `url`, dropped afterwards.
pub async fn cross_gateway_notice_ms(url: &str, samples: usize) -> Result<Vec<Figure>> {
    let schema = unique_schema_name("swbench");
    let out = run(url, &schema, samples.max(1)).await;
    if let Err(e) = drop_schema(url, &schema).await {
        tracing::warn!(error = %e, schema, "could not drop the bench schema");
    }
    out
}

async fn gateway(url: &str, schema: &str, host: &str) -> Result<Kernel<PostgresStore>> {
    let store = PostgresStore::connect(url, Some(schema)).await.map_err(|e| e.to_string())?;
    let config = KernelConfig {
        store_identity: store.identity().to_string(),
        host_id: Some(host.into()),
        wake_coalesce_ms: 0,
        ..KernelConfig::default()
    };
    let kernel = Kernel::start(store, Arc::new(SystemClock) as Arc<dyn Clock>, config).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while kernel.metrics().listener_connects.load(Ordering::SeqCst) == 0 {
        if Instant::now() > deadline {
            return Err(format!("gateway {host}: the listener never connected"));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(kernel)
}

async fn run(url: &str, schema: &str, samples: usize) -> Result<Vec<Figure>> {
    let a = gateway(url, schema, "bench-a").await?;
    let b = gateway(url, schema, "bench-b").await?;
    if !b.register_watch(WATCHER, TARGET, Provenance::Explicit).await.is_watching() {
        return Err("the bench watch was refused".into());
    }
    b.host_session(WATCHER, "main").await;
    let mut signals = b.subscribe();
    let mut probe = NotifyProbe::connect(url).await?;
    let (mut times, mut bare) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for n in 0..samples {
        bare.push(probe.once(n as u64).await?.as_secs_f64() * 1000.0);
        let started = Instant::now();
        let recorded = a
            .record(
                NewEvent::human_message(TARGET, "main", "bench", None),
                RecordPolicy::human_turn(HumanTurnSource::Gateway, None),
            )
            .await;
        if recorded.event().is_none() {
            return Err(format!("the bench turn was not recorded: {recorded:?}"));
        }
        let woke = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match signals.recv().await {
                    Ok(Signal::Wake { session, .. }) if session == WATCHER => return true,
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(_) => return false,
                }
            }
        })
        .await;
        if !matches!(woke, Ok(true)) {
            return Err("no cross-gateway wake within 5 s".into());
        }
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        b.drain(WATCHER).await;
    }
    times.sort_by(f64::total_cmp);
    bare.sort_by(f64::total_cmp);
    let pick = |v: &[f64], q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
    let ms = |name: &str, v: f64| Figure::new(name, (v * 1000.0).round() / 1000.0, "ms");
    let (p99, bare_p99) = (pick(&times, 0.99), pick(&bare, 0.99));
    Ok(vec![
        ms("cross_gateway_notice_p50_ms", pick(&times, 0.50)),
        ms("cross_gateway_notice_p99_ms", p99),
        ms("cross_gateway_notice_max_ms", pick(&times, 1.0)),
        Figure::new("cross_gateway_notice_samples", times.len() as f64, "count"),
        ms("raw_postgres_notify_p50_ms", pick(&bare, 0.50)),
        ms("raw_postgres_notify_p99_ms", bare_p99),
        Figure::new("cross_gateway_notice_p99_vs_notify_p99_ratio", p99 / bare_p99.max(1e-9), "x"),
    ])
}
