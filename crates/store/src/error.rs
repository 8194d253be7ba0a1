use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("database {path} is not a usable sessionwatch database: {reason}")]
    Corrupt { path: String, reason: String },
    #[error(
        "database schema version {found} is newer than this sessionwatch understands ({supported}); upgrade sessionwatch"
    )]
    TooNew { found: i64, supported: i64 },
    #[error("the database is full")]
    Full,
    #[error("the database is busy")]
    Busy,
    #[error("invalid data in the database: {0}")]
    InvalidData(String),
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("store task failed: {0}")]
    Task(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

impl StoreError {
    /// The same failure for another caller (a failed group commit fails every job in it).
    pub(crate) fn copy(&self) -> StoreError {
        match self {
            StoreError::Full => StoreError::Full,
            StoreError::Busy => StoreError::Busy,
            other => StoreError::Task(format!("the commit failed: {other}")),
        }
    }

    pub(crate) fn classify(e: rusqlite::Error) -> StoreError {
        use rusqlite::ErrorCode;
        match e.sqlite_error_code() {
            Some(ErrorCode::DiskFull) => StoreError::Full,
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Busy,
            _ => StoreError::Sqlite(e),
        }
    }
}
