//! Every error answer: an [`ApiError`] as its type name, its HTTP status and its body
//! `{"ok":false,"error":{"type","message"}}` (`/tools/invoke` picks OpenClaw's statuses and types itself,
//! `tool_invoke.rs`, and renders its body here too).

use crate::error::ApiError;
use crate::host_protocol::{ErrorBodyJson, ErrorJson};
use crate::request_body::BodyRejection;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// The error's `type` on the wire.
pub(crate) fn error_kind(e: &ApiError) -> &'static str {
    match e {
        ApiError::InvalidArgument(_) => "invalid_argument",
        ApiError::NotFound(_) => "not_found",
        ApiError::UnknownTool(_) => "unknown_tool",
        ApiError::Conflict(_) => "conflict",
        ApiError::Unauthorized(_) => "unauthorized",
        ApiError::Forbidden(_) => "forbidden",
        ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
        // OpenClaw's type for its 413.
        ApiError::PayloadTooLarge(_) => "invalid_request_error",
        ApiError::Internal(_) => "internal",
        ApiError::Unavailable(_) => "unavailable",
    }
}

/// The HTTP status of this error everywhere it is answered (the host API, the guard, the nodes'
/// routes). `/tools/invoke` answers OpenClaw's statuses instead (`tool_invoke.rs`).
fn error_status(e: &ApiError) -> StatusCode {
    match e {
        ApiError::InvalidArgument(_) => StatusCode::BAD_REQUEST,
        ApiError::NotFound(_) | ApiError::UnknownTool(_) => StatusCode::NOT_FOUND,
        ApiError::Conflict(_) => StatusCode::CONFLICT,
        ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
        ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
        ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// An error: `{"type", "message"}` (inside `{"ok": false, "error": …}` over HTTP, as MCP structured content
/// under `error`).
pub(crate) fn error_detail(kind: &str, message: &str) -> Value {
    super::to_value(error_json(kind, message))
}

fn error_json(kind: &str, message: &str) -> ErrorJson {
    ErrorJson { message: message.to_string(), kind: kind.to_string() }
}

/// An HTTP error body: `{"ok": false, "error": {"type", "message"}}`.
pub(crate) fn error_body(kind: &str, message: &str) -> Value {
    super::to_value(ErrorBodyJson { error: error_json(kind, message), ok: false })
}

/// `e` answered with `status` (the guard's and the middlewares' refusals).
pub(crate) fn error_response(status: StatusCode, e: &ApiError) -> Response {
    (status, Json(error_body(error_kind(e), &e.to_string()))).into_response()
}

/// `e` answered with its own status (the host API, the guard, the stream, the nodes' routes).
pub(crate) fn host_error(e: ApiError) -> Response {
    error_response(error_status(&e), &e)
}

/// A host API handler's answer: the value as JSON, or the error as [`host_error`] answers it (so a
/// handler takes the gateway's `ApiResult`s with `?`).
pub(crate) type HostAnswer<T> = Result<Json<T>, HostError>;

/// The error of a [`HostAnswer`].
pub(crate) struct HostError(ApiError);

impl From<ApiError> for HostError {
    fn from(e: ApiError) -> Self {
        HostError(e)
    }
}

impl IntoResponse for HostError {
    fn into_response(self) -> Response {
        host_error(self.0)
    }
}

/// `value` as the JSON of a host API answer; a value serde refuses is an internal error, answered as
/// JSON like every other (not axum's plain-text 500).
pub(crate) fn host_json(value: impl serde::Serialize) -> HostAnswer<Value> {
    serde_json::to_value(value).map(Json).map_err(|e| HostError(ApiError::Internal(e.to_string())))
}

impl IntoResponse for BodyRejection {
    fn into_response(self) -> Response {
        match self {
            // Too large or cut off: axum's own answer, which `http::edge` turns into the JSON one.
            BodyRejection::Unread(rejection) => rejection.into_response(),
            BodyRejection::Refused(e) => host_error(e),
        }
    }
}
