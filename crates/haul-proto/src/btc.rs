//! Throughput predictions a server shares with `SITE BTC` (haul extension, docs/protocol.md):
//! one line per peer it has served lately, which a client reads from servers it does not
//! control to choose a route (002 §2.3–2.4).

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

impl PeerPrediction {
    /// The `SITE BTC` reply line: `peer=ADDR;dir=sent|received;bps=N;predictor=P;age=S;samples=K;`.
    pub fn line(&self) -> String {
        let dir = match self.direction {
            Direction::Sent => "sent",
            Direction::Received => "received",
        };
        format!(
            "peer={};dir={dir};bps={:.0};predictor={};age={:.0};samples={};",
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
                _ => {}
            }
        }
        let sane = !p.peer.is_empty() && p.bps.is_finite() && p.bps >= 0.0 && p.age_s >= 0.0;
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
        };
        assert_eq!(
            p.line(),
            "peer=10.0.0.2;dir=received;bps=812000000;predictor=median;age=34;samples=5;"
        );
        assert_eq!(PeerPrediction::parse(&p.line()), Some(p));
        for bad in [
            "",
            "peer=;bps=1",
            "peer=a;bps=-1",
            "peer=a;bps=x",
            "peer=a;dir=up;bps=1",
        ] {
            assert_eq!(PeerPrediction::parse(bad), None, "{bad}");
        }
    }
}
