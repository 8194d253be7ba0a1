//! `GET /v1/stream`: Server-Sent Events `wake`, `notice` and `message` for one session (or all).
//! With `include=changes` (what the dashboard asks for) also `change` (an append: the session's new
//! state version) and `ack` (a turn took delivery of its notices); without it the stream is as before.

use crate::state::{AppState, query_param};
use crate::wire::host_error;
use axum::extract::State;
use axum::http::Uri;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::json;
use sessionwatch_kernel::Signal;
use sessionwatch_store::Store;
use std::sync::Arc;
use tokio_stream::wrappers::BroadcastStream;

pub(crate) async fn stream<S: Store>(State(state): State<Arc<AppState<S>>>, uri: Uri) -> Response {
    let gateway = state.gateway.clone();
    let filter = match query_param(&uri, "sessionKey") {
        Some(raw) => match gateway.resolve_host_key(&raw, None) {
            Ok(r) => {
                // The gateway serving a session's stream hosts it.
                gateway.kernel().host_session(&r.key, &r.agent_id).await;
                Some(r.key)
            }
            Err(e) => return host_error(e),
        },
        None => None,
    };
    let changes = query_param(&uri, "include").is_some_and(|v| v.split(',').any(|p| p == "changes"));
    let signals = BroadcastStream::new(gateway.kernel().subscribe());
    let events = signals.filter_map(move |s| {
        let filter = filter.clone();
        async move {
            let s = s.ok()?;
            if filter.as_ref().is_some_and(|f| f != s.session()) {
                return None;
            }
            let event = match &s {
                Signal::Wake { session, reason } => Event::default()
                    .event("wake")
                    .data(json!({ "sessionKey": session, "reason": reason }).to_string()),
                Signal::Notice { session, text } => Event::default()
                    .event("notice")
                    .data(json!({ "sessionKey": session, "text": text }).to_string()),
                Signal::Message { session, id, role, run_id } => Event::default().event("message").data(
                    json!({ "sessionKey": session, "id": id, "role": role, "runId": run_id }).to_string(),
                ),
                Signal::Changed { session, sequence } if changes => Event::default()
                    .event("change")
                    .data(json!({ "sessionKey": session, "stateVersion": sequence }).to_string()),
                Signal::Acknowledged { session, notices } if changes => Event::default()
                    .event("ack")
                    .data(json!({ "sessionKey": session, "notices": notices }).to_string()),
                Signal::Changed { .. } | Signal::Acknowledged { .. } => return None,
            };
            Some(Ok::<_, std::convert::Infallible>(event))
        }
    });
    // A first comment so clients know the subscription is live before anything happens.
    let ready = futures::stream::once(async { Ok(Event::default().comment("ready")) });
    Sse::new(ready.chain(events)).keep_alive(KeepAlive::default()).into_response()
}
