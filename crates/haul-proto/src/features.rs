//! What a server says it supports in its `211` FEAT reply (RFC 2389): every feature line haul
//! understands is read here, for the client's login ([`crate::client::Login`]) and for the
//! transfer engine.

use crate::Reply;

/// What a server said it supports in its FEAT reply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    /// The server speaks haul's own dialect (`HAUL` feature line).
    pub haul: bool,
    /// The server offers data-connection tokens (`DTOK`).
    pub dtok: bool,
    /// CKSM algorithms offered, upper-cased.
    pub cksm: Vec<String>,
    /// AUTH TLS is offered.
    pub auth_tls: bool,
    /// PLUT data channels are offered (`PLUT 1`).
    pub plut: bool,
    /// The server's PLUT takes a starting rate in `OPTS HAUL` (`PLUT 1;START`).
    pub plut_start: bool,
    /// The server relays commands on nested URLs and answers `SITE RELAY FEAT` (`RELAY`).
    pub relay: bool,
    /// The server shares its throughput predictions with `SITE BTC` (`BTC`).
    pub btc: bool,
    /// The server aggregates other servers' predictions and answers `SITE BTC ALL` (`BTCREG`).
    pub btc_registry: bool,
}

impl Features {
    /// Reads a `211` FEAT reply: one feature per line, the CKSM line listing algorithms.
    pub fn parse(r: &Reply) -> Features {
        let mut f = Features::default();
        for l in &r.lines {
            let l = l.trim();
            let (name, rest) = l.split_once(' ').unwrap_or((l, ""));
            match name.to_ascii_uppercase().as_str() {
                "HAUL" => f.haul = true,
                "PLUT" => {
                    f.plut = true;
                    f.plut_start = rest
                        .split(';')
                        .any(|w| w.trim().eq_ignore_ascii_case("START"));
                }
                "DTOK" => f.dtok = true,
                "RELAY" => f.relay = true,
                "BTC" => f.btc = true,
                "BTCREG" => f.btc_registry = true,
                "CKSM" => {
                    f.cksm = rest
                        .split([';', ','])
                        .filter_map(|a| a.split(':').next())
                        .map(|a| a.trim().to_ascii_uppercase())
                        .filter(|a| !a.is_empty())
                        .collect()
                }
                "AUTH" if rest.to_ascii_uppercase().contains("TLS") => f.auth_tls = true,
                _ => {}
            }
        }
        f
    }

    /// True when the server computes `alg` for CKSM.
    pub fn has_cksm(&self, alg: &str) -> bool {
        self.cksm.iter().any(|a| a.eq_ignore_ascii_case(alg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_haul_and_globus_lines() {
        let r = Reply::multi(
            211,
            vec![
                "Extensions supported:".into(),
                " HAUL 1".into(),
                " PLUT 1".into(),
                " DTOK".into(),
                " RELAY".into(),
                " BTC".into(),
                " BTCREG".into(),
                " AUTH TLS".into(),
                " CKSM MD5:10;adler32:1,crc32c".into(),
                " MODE E".into(),
                "End.".into(),
            ],
        );
        let f = Features::parse(&r);
        assert!(f.haul && f.plut && f.dtok && f.relay && f.btc && f.btc_registry && f.auth_tls);
        assert!(!f.plut_start, "PLUT 1 alone takes no starting rate");
        let r = Reply::multi(211, vec!["x".into(), " PLUT 1;START".into(), "End.".into()]);
        let g = Features::parse(&r);
        assert!(g.plut && g.plut_start);
        assert_eq!(f.cksm, ["MD5", "ADLER32", "CRC32C"]);
        assert!(f.has_cksm("adler32") && !f.has_cksm("sha1"));
    }

    #[test]
    fn unknown_lines_read_as_nothing() {
        let f = Features::parse(&Reply::multi(211, vec!["AUTH SSL".into(), "x".into()]));
        assert_eq!(f, Features::default());
    }
}
