//! [`Peers`]: who a session's data connections may reach (RFC 2577's bounce attack).

use std::net::{IpAddr, SocketAddr};

/// The one host a session's data connections may reach, unless third-party transfers are
/// allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peers {
    /// The control connection's peer.
    pub client: IpAddr,
    /// The user may move data to and from other hosts.
    pub third_party: bool,
}

/// An address as the kernel reports it for either family (`::ffff:a.b.c.d` is `a.b.c.d`).
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl Peers {
    /// Whether a data connection may be made to or accepted from `ip`.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.third_party || canonical(ip) == canonical(self.client)
    }

    /// Why `PORT`/`EPRT`/`SPOR` may not name `addr`, if it may not.
    pub fn refuse_port(&self, addr: &SocketAddr) -> Option<String> {
        if addr.port() < 1024 {
            return Some(format!(
                "{addr}: privileged ports are never data ports (RFC 2577)"
            ));
        }
        if !self.allows(addr.ip()) {
            return Some(format!(
                "{addr}: data connections go only to this session's client ({}); third-party transfers need the third-party permission",
                self.client
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_client_is_a_peer_unless_third_party_is_allowed() {
        let client: IpAddr = "192.0.2.7".parse().unwrap();
        let p = Peers {
            client,
            third_party: false,
        };
        assert!(p.allows("::ffff:192.0.2.7".parse().unwrap()));
        assert!(!p.allows("192.0.2.8".parse().unwrap()));
        assert!(p.refuse_port(&"192.0.2.7:5000".parse().unwrap()).is_none());
        assert!(p.refuse_port(&"192.0.2.8:5000".parse().unwrap()).is_some());
        assert!(
            p.refuse_port(&"192.0.2.7:25".parse().unwrap()).is_some(),
            "privileged port"
        );
        let open = Peers {
            client,
            third_party: true,
        };
        assert!(open
            .refuse_port(&"198.51.100.1:5000".parse().unwrap())
            .is_none());
    }
}
