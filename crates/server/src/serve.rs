//! The accept loop: connections, their slots (`connections.rs`) and a graceful shutdown.

use crate::connections;
use crate::http;
use crate::state::AppState;
use sessionwatch_store::Store;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Serves `state` on `listener` until `shutdown` resolves; in-flight requests finish first.
///
/// Each connection gets `gateway.headerTimeoutSeconds` to send its request headers (a new one, and one
/// idle between requests) and `gateway.bodyTimeoutSeconds` from them to send its body; a client past
/// either is closed ([`connections`]). At most `gateway.maxConnections` are open at once (lowered to what
/// the fd limit allows). A client arriving at the cap takes the slot of the connection idle the longest
/// (see [`connections`]): idle or half-sent connections cannot starve a client that sends its request.
/// When every slot has a request in flight, newcomers wait in the listen backlog until one frees.
pub async fn run<S: Store>(
    listener: TcpListener,
    state: Arc<AppState<S>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = state.gateway.config().limits;
    // MCP streams (`/mcp`) are long-lived: end them when shutdown begins so in-flight work can finish.
    let mcp_shutdown = tokio_util::sync::CancellationToken::new();
    let kernel = state.gateway.kernel().clone();
    let gateway = state.gateway.clone();
    let router = http::app(state, mcp_shutdown.clone());
    let slots = Arc::new(tokio::sync::Semaphore::new(connections::effective_cap(limits.max_connections)));
    let open = Arc::new(connections::Connections::new(limits.header_timeout, limits.body_timeout));
    let closing = tokio_util::sync::CancellationToken::new();
    let tasks = tokio_util::task::TaskTracker::new();
    tokio::spawn(open.clone().watch_deadlines(closing.clone()));
    let mut http1 = hyper::server::conn::http1::Builder::new();
    // The connections' deadlines hold clients to the header timeout, without a timer per request.
    http1.header_read_timeout(None);
    tokio::pin!(shutdown);
    while let Some((tcp, slot)) = next_connection(&listener, &slots, &open, shutdown.as_mut()).await {
        serve_connection(&tasks, &http1, tcp, slot, &open, &closing, &router);
    }
    mcp_shutdown.cancel();
    closing.cancel();
    tasks.close();
    tasks.wait().await;
    // Edits still held for their session's turn are recorded, then the kernel's background tasks
    // (listener, trailing wakes, a scheduled prune) stop.
    gateway.flush_workspaces().await;
    drop(gateway);
    kernel.shutdown().await;
    Ok(())
}

/// The next client and its slot; `None` once `shutdown` resolved first. A failed accept (EMFILE and
/// friends) frees a descriptor held by an idle connection and backs off instead of spinning; the
/// listener stays up. At the cap, the connection idle the longest gives its slot up (if every one has a
/// request in flight, the client waits for a slot).
async fn next_connection(
    listener: &TcpListener,
    slots: &Arc<tokio::sync::Semaphore>,
    open: &connections::Connections,
    mut shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Option<(tokio::net::TcpStream, tokio::sync::OwnedSemaphorePermit)> {
    let tcp = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => break tcp,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    let shed = open.shed_longest_idle();
                    tokio::time::sleep(std::time::Duration::from_millis(if shed { 5 } else { 50 })).await;
                }
            },
            () = shutdown.as_mut() => return None,
        }
    };
    let slot = match slots.clone().try_acquire_owned() {
        Ok(slot) => slot,
        Err(_) => {
            open.shed_longest_idle();
            tokio::select! {
                slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
                () = shutdown.as_mut() => return None,
            }
        }
    };
    Some((tcp, slot))
}

/// Serves one accepted client on its own task until it ends, passes its deadline, gives its slot up
/// (shed at the cap) or the gateway shuts down; in the last two cases an idle connection closes at once
/// and a busy one finishes its request first.
fn serve_connection(
    tasks: &tokio_util::task::TaskTracker,
    http1: &hyper::server::conn::http1::Builder,
    tcp: tokio::net::TcpStream,
    slot: tokio::sync::OwnedSemaphorePermit,
    open: &Arc<connections::Connections>,
    closing: &tokio_util::sync::CancellationToken,
    router: &axum::Router,
) {
    use hyper_util::rt::TokioIo;
    // No Nagle: a wake or notice on the stream is one small write that must leave at once, not wait
    // for the client's delayed ACK.
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY not set");
    }
    let (id, conn) = open.open();
    let service = {
        let (open, conn, router) = (open.clone(), conn.clone(), router.clone());
        hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            use tower_service::Service;
            let awaits_body = !hyper::body::Body::is_end_stream(req.body());
            let in_flight = open.begin_request(&conn, awaits_body);
            let req = if awaits_body {
                req.map(|b| axum::body::Body::new(connections::OwedBody::new(b, conn.clone())))
            } else {
                req.map(axum::body::Body::new)
            };
            let mut router = router.clone();
            async move {
                let resp = router.call(req).await?;
                in_flight.answering();
                Ok::<_, std::convert::Infallible>(
                    resp.map(|body| connections::TrackedBody::new(body, in_flight)),
                )
            }
        })
    };
    let serving = http1.serve_connection(TokioIo::new(tcp), service);
    let (open, closing) = (open.clone(), closing.clone());
    tasks.spawn(async move {
        tokio::pin!(serving);
        let mut finishing = false;
        loop {
            tokio::select! {
                ended = serving.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    break;
                }
                // Past its header or body timeout: closed at once, whatever it has in flight.
                () = conn.expired() => break,
                () = conn.shed_requested(), if !finishing => {
                    if conn.is_idle() { break } // dropping it closes the socket
                    finishing = true;
                    serving.as_mut().graceful_shutdown();
                }
                () = closing.cancelled(), if !finishing => {
                    if conn.is_idle() { break }
                    finishing = true;
                    serving.as_mut().graceful_shutdown();
                }
            }
        }
        open.close(id);
        drop(slot);
    });
}
