//! Throughput predictions a server shares with `SITE BTC` (haul extension, docs/protocol.md):
//! one line per peer it has served lately, which a client reads from servers it does not
//! control to choose a route (002 §2.3–2.4); and what an aggregating registry caches of many
//! servers' lines (`SITE BTC ALL`, [`RegistryReply`]).

use std::net::SocketAddr;

/// How long a prediction is shared, in seconds: one whose newest measurement is older expires,
/// at the server that made it and at a registry that caches it.
pub const MAX_AGE_S: f64 = 7.0 * 24.0 * 3600.0;

/// The longest server name a registry line may carry (a DNS name, brackets, a port).
pub const MAX_SERVER_NAME: usize = 262;

/// Which way data went, seen from the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The server sent (RETR, ERET, a listing).
    Sent,
    /// The server received (STOR, APPE, ESTO).
    Received,
}

/// One throughput prediction a server shares about a peer it has served (`SITE BTC`).
#[derive(Debug, Clone, PartialEq)]
pub struct PeerPrediction {
    /// The peer's address.
    pub peer: String,
    /// Which way the data went (sent: this server to the peer).
    pub direction: Direction,
    /// Predicted throughput, bits per second (0: the peer was unreachable last time).
    pub bps: f64,
    /// Which predictor made it (`median`, `average`, `ewma`).
    pub predictor: String,
    /// Seconds since the newest measurement behind it.
    pub age_s: f64,
    /// Measurements behind it.
    pub samples: usize,
    /// The predictor's recent mean absolute error on this pair, percent of the measured value
    /// (`err=`; None when it has too few measurements to have erred yet).
    pub err_pct: Option<f64>,
}

/// What a `SITE BTC` reply says: the predictions and whether the server relays.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shared {
    /// One per peer and direction.
    pub predictions: Vec<PeerPrediction>,
    /// The server relays nested URLs.
    pub relays: bool,
}

impl Shared {
    /// Reads a `211` reply to `SITE BTC`; lines that are neither a prediction nor the relay
    /// line are skipped.
    pub fn parse(r: &crate::Reply) -> Shared {
        let mut s = Shared::default();
        for l in &r.lines {
            let l = l.trim();
            if l.eq_ignore_ascii_case("relay=yes;") {
                s.relays = true;
            } else if let Some(p) = PeerPrediction::parse(l) {
                s.predictions.push(p);
            }
        }
        s
    }
}

/// One server a registry polled: the `server=…;addr=…;relay=…;polled=…;` line of
/// `SITE BTC ALL`.
#[derive(Debug, Clone, PartialEq)]
pub struct PolledServer {
    /// The server, `host:port` as the registry's list names it.
    pub server: String,
    /// The address the registry reached it at.
    pub addr: Option<SocketAddr>,
    /// It relays nested URLs.
    pub relays: bool,
    /// Seconds since the poll its predictions come from.
    pub polled_s: f64,
}

/// One prediction a registry caches, with the server that made it: the
/// `server=…;peer=…;dir=…;…` line of `SITE BTC ALL`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reported {
    /// The server that made it, as in its [`PolledServer`] line.
    pub server: String,
    /// The prediction, its age grown by the time it spent in the cache.
    pub prediction: PeerPrediction,
}

/// What a `211` reply to `SITE BTC ALL` says: the servers a registry polled and their
/// predictions. Lines that are neither are skipped, so the format can grow.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegistryReply {
    /// One per server whose last poll answered.
    pub servers: Vec<PolledServer>,
    /// Their predictions.
    pub reported: Vec<Reported>,
}

/// A server name fit for a registry line: printable ASCII without spaces, bounded.
fn server_name(v: &str) -> Option<String> {
    let v = v.trim();
    let ok = !v.is_empty()
        && v.len() <= MAX_SERVER_NAME
        && v.bytes()
            .all(|b| b.is_ascii_graphic() && b != b';' && b != b'=');
    ok.then(|| v.to_string())
}

/// The value of `key` in a `k=v;k=v;` line (the first one), trimmed.
fn value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(';')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
}

impl PolledServer {
    /// The line for `SITE BTC ALL`.
    pub fn line(&self) -> String {
        let addr = self.addr.map(|a| format!("addr={a};")).unwrap_or_default();
        let relay = if self.relays { "yes" } else { "no" };
        format!(
            "server={};{addr}relay={relay};polled={:.0};",
            self.server, self.polled_s
        )
    }

    /// Reads a server line back; None if it is not one.
    pub fn parse(line: &str) -> Option<PolledServer> {
        if value(line, "peer").is_some() {
            return None;
        }
        let addr = match value(line, "addr") {
            Some(a) => Some(a.parse().ok()?),
            None => None,
        };
        let polled_s: f64 = value(line, "polled")?.parse().ok()?;
        (polled_s.is_finite() && polled_s >= 0.0).then_some(())?;
        Some(PolledServer {
            server: server_name(value(line, "server")?)?,
            addr,
            relays: value(line, "relay") == Some("yes"),
            polled_s,
        })
    }
}

impl Reported {
    /// The line for `SITE BTC ALL`.
    pub fn line(&self) -> String {
        format!("server={};{}", self.server, self.prediction.line())
    }

