//! The library's error type: every variant names what failed.

use std::path::PathBuf;

/// Errors of the link emulator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A human-unit value (duration, rate, size, percentage) did not parse.
    #[error("invalid {what} {value:?}: {reason}")]
    Parse {
        /// Which kind of value was expected.
        what: &'static str,
        /// The text given.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A parameter or topology is inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An external command (`ip`, a program run in a namespace) failed.
    #[error("command `{cmd}` failed: {detail}")]
    Command {
        /// The command line.
        cmd: String,
        /// Exit status and stderr, or the spawn error.
        detail: String,
    },
    /// A system call on a namespace, TUN device or sysctl failed.
    #[error("{what}: {source}")]
    Sys {
        /// What was being done, naming the namespace / device / file.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file under the state directory could not be read or written.
    #[error("state file {path}: {reason}")]
    State {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The control socket of a running testbed failed or returned an error.
    #[error("control socket: {0}")]
    Control(String),
    /// A host or link name is not part of the topology.
    #[error("unknown {kind} {name:?}")]
    Unknown {
        /// "host" or "link".
        kind: &'static str,
        /// The name given.
        name: String,
    },
}

/// Result alias of the crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Wraps an OS error with a description of what was being done.
    pub fn sys(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Sys {
            what: what.into(),
            source,
        }
    }

    /// A parse error for `what` with the offending `value`.
    pub fn parse(what: &'static str, value: &str, reason: impl Into<String>) -> Self {
        Error::Parse {
            what,
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}
