//! Topologies: hosts and the links between them, built-in shapes (`pair`, `chain`), the TOML
//! topology file, addressing (one private /24 per link) and routes (shortest path).

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::params::{DirParams, DirPatch};

/// Which direction of a link: from its `a` end to its `b` end, or back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    /// From `a` to `b`.
    Ab,
    /// From `b` to `a`.
    Ba,
}

/// One link: its ends, MTU and the parameters of each direction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkSpec {
    /// The host at end `a`.
    pub a: String,
    /// The host at end `b`.
    pub b: String,
    /// The MTU of both TUN devices, bytes.
    pub mtu: u32,
    /// Parameters from `a` to `b`.
    pub ab: DirParams,
    /// Parameters from `b` to `a`.
    pub ba: DirParams,
}

impl LinkSpec {
    /// A symmetric link between `a` and `b`.
    pub fn symmetric(a: &str, b: &str, mtu: u32, params: DirParams) -> Self {
        LinkSpec {
            a: a.into(),
            b: b.into(),
            mtu,
            ab: params.clone(),
            ba: params,
        }
    }

    /// The link's name, `a-b`.
    pub fn name(&self) -> String {
        format!("{}-{}", self.a, self.b)
    }

    /// The round-trip propagation time of the link, seconds (sizes the default queue).
    pub fn rtt(&self) -> f64 {
        self.ab.delay + self.ba.delay
    }

    /// The parameters of direction `d`.
    pub fn dir(&self, d: Dir) -> &DirParams {
        match d {
            Dir::Ab => &self.ab,
            Dir::Ba => &self.ba,
        }
    }

    /// The parameters of direction `d`, mutable.
    pub fn dir_mut(&mut self, d: Dir) -> &mut DirParams {
        match d {
            Dir::Ab => &mut self.ab,
            Dir::Ba => &mut self.ba,
        }
    }
}

/// Hosts and links.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Host names, in order.
    pub hosts: Vec<String>,
    /// Links; link `i` uses subnet 10.78.i.0/24 (`a` is .1, `b` is .2).
    pub links: Vec<LinkSpec>,
}

/// A link in a topology file: ends, MTU, parameters of both directions and per-direction overrides.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkFile {
    a: String,
    b: String,
    #[serde(default = "default_mtu")]
    mtu: u32,
    #[serde(flatten)]
    both: DirPatch,
    #[serde(default)]
    ab: Option<DirPatch>,
    #[serde(default)]
    ba: Option<DirPatch>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyFile {
    #[serde(default)]
    hosts: Vec<String>,
    #[serde(rename = "link", default)]
    links: Vec<LinkFile>,
}

fn default_mtu() -> u32 {
    1500
}

impl Topology {
    /// Two hosts `a` and `b` joined by one link.
    pub fn pair(mtu: u32, params: DirParams) -> Self {
        Topology {
            hosts: vec!["a".into(), "b".into()],
            links: vec![LinkSpec::symmetric("a", "b", mtu, params)],
        }
    }

    /// Three hosts `a`, `b`, `c` joined by links a—b and b—c with the same parameters.
    pub fn chain(mtu: u32, params: DirParams) -> Self {
        Topology {
            hosts: vec!["a".into(), "b".into(), "c".into()],
            links: vec![
                LinkSpec::symmetric("a", "b", mtu, params.clone()),
                LinkSpec::symmetric("b", "c", mtu, params),
            ],
        }
    }

    /// Parses a topology file (see docs/netem.md) and validates it.
    pub fn from_toml(text: &str) -> Result<Self> {
        let file: TopologyFile =
            toml::from_str(text).map_err(|e| Error::Config(format!("topology file: {e}")))?;
        let mut hosts = file.hosts;
        let mut links = Vec::new();
        for l in file.links {
            for h in [&l.a, &l.b] {
                if !hosts.contains(h) {
                    hosts.push(h.clone());
                }
            }
            let mut ab = DirParams::default();
            l.both.apply(&mut ab);
            let mut ba = ab.clone();
            if let Some(p) = &l.ab {
                p.apply(&mut ab);
            }
            if let Some(p) = &l.ba {
                p.apply(&mut ba);
            }
            links.push(LinkSpec {
                a: l.a,
                b: l.b,
                mtu: l.mtu,
                ab,
                ba,
            });
        }
        let t = Topology { hosts, links };
        t.validate()?;
        Ok(t)
    }

    /// Checks names, MTUs, parameters and that every link joins two distinct known hosts.
    pub fn validate(&self) -> Result<()> {
        if self.links.is_empty() || self.links.len() > 250 {
            return Err(Error::Config("a topology needs 1 to 250 links".into()));
        }
        for h in &self.hosts {
            let ok = !h.is_empty()
                && h.len() <= 12
                && h.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if !ok {
                return Err(Error::Config(format!(
                    "host name {h:?}: use 1-12 of [a-z0-9_]"
                )));
            }
        }
        for (i, l) in self.links.iter().enumerate() {
            let name = l.name();
            if l.a == l.b || !self.hosts.contains(&l.a) || !self.hosts.contains(&l.b) {
                return Err(Error::Config(format!(
                    "link {name} must join two distinct listed hosts"
                )));
            }
            if self.links[..i]
                .iter()
                .any(|o| (o.a == l.a && o.b == l.b) || (o.a == l.b && o.b == l.a))
            {
                return Err(Error::Config(format!("link {name} is listed twice")));
            }
            if !(576..=9000).contains(&l.mtu) {
                return Err(Error::Config(format!(
                    "link {name}: MTU {} is outside 576..=9000",
                    l.mtu
                )));
            }
            l.ab.validate(&format!("link {name} direction ab"))?;
            l.ba.validate(&format!("link {name} direction ba"))?;
        }
        Ok(())
    }

