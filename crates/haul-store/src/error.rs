//! Errors of the history store; each names the database path.

use std::path::PathBuf;

/// What went wrong with the history database, and where.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused an operation (includes "file is not a database").
    #[error("history database {path}: {what}: {source}")]
    Sqlite {
        /// Path of the database.
        path: PathBuf,
        /// The operation that failed.
        what: &'static str,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The directory holding the database could not be created.
    #[error("history database {path}: cannot create directory {dir}: {source}")]
    CreateDir {
        /// Path of the database.
        path: PathBuf,
        /// The directory that could not be created.
        dir: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The database was written by a newer haul.
    #[error("history database {path}: schema version {found} is newer than the {supported} this haul understands")]
    TooNew {
        /// Path of the database.
        path: PathBuf,
        /// Version found in the file.
        found: i64,
        /// Newest version this build knows.
        supported: i64,
    },
    /// A record cannot be stored as given.
    #[error("history database {path}: invalid record: {reason}")]
    Invalid {
        /// Path of the database.
        path: PathBuf,
        /// Which field is wrong and why.
        reason: String,
    },
    /// A stored row does not decode.
    #[error("history database {path}: transfer {id} is corrupt: {reason}")]
    Corrupt {
        /// Path of the database.
        path: PathBuf,
        /// Row id of the transfer.
        id: i64,
        /// What did not decode.
        reason: String,
    },
}
