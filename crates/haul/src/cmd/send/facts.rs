//! The module database of a request (000 §1, "NADMA" and "Module DB"): what haul can learn of
//! the two ends and the path before anything moves. Each remote end is asked for its features
//! (which transports it offers), the source is listed (files and bytes), the history gives each
//! transport's rate on this pair and its best settings, and with relays the route chooser gives
//! the direct and relayed predictions; an operator's `--services` file prices relays.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use haul_plan::request::Request;
use haul_plan::workflow::{Estimate, Facts, TransportOption};
use haul_store::{Filter, Outcome, Store, TransferRecord};
use haul_tune::predict::{Measurement, Selector};
use haul_xfer::session::Session;
use haul_xfer::tls::ClientTls;
use haul_xfer::walk::{walk_local, walk_remote, WalkLimits};
use haul_xfer::{Endpoint, PasvAddress, RemoteUrl};

use super::RequestArgs;
use crate::cmd::{human_rate, now_unix};

/// Measurements older than this are not used: the pair is probed again.
pub const STALE_S: f64 = 86_400.0;

/// What one file costs PLUT beyond its bytes: PLUT opens a session per file (its handshake
/// and rate start), about 0.35 s on loopback (a 32 MiB probe takes 0.43 s where 3.8 Gb/s
/// moves it in 0.07 s) plus round trips; on the demo's 100 ms path a tree of small files
/// crawled at 7.5 Mb/s over PLUT. A model, in seconds: [`PLUT_FILE_S`] + [`PLUT_FILE_RTTS`]
/// round trips.
const PLUT_FILE_S: f64 = 0.35;
/// Round trips each PLUT file costs (see [`PLUT_FILE_S`]).
const PLUT_FILE_RTTS: f64 = 4.0;

/// The control connection's round trip: the fastest of three NOOPs.
fn rtt(sess: &mut Session) -> Option<f64> {
    (0..3)
        .filter_map(|_| {
            let t = std::time::Instant::now();
            sess.ctl.send(&haul_proto::Command::Noop).ok()?;
            let r = sess.ctl.final_reply(&mut |_| {}).ok()?;
            (r.code / 100 == 2).then(|| t.elapsed().as_secs_f64())
        })
        .reduce(f64::min)
}

/// Settings a transport ran with, from the history or a probe.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Known {
    /// TCP streams per file.
    pub parallelism: Option<u32>,
    /// Socket buffer in bytes (None: the kernel's autotuning).
    pub tcp_buffer: Option<u64>,
    /// Files in flight.
    pub concurrency: Option<u32>,
    /// Where they come from.
    pub source: String,
}

/// What was found.
pub struct Found {
    /// The module database the planner reads.
    pub facts: Facts,
    /// Per route of `facts.routes`, the source and destination that take it.
    pub urls: Vec<(String, String)>,
    /// Per route, the `/dev/zero` and `/dev/null` ends of a memory-to-memory probe along it.
    pub probe_urls: Vec<(String, String)>,
    /// The control connection's round trip to the server, seconds.
    pub rtt_s: Option<f64>,
    /// Files to move (1 when the size was given and the source not listed).
    pub files: u64,
    /// The pair as the history names it (`host:port` or `local`).
    pub pair: (String, String),
    /// Per transport, the settings of the fastest recent transfer on this pair.
    pub best: BTreeMap<String, Known>,
    /// What could not be learned, for the report.
    pub notes: Vec<String>,
    /// For `haul send`: the direct route's files, listed once for the copy too.
    pub planned: Option<Box<(haul_xfer::Route, Vec<haul_xfer::plan::Job>)>>,
}

