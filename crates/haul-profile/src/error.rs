//! Errors of the profiler: what failed, with the peer, parameter or path involved.

use thiserror::Error;

/// Everything that can go wrong in a profiling run.
#[derive(Debug, Error)]
pub enum ProfileError {
    /// A socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the address involved.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The control channel carried something unexpected or malformed.
    #[error("control channel: {0}")]
    Protocol(String),
    /// The peer sent an ERROR message.
    #[error("peer reported an error: {0}")]
    Remote(String),
    /// A parameter is out of range or inconsistent.
    #[error("bad parameter {name}: {reason}")]
    Param {
        /// The parameter (flag) name.
        name: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A transport is not available in this build.
    #[error("transport {0} is not available: {1}")]
    Unavailable(String, String),
    /// A PLUT data channel failed.
    #[error("PLUT data channel {channel}: {source}")]
    Plut {
        /// The channel's address.
        channel: String,
        /// The PLUT IO layer's error.
        #[source]
        source: haul_transport::plut::PlutError,
    },
    /// Writing a table, plot or trace failed.
    #[error("writing {path}: {reason}")]
    Output {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

impl ProfileError {
    /// An IO error with context.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> ProfileError {
        ProfileError::Io {
            what: what.into(),
            source,
        }
    }

    /// A parameter error.
    pub fn param(name: impl Into<String>, reason: impl Into<String>) -> ProfileError {
        ProfileError::Param {
            name: name.into(),
            reason: reason.into(),
        }
    }
}