    /// Index of the link named `a-b` (either order).
    pub fn link_index(&self, name: &str) -> Result<usize> {
        self.links
            .iter()
            .position(|l| l.name() == name || format!("{}-{}", l.b, l.a) == name)
            .ok_or_else(|| Error::Unknown {
                kind: "link",
                name: name.into(),
            })
    }

    /// The address of `host` on link `i`.
    pub fn link_addr(&self, i: usize, host: &str) -> Ipv4Addr {
        let last = if self.links[i].a == host { 1 } else { 2 };
        Ipv4Addr::new(10, 78, i as u8, last)
    }

    /// The host's address: its address on the first link it is on.
    pub fn addr(&self, host: &str) -> Result<Ipv4Addr> {
        let i = self
            .links
            .iter()
            .position(|l| l.a == host || l.b == host)
            .ok_or_else(|| Error::Unknown {
                kind: "host",
                name: host.into(),
            })?;
        Ok(self.link_addr(i, host))
    }

    /// The interface name of link `i` inside `host`: `to-PEER`.
    pub fn ifname(&self, i: usize, host: &str) -> String {
        let l = &self.links[i];
        let peer = if l.a == host { &l.b } else { &l.a };
        format!("to-{peer}")
    }

    /// Routes of `host` to the subnets of links it is not on: `(link index, via link index)`,
    /// the first hop of a shortest path towards the link.
    pub fn routes(&self, host: &str) -> Vec<(usize, usize)> {
        // Breadth-first search from `host`, remembering the first link taken.
        let mut first: Vec<Option<usize>> = vec![None; self.hosts.len()];
        let idx = |h: &str| self.hosts.iter().position(|x| x == h);
        let Some(start) = idx(host) else {
            return Vec::new();
        };
        let mut seen = vec![false; self.hosts.len()];
        seen[start] = true;
        let mut q = VecDeque::from([start]);
        while let Some(h) = q.pop_front() {
            for (li, l) in self.links.iter().enumerate() {
                let other = if l.a == self.hosts[h] {
                    &l.b
                } else if l.b == self.hosts[h] {
                    &l.a
                } else {
                    continue;
                };
                if let Some(o) = idx(other) {
                    if !seen[o] {
                        seen[o] = true;
                        first[o] = if h == start { Some(li) } else { first[h] };
                        q.push_back(o);
                    }
                }
            }
        }
        let mut out = Vec::new();
        for (li, l) in self.links.iter().enumerate() {
            if l.a == host || l.b == host {
                continue;
            }
            let via = [&l.a, &l.b]
                .iter()
                .filter_map(|h| idx(h).and_then(|i| first[i]))
                .next();
            if let Some(v) = via {
                out.push((li, v));
            }
        }
        out
    }

    /// The largest bandwidth-delay product over all links and directions, bytes (rate × RTT).
    pub fn max_bdp(&self) -> f64 {
        self.links
            .iter()
            .flat_map(|l| {
                [l.ab.rate, l.ba.rate]
                    .into_iter()
                    .map(move |r| r.unwrap_or(1.25e9) * l.rtt())
            })
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::LossModel;

    #[test]
    fn toml_with_overrides() {
        let t = Topology::from_toml(
            r#"
            [[link]]
            a = "a"
            b = "r"
            mtu = 9000
            rtt = "100ms"
            rate = "1gbit"
            loss = "0.01%"
            [link.ba]
            rate = "100mbit"

            [[link]]
            a = "r"
            b = "c"
            delay = "5ms"
            loss_ge = { p = "1%", r = "10%" }
            "#,
        )
        .unwrap();
        assert_eq!(t.hosts, vec!["a", "r", "c"]);
        assert_eq!(t.links[0].ab.rate, Some(125e6));
        assert_eq!(t.links[0].ba.rate, Some(12.5e6));
        assert_eq!(t.links[0].ba.delay, 0.05);
        assert!(matches!(
            t.links[1].ab.loss,
            LossModel::GilbertElliott { .. }
        ));
        assert_eq!(t.addr("c").unwrap(), Ipv4Addr::new(10, 78, 1, 2));
        assert_eq!(t.routes("a"), vec![(1, 0)]);
        assert_eq!(t.routes("c"), vec![(0, 1)]);
        assert!(t.routes("r").is_empty());
    }

    #[test]
    fn invalid_topologies_are_rejected() {
        assert!(Topology::from_toml("[[link]]\na = \"a\"\nb = \"a\"").is_err());
        assert!(Topology::from_toml("[[link]]\na = \"a\"\nb = \"b\"\nmtu = 100").is_err());
        assert!(Topology::from_toml("[[link]]\na = \"A b\"\nb = \"b\"").is_err());
        assert!(Topology::from_toml("[[link]]\na = \"a\"\nb = \"b\"\nspeed = 1").is_err());
        assert!(Topology::from_toml("").is_err());
    }

    #[test]
    fn chain_routes_through_the_middle() {
        let t = Topology::chain(1500, DirParams::default());
        assert_eq!(t.link_index("c-b").unwrap(), 1);
        assert_eq!(t.ifname(0, "b"), "to-a");
        assert_eq!(t.routes("a"), vec![(1, 0)]);
    }
}