/// Learns everything the planner needs about `req`. For `haul send` (`send`) of a request that
/// cannot be refused, the source is listed as the copy lists it (creating the destination's
/// directories), so the copy need not list it again; otherwise it is only walked.
pub fn discover(req: &Request, a: &RequestArgs, send: bool) -> anyhow::Result<Found> {
    // Only a request with something to check can be refused: a refused one must leave nothing
    // behind, so its source is walked without creating the destination's directories.
    let constrained = req.deadline_s.is_some()
        || req.target_bps.is_some()
        || req.cost_cap.is_some()
        || req.require.encrypted;
    let send = send && !constrained;
    let t = std::time::Instant::now();
    if let Some(bad) = wanted(a)
        .iter()
        .find(|n| !matches!(n.as_str(), "tcp" | "plut" | "udt"))
    {
        return Err(haul_xfer::XferError::Usage(format!(
            "--transports {bad}: expected tcp, plut or udt"
        ))
        .into());
    }
    let (s, d) = (Endpoint::parse(&req.src)?, Endpoint::parse(&req.dst)?);
    let tls = match &a.ca {
        Some(ca) => Some(ClientTls::from_ca_file(ca).context("--ca")?),
        None => None,
    };
    let (src, dst) = (remote(&s), remote(&d));
    if src.is_none() && dst.is_none() {
        anyhow::bail!("both SRC and DST are local; one side must be ftp:// or haul://");
    }
    let pair = (crate::cmd::host_id(&s), crate::cmd::host_id(&d));
    let encrypted = [&src, &dst]
        .iter()
        .all(|u| u.as_ref().is_none_or(|u| u.tls));
    let rows = history(&a.history);
    // The route zone (the relays and the ends asked for their predictions) on a thread of its
    // own, while this one asks the ends for their features and lists the source: on a long
    // path each is a few round trips of logins.
    let (ends, zone) = std::thread::scope(|sc| {
        let zone = sc.spawn(|| {
            let mut notes = Vec::new();
            super::routes::discover(req, a, &rows, &mut notes, encrypted).map(|z| (z, notes))
        });
        let ends = ask_ends(req, (&s, &d), tls.as_ref(), send);
        let zone = zone.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        (ends, zone)
    });
    let Ends {
        plut,
        round_trip,
        files,
        bytes,
        planned,
    } = ends?;
    let (zone, route_notes) = zone?;
    let mut notes = Vec::new();
    let (transports, best) = transports(a, &rows, &pair, (plut, encrypted, round_trip), &mut notes);
    notes.extend(route_notes);
    Ok(Found {
        facts: Facts {
            routes: zone.options,
            transports,
            size: bytes,
            files,
            setup_s: t.elapsed().as_secs_f64(),
        },
        urls: zone.urls,
        probe_urls: zone.probes,
        rtt_s: round_trip,
        files,
        pair,
        best,
        notes,
        planned,
    })
}

/// What the ends of a request said: whether PLUT can carry it, the control connection's round
/// trip, the files and bytes to move, and (for `haul send`) the source's listing.
struct Ends {
    plut: bool,
    round_trip: Option<f64>,
    files: u64,
    bytes: Option<u64>,
    planned: Option<Box<(haul_xfer::Route, Vec<haul_xfer::plan::Job>)>>,
}

/// Asks each remote end of `req` for its features and round trip, and lists the source: as
/// the copy lists it when `send` (see [`discover`]), else only walked.
fn ask_ends(
    req: &Request,
    (s, d): (&Endpoint, &Endpoint),
    tls: Option<&ClientTls>,
    send: bool,
) -> anyhow::Result<Ends> {
    let (src, dst) = (remote(s), remote(d));
    let mut plut = false;
    let mut round_trip = None;
    let (mut files, mut bytes) = (1u64, req.size);
    if let Some(u) = &src {
        let mut sess = open(u, tls)?;
        plut = sess.ctl.features.plut && dst.is_none();
        round_trip = rtt(&mut sess);
        if req.size.is_none() && !send {
            let (f, b) = list_remote(&mut sess, u, tls)?;
            (files, bytes) = (f, Some(b));
        }
        sess.quit();
    }
    if let Some(u) = &dst {
        let mut sess = open(u, tls)?;
        if src.is_none() {
            plut = sess.ctl.features.plut;
            round_trip = rtt(&mut sess);
        }
        sess.quit();
    }
    let mut planned = None;
    if send {
        let opts = haul_xfer::plan::PlanOptions {
            recursive: true,
            tls: tls.cloned(),
            ..Default::default()
        };
        let (route, jobs) = haul_xfer::plan::plan(s, d, &opts)?;
        files = jobs.len() as u64;
        bytes = bytes.or(Some(jobs.iter().map(|j| j.size).sum()));
        planned = Some(Box::new((route, jobs)));
    } else if let (Endpoint::Local(p), None) = (s, req.size) {
        let (f, b) = list_local(p)?;
        (files, bytes) = (f, Some(b));
    }
    Ok(Ends {
        plut,
        round_trip,
        files,
        bytes,
        planned,
    })
}

/// The transports to plan with (those offered; PLUT only where `plut`), each with the
/// history's estimate on `pair` and its cost per file, and the settings of each one's fastest
/// recent run.
fn transports(
    a: &RequestArgs,
    rows: &[TransferRecord],
    pair: &(String, String),
    (plut, encrypted, round_trip): (bool, bool, Option<f64>),
    notes: &mut Vec<String>,
) -> (Vec<TransportOption>, BTreeMap<String, Known>) {
    let mut transports = Vec::new();
    let mut best = BTreeMap::new();
    for name in wanted(a) {
        if name == "plut" && !plut {
            notes.push(format!(
                "{name}: not offered (no PLUT in the server's FEAT, or a third-party copy)"
            ));
            continue;
        }
        let (estimate, known) = from_history(rows, pair, &name);
        best.insert(name.clone(), known);
        transports.push(TransportOption {
            encrypted: encrypted && name == "tcp",
            relayable: name == "tcp",
            per_file_s: if name == "plut" {
                PLUT_FILE_S + PLUT_FILE_RTTS * round_trip.unwrap_or(0.0)
            } else {
                0.0
            },
            name,
            estimate,
        });
    }
    (transports, best)
}

fn remote(e: &Endpoint) -> Option<RemoteUrl> {
    match e {
        Endpoint::Remote(u) => Some(u.clone()),
        Endpoint::Local(_) => None,
    }
}

