//! A running topology: namespaces, TUN devices, addresses, routes, sysctls and forwarder threads,
//! torn down on `Drop`. The handle for tests, benches and the `haul netem` daemon.

use std::net::Ipv4Addr;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::forward::{self, Shared};
use crate::model::{DirModel, DirStats};
use crate::netns;
use crate::params::{DirParams, DirPatch};
use crate::topology::{Dir, LinkSpec, Topology};
use crate::tun::Tun;

/// The prefix of everything `haul netem` creates.
pub const DEFAULT_PREFIX: &str = "haulnet-";

/// How a testbed is brought up.
#[derive(Clone, Debug)]
pub struct Options {
    /// Prefix of namespace names; `up` first deletes stale namespaces carrying it.
    pub prefix: String,
    /// Seed of the model RNGs (each direction derives its own).
    pub seed: u64,
    /// Segmentation offload on the TUN devices ([`crate::gso`]); on unless the environment
    /// variable `HAUL_NETEM_OFFLOAD` is `0`.
    pub offload: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            prefix: DEFAULT_PREFIX.into(),
            seed: forward::now_ns(),
            offload: std::env::var("HAUL_NETEM_OFFLOAD").map_or(true, |v| v != "0"),
        }
    }
}

/// The longest a link may take to serialize one offload packet, as a share of the link's RTT,
/// between [`GSO_BUDGET_MIN_S`] and [`GSO_BUDGET_MAX_S`]: the packet is delivered when its last
/// wire packet would have arrived, so its first one arrives up to this late, inside the
/// fidelity bound (2 % of the RTT or 0.3 ms, whichever is larger). It sets each device's
/// `gso_max_size` from the rate leaving it.
const GSO_BUDGET_RTT: f64 = 0.01;
/// The budget's floor, seconds (a third of the 0.3 ms bound).
const GSO_BUDGET_MIN_S: f64 = 100e-6;
/// The budget's ceiling, seconds: as much as TCP puts in one offload packet at the link rate
/// (its autosizing aims at about 1 ms).
const GSO_BUDGET_MAX_S: f64 = 500e-6;

/// `gso_max_size` for a device whose outgoing direction has `p`'s rate on a link of round trip
/// `rtt` seconds: what the link serializes within the budget, at least one MTU (no offload
/// packets at all), at most 64 KiB.
fn gso_max_size(p: &DirParams, rtt: f64, mtu: u32) -> u32 {
    let budget = (rtt * GSO_BUDGET_RTT).clamp(GSO_BUDGET_MIN_S, GSO_BUDGET_MAX_S);
    let budget = p.rate.map_or(f64::MAX, |r| r * budget);
    budget.clamp(mtu as f64, 65_536.0) as u32
}

impl Options {
    /// Options with the given namespace prefix.
    pub fn with_prefix(prefix: &str) -> Self {
        Options {
            prefix: prefix.into(),
            ..Default::default()
        }
    }
}

/// Parameters and counters of one direction.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DirReport {
    /// Current parameters.
    pub params: DirParams,
    /// Counters.
    pub stats: DirStats,
    /// Packets the forwarder failed to write to the egress device.
    pub write_errors: u64,
    /// Offload packets of several wire packets forwarded whole.
    #[serde(default)]
    pub offload_frames: u64,
    /// Offload packets cut into their wire packets (one lost, duplicated or reordered).
    #[serde(default)]
    pub split_frames: u64,
}

/// Parameters and counters of one link.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinkReport {
    /// The link's name, `a-b`.
    pub name: String,
    /// MTU, bytes.
    pub mtu: u32,
    /// Direction a→b.
    pub ab: DirReport,
    /// Direction b→a.
    pub ba: DirReport,
}

struct LinkRt {
    dirs: [Arc<Shared>; 2],
}

