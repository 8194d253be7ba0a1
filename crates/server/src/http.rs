//! HTTP: the router (`POST /tools/invoke`, the host API, the live stream, the nodes' API, the dashboard,
//! `/mcp`, health and metrics), bearer auth on the API routes, and the one middleware every route sits
//! behind (`edge`: the cross-site guard, the body limit, path decoding, timing). The handlers live with what they serve (`host_api.rs`,
//! `tool_invoke.rs`, `http_nodes.rs`, `sse.rs`, `dashboard/`, `mcp/`).

use crate::error::ApiError;
use crate::host_api::*;
use crate::state::{AppState, MAX_BODY_BYTES, Shared, carries_token};
use crate::tool_invoke::invoke_tool;
use crate::wire::{error_response, host_error};
use crate::{dashboard, guard, http_nodes, mcp, sse};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::json;
use sessionwatch_store::Store;
use std::sync::Arc;
use std::time::Instant;

/// The whole HTTP surface; the MCP endpoint's streams end when `mcp_shutdown` is cancelled.
pub(crate) fn app<S: Store>(
    state: Arc<AppState<S>>,
    mcp_shutdown: tokio_util::sync::CancellationToken,
) -> Router {
    let limits = state.gateway.config().limits;
    let mcp_sessions = mcp::BoundedSessions::new(limits.mcp_max_sessions, limits.mcp_idle);
    mcp_sessions.spawn_sweeper(mcp_shutdown.clone());
    let mcp = mcp::http_service(
        state.gateway.clone(),
        &state.gateway.config().mcp_allowed_hosts,
        mcp_sessions.clone(),
        mcp_shutdown,
    );
    let config = state.gateway.config();
    let allowed = guard::AllowedHosts::new(Some(config.listen), &config.mcp_allowed_hosts);
    let api = Router::new()
        .route(
            "/tools/invoke",
            post(invoke_tool::<S>)
                .fallback(|| async { (StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed") }),
        )
        .route("/v1/sessions", post(create_session::<S>).get(list_sessions::<S>))
        .route("/v1/sessions/{key}/watchers/{watcher}", put(watch_session::<S>))
        .route("/v1/sessions/{key}", axum::routing::delete(delete_session::<S>))
        .route("/v1/sessions/{key}/inbound", post(inbound::<S>))
        .route("/v1/sessions/{key}/turns", post(begin_turn::<S>))
        .route("/v1/sessions/{key}/messages", post(add_message::<S>))
        .route("/v1/sessions/{key}/goal", put(set_goal::<S>).delete(clear_goal::<S>))
        .route("/v1/sessions/{key}/compactions", post(compaction::<S>))
        .route("/v1/sessions/{key}/reset", post(reset::<S>))
        .route("/v1/sessions/{key}/notices", post(drain_notices::<S>))
        .route("/v1/runs/{run_id}/result", post(run_result::<S>))
        .route("/v1/stream", get(sse::stream::<S>))
        .route("/v1/catalog", get(catalog::<S>))
        .route("/v1/catalog/continue", post(catalog_continue::<S>))
        .route("/v1/monitor/tick", post(monitor_tick::<S>))
        .route("/v1/hooks", post(hook::<S>))
        .route("/v1/hooks/tool-uses/{id}", get(tool_use::<S>))
        .route("/metrics", get(metrics::<S>).layer(axum::Extension(mcp_sessions)))
        .route("/v1/ui/login-links", post(dashboard::issue_login_link::<S>))
        .route("/v1/nodes", get(http_nodes::list::<S>).post(http_nodes::issue::<S>))
        .route("/v1/nodes/{name}", axum::routing::delete(http_nodes::revoke::<S>))
        .nest_service("/mcp", mcp)
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token::<S>));
    let node_api = Router::new()
        .route("/v1/node/sync", post(http_nodes::sync::<S>))
        .route("/v1/node/baselines", post(http_nodes::baselines::<S>))
        .route("/v1/node/outcomes", post(http_nodes::outcomes::<S>))
        .route("/v1/node/heads", post(http_nodes::heads::<S>))
        .route_layer(middleware::from_fn_with_state(state.clone(), http_nodes::require_node::<S>));
    Router::new()
        .route("/healthz", get(|| async { Json(json!({ "ok": true })) }))
        .merge(dashboard::routes::<S>())
        .merge(node_api)
        .merge(api)
        .fallback(|| async {
            error_response(StatusCode::NOT_FOUND, &ApiError::NotFound("no such route".into()))
        })
        .layer(middleware::from_fn_with_state(Edge { allowed, state: state.clone() }, edge::<S>))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn require_token<S: Store>(State(state): State<Shared<S>>, req: Request, next: Next) -> Response {
    if let Some(token) = &state.token {
        // A dashboard login opens the live stream it reads, and nothing else of the API.
        let browser_stream = req.method() == axum::http::Method::GET
            && req.uri().path() == "/v1/stream"
            && dashboard::has_login_cookie(&state, req.headers());
        if !browser_stream && !carries_token(req.headers(), token) {
            return error_response(
                StatusCode::UNAUTHORIZED,
                &ApiError::Unauthorized("missing or wrong bearer token".into()),
            );
        }
    }
    next.run(req).await
}

/// After a 413, at most this much of the refused body is read and discarded, for at most
/// [`DISCARD_TIME`], before the connection closes.
const DISCARD_BYTES: usize = 8 * 1024 * 1024;
const DISCARD_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// What [`edge`] needs: the hosts it answers to and the metrics it times requests into.
#[derive(Clone)]
struct Edge<S: Store> {
    allowed: guard::AllowedHosts,
    state: Shared<S>,
}

/// What every request passes before its route, in this order: the cross-site guard ([`guard::check`]),
/// the declared body size, a path that decodes; then the route, timed into the metrics. One middleware,
/// not four: each `from_fn` layer boxes a future and clones the inner service on every request, and the
/// four of them cost `bench gateway` about as much as the bare axum server's whole request.
///
/// A declared `Content-Length` over the limit is refused before a byte of the body is read (a client
/// announcing 10 GB must not hold a connection until 2 MB arrived); a body that turns out too large
/// while streaming gets the same JSON answer. The refused body is then read and discarded (bounded by
/// [`DISCARD_BYTES`] and [`DISCARD_TIME`]) while the answer goes out, and the connection closes after
/// it: closing a socket with unread data resets it, and a client that writes its whole body before
/// reading (Python's `http.client`) then saw a broken pipe instead of the 413.
///
/// A path whose percent-escapes do not decode to UTF-8 gets the JSON error body (axum's extractors
/// would answer plain text).
async fn edge<S: Store>(State(edge): State<Edge<S>>, req: Request, next: Next) -> Response {
    if let Err(e) = guard::check(&edge.allowed, &req) {
        return host_error(e);
    }
    let too_large = || {
        error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            &ApiError::PayloadTooLarge(format!("Payload too large: the limit is {MAX_BODY_BYTES} bytes")),
        )
    };
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok());
    if declared.and_then(|v| v.trim().parse::<u64>().ok()).is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        tokio::spawn(discard_rest(req.into_body().into_data_stream()));
        return closing(too_large());
    }
    // A body without a declared length is only found too large while streaming, after the route gave
    // up on it: it goes to the route through a task that then reads on and discards the rest.
    let streamed = req.headers().contains_key(header::TRANSFER_ENCODING);
    let req = if streamed { req.map(drained_when_dropped) } else { req };
    if !decodes_to_utf8(req.uri().path()) {
        return error_response(
            StatusCode::BAD_REQUEST,
            &ApiError::invalid("the request path is not valid UTF-8 once percent-decoded"),
        );
    }
    let started = Instant::now();
    let resp = next.run(req).await;
    edge.state.metrics.observe(started.elapsed());
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if resp.status() != StatusCode::PAYLOAD_TOO_LARGE {
        return resp;
    }
    let resp = if is_json { resp } else { too_large() };
    if streamed { closing(resp) } else { resp }
}

