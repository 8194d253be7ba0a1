//! The sessionwatch gateway: sessions around the kernel, the OpenClaw-compatible tools, the host API, a
//! live stream, auth and config. This is the only crate that knows JSON wire shapes.

pub mod args;
pub mod auth;
pub mod config;
pub mod error;
pub mod gateway;
pub mod guard;
pub mod http;
pub mod mcp;
pub mod metrics;
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
pub async fn run<S: Store>(
    listener: TcpListener,
    state: Arc<AppState<S>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // MCP streams (`/mcp`) are long-lived: end them when shutdown begins so in-flight work can finish.
    let mcp_shutdown = tokio_util::sync::CancellationToken::new();
    let router = http::app_with_shutdown(state, mcp_shutdown.clone());
    let shutdown = async move {
        shutdown.await;
        mcp_shutdown.cancel();
    };
    // No Nagle: a wake or notice on the stream is one small write that must leave at once, not wait
    // for the client's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
    });
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}
