//! Cross-gateway figures on PostgreSQL: two kernels (two pools, two host ids) share one fresh schema;
//! a human turn recorded through gateway `a` on a target watched by a session hosted on gateway `b`
//! is timed until `b` emits the watcher's wake (NOTIFY at commit, LISTEN, read-only reconcile, queue,
//! wake). Each sample is drained (acknowledged) on `b` before the next one.

use crate::{Kernel, KernelConfig, Signal};
use sessionwatch_core::HumanTurnSource;
use sessionwatch_core::NewEvent;
use sessionwatch_core::RecordPolicy;
use sessionwatch_core::{Clock, Provenance, SystemClock};
use sessionwatch_store::postgres::testing::{drop_schema, unique_schema_name};
use sessionwatch_store::{PostgresStore, Result, StoreError};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const WATCHER: &str = "agent:main:main";
const TARGET: &str = "agent:main:dashboard:bench";

/// `(name, value, unit)`: `cross_gateway_notice_p50_ms`, `cross_gateway_notice_p99_ms`,
/// `cross_gateway_notice_max_ms` and `cross_gateway_notice_samples`. Runs in a temporary schema of the
/// database at `url`, dropped afterwards.
pub async fn cross_gateway_notice_ms(url: &str, samples: usize) -> Result<Vec<(String, f64, String)>> {
    let schema = unique_schema_name("swbench");
    let out = run(url, &schema, samples.max(1)).await;
    if let Err(e) = drop_schema(url, &schema).await {
        tracing::warn!(error = %e, schema, "could not drop the bench schema");
    }
    out
}

async fn gateway(url: &str, schema: &str, host: &str) -> Result<Kernel<PostgresStore>> {
    let store = PostgresStore::connect(url, Some(schema)).await?;
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
            return Err(StoreError::Postgres(format!("gateway {host}: the listener never connected")));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(kernel)
}

async fn run(url: &str, schema: &str, samples: usize) -> Result<Vec<(String, f64, String)>> {
    let a = gateway(url, schema, "bench-a").await?;
    let b = gateway(url, schema, "bench-b").await?;
    if !b.register_watch(WATCHER, TARGET, Provenance::Explicit).await.is_watching() {
        return Err(StoreError::InvalidData("the bench watch was refused".into()));
    }
    b.host_session(WATCHER, "main").await;
    let mut signals = b.subscribe();
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        let recorded = a
            .record(
                NewEvent::human_message(TARGET, "main", "bench", None),
                RecordPolicy::human_turn(HumanTurnSource::Gateway, None),
            )
            .await;
        if recorded.event().is_none() {
            return Err(StoreError::InvalidData(format!("the bench turn was not recorded: {recorded:?}")));
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
            return Err(StoreError::Postgres("no cross-gateway wake within 5 s".into()));
        }
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        b.drain(WATCHER).await;
    }
    times.sort_by(f64::total_cmp);
    let pick = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
    let ms = |name: &str, v: f64| (name.to_string(), (v * 1000.0).round() / 1000.0, "ms".to_string());
    Ok(vec![
        ms("cross_gateway_notice_p50_ms", pick(0.50)),
        ms("cross_gateway_notice_p99_ms", pick(0.99)),
        ms("cross_gateway_notice_max_ms", pick(1.0)),
        ("cross_gateway_notice_samples".into(), times.len() as f64, "count".into()),
    ])
}