/// A topology that is up. Dropping it stops the forwarders and deletes the namespaces.
pub struct Testbed {
    opts: Options,
    topo: Topology,
    namespaces: Vec<String>,
    links: Vec<LinkRt>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// TCP buffer maximum for the largest BDP: 4× (half the receive buffer is overhead, and the
/// queue adds up to another BDP in flight), at least 16 MiB, at most 1 GiB.
fn buffer_max(topo: &Topology) -> u64 {
    ((4.0 * topo.max_bdp()) as u64).clamp(16 << 20, 1 << 30)
}

impl Testbed {
    /// Brings `topo` up: namespaces `PREFIX+HOST`, one TUN pair and forwarder per link.
    pub fn up(topo: &Topology, opts: Options) -> Result<Testbed> {
        topo.validate()?;
        let stale = netns::del_prefix(&opts.prefix)?;
        if !stale.is_empty() {
            tracing::warn!("deleted stale namespaces {stale:?}");
        }
        let mut tb = Testbed {
            opts,
            topo: topo.clone(),
            namespaces: Vec::new(),
            links: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        let bufmax = buffer_max(topo);
        netns::allow_all_congestion_controls()?;
        for h in &topo.hosts {
            tb.add_host(h, bufmax)?;
        }
        for (i, l) in topo.links.iter().enumerate() {
            tb.add_link(i, l)?;
        }
        for h in &topo.hosts {
            tb.add_routes(h)?;
        }
        Ok(tb)
    }

    /// Creates `host`'s namespace with loopback up and the testbed's sysctls, TCP buffers
    /// up to `bufmax` bytes.
    fn add_host(&mut self, host: &str, bufmax: u64) -> Result<()> {
        let ns = self.ns(host);
        netns::add(&ns)?;
        self.namespaces.push(ns.clone());
        netns::ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        let s = |k: &'static str, v: String| (k, v, false);
        let o = |k: &'static str, v: String| (k, v, true);
        netns::sysctls(
            &ns,
            &[
                o("net.ipv6.conf.all.disable_ipv6", "1".into()),
                o("net.ipv6.conf.default.disable_ipv6", "1".into()),
                s("net.ipv4.ip_forward", "1".into()),
                s("net.ipv4.conf.all.rp_filter", "0".into()),
                s("net.ipv4.conf.default.rp_filter", "0".into()),
                s("net.ipv4.tcp_rmem", format!("4096 131072 {bufmax}")),
                s("net.ipv4.tcp_wmem", format!("4096 16384 {bufmax}")),
                o("net.core.rmem_max", bufmax.to_string()),
                o("net.core.wmem_max", bufmax.to_string()),
            ],
        )
    }

    /// Creates link `i`'s TUN pair and starts a forwarder thread for each direction.
    fn add_link(&mut self, i: usize, l: &LinkSpec) -> Result<()> {
        let tuns = [self.add_tun(i, l, &l.a)?, self.add_tun(i, l, &l.b)?];
        let rtt = l.rtt();
        let mk = |p: &DirParams, d: u64| {
            Arc::new(Shared::new(DirModel::new(
                p.clone(),
                rtt,
                l.mtu,
                self.opts.seed ^ (i as u64 * 2 + d),
            )))
        };
        let dirs = [mk(&l.ab, 0), mk(&l.ba, 1)];
        for (d, (from, to)) in [(0, 1), (1, 0)].into_iter().enumerate() {
            let (input, output, shared, stop) = (
                tuns[from].clone(),
                tuns[to].clone(),
                dirs[d].clone(),
                self.stop.clone(),
            );
            let mtu = l.mtu as usize;
            let name = format!("netem-{}{}", l.name(), if d == 0 { ">" } else { "<" });
            let h = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || forward::run(input, output, shared, mtu, stop))
                .map_err(|e| Error::sys(format!("spawn forwarder thread {name}"), e))?;
            self.threads.push(h);
        }
        self.links.push(LinkRt { dirs });
        Ok(())
    }

    /// Creates `host`'s end of link `i`: a TUN device with the link's MTU and address, up.
    fn add_tun(&self, i: usize, l: &LinkSpec, host: &str) -> Result<Arc<Tun>> {
        let ns = self.ns(host);
        let dev = self.topo.ifname(i, host);
        let tun = Tun::create(&ns, &dev, self.opts.offload)?;
        let out = if host == l.a { &l.ab } else { &l.ba };
        self.bound_offload(i, host, out, l.rtt(), l.mtu)?;
        let mtu = l.mtu.to_string();
        netns::ip(&[
            "-n",
            &ns,
            "link",
            "set",
            "dev",
            &dev,
            "mtu",
            &mtu,
            "txqueuelen",
            "10000",
            "up",
        ])?;
        let addr = format!("{}/24", self.topo.link_addr(i, host));
        netns::ip(&["-n", &ns, "addr", "add", &addr, "dev", &dev])?;
        Ok(Arc::new(tun))
    }

    /// Sets `gso_max_size` of `host`'s device on link `i`, whose outgoing direction has `out`.
    fn bound_offload(
        &self,
        i: usize,
        host: &str,
        out: &DirParams,
        rtt: f64,
        mtu: u32,
    ) -> Result<()> {
        let gso = gso_max_size(out, rtt, mtu).to_string();
        let (ns, dev) = (self.ns(host), self.topo.ifname(i, host));
        netns::ip(&["-n", &ns, "link", "set", "dev", &dev, "gso_max_size", &gso])
    }