/// Whether `path`'s percent-escapes decode to UTF-8. An ASCII path decodes to ASCII unless an escape
/// names a byte of 0x80 or more: such a path (every session key's) is answered from its escapes, without
/// building the decoded path (1.5k instructions less a host request, callgrind of `bench gateway --part
/// inbound`); any other is decoded.
fn decodes_to_utf8(path: &str) -> bool {
    let high_escape = |w: &[u8]| {
        w[0] == b'%' && matches!(w[1], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F') && w[2].is_ascii_hexdigit()
    };
    (path.is_ascii() && !path.as_bytes().windows(3).any(high_escape))
        || percent_encoding::percent_decode_str(path).decode_utf8().is_ok()
}

/// `resp` with `Connection: close`: sent after a refused body, whose rest is being discarded.
fn closing(mut resp: Response) -> Response {
    resp.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    resp
}

/// `body` as the route reads it, fed by a task that, once the route drops it unfinished (a 413), reads
/// and drops the rest ([`discard_rest`]): a client that writes its whole chunked body before
/// reading then reads the 413 instead of a reset.
fn drained_when_dropped(body: axum::body::Body) -> axum::body::Body {
    use futures::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    tokio::spawn(async move {
        let mut chunks = body.into_data_stream();
        while let Some(chunk) = chunks.next().await {
            if tx.send(chunk).await.is_err() {
                discard_rest(chunks).await;
                return;
            }
        }
    });
    axum::body::Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// Reads and drops what is left of a body, up to [`DISCARD_BYTES`] within [`DISCARD_TIME`].
async fn discard_rest(mut chunks: axum::body::BodyDataStream) {
    use futures::StreamExt;
    let mut discarded = 0;
    let drain = async {
        while discarded < DISCARD_BYTES
            && let Some(Ok(chunk)) = chunks.next().await
        {
            discarded += chunk.len();
        }
    };
    let _ = tokio::time::timeout(DISCARD_TIME, drain).await;
}

#[cfg(test)]
mod tests {
    use super::decodes_to_utf8;

    #[test]
    fn a_path_decodes_to_utf8_unless_its_escapes_make_invalid_bytes() {
        assert!(decodes_to_utf8("/v1/sessions/agent%3Amain%3Amain/inbound"));
        assert!(decodes_to_utf8("/v1/sessions/agent%3Amain%3Ac%C3%A9/turns")); // é: not ASCII, still UTF-8
        assert!(!decodes_to_utf8("/v1/sessions/agent%3Amain%3A%FF%FE/turns"));
        assert!(!decodes_to_utf8("/v1/sessions/agent%3Amain%3A%C3/turns")); // a sequence cut short
    }
}
