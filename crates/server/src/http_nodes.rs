//! HTTP for remote nodes: the admin's `/v1/nodes` (bearer token) and the nodes' own `/v1/node/*`
//! (a node token, which opens nothing else).

use crate::error::ApiError;
use crate::host_protocol::NodeTokenJson;
use crate::node_protocol::SyncAnswer;
use crate::request_body::{Body, non_empty};
use crate::state::{AppState, bearer_of};
use crate::wire::{HostAnswer, error_response, host_error, host_json};
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use axum::{Extension, Json};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sessionwatch_store::Store;
use std::sync::Arc;

type Shared<S> = Arc<AppState<S>>;

/// The node a `/v1/node/*` request comes from (its token's).
#[derive(Clone, Debug)]
pub(crate) struct NodeName(pub String);

/// `/v1/node/*` takes a node token only; the admin token is not a node.
pub(crate) async fn require_node<S: Store>(
    State(state): State<Shared<S>>,
    mut req: Request,
    next: Next,
) -> Response {
    let node = match bearer_of(req.headers()) {
        Some(t) => state.gateway.node_of_token(t).await,
        None => Ok(None),
    };
    match node {
        Ok(Some(name)) => {
            req.extensions_mut().insert(NodeName(name));
            next.run(req).await
        }
        Ok(None) => error_response(
            StatusCode::UNAUTHORIZED,
            &ApiError::Unauthorized("missing, unknown or revoked node token".into()),
        ),
        Err(e) => host_error(e),
    }
}

fn typed<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::invalid(format!("malformed body: {e}")))
}

pub(crate) async fn sync<S: Store>(
    State(state): State<Shared<S>>,
    Extension(NodeName(node)): Extension<NodeName>,
    body: Bytes,
) -> HostAnswer<SyncAnswer> {
    Ok(Json(state.gateway.node_sync(&node, typed(&body)?).await?))
}

pub(crate) async fn baselines<S: Store>(
    State(state): State<Shared<S>>,
    Extension(NodeName(node)): Extension<NodeName>,
    body: Bytes,
) -> HostAnswer<Value> {
    let linked = state.gateway.node_baselines(&node, typed(&body)?).await?;
    Ok(Json(serde_json::json!({ "linked": linked })))
}

pub(crate) async fn outcomes<S: Store>(
    State(state): State<Shared<S>>,
    Extension(NodeName(node)): Extension<NodeName>,
    body: Bytes,
) -> HostAnswer<Value> {
    host_json(state.gateway.node_outcomes(&node, typed(&body)?).await?)
}

/// `POST /v1/node/heads`: HEAD moves in the git dirs the node follows for the gateway.
pub(crate) async fn heads<S: Store>(
    State(state): State<Shared<S>>,
    Extension(NodeName(node)): Extension<NodeName>,
    body: Bytes,
) -> HostAnswer<Value> {
    host_json(state.gateway.node_heads(&node, typed(&body)?).await?)
}

/// `GET /v1/nodes`.
pub(crate) async fn list<S: Store>(State(state): State<Shared<S>>) -> HostAnswer<Value> {
    Ok(Json(crate::wire::nodes(&state.gateway.node_statuses().await?)))
}

/// `POST /v1/nodes {name}`: issues a node token.
pub(crate) async fn issue<S: Store>(
    State(state): State<Shared<S>>,
    Body(body): Body<crate::host_protocol::IssueNodeRequest>,
) -> HostAnswer<NodeTokenJson> {
    let name = non_empty("body.name", &body.name)?.trim().to_string();
    let token = state.gateway.issue_node(&name).await?;
    Ok(Json(crate::wire::node_token(&name, &token)))
}

/// `DELETE /v1/nodes/{name}`: revokes its token.
pub(crate) async fn revoke<S: Store>(
    State(state): State<Shared<S>>,
    Path(name): Path<String>,
) -> HostAnswer<Value> {
    state.gateway.revoke_node(&name).await?;
    Ok(Json(serde_json::json!({ "revoked": name })))
}