    /// Adds `host`'s routes to every link subnet it is not on.
    fn add_routes(&self, host: &str) -> Result<()> {
        let ns = self.ns(host);
        for (li, via) in self.topo.routes(host) {
            let net = format!("10.78.{li}.0/24");
            let dev = self.topo.ifname(via, host);
            netns::ip(&["-n", &ns, "route", "add", &net, "dev", &dev])?;
        }
        Ok(())
    }

    fn ns(&self, host: &str) -> String {
        format!("{}{}", self.opts.prefix, host)
    }

    /// The topology as brought up (parameters as configured at `up`).
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The namespace of `host`.
    pub fn namespace(&self, host: &str) -> Result<String> {
        if self.topo.hosts.iter().any(|h| h == host) {
            Ok(self.ns(host))
        } else {
            Err(Error::Unknown {
                kind: "host",
                name: host.into(),
            })
        }
    }

    /// The address of `host`.
    pub fn addr(&self, host: &str) -> Result<Ipv4Addr> {
        self.topo.addr(host)
    }

    /// A command that runs `program` inside `host` (`ip netns exec`).
    pub fn command(&self, host: &str, program: &str) -> Result<Command> {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.namespace(host)?, program]);
        Ok(c)
    }

    /// Runs `program ARGS…` inside `host` to completion; a non-zero exit is an error.
    pub fn run(&self, host: &str, program: &str, args: &[&str]) -> Result<Output> {
        let cmd = format!("{program} {} (in {host})", args.join(" "));
        let out = self
            .command(host, program)?
            .args(args)
            .output()
            .map_err(|e| Error::Command {
                cmd: cmd.clone(),
                detail: e.to_string(),
            })?;
        if !out.status.success() {
            let detail = format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return Err(Error::Command { cmd, detail });
        }
        Ok(out)
    }

    /// Runs `f` on a thread inside `host`'s namespace (sockets it opens live there).
    pub fn enter<T: Send, F: FnOnce() -> T + Send>(&self, host: &str, f: F) -> Result<T> {
        netns::enter(&self.namespace(host)?, f)
    }

    /// Current parameters and counters of every link.
    pub fn stats(&self) -> Vec<LinkReport> {
        let report = |s: &Shared| {
            let (params, stats) = match s.model.lock() {
                Ok(m) => (m.params().clone(), m.stats()),
                Err(p) => (p.get_ref().params().clone(), p.get_ref().stats()),
            };
            DirReport {
                params,
                stats,
                write_errors: s.write_errors.load(Ordering::Relaxed),
                offload_frames: s.offload_frames.load(Ordering::Relaxed),
                split_frames: s.split_frames.load(Ordering::Relaxed),
            }
        };
        self.topo
            .links
            .iter()
            .zip(&self.links)
            .map(|(l, rt)| LinkReport {
                name: l.name(),
                mtu: l.mtu,
                ab: report(&rt.dirs[0]),
                ba: report(&rt.dirs[1]),
            })
            .collect()
    }

    /// Changes the parameters of `link` (`a-b`) in direction `dir` (`None`: both) while running.
    pub fn set(&self, link: &str, dir: Option<Dir>, patch: &DirPatch) -> Result<()> {
        let i = self.topo.link_index(link)?;
        let spec = &self.topo.links[i];
        let rt = &self.links[i];
        let lock = |d: usize| {
            rt.dirs[d]
                .model
                .lock()
                .map_err(|_| Error::Control(format!("link {link} forwarder panicked")))
        };
        let (mut ab, mut ba) = (lock(0)?, lock(1)?);
        let mut p = [ab.params().clone(), ba.params().clone()];
        for (d, which) in [(0, Dir::Ab), (1, Dir::Ba)] {
            if dir.is_none_or(|x| x == which) {
                patch.apply(&mut p[d]);
                p[d].validate(&format!("link {link} direction {which:?}"))?;
            }
        }
        let rtt = p[0].delay + p[1].delay;
        for (host, q) in [(&spec.a, &p[0]), (&spec.b, &p[1])] {
            self.bound_offload(i, host, q, rtt, spec.mtu)?;
        }
        let [pa, pb] = p;
        ab.set_params(pa, rtt, spec.mtu);
        ba.set_params(pb, rtt, spec.mtu);
        Ok(())
    }

    /// Stops the forwarders and deletes the namespaces, reporting the first failure.
    pub fn down(mut self) -> Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.links.clear();
        let mut first = Ok(());
        for ns in self.namespaces.drain(..) {
            if let Err(e) = netns::del(&ns) {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::error!("testbed teardown: {e}");
        }
    }
}