    /// Reads a prediction line back; None if it is not one.
    pub fn parse(line: &str) -> Option<Reported> {
        Some(Reported {
            server: server_name(value(line, "server")?)?,
            prediction: PeerPrediction::parse(line)?,
        })
    }
}

impl RegistryReply {
    /// Reads a `211` reply to `SITE BTC ALL`.
    pub fn parse(r: &crate::Reply) -> RegistryReply {
        let mut out = RegistryReply::default();
        for l in &r.lines {
            if let Some(p) = Reported::parse(l) {
                out.reported.push(p);
            } else if let Some(s) = PolledServer::parse(l) {
                out.servers.push(s);
            }
        }
        out
    }
}

impl PeerPrediction {
    /// The `SITE BTC` reply line:
    /// `peer=ADDR;dir=sent|received;bps=N;predictor=P;age=S;samples=K;[err=E;]`.
    pub fn line(&self) -> String {
        let dir = match self.direction {
            Direction::Sent => "sent",
            Direction::Received => "received",
        };
        let err = self
            .err_pct
            .map(|e| format!("err={e:.1};"))
            .unwrap_or_default();
        format!(
            "peer={};dir={dir};bps={:.0};predictor={};age={:.0};samples={};{err}",
            self.peer, self.bps, self.predictor, self.age_s, self.samples
        )
    }

    /// Reads a `SITE BTC` line back; None if it is not one.
    pub fn parse(line: &str) -> Option<PeerPrediction> {
        let mut p = PeerPrediction {
            peer: String::new(),
            direction: Direction::Sent,
            bps: f64::NAN,
            predictor: String::new(),
            age_s: 0.0,
            samples: 0,
            err_pct: None,
        };
        for kv in line.trim().split(';').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=')?;
            match k.trim() {
                "peer" => p.peer = v.trim().to_string(),
                "dir" => {
                    p.direction = match v.trim() {
                        "sent" => Direction::Sent,
                        "received" => Direction::Received,
                        _ => return None,
                    }
                }
                "bps" => p.bps = v.trim().parse().ok()?,
                "predictor" => p.predictor = v.trim().to_string(),
                "age" => p.age_s = v.trim().parse().ok()?,
                "samples" => p.samples = v.trim().parse().ok()?,
                "err" => p.err_pct = Some(v.trim().parse().ok()?),
                _ => {}
            }
        }
        let err_ok = p.err_pct.is_none_or(|e| e.is_finite() && e >= 0.0);
        let sane =
            !p.peer.is_empty() && p.bps.is_finite() && p.bps >= 0.0 && p.age_s >= 0.0 && err_ok;
        sane.then_some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prediction_line_reads_back() {
        let p = PeerPrediction {
            peer: "10.0.0.2".into(),
            direction: Direction::Received,
            bps: 8.12e8,
            predictor: "median".into(),
            age_s: 34.0,
            samples: 5,
            err_pct: None,
        };
        assert_eq!(
            p.line(),
            "peer=10.0.0.2;dir=received;bps=812000000;predictor=median;age=34;samples=5;"
        );
        assert_eq!(PeerPrediction::parse(&p.line()), Some(p.clone()));
        let p = PeerPrediction {
            err_pct: Some(18.5),
            ..p
        };
        assert!(p.line().ends_with(";samples=5;err=18.5;"), "{}", p.line());
        assert_eq!(PeerPrediction::parse(&p.line()), Some(p));
        for bad in [
            "",
            "peer=;bps=1",
            "peer=a;bps=-1",
            "peer=a;bps=x",
            "peer=a;dir=up;bps=1",
            "peer=a;bps=1;err=-3",
            "peer=a;bps=1;err=inf",
            "peer=a;bps=1;err=NaN",
            "peer=a;bps=1;err=",
        ] {
            assert_eq!(PeerPrediction::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn registry_lines_read_back_and_name_both_ends() {
        let server = PolledServer {
            server: "origin.example.org:2811".into(),
            addr: Some("10.0.0.9:2811".parse().unwrap()),
            relays: true,
            polled_s: 12.0,
        };
        assert_eq!(
            server.line(),
            "server=origin.example.org:2811;addr=10.0.0.9:2811;relay=yes;polled=12;"
        );
        let reported = Reported {
            server: "[fd00::1]:2811".into(),
            prediction: PeerPrediction {
                peer: "10.0.0.2".into(),
                direction: Direction::Sent,
                bps: 1e8,
                predictor: "ewma(0.3)".into(),
                age_s: 70.0,
                samples: 3,
                err_pct: Some(4.0),
            },
        };
        let reply = crate::Reply::multi(
            211,
            vec![
                "BTC registry".into(),
                format!(" {}", server.line()),
                format!(" {};future=1;", reported.line()),
                " server=a:1;peer=x;bps=nan;".into(),
                " server=has space:1;polled=1;".into(),
                " relay=no;".into(),
                "End.".into(),
            ],
        );
        let r = RegistryReply::parse(&reply);
        assert_eq!(r.servers, vec![server]);
        assert_eq!(r.reported, vec![reported]);
        for bad in [
            "server=a:1;addr=nowhere;polled=1;",
            "server=a:1;polled=-1;",
            "server=;polled=1;",
            "addr=1.2.3.4:5;polled=1;",
        ] {
            assert_eq!(PolledServer::parse(bad), None, "{bad}");
        }
    }
}
