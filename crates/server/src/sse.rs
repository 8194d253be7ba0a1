//! `GET /v1/stream`: Server-Sent Events `wake`, `notice` and `message` for one session (or all).

use crate::http::{AppState, error_response, query_param};
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::json;
use sessionwatch_kernel::Signal;
use sessionwatch_store::Store;
use std::sync::Arc;
use tokio_stream::wrappers::BroadcastStream;

pub async fn stream<S: Store>(State(state): State<Arc<AppState<S>>>, uri: Uri) -> Response {
    let gateway = state.gateway.clone();
    let filter = match query_param(&uri, "sessionKey") {
        Some(raw) => match gateway.resolve_host_key(&raw, None) {
            Ok(r) => {
                // The gateway serving a session's stream hosts it.
                gateway.kernel().host_session(&r.key, &r.agent_id).await;
                Some(r.key)
            }
            Err(e) => return error_response(StatusCode::BAD_REQUEST, &e),
        },
        None => None,
    };
    let signals = BroadcastStream::new(gateway.kernel().subscribe());
    let events = signals.filter_map(move |s| {
        let filter = filter.clone();
        async move {
            let s = s.ok()?;
            let (session, event) = match &s {
                Signal::Wake { session, reason } => (
                    session,
                    Event::default()
                        .event("wake")
                        .data(json!({ "sessionKey": session, "reason": reason }).to_string()),
                ),
                Signal::Notice { session, text } => (
                    session,
                    Event::default()
                        .event("notice")
                        .data(json!({ "sessionKey": session, "text": text }).to_string()),
                ),
                Signal::Message { session, id, role, run_id } => (
                    session,
                    Event::default().event("message").data(
                        json!({ "sessionKey": session, "id": id, "role": role, "runId": run_id }).to_string(),
                    ),
                ),
            };
            if filter.as_ref().is_some_and(|f| f != session) {
                return None;
            }
            Some(Ok::<_, std::convert::Infallible>(event))
        }
    });
    // A first comment so clients know the subscription is live before anything happens.
    let ready = futures::stream::once(async { Ok(Event::default().comment("ready")) });
    Sse::new(ready.chain(events)).keep_alive(KeepAlive::default()).into_response()
}
