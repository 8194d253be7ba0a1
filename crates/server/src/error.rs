//! Errors a tool or host call answers with; `wire::error` renders them (type, status, body).

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

pub(crate) type ApiResult<T> = Result<T, ApiError>;
