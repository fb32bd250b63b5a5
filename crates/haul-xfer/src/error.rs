//! Errors of the transfer engine. Each names the host or path it concerns and maps to one of
//! the CLI's documented exit codes through [`XferError::kind`].

use haul_proto::{Command, Reply};

/// The broad cause of a failure, for exit codes and JSON summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Could not reach the server.
    ConnectionRefused,
    /// Login rejected.
    AuthenticationFailed,
    /// A path does not exist.
    NoSuchPath,
    /// Access denied.
    PermissionDenied,
    /// Data arrived but did not verify.
    ChecksumMismatch,
    /// Anything else.
    Other,
}

/// A transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum XferError {
    /// TCP connect or name resolution failed.
    #[error("connection to {host} failed: {reason}")]
    Connect {
        /// The server.
        host: String,
        /// Why.
        reason: String,
    },
    /// The server rejected the credentials.
    #[error("authentication failed for {user} at {host}: {reply}")]
    Auth {
        /// The server.
        host: String,
        /// The user name tried.
        user: String,
        /// The server's reply.
        reply: String,
    },
    /// The server refused a command.
    #[error("{host} refused `{command}`: {reply}")]
    Refused {
        /// The server.
        host: String,
        /// The command (passwords masked).
        command: String,
        /// The reply.
        reply: String,
        /// Classified cause.
        kind: ErrorKind,
    },
    /// The server said something out of protocol.
    #[error("protocol error with {host}: {reply}")]
    Protocol {
        /// The server.
        host: String,
        /// What was received.
        reply: String,
    },
    /// The server does not offer something the transfer needs.
    #[error("{host} does not offer {what}: {reply}")]
    Unsupported {
        /// The server.
        host: String,
        /// What was asked for.
        what: String,
        /// The server's refusal.
        reply: String,
    },
    /// TLS set-up failed.
    #[error("TLS with {host} failed: {reason}")]
    Tls {
        /// The server.
        host: String,
        /// Why.
        reason: String,
    },
    /// GSI (`gsiftp://`) could not be set up: the user's proxy, the trusted CAs, or the
    /// server's credential.
    #[error("GSI with {host} failed: {reason}")]
    Gsi {
        /// The server, or the proxy file.
        host: String,
        /// Why.
        reason: String,
    },
    /// A local or socket IO error.
    #[error("{what}: {error}")]
    Io {
        /// The path or host concerned.
        what: String,
        /// The error: shown in this error's message, so not also a `source()` that a report
        /// walking the chain would print a second time.
        error: std::io::Error,
    },
    /// Verification failed even after re-transfer.
    #[error("checksum mismatch for {path}: source {expected} ({alg}), destination {actual}")]
    ChecksumMismatch {
        /// The destination path.
        path: String,
        /// Algorithm used.
        alg: String,
        /// Source digest.
        expected: String,
        /// Destination digest.
        actual: String,
    },
    /// The server ended a transfer without sending every byte asked for; the file is not kept.
    #[error("{host} ended the transfer of {path} with bytes missing (ranges {missing} of {len})")]
    Incomplete {
        /// The server.
        host: String,
        /// The remote path.
        path: String,
        /// The missing byte ranges, `start-end,…` (end exclusive).
        missing: String,
        /// The bytes that were asked for.
        len: u64,
    },
    /// A source tree broke a walk limit or looped (see [`crate::walk`]).
    #[error("{path}: {reason}")]
    Tree {
        /// The path where the walk stopped.
        path: String,
        /// Which limit, or the loop.
        reason: String,
    },
    /// Files planned did not all arrive; each is named (the first 20 in the message).
    #[error("{}", not_moved(*planned, missing, cause.as_deref()))]
    NotMoved {
        /// Files planned.
        planned: usize,
        /// Destinations of the files that did not arrive.
        missing: Vec<String>,
        /// What stopped the engine, when it was a failure of its own.
        cause: Option<String>,
    },
    /// A failure inside the engine: a panicked thread, a poisoned lock, broken bookkeeping.
    #[error("internal error: {0}")]
    Internal(String),
    /// Bad request by the user.
    #[error("{0}")]
    Usage(String),
    /// The transfer's owner stopped it ([`crate::Transfer::abort`]); what arrived is kept
    /// for `--resume`.
    #[error("stopped: {0}")]
    Stopped(String),
}

/// The message of [`XferError::NotMoved`].
fn not_moved(planned: usize, missing: &[String], cause: Option<&str>) -> String {
    const SHOWN: usize = 20;
    let mut m = format!("{} of {planned} files not moved", missing.len());
    if let Some(c) = cause {
        m += &format!(" ({c})");
    }
    m += ": ";
    m += &missing
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if missing.len() > SHOWN {
        m += &format!(" and {} more", missing.len() - SHOWN);
    }
    m
}

impl XferError {
    /// An IO error on `what`.
    pub fn io(what: &str, source: std::io::Error) -> XferError {
        XferError::Io {
            what: what.to_string(),
            error: source,
        }
    }

    /// A refusal built from a server reply, classified by code and text.
    pub fn from_reply(host: &str, cmd: &Command, r: &Reply) -> XferError {
        let text = r.text().to_ascii_lowercase();
        // 530 not logged in; 534 and 535 (RFC 2228) security set-up refused.
        let kind = if matches!(r.code, 530 | 534 | 535) {
            ErrorKind::AuthenticationFailed
        } else if text.contains("no such file")
            || text.contains("not found")
            || text.contains("does not exist")
        {
            ErrorKind::NoSuchPath
        } else if text.contains("permission denied")
            || text.contains("outside the served root")
            || text.contains("read-only")
        {
            ErrorKind::PermissionDenied
        } else {
            ErrorKind::Other
        };
        let command = if matches!(cmd, Command::Pass(_)) {
            "PASS ****".to_string()
        } else {
            cmd.to_string()
        };
        XferError::Refused {
            host: host.to_string(),
            command,
            reply: r.to_string(),
            kind,
        }
    }

    /// The broad cause.
    pub fn kind(&self) -> ErrorKind {
        match self {
            XferError::Connect { .. } => ErrorKind::ConnectionRefused,
            XferError::Auth { .. } | XferError::Gsi { .. } => ErrorKind::AuthenticationFailed,
            XferError::Refused { kind, .. } => *kind,
            XferError::ChecksumMismatch { .. } => ErrorKind::ChecksumMismatch,
            XferError::Io { error, .. } => match error.kind() {
                std::io::ErrorKind::NotFound => ErrorKind::NoSuchPath,
                std::io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
                std::io::ErrorKind::ConnectionRefused => ErrorKind::ConnectionRefused,
                _ => ErrorKind::Other,
            },
            _ => ErrorKind::Other,
        }
    }
}
