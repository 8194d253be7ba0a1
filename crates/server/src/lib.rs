//! The sessionwatch gateway: sessions around the kernel, the OpenClaw-compatible tools, the host API, a
//! live stream, auth and config. This is the only crate that knows JSON wire shapes.

pub mod args;
pub mod auth;
pub mod config;
pub mod dashboard;
pub mod discovery;
pub mod error;
pub mod gateway;
pub mod guard;
pub mod http;
pub mod http_nodes;
pub mod mcp;
pub mod metrics;
pub mod node_protocol;
pub mod sse;
pub mod wire;

pub use config::Config;
pub use gateway::Gateway;
pub use http::{AppState, app};

use sessionwatch_store::Store;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Serves `state` on `listener` until `shutdown` resolves; in-flight requests finish first.
///
/// Each connection gets `gateway.headerTimeoutSeconds` to send its request headers (a client that
/// never finishes them is closed, so idle half-open connections cannot pile up), and at most
/// `gateway.maxConnections` are served at once; beyond that, new connections wait in the listen backlog
/// until one closes, so the process never runs out of file descriptors.
pub async fn run<S: Store>(
    listener: TcpListener,
    state: Arc<AppState<S>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let limits = state.gateway.config().limits;
    // MCP streams (`/mcp`) are long-lived: end them when shutdown begins so in-flight work can finish.
    let mcp_shutdown = tokio_util::sync::CancellationToken::new();
    let kernel = state.gateway.kernel().clone();
    let router = http::app_with_shutdown(state, mcp_shutdown.clone());
    let service = hyper_util::service::TowerToHyperService::new(router);
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning; the listener stays up.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // No Nagle: a wake or notice on the stream is one small write that must leave at once, not wait
        // for the client's delayed ACK.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
        let conn = graceful.watch(http1.serve_connection(TokioIo::new(tcp), service.clone()));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(slot);
        });
    }
    mcp_shutdown.cancel();
    graceful.shutdown().await;
    // Then the kernel's background tasks (listener, trailing wakes, a scheduled prune).
    kernel.shutdown().await;
    Ok(())
}
