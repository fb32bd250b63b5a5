//! Prometheus metrics of a server (`haul serve --metrics ADDR`): sessions, bytes and
//! throughput by direction, bytes by user and by peer, transfers by outcome and errors by
//! cause. [`Metrics`] is a [`TransferLog`]: the server tells it of each transfer as it ends
//! and of each session, refusal and failed login as they happen. Label values of users and
//! peers are bounded: the first `labels` distinct ones get their own series, later ones count
//! under `other`, so a scan from many addresses cannot grow the registry. `http` serves the
//! text format on a small, bounded HTTP/1.1 endpoint.

mod http;

use std::collections::HashSet;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::journal::{Direction, ServedTransfer, ServerEvent, TransferLog};

pub use http::{serve as serve_http, HttpLimits};

/// The label value of the series that users and peers past the bound count under.
pub const OTHER: &str = "other";

/// Labels of a direction: `sent` (downloads) or `received` (uploads).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Dir {
    direction: &'static str,
}

/// Labels of a user's bytes.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UserDir {
    user: String,
    direction: &'static str,
}

/// Labels of a peer's bytes.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PeerDir {
    peer: String,
    direction: &'static str,
}

/// Labels of a transfer's outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirOutcome {
    direction: &'static str,
    outcome: &'static str,
}

/// Labels of an outcome alone.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: &'static str,
}

/// Labels of where a checksum came from.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Source {
    source: &'static str,
}

/// Labels of an error's cause.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Cause {
    cause: &'static str,
}

/// Labels of a refusal at a limit.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Limit {
    limit: &'static str,
}

/// At most `max` distinct label values; later ones become [`OTHER`].
#[derive(Debug)]
struct Bounded {
    max: usize,
    seen: Mutex<HashSet<String>>,
}

impl Bounded {
    fn label(&self, v: &str) -> String {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(v) {
            return v.to_string();
        }
        if seen.len() < self.max {
            seen.insert(v.to_string());
            return v.to_string();
        }
        OTHER.to_string()
    }
}

/// A server's metrics and the registry they are exposed from.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    sessions: Gauge,
    sessions_opened: Counter,
    refused: Family<Limit, Counter>,
    bytes: Family<Dir, Counter>,
    user_bytes: Family<UserDir, Counter>,
    peer_bytes: Family<PeerDir, Counter>,
    transfers: Family<DirOutcome, Counter>,
    throughput: Family<Dir, Histogram>,
    errors: Family<Cause, Counter>,
    reloads: Family<Outcome, Counter>,
    checksums: Family<Source, Counter>,
    checksum_read_bytes: Counter,
    users: Bounded,
    peers: Bounded,
}

/// Throughput histogram buckets, bits per second: 1 Mb/s to about 16 Gb/s, doubling.
fn throughput_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e6, 2.0, 15))
}

impl Metrics {
    /// Metrics whose user and peer labels take at most `labels` distinct values each.
    pub fn new(labels: usize) -> Metrics {
        let mut m = Metrics {
            registry: Registry::with_prefix("haul_serve"),
            sessions: Gauge::default(),
            sessions_opened: Counter::default(),
            refused: Family::default(),
            bytes: Family::default(),
            user_bytes: Family::default(),
            peer_bytes: Family::default(),
            transfers: Family::default(),
            throughput: Family::new_with_constructor(throughput_histogram),
            errors: Family::default(),
            reloads: Family::default(),
            checksums: Family::default(),
            checksum_read_bytes: Counter::default(),
            users: Bounded {
                max: labels,
                seen: Mutex::default(),
            },
            peers: Bounded {
                max: labels,
                seen: Mutex::default(),
            },
        };
        m.register();
        m
    }

