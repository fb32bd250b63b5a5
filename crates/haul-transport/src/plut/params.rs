//! The control-channel words of haul's PLUT extension (docs/protocol.md, "PLUT data
//! channels"): `OPTS HAUL Transport=plut;Mds=N;Rate=B;` and the session ids of `PLUT PORT` /
//! `PLUT PASV`, formatted by the client and parsed by the server.

/// Session parameters agreed by `OPTS HAUL`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Maximum datagram size (UDP payload) both ends use.
    pub mds: usize,
    /// NIC rate B of the sender, bytes/s (the pacer never exceeds it).
    pub rate: f64,
    /// The rate the sender's controller starts from, bytes/s (at most B), when the client
    /// knows one from its history of the path (`Start=`); None starts at B/16.
    pub start: Option<f64>,
}

impl Params {
    /// The PLUT configuration of one flow: [`super::config`], starting at `start` when given.
    pub fn config(&self, session: u64, buffer_bytes: usize) -> haul_plut::Config {
        let mut c = super::config(session, self.mds, self.rate, buffer_bytes);
        if let Some(s) = self.start {
            c.initial_rate = s.min(self.rate);
        }
        c
    }
}

/// NIC rate assumed when the client names none: 10 Gb/s.
pub const DEFAULT_RATE: f64 = 1.25e9;

/// `Transport=plut;Mds=N;Rate=B;` (the argument of `OPTS HAUL`).
pub fn format_opts(p: &Params) -> String {
    let start = p
        .start
        .map_or(String::new(), |s| format!("Start={};", s.round() as u64));
    format!(
        "Transport=plut;Mds={};Rate={};{start}",
        p.mds,
        p.rate.round() as u64
    )
}

/// Parses the argument of `OPTS HAUL`: `Some(params)` selects PLUT, `None` (`Transport=tcp`)
/// goes back to TCP. Unknown keys are an error naming them.
pub fn parse_opts(s: &str) -> Result<Option<Params>, String> {
    let mut plut = None;
    let mut p = Params {
        mds: super::DEFAULT_MDS,
        rate: DEFAULT_RATE,
        start: None,
    };
    for kv in s.split(';').map(str::trim).filter(|kv| !kv.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("OPTS HAUL option {kv:?} is not key=value"))?;
        match k.to_ascii_lowercase().as_str() {
            "transport" => match v.to_ascii_lowercase().as_str() {
                "plut" => plut = Some(true),
                "tcp" => plut = Some(false),
                _ => return Err(format!("OPTS HAUL Transport={v}: expected plut or tcp")),
            },
            "mds" => {
                p.mds = v
                    .parse()
                    .ok()
                    .filter(|m| (576 - 28..=super::MAX_MDS).contains(m))
                    .ok_or_else(|| format!("OPTS HAUL Mds={v}: expected 548..=65507"))?
            }
            "rate" => {
                p.rate = v
                    .parse::<u64>()
                    .ok()
                    .filter(|r| *r >= 1_000_000)
                    .ok_or_else(|| format!("OPTS HAUL Rate={v}: expected bytes/s ≥ 1000000"))?
                    as f64
            }
            "start" => {
                p.start = Some(
                    v.parse::<u64>()
                        .ok()
                        .filter(|r| *r >= 1_000_000)
                        .ok_or_else(|| format!("OPTS HAUL Start={v}: expected bytes/s ≥ 1000000"))?
                        as f64,
                )
            }
            _ => return Err(format!("OPTS HAUL option {k} not understood")),
        }
    }
    match plut {
        Some(true) => Ok(Some(p)),
        Some(false) => Ok(None),
        None => Err("OPTS HAUL needs Transport=plut or Transport=tcp".into()),
    }
}

/// Parses a session id (1 to 16 hex digits, nothing else: `from_str_radix` alone would also
/// take a leading `+`).
pub fn parse_session(s: &str) -> Result<u64, String> {
    if s.is_empty() || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "PLUT session id {s:?}: expected 1 to 16 hex digits"
        ));
    }
    u64::from_str_radix(s, 16).map_err(|_| format!("PLUT session id {s:?}: expected hex digits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opts_round_trip_and_errors_name_the_key() {
        let p = Params {
            mds: 8972,
            rate: 125e6,
            start: None,
        };
        assert_eq!(parse_opts(&format_opts(&p)), Ok(Some(p)));
        let hinted = Params {
            start: Some(100e6),
            ..p
        };
        assert_eq!(
            format_opts(&hinted),
            "Transport=plut;Mds=8972;Rate=125000000;Start=100000000;"
        );
        assert_eq!(parse_opts(&format_opts(&hinted)), Ok(Some(hinted)));
        assert_eq!(hinted.config(1, 1 << 20).initial_rate, 100e6);
        assert_eq!(p.config(1, 1 << 20).initial_rate, 125e6 / 16.0);
        let over = Params {
            start: Some(500e6),
            ..p
        };
        assert_eq!(over.config(1, 1 << 20).initial_rate, 125e6, "never above B");
        assert!(parse_opts("Transport=plut;Start=5;")
            .unwrap_err()
            .contains("Start=5"));
        assert_eq!(parse_opts("Transport=tcp;"), Ok(None));
        assert!(parse_opts("Transport=plut;Mds=10;")
            .unwrap_err()
            .contains("Mds=10"));
        assert!(parse_opts("Foo=1;Transport=plut")
            .unwrap_err()
            .contains("Foo"));
        assert!(parse_opts("Mds=9000;").is_err());
        assert_eq!(parse_session("00ff"), Ok(255));
        assert!(parse_session("xyz").is_err());
        assert!(parse_session("11112222333344445").is_err());
        // Found by the `options` fuzz target: a sign is not a hex digit.
        assert!(parse_session("+A").is_err());
    }
}
