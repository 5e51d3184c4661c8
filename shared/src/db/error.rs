//! Failures at the database boundary, and the words that explain them.

/// Failures at the database boundary.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// No connection could be had or it broke: the caller may retry later.
    #[error("the database is unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The statement gave way to another one: a lock or statement timeout, a deadlock,
    /// a serialization failure. Nothing was changed, and the same request may succeed
    /// when tried again.
    #[error("the database is busy")]
    Busy(#[source] tokio_postgres::Error),
    #[error("database query failed")]
    Query(#[source] tokio_postgres::Error),
    #[error("a stored value is not one this code knows: {0}")]
    Corrupt(String),
}

impl DbError {
    /// The SQLSTATE of a server-side error, such as `23P01` for an exclusion violation.
    pub fn sql_state(&self) -> Option<&tokio_postgres::error::SqlState> {
        match self {
            DbError::Query(e) | DbError::Busy(e) => e.code(),
            _ => None,
        }
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        use tokio_postgres::error::SqlState;
        // A server that cannot write, or is going away: a standby not yet promoted, a
        // primary made read-only, a shutdown, a crash, a recovery. During a failover
        // the connections made before it may all lead there, so none of them is handed
        // out again ([`super::pool()`]'s check).
        let not_writable = e.code().is_some_and(|code| {
            *code == SqlState::READ_ONLY_SQL_TRANSACTION
                || *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
        });
        if not_writable {
            super::pool::write_off_connections();
        }
        let unavailable = not_writable
            || e.is_closed()
            || match e.code() {
                // Class 08 (connection exception), too many connections.
                Some(code) => code.code().starts_with("08") || *code == SqlState::TOO_MANY_CONNECTIONS,
                // No SQLSTATE at all means the error came from the socket, not the server
                // (or from the read-write check of a new connection).
                None => e.as_db_error().is_none(),
            };
        let busy = e.code().is_some_and(|code| {
            *code == SqlState::LOCK_NOT_AVAILABLE
                || *code == SqlState::QUERY_CANCELED
                || *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::T_R_SERIALIZATION_FAILURE
        });
        if unavailable {
            DbError::Unavailable(Box::new(e))
        } else if busy {
            DbError::Busy(e)
        } else {
            DbError::Query(e)
        }
    }
}

impl From<crate::domain::UnknownValue> for DbError {
    fn from(e: crate::domain::UnknownValue) -> Self {
        DbError::Corrupt(e.to_string())
    }
}

impl From<deadpool_postgres::PoolError> for DbError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            other => DbError::Unavailable(Box::new(other)),
        }
    }
}

/// A request that did not finish within its time (`DB_REQUEST_TIMEOUT_MS`):
/// its database work waited on a peer that is gone or stalled.
#[derive(Debug, thiserror::Error)]
#[error("the request did not finish within {0:?}")]
pub struct TimedOut(pub std::time::Duration);

/// A server that answers but cannot write: a standby in recovery, or a server made
/// read-only.
#[derive(Debug, thiserror::Error)]
#[error("the database server cannot write (in recovery or read-only)")]
pub struct NotWritable;

/// Why a connection or statement failed, in a few words: the server's own message (a
/// wrong password, a missing database), else the socket's error (refused, timed out, an
/// unknown host name).
pub fn postgres_reason(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return db.message().to_string();
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return io_reason(io);
        }
        source = cause.source();
    }
    e.to_string()
}

/// An I/O error as words: "connection refused", not "Os { code: 111, ... }" nor
/// "Connection refused (os error 111)".
pub fn io_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(i) => &text[..i],
        None => &text,
    };
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        // "Connection refused" reads as "connection refused"; "TLS ..." stays as it is.
        (Some(first), Some(second)) if first.is_uppercase() && second.is_lowercase() => {
            first.to_lowercase().chain(text[first.len_utf8()..].chars()).collect()
        }
        _ => text.to_string(),
    }
}