    fn register(&mut self) {
        let r = &mut self.registry;
        r.register(
            "sessions",
            "Control sessions open now",
            self.sessions.clone(),
        );
        r.register(
            "sessions_opened",
            "Control sessions admitted since start",
            self.sessions_opened.clone(),
        );
        r.register(
            "refused",
            "Clients turned away at a session limit, by limit",
            self.refused.clone(),
        );
        r.register(
            "bytes",
            "Payload bytes of ended transfers, by direction (sent: downloads)",
            self.bytes.clone(),
        );
        r.register(
            "user_bytes",
            "Payload bytes by user and direction (users past the label bound: other)",
            self.user_bytes.clone(),
        );
        r.register(
            "peer_bytes",
            "Payload bytes by client address and direction (past the bound: other)",
            self.peer_bytes.clone(),
        );
        r.register(
            "transfers",
            "Transfers by direction and outcome (ok, failed)",
            self.transfers.clone(),
        );
        r.register(
            "transfer_throughput_bits_per_second",
            "Throughput of each completed transfer, by direction",
            self.throughput.clone(),
        );
        r.register(
            "errors",
            "Errors by cause: failed transfers (timeout, connection, disk_full, path, other), failed logins (login) and reloads (reload)",
            self.errors.clone(),
        );
        r.register(
            "reloads",
            "Reloads (SIGHUP) by outcome",
            self.reloads.clone(),
        );
        r.register(
            "checksums",
            "CKSM replies by source: transit (hashed as the file was sent or received) or file (read again)",
            self.checksums.clone(),
        );
        r.register(
            "checksum_read_bytes",
            "Bytes read again from files to answer CKSM",
            self.checksum_read_bytes.clone(),
        );
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    fn error(&self, cause: &'static str) {
        self.errors.get_or_create(&Cause { cause }).inc();
    }
}

/// The label of a direction.
fn direction(d: Direction) -> &'static str {
    match d {
        Direction::Sent => "sent",
        Direction::Received => "received",
    }
}

/// The cause of a failed transfer, from its error text: a handful of values, whatever the
/// text says.
pub fn cause(error: &str) -> &'static str {
    let e = error.to_ascii_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| e.contains(w));
    if any(&["no space", "quota"]) {
        "disk_full"
    } else if any(&["timed out", "timeout", "no byte"]) {
        "timeout"
    } else if any(&[
        "no such file",
        "permission",
        "outside the served root",
        "symbolic link",
    ]) {
        "path"
    } else if any(&["connection", "reset", "broken pipe", "closed", "eof"]) {
        "connection"
    } else {
        "other"
    }
}

impl TransferLog for Metrics {
    fn record(&self, t: ServedTransfer) {
        let direction = direction(t.direction);
        let outcome = if t.outcome.is_ok() { "ok" } else { "failed" };
        self.transfers
            .get_or_create(&DirOutcome { direction, outcome })
            .inc();
        self.bytes.get_or_create(&Dir { direction }).inc_by(t.bytes);
        let user = self.users.label(&t.user);
        self.user_bytes
            .get_or_create(&UserDir { user, direction })
            .inc_by(t.bytes);
        let peer = self.peers.label(&t.peer.to_string());
        self.peer_bytes
            .get_or_create(&PeerDir { peer, direction })
            .inc_by(t.bytes);
        match &t.outcome {
            Ok(()) if t.elapsed_s > 0.0 => self
                .throughput
                .get_or_create(&Dir { direction })
                .observe(t.bytes as f64 * 8.0 / t.elapsed_s),
            Ok(()) => {}
            Err(e) => self.error(cause(e)),
        }
    }

    fn event(&self, e: ServerEvent) {
        match e {
            ServerEvent::SessionOpened => {
                self.sessions.inc();
                self.sessions_opened.inc();
            }
            ServerEvent::SessionClosed => {
                self.sessions.dec();
            }
            ServerEvent::Refused(limit) => {
                self.refused.get_or_create(&Limit { limit }).inc();
            }
            ServerEvent::LoginFailed => self.error("login"),
            ServerEvent::Checksum { read, bytes } => {
                let source = if read { "file" } else { "transit" };
                self.checksums.get_or_create(&Source { source }).inc();
                self.checksum_read_bytes.inc_by(bytes);
            }
            ServerEvent::Reloaded { ok } => {
                let outcome = if ok { "ok" } else { "failed" };
                self.reloads.get_or_create(&Outcome { outcome }).inc();
                if !ok {
                    self.error("reload");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
