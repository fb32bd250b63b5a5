//! `haul netem`: bring an emulated WAN testbed up in network namespaces, run commands in its
//! hosts, read its counters, change its links while running, and tear it down.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use haul_netem::daemon::{self, Control};
use haul_netem::params::{Dur, GePatch, Prob, Rate, Size};
use haul_netem::{units, Dir, DirPatch, LinkReport, LossModel, Topology, DEFAULT_PREFIX};

/// Arguments of `haul netem`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// State directory (pid, topology, control socket, log).
    #[arg(long, global = true, env = "HAUL_NETEM_STATE", default_value = daemon::STATE_DIR)]
    state: PathBuf,
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Bring a testbed up (a topology FILE, or --pair / --chain with link flags) and return.
    Up(UpArgs),
    /// Print a host's address.
    Addr {
        /// Host name (e.g. `b`).
        host: String,
    },
    /// Run a command inside a host: `haul netem run a -- iperf3 -c 10.78.0.2`.
    Run {
        /// Host name.
        host: String,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Show every link's parameters and counters.
    Stats {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Change a running link's parameters (unset flags keep their value).
    Set {
        /// Link name, `a-b`.
        link: String,
        /// Direction to change: ab, ba or both.
        #[arg(long, default_value = "both")]
        dir: String,
        #[command(flatten)]
        patch: PatchArgs,
    },
    /// Stop the daemon and delete everything carrying the prefix, also after a crash.
    Down {
        /// Namespace prefix to remove.
        #[arg(long, default_value = DEFAULT_PREFIX)]
        prefix: String,
    },
    /// The forwarder daemon (started by `up`).
    #[command(hide = true)]
    Daemon,
}

#[derive(clap::Args, Debug)]
struct UpArgs {
    /// Topology file (TOML, see docs/netem.md).
    #[arg(conflicts_with_all = ["pair", "chain"], required_unless_present_any = ["pair", "chain"])]
    file: Option<PathBuf>,
    /// Hosts a and b joined by one symmetric link.
    #[arg(long, conflicts_with = "chain")]
    pair: bool,
    /// Hosts a, b and c joined by links a-b and b-c.
    #[arg(long)]
    chain: bool,
    /// MTU of the links, 576 to 9000.
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// Namespace prefix.
    #[arg(long, default_value = DEFAULT_PREFIX)]
    prefix: String,
    #[command(flatten)]
    patch: PatchArgs,
}

/// Link parameters as flags; all optional.
#[derive(clap::Args, Debug)]
struct PatchArgs {
    /// Round-trip time, split evenly between the directions (e.g. 100ms).
    #[arg(long)]
    rtt: Option<Dur>,
    /// One-way delay of each changed direction.
    #[arg(long)]
    delay: Option<Dur>,
    /// Uniform ± jitter of the one-way delay (never reorders).
    #[arg(long)]
    jitter: Option<Dur>,
    /// Rate (e.g. 1gbit, 100mbit).
    #[arg(long)]
    rate: Option<Rate>,
    /// Bernoulli loss (e.g. 0.01%); 0 turns loss off.
    #[arg(long)]
    loss: Option<Prob>,
    /// Gilbert–Elliott loss P,R[,H[,K]] (good→bad, bad→good, delivery in bad, in good).
    #[arg(long, value_name = "P,R[,H[,K]]")]
    loss_ge: Option<String>,
    /// Periodic loss: every N-th packet.
    #[arg(long, value_name = "N")]
    loss_every: Option<u64>,
    /// Drop-tail queue limit in bytes (default one BDP).
    #[arg(long)]
    queue: Option<Size>,
    /// Drop-tail queue limit in packets.
    #[arg(long)]
    queue_packets: Option<u64>,
    /// Reordering probability.
    #[arg(long)]
    reorder: Option<Prob>,
    /// Extra delay of a reordered packet (default 1ms).
    #[arg(long)]
    reorder_gap: Option<Dur>,
    /// Duplication probability.
    #[arg(long)]
    duplicate: Option<Prob>,
    /// Pareto on/off cross-traffic sources per direction.
    #[arg(long)]
    cross_sources: Option<u32>,
    /// Rate of one cross-traffic source while on (default 5mbit).
    #[arg(long)]
    cross_rate: Option<Rate>,
    /// Pareto shape of on/off periods (default 1.4).
    #[arg(long)]
    cross_shape: Option<f64>,
    /// Mean on period (default 1.5s).
    #[arg(long)]
    cross_on: Option<Dur>,
    /// Mean off period (default 1.5s).
    #[arg(long)]
    cross_off: Option<Dur>,
}

impl PatchArgs {
    fn to_patch(&self) -> anyhow::Result<DirPatch> {
        let loss_ge = match &self.loss_ge {
            None => None,
            Some(s) => {
                let v: Vec<Prob> = s.split(',').map(str::parse).collect::<Result<_, _>>()?;
                match v.as_slice() {
                    [p, r, rest @ ..] if rest.len() <= 2 => Some(GePatch {
                        p: *p,
                        r: *r,
                        h: rest.first().copied().unwrap_or(Prob(0.0)),
                        k: rest.get(1).copied().unwrap_or(Prob(1.0)),
                    }),
                    _ => bail!("--loss-ge {s:?}: expected P,R[,H[,K]]"),
                }
            }
        };
        Ok(DirPatch {
            rtt: self.rtt,
            delay: self.delay,
            jitter: self.jitter,
            rate: self.rate,
            queue: self.queue,
            queue_packets: self.queue_packets,
            loss: self.loss,
            loss_ge,
            loss_every: self.loss_every,
            reorder: self.reorder,
            reorder_gap: self.reorder_gap,
            duplicate: self.duplicate,
            cross_sources: self.cross_sources,
            cross_rate: self.cross_rate,
            cross_shape: self.cross_shape,
            cross_on: self.cross_on,
            cross_off: self.cross_off,
            cross_packet: None,
        })
    }
}

/// Runs `haul netem`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dir = args.state;
    match args.command {
        Sub::Up(up) => {
            let topo = topology(&up)?;
            let exe =
                std::env::current_exe().context("locating the haul binary to start the daemon")?;
            let mut cmd = std::process::Command::new(exe);
            cmd.args(["netem", "--state"]).arg(&dir).arg("daemon");
            let state = daemon::start(&dir, &up.prefix, &topo, cmd)?;
            for (host, ns) in &state.namespaces {
                println!("{host}\t{}\t{ns}", state.addrs[host]);
            }
        }
        Sub::Daemon => daemon::serve(&dir)?,
        Sub::Addr { host } => {
            let state = daemon::load_state(&dir)?;
            let addr = state
                .addrs
                .get(&host)
                .with_context(|| format!("no host {host:?} in the testbed"))?;
            println!("{addr}");
        }
        Sub::Run { host, cmd } => {
            let state = daemon::load_state(&dir)?;
            let ns = state
                .namespaces
                .get(&host)
                .with_context(|| format!("no host {host:?} in the testbed"))?;
            let status = std::process::Command::new("ip")
                .args(["netns", "exec", ns])
                .args(&cmd)
                .status()
                .with_context(|| format!("running `ip netns exec {ns} {}`", cmd.join(" ")))?;
            return Ok(match status.code() {
                Some(c) => ExitCode::from(c.clamp(0, 255) as u8),
                None => ExitCode::FAILURE,
            });
        }
        Sub::Stats { json } => {
            let reply = daemon::control(&dir, &Control::Stats)?;
            let links = reply.stats.unwrap_or_default();
            if json {
                println!("{}", serde_json::to_string_pretty(&links)?);
            } else {
                print_stats(&links);
            }
        }
        Sub::Set {
            link,
            dir: d,
            patch,
        } => {
            let which = match d.as_str() {
                "both" => None,
                "ab" => Some(Dir::Ab),
                "ba" => Some(Dir::Ba),
                other => bail!("--dir {other:?}: use ab, ba or both"),
            };
            let patch = patch.to_patch()?;
            if patch == DirPatch::default() {
                bail!("nothing to change: give at least one parameter flag");
            }
            daemon::control(
                &dir,
                &Control::Set {
                    link,
                    dir: which,
                    patch: Box::new(patch),
                },
            )?;
        }
        Sub::Down { prefix } => {
            let removed = daemon::cleanup(&dir, &prefix)?;
            if !removed.is_empty() {
                println!("removed {}", removed.join(" "));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn topology(up: &UpArgs) -> anyhow::Result<Topology> {
    let patch = up.patch.to_patch()?;
    if let Some(path) = &up.file {
        if patch != DirPatch::default() {
            bail!(
                "link flags apply to --pair / --chain; put them in {} instead",
                path.display()
            );
        }
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        return Topology::from_toml(&text).with_context(|| format!("in {}", path.display()));
    }
    let mut params = haul_netem::DirParams::default();
    patch.apply(&mut params);
    let topo = if up.chain {
        Topology::chain(up.mtu, params)
    } else {
        Topology::pair(up.mtu, params)
    };
    topo.validate()?;
    Ok(topo)
}

fn loss_text(l: &LossModel) -> String {
    match l {
        LossModel::None => "none".into(),
        LossModel::Bernoulli { p } => format!("{}%", p * 100.0),
        LossModel::GilbertElliott { p, r, h, k } => format!("GE p={p} r={r} h={h} k={k}"),
        LossModel::Periodic { n } => format!("every {n}"),
    }
}

fn print_stats(links: &[LinkReport]) {
    println!(
        "{:<10} {:<3} {:>9} {:>7} {:>7} {:>12} {:>12} {:>12} {:>9} {:>9} {:>11}",
        "link",
        "dir",
        "delay",
        "rate",
        "loss",
        "rx pkts",
        "rx bytes",
        "tx pkts",
        "drop q",
        "drop loss",
        "max queue"
    );
    for l in links {
        for (d, r) in [("ab", &l.ab), ("ba", &l.ba)] {
            let (p, s) = (&r.params, &r.stats);
            println!(
                "{:<10} {:<3} {:>9} {:>7} {:>7} {:>12} {:>12} {:>12} {:>9} {:>9} {:>11}",
                l.name,
                d,
                units::fmt_duration(p.delay),
                p.rate.map_or("-".into(), units::fmt_rate),
                loss_text(&p.loss),
                s.rx_packets,
                s.rx_bytes,
                s.tx_packets,
                s.drop_queue,
                s.drop_loss,
                s.max_queue_bytes
            );
        }
    }
}
