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
    /// A PostgreSQL error (connection, pool or statement), with its SQLSTATE when the server sent one.
    #[error("postgres: {0}")]
    Postgres(String),
    /// Another process holds the database (a second gateway on one SQLite file).
    #[error("{0}")]
    Locked(String),
    /// The store configuration is unusable (e.g. an invalid schema name).
    #[error("invalid store configuration: {0}")]
    Config(String),
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

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> StoreError {
        use tokio_postgres::error::SqlState;
        match e.code() {
            Some(c) if *c == SqlState::DISK_FULL => StoreError::Full,
            Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => StoreError::Busy,
            Some(c) => StoreError::Postgres(format!(
                "{} ({})",
                e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_string()),
                c.code()
            )),
            None => StoreError::Postgres(e.to_string()),
        }
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> StoreError {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            e => StoreError::Postgres(format!("pool: {e}")),
        }
    }
}
