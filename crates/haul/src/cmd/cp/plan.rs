//! Setting up a `haul cp`: TLS, the transfer options (flags over `--profile`), the file-size
//! clustering and its path estimate, the planner's options and the piece size.

use std::time::Duration;

use anyhow::Context;
use haul_tune::cluster::Policy;
use haul_xfer::plan::{Job, PlanOptions};
use haul_xfer::tls::ClientTls;
use haul_xfer::walk::WalkLimits;
use haul_xfer::{Clustering, Endpoint, Options, PasvAddress, PathEstimate, Transport};

use super::args::{transport_name, Args, PieceSize};

/// The client's security: TLS for haul:// ends, from `--ca`, which a haul:// URL requires;
/// GSI for gsiftp:// ends, from the user's proxy and the trusted CAs where the Globus tools
/// find them.
pub(super) fn client_tls(
    args: &Args,
    src: &Endpoint,
    dst: &Endpoint,
) -> anyhow::Result<Option<ClientTls>> {
    let any = |f: fn(&haul_xfer::RemoteUrl) -> bool| {
        [src, dst]
            .iter()
            .any(|e| matches!(e, Endpoint::Remote(r) if f(r)))
    };
    let tls = match &args.ca {
        Some(ca) => Some(
            ClientTls::from_ca_file(ca)
                .with_context(|| format!("loading CA file {}", ca.display()))?,
        ),
        None if any(|r| r.tls) => {
            anyhow::bail!("haul:// URLs need --ca FILE with the server's CA certificate")
        }
        None => None,
    };
    if !any(|r| r.gsi) {
        return Ok(tls);
    }
    use haul_xfer::gsi::Dcau;
    let level = match args.data_protection.as_str() {
        "safe" => haul_xfer::gsi::Protection::Safe,
        "private" => haul_xfer::gsi::Protection::Private,
        _ => haul_xfer::gsi::Protection::Clear,
    };
    let dcau = match args.dcau.as_str() {
        "self" => Dcau::SelfId,
        "none" => Dcau::None,
        s if s.starts_with('/') => Dcau::Subject(s.to_string()),
        s => anyhow::bail!("--dcau {s}: expected self, none or a subject (/O=.../CN=...)"),
    };
    if dcau == Dcau::None && level != haul_xfer::gsi::Protection::Clear {
        anyhow::bail!(
            "--data-protection {} needs authenticated data channels, not --dcau none",
            args.data_protection
        );
    }
    let gsi = haul_xfer::gsi::ClientGsi::from_environment()?
        .with_protection(level)
        .with_dcau(dcau);
    Ok(Some(tls.unwrap_or_default().with_gsi(gsi)))
}

/// The engine's options from the flags and `--profile`, without clustering or pieces.
pub(super) fn options(args: &Args, tls: Option<ClientTls>) -> anyhow::Result<Options> {
    let (parallelism, block, tcp_buffer) = settings(args)?;
    Ok(Options {
        parallelism,
        concurrency: args.concurrency,
        pipeline: args.pipeline,
        tcp_buffer: tcp_buffer.map(|b| b as usize),
        block: block.clamp(4096, 64 << 20) as usize,
        checksum: args.checksum,
        verify: !args.no_verify,
        resume: args.resume,
        sample_interval: Duration::from_millis(
            args.sample_ms
                .unwrap_or(if args.tune { 200 } else { 1000 })
                .max(100),
        ),
        tls,
        pasv: pasv_address(args),
        data_timeout: Duration::from_secs(args.data_timeout),
        len: args.len,
        max_rate: args.max_rate,
        direct_io: !args.no_direct_io,
        transport: args.transport,
        plut_rate: args.plut_rate,
        plut_start: None,
        clustering: None,
        piece: None,
        relay_leg: (args.relay_streams.is_some() || args.relay_tcp_buffer.is_some()).then_some(
            haul_proto::nested::NextLeg {
                parallelism: args.relay_streams,
                tcp_buffer: args.relay_tcp_buffer,
            },
        ),
        spare: Default::default(),
    })
}

/// The file-size clustering `--clusters` asks for (mc by default with `--tune`; TCP only),
/// sized for the measured path; none when off or when the path cannot be measured.
pub(super) fn clustering(
    args: &Args,
    src: &Endpoint,
    dst: &Endpoint,
    opts: &Options,
) -> Option<Clustering> {
    let policy = args
        .clusters
        .map_or(args.tune.then_some(Policy::MultiCluster), |m| m.0)
        .filter(|_| args.transport == Transport::Tcp)?;
    match path_estimate(src, dst, args, opts.tcp_buffer, opts.tls.as_ref()) {
        Ok(path) => Some(Clustering {
            path,
            cutoffs: args.cluster_cutoffs.unwrap_or_default(),
            policy,
        }),
        Err(e) => {
            tracing::warn!("clustering off: cannot measure the path: {e}");
            None
        }
    }
}

/// The planner's options: recursion, the walk's limits, and the connection settings of `opts`.
pub(super) fn plan_options(args: &Args, opts: &Options) -> PlanOptions {
    PlanOptions {
        recursive: args.recursive,
        len: args.len,
        tls: opts.tls.clone(),
        pasv: opts.pasv,
        limits: WalkLimits {
            max_depth: args.max_depth,
            max_entries: args.max_entries,
        },
        mkdir: args.mkdir,
        data_timeout: Some(opts.data_timeout),
        spare: opts.spare.clone(),
    }
}