fn open(u: &RemoteUrl, tls: Option<&ClientTls>) -> Result<Session, haul_xfer::XferError> {
    let tls = if u.tls { tls } else { None };
    Session::open(u, tls, PasvAddress::ControlPeer)
}

/// Files and bytes under a remote path (a file or a tree).
fn list_remote(
    sess: &mut Session,
    u: &RemoteUrl,
    tls: Option<&ClientTls>,
) -> anyhow::Result<(u64, u64)> {
    let (dir, size) = sess.stat(&u.path)?;
    if !dir {
        return Ok((1, size));
    }
    let more = || open(u, tls);
    let (tree, extra) = walk_remote(sess, &u.path, WalkLimits::default(), &more)?;
    extra.into_iter().for_each(Session::quit);
    Ok(totals(&tree))
}

/// Files and bytes of a walked tree.
fn totals<P>(tree: &haul_xfer::walk::Tree<P>) -> (u64, u64) {
    (
        tree.files.len() as u64,
        tree.files.iter().map(|f| f.1).sum(),
    )
}

/// Files and bytes under a local path.
fn list_local(p: &Path) -> anyhow::Result<(u64, u64)> {
    let md = std::fs::metadata(p).with_context(|| p.display().to_string())?;
    if !md.is_dir() {
        return Ok((1, md.len()));
    }
    Ok(totals(&walk_local(p, WalkLimits::default())?))
}

/// The transports to consider: `--transports`, or TCP and PLUT.
fn wanted(a: &RequestArgs) -> Vec<String> {
    if a.transports.is_empty() {
        vec!["tcp".into(), "plut".into()]
    } else {
        a.transports
            .iter()
            .map(|t| t.trim().to_ascii_lowercase())
            .collect()
    }
}

/// The successful copies and sends and the probes in the history of the last day, newest first,
/// direct and relayed.
fn history(p: &Option<PathBuf>) -> Vec<TransferRecord> {
    let Ok(store) = Store::open(&super::history_path(p)) else {
        return Vec::new();
    };
    store
        .list(&Filter {
            since: Some(now_unix() - STALE_S),
            ..Filter::default()
        })
        .unwrap_or_default()
        .into_iter()
        // A probe ends at its time limit (interrupted) as often as at its length; a send's
        // copy is interrupted by its trial's time or a re-plan, having measured the path.
        .filter(|r| {
            matches!(
                (r.kind.as_str(), r.outcome),
                ("cp", Outcome::Ok) | ("send" | "probe", Outcome::Ok | Outcome::Interrupted)
            )
        })
        .filter(|r| r.bytes >= 1 << 20 && r.duration_s > 0.0)
        .collect()
}

/// A transport's predicted rate on `pair` from the history (the selector of 002 §2.3 over the
/// pair's recent direct transfers) and the settings of its fastest one.
pub fn from_history(
    rows: &[TransferRecord],
    pair: &(String, String),
    transport: &str,
) -> (Option<Estimate>, Known) {
    let all: Vec<&TransferRecord> = rows
        .iter()
        .filter(|r| !crate::cmd::relayed(r))
        .filter(|r| {
            (r.source_host.as_str(), r.destination_host.as_str())
                == (pair.0.as_str(), pair.1.as_str())
        })
        .filter(|r| r.params.transport.as_deref().unwrap_or("tcp") == transport)
        .collect();
    predicted(all, "pair")
}

/// The selector's prediction over `all` (one pair's or one route's transfers: `on`), real
/// copies before probes, and the settings of the fastest.
pub fn predicted(all: Vec<&TransferRecord>, on: &str) -> (Option<Estimate>, Known) {
    // Real copies measure what the user will see (disks included); memory-to-memory probes
    // only stand in until there are some.
    let real: Vec<&TransferRecord> = all.iter().copied().filter(|r| r.kind != "probe").collect();
    let (mine, what) = if real.is_empty() {
        (all, "probe")
    } else {
        (real, "transfer")
    };
    let series: Vec<Measurement> = mine
        .iter()
        .map(|r| Measurement::new(r.started_at + r.duration_s, r.mean_bps()))
        .collect();
    let known = mine
        .iter()
        .max_by(|a, b| a.mean_bps().total_cmp(&b.mean_bps()))
        .map(|r| Known {
            parallelism: r.params.parallelism,
            tcp_buffer: r.params.tcp_buffer,
            concurrency: r.params.concurrency,
            source: format!(
                "the fastest recent {} on this {on} ({})",
                if r.kind == "probe" {
                    "probe"
                } else {
                    "transfer"
                },
                human_rate(r.mean_bps())
            ),
        })
        .unwrap_or_default();
    let est = Selector::default()
        .predict(&series, now_unix())
        .map(|p| Estimate {
            bps: p.bps,
            source: format!(
                "history: {} of {} {what}{}, newest {:.0} s old ({})",
                p.predictor,
                p.samples,
                if p.samples == 1 { "" } else { "s" },
                p.age_s,
                human_rate(p.bps)
            ),
        });
    (est, known)
}
