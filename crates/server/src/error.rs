//! Errors a tool or host call answers with: `{"ok":false,"error":{"type","message"}}`.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    UnknownTool(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    Internal(String),
    /// The state store could not answer (a read or write failed): try again later.
    #[error("{0}")]
    Unavailable(String),
}

impl ApiError {
    pub fn kind(&self) -> &'static str {
        match self {
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
    /// routes). `/tools/invoke` answers OpenClaw's statuses instead (`http.rs` `invoke_tool`).
    pub fn status(&self) -> axum::http::StatusCode {
        use axum::http::StatusCode;
        match self {
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

    pub fn body(&self) -> Value {
        crate::wire::error_body(self.kind(), &self.to_string())
    }

    pub fn invalid(msg: impl Into<String>) -> ApiError {
        ApiError::InvalidArgument(msg.into())
    }
}

impl From<sessionwatch_store::StoreError> for ApiError {
    fn from(e: sessionwatch_store::StoreError) -> Self {
        tracing::warn!(error = %e, "store error");
        ApiError::Unavailable("the state store could not answer; try again".into())
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