/// `--piece-size auto` splits only when few files are big enough to split: pieces exist so
/// that idle channels can share the last big files, and with many big files whole ones already
/// keep every channel busy. Measured on a 1 Gb/s, 40 ms path with 5,000 small files: with 5
/// big files pieces were 7.5–14% faster than whole files, with 20 they were 5% slower
/// (docs/benchmarks.md). 16 sits between and is half the default `--tune-cap`.
pub(super) const AUTO_MAX_SPLIT_FILES: usize = 16;

/// `n` when fewer than [`AUTO_MAX_SPLIT_FILES`] of `jobs` are big enough to cut into pieces of
/// `n` bytes.
pub(super) fn auto_piece(n: u64, jobs: &[Job]) -> Option<u64> {
    let big = jobs
        .iter()
        .filter(|j| haul_xfer::plan::piece_count(j.size, n) > 0)
        .count();
    (big < AUTO_MAX_SPLIT_FILES).then_some(n)
}

/// The piece size `--piece-size` gives for a transfer of `jobs`.
pub(super) fn piece_bytes(
    p: PieceSize,
    clustering: Option<&Clustering>,
    jobs: &[Job],
) -> Option<u64> {
    match (p, clustering) {
        (PieceSize::Bytes(n), _) => Some(n),
        (PieceSize::Auto, Some(c)) => {
            auto_piece(((8.0 * c.path.bdp()) as u64).clamp(64 << 20, 1 << 30), jobs)
        }
        _ => None,
    }
}

/// Streams, block and socket buffer: each flag given, else the --profile's value, else the
/// default (4 streams, 1 MiB blocks, kernel autotuning).
fn settings(args: &Args) -> anyhow::Result<(u32, u64, Option<u64>)> {
    let profile = match &args.profile {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the profile {}", path.display()))?;
            let s = haul_profile::TransferSettings::from_json(&text)
                .with_context(|| format!("the profile {}", path.display()))?;
            let wanted = match args.transport {
                Transport::Udt => haul_profile::TransportKind::Udt,
                _ => haul_profile::TransportKind::Tcp,
            };
            if s.transport != wanted || args.transport == Transport::Plut {
                anyhow::bail!(
                    "the profile {} measured {}; haul cp --transport {} takes settings only from \
                     a {} profile (tcp or udt)",
                    path.display(),
                    s.transport.as_str(),
                    transport_name(args.transport),
                    wanted.as_str(),
                );
            }
            Some(s)
        }
        None => None,
    };
    let parallelism = args
        .parallelism
        .or(profile.map(|p| p.streams.clamp(1, 64)))
        .unwrap_or(4);
    let block = args
        .block
        .or(profile.and_then(|p| p.block))
        .unwrap_or(1 << 20);
    let buffer = args.tcp_buffer.or(profile.and_then(|p| p.buffer));
    Ok((parallelism, block, buffer))
}

/// Where data channels connect: `--trust-pasv-address`, or the control connection's peer.
fn pasv_address(args: &Args) -> PasvAddress {
    if args.trust_pasv_address {
        PasvAddress::Trusted
    } else {
        PasvAddress::ControlPeer
    }
}

/// The path the clusters are sized for: the control-channel RTT to the remote end (for
/// third-party transfers the larger of the two, since the client cannot see the
/// server-to-server path), the user's bandwidth or the prior, and the buffer.
fn path_estimate(
    src: &Endpoint,
    dst: &Endpoint,
    args: &Args,
    buffer: Option<usize>,
    tls: Option<&ClientTls>,
) -> anyhow::Result<PathEstimate> {
    let mut best: Option<PathEstimate> = None;
    for e in [src, dst] {
        if let Endpoint::Remote(r) = e {
            let p = PathEstimate::measure(r, tls, args.bandwidth, buffer)?;
            if best.is_none_or(|b| p.rtt_s > b.rtt_s) {
                best = Some(p);
            }
        }
    }
    best.ok_or_else(|| anyhow::anyhow!("no remote end to measure"))
}

/// PLUT's starting rate from history: 90 % of the median rate over the second half of the
/// latest successful PLUT copy between the same two ends in the last day, so a repeated
/// transfer starts near what the path gave rather than probing up from B/16 (about 1.4 s at
/// 1 Gb/s and 100 ms). None for other transports, or with no such copy.
pub(super) fn plut_start(
    args: &Args,
    src: &Endpoint,
    dst: &Endpoint,
    opts: &Options,
) -> Option<u64> {
    if opts.transport != Transport::Plut {
        return None;
    }
    let path = args
        .history
        .clone()
        .unwrap_or_else(haul_store::Store::default_path);
    let store = haul_store::Store::open(&path).ok()?;
    let (s, d) = (crate::cmd::host_id(src), crate::cmd::host_id(dst));
    let remote = if matches!(src, Endpoint::Remote(_)) {
        &s
    } else {
        &d
    };
    let recent = store
        .list(&haul_store::Filter {
            host: Some(remote.clone()),
            kind: Some("cp".into()),
            outcome: Some(haul_store::Outcome::Ok),
            since: Some(crate::cmd::now_unix() - 86_400.0),
            limit: Some(20),
            with_samples: true,
        })
        .ok()?;
    let last = recent.iter().find(|r| {
        r.source_host == s
            && r.destination_host == d
            && r.params.transport.as_deref() == Some("plut")
    })?;
    let mut bps: Vec<f64> = last.samples[last.samples.len() / 2..]
        .iter()
        .map(|x| x.bps)
        .collect();
    bps.sort_by(f64::total_cmp);
    let median = *bps.get(bps.len() / 2)?;
    let start = (0.9 * median / 8.0) as u64;
    (start >= 1_000_000).then_some(start)
}
