//! `haul cp SRC DST`: plan the files, run the engine with a progress bar, verify, record the
//! transfer in the history store, and print a summary (or JSON).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use haul_store::{Outcome, Params, Store, TransferRecord};
use haul_tune::cluster::{Cutoffs, Policy};
use haul_tune::concurrency::Utility;
use haul_xfer::autotune::{self, SampleEstimate, Tunable};
use haul_xfer::checksum::Algorithm;
use haul_xfer::plan::PlanOptions;
use haul_xfer::tls::ClientTls;
use haul_xfer::walk::{self, WalkLimits};
use haul_xfer::{
    Clustering, Endpoint, Options, PasvAddress, PathEstimate, Summary, Transfer, Transport,
};

use super::{human_bytes, human_rate, parse_bytes, parse_rate_bytes};

/// Arguments of `haul cp`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Source: ftp://[user[:pass]@]host[:port]/path, haul://… (TLS), or a local path.
    pub src: String,
    /// Destination, in the same forms.
    pub dst: String,
    /// TCP streams per file (parallelism), 1 to 64 (default 4, or the --profile's streams).
    #[arg(short = 'p', long = "parallelism", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub parallelism: Option<u32>,
    /// Files in flight at once (concurrency: control sessions), at least 1.
    #[arg(long, short = 'c', default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: u32,
    /// Commands queued per control session (pipelining depth), at least 1.
    #[arg(long, default_value_t = 16, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub pipeline: usize,
    /// TCP socket buffer size, a size in bytes such as 16M (default: kernel autotuning, or the
    /// --profile's buffer).
    #[arg(long, value_parser = parse_bytes)]
    pub tcp_buffer: Option<u64>,
    /// MODE E block size, a size in bytes such as 256K (default 1M, or the --profile's block).
    #[arg(long, value_parser = parse_bytes)]
    pub block: Option<u64>,
    /// Settings from a TCP profile: the JSON that `haul profile tune --json` (its best θ) or
    /// `haul profile run --json` printed. Its streams, block and buffer stand in for -p, --block
    /// and --tcp-buffer where those are not given.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Checksum algorithm: xxh128 (default with haul peers), md5, adler32, crc32c.
    #[arg(long)]
    pub checksum: Option<Algorithm>,
    /// Move data without end-to-end verification.
    #[arg(long)]
    pub no_verify: bool,
    /// Copy directory trees.
    #[arg(short = 'r', long)]
    pub recursive: bool,
    /// Create missing parent directories of DST (local or remote); without it a missing parent
    /// is an error, as with cp. cp -r creates DST itself either way.
    #[arg(long)]
    pub mkdir: bool,
    /// -r: directories deeper than this many levels below the source are an error (a server
    /// can list a tree that never ends).
    #[arg(long, default_value_t = walk::DEFAULT_MAX_DEPTH)]
    pub max_depth: usize,
    /// -r: more files and directories than this in the source tree are an error.
    #[arg(long, default_value_t = walk::DEFAULT_MAX_ENTRIES)]
    pub max_entries: usize,
    /// Continue interrupted transfers from their restart journals.
    #[arg(long)]
    pub resume: bool,
    /// Bytes to read from /dev/zero (memory-to-memory runs), a size such as 8G.
    #[arg(long, value_parser = parse_bytes)]
    pub len: Option<u64>,
    /// Bandwidth cap per file, a rate whose unit says bits or bytes (800mbit, 100MB/s).
    #[arg(long, value_parser = parse_rate_bytes)]
    pub max_rate: Option<u64>,
    /// Data channel: tcp (MODE E streams) or plut (reliable UDP; the server must offer PLUT).
    #[arg(long, value_parser = parse_transport, default_value = "tcp")]
    pub transport: Transport,
    /// PLUT: the sender's NIC rate, its pacing ceiling, a rate such as 1gbit or 125MB/s
    /// (default 10gbit).
    #[arg(long, value_parser = parse_rate_bytes)]
    pub plut_rate: Option<u64>,
    /// Seconds a data channel may stay silent (connecting, waiting for the server's connection,
    /// or between bytes) before the transfer fails.
    #[arg(long, value_name = "SECS", default_value_t = haul_xfer::session::DEFAULT_DATA_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub data_timeout: u64,
    /// Connect data channels to the address a server's PASV reply names. By default haul
    /// connects to the control connection's peer with the reply's port, so a server cannot
    /// point it at a third host; this is for servers whose data interface has another address.
    #[arg(long)]
    pub trust_pasv_address: bool,
    /// PEM file of CA certificates that haul:// servers must chain to.
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// History database (default: $XDG_DATA_HOME/haul/history.sqlite).
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Throughput sample interval in milliseconds, down to 100 (default 1000; 200 with --tune).
    #[arg(long)]
    pub sample_ms: Option<u64>,
    /// Tune concurrency on the live transfer (Alg. 3 of the real-time tuning thesis, with
    /// early-stopping samples and re-tuning); starts from the history's best for this host pair.
    #[arg(long)]
    pub tune: bool,
    /// Highest concurrency --tune may choose.
    #[arg(long, default_value_t = 32)]
    pub tune_cap: u32,
    /// Lowest concurrency --tune may choose. Default: the number of file-size clusters (the
    /// fewest channels at which every cluster runs at once), 1 without clusters.
    #[arg(long)]
    pub tune_floor: Option<u32>,
    /// How --tune compares two concurrency levels: `cost:K` (throughput / K^cc: each channel
    /// must add about (K-1) of the throughput) or `gamma` / `gamma:TOL` (Eq. 3.1 of the thesis,
    /// tolerance 0.10: a doubling must add 20%).
    #[arg(long, value_parser = parse_utility, default_value = "cost:1.03")]
    pub tune_utility: Utility,
    /// What a --tune search sample reports for its level: `mean` (of its readings) or
    /// `forecast` (the early-stopping model's, kept within the readings' range).
    #[arg(long, value_parser = parse_estimate, default_value = "mean")]
    pub tune_estimate: SampleEstimate,
    /// File-size clusters with per-cluster pipelining and parallelism (pp = BDP/avg size,
    /// p = min(⌈BDP/buffer⌉, ⌈avg size/buffer⌉)): mc (round-robin channels), promc (channels
    /// by cluster bytes) or off. Default: mc with --tune, off otherwise; on, it replaces
    /// -p and --pipeline.
    #[arg(long, value_parser = parse_clusters)]
    pub clusters: Option<ClusterMode>,
    /// Cluster cut-offs as multiples of the BDP: SMALL,MIDDLE,LARGE (default 0.1,1,20).
    #[arg(long, value_parser = parse_cutoffs)]
    pub cluster_cutoffs: Option<Cutoffs>,
    /// The path's bottleneck bandwidth for the BDP, e.g. 1gbit or 10gbit (default: 1 Gb/s
    /// until the tuner measures more).
    #[arg(long, value_parser = parse_bandwidth)]
    pub bandwidth: Option<f64>,
    /// Cut files of at least two pieces into pieces of SIZE bytes that free channels fetch
    /// in parallel (ERET), so a big file does not end a transfer on one channel: auto (with
    /// clusters on and fewer than 16 such files: 8 BDP, at least 64 MiB, at most 1 GiB; off
    /// otherwise), off, or a size. At the end of the transfer the last pieces (and whole files
    /// of at least two eighths of SIZE) are cut into smaller shares so that every channel
    /// fetches some of the last bytes (docs/cli.md). Downloads over TCP without --resume only.
    #[arg(long, value_parser = parse_piece, default_value = "auto")]
    pub piece_size: PieceSize,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

/// `--clusters`: a policy, or off.
#[derive(Debug, Clone, Copy)]
pub struct ClusterMode(Option<Policy>);

fn parse_clusters(s: &str) -> Result<ClusterMode, String> {
    match s.to_ascii_lowercase().as_str() {
        "mc" => Ok(ClusterMode(Some(Policy::MultiCluster))),
        "promc" => Ok(ClusterMode(Some(Policy::ProMc))),
        "off" | "none" => Ok(ClusterMode(None)),
        _ => Err(format!(
            "unknown cluster policy {s:?}: expected mc, promc or off"
        )),
    }
}

fn parse_estimate(s: &str) -> Result<SampleEstimate, String> {
    match s.to_ascii_lowercase().as_str() {
        "mean" => Ok(SampleEstimate::Mean),
        "forecast" => Ok(SampleEstimate::Forecast),
        _ => Err(format!(
            "unknown sample estimate {s:?}: expected mean or forecast"
        )),
    }
}

fn parse_utility(s: &str) -> Result<Utility, String> {
    let lower = s.to_ascii_lowercase();
    let u = match lower.split_once(':') {
        None if lower == "gamma" => Utility::Gamma { tolerance: 0.10 },
        Some(("gamma", t)) => Utility::Gamma {
            tolerance: t.parse().map_err(|_| format!("bad tolerance {t:?}"))?,
        },
        Some(("cost", k)) => Utility::ChannelCost {
            k: k.parse()
                .map_err(|_| format!("bad per-channel factor {k:?}"))?,
        },
        _ => {
            return Err(format!(
                "unknown utility {s:?}: expected gamma, gamma:TOL or cost:K"
            ))
        }
    };
    if u.is_valid() {
        Ok(u)
    } else {
        Err(format!(
            "utility {s:?} out of range: the tolerance must be > 0, K >= 1"
        ))
    }
}

/// `--piece-size`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PieceSize {
    /// 8 BDP within [64 MiB, 1 GiB] with clusters on and fewer than
    /// [`AUTO_MAX_SPLIT_FILES`] files to split; off otherwise.
    Auto,
    /// Files move whole.
    Off,
    /// This many bytes.
    Bytes(u64),
}

/// The smallest piece `--piece-size` accepts: below it the ERET round trip per piece costs
/// more than the sharing gains.
const MIN_PIECE: u64 = 1 << 20;

fn parse_piece(s: &str) -> Result<PieceSize, String> {
    match s.to_ascii_lowercase().as_str() {
        "auto" => Ok(PieceSize::Auto),
        "off" | "none" | "0" => Ok(PieceSize::Off),
        _ => match parse_bytes(s)? {
            n if n >= MIN_PIECE => Ok(PieceSize::Bytes(n)),
            n => Err(format!(
                "{n} bytes: a piece must be at least 1M (or auto, off)"
            )),
        },
    }
}

/// `--piece-size auto` splits only when few files are big enough to split: pieces exist so
/// that idle channels can share the last big files, and with many big files whole ones already
/// keep every channel busy. Measured on a 1 Gb/s, 40 ms path with 5,000 small files: with 5
/// big files pieces were 7.5–14% faster than whole files, with 20 they were 5% slower
/// (docs/benchmarks.md). 16 sits between and is half the default `--tune-cap`.
const AUTO_MAX_SPLIT_FILES: usize = 16;

fn auto_piece(n: u64, jobs: &[haul_xfer::plan::Job]) -> Option<u64> {
    let big = jobs
        .iter()
        .filter(|j| haul_xfer::plan::piece_count(j.size, n) > 0)
        .count();
    (big < AUTO_MAX_SPLIT_FILES).then_some(n)
}

/// The piece size `--piece-size` gives for a transfer of `jobs`.
fn piece_bytes(
    p: PieceSize,
    clustering: Option<&Clustering>,
    jobs: &[haul_xfer::plan::Job],
) -> Option<u64> {
    match (p, clustering) {
        (PieceSize::Bytes(n), _) => Some(n),
        (PieceSize::Auto, Some(c)) => {
            auto_piece(((8.0 * c.path.bdp()) as u64).clamp(64 << 20, 1 << 30), jobs)
        }
        _ => None,
    }
}

fn parse_cutoffs(s: &str) -> Result<Cutoffs, String> {
    let v: Vec<f64> = s
        .split(',')
        .map(|x| {
            x.trim()
                .parse::<f64>()
                .map_err(|_| format!("{x:?} is not a number"))
        })
        .collect::<Result<_, _>>()?;
    let [small_below, middle_below, large_below] = v[..] else {
        return Err(format!(
            "{s:?}: expected three multiples of the BDP, SMALL,MIDDLE,LARGE"
        ));
    };
    let c = Cutoffs {
        small_below,
        middle_below,
        large_below,
    };
    c.validate().map_err(|e| e.to_string())?;
    Ok(c)
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
            if s.transport != haul_profile::TransportKind::Tcp {
                anyhow::bail!(
                    "the profile {} measured {}; haul cp can take its settings only from a TCP \
                     profile",
                    path.display(),
                    s.transport.as_str()
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

/// `--bandwidth`: a link rate (`1gbit`, `10Gb/s`), in bits per second as the path estimate
/// takes it.
fn parse_bandwidth(s: &str) -> Result<f64, String> {
    match haul_units::parse_rate(s) {
        Ok(r) if r.bits_per_sec() > 0.0 => Ok(r.bits_per_sec()),
        Ok(_) => Err(format!("{s:?}: the bandwidth must be positive")),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_transport(s: &str) -> Result<Transport, String> {
    match s.to_ascii_lowercase().as_str() {
        "tcp" => Ok(Transport::Tcp),
        "plut" => Ok(Transport::Plut),
        _ => Err(format!("unknown transport {s:?}: expected tcp or plut")),
    }
}

fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Tcp => "tcp",
        Transport::Plut => "plut",
    }
}

fn pasv_address(args: &Args) -> PasvAddress {
    if args.trust_pasv_address {
        PasvAddress::Trusted
    } else {
        PasvAddress::ControlPeer
    }
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn host_of(e: &Endpoint) -> String {
    match e {
        Endpoint::Local(_) => "local".into(),
        Endpoint::Remote(r) => r.host_port(),
    }
}

/// Runs `haul cp`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let src = Endpoint::parse(&args.src)?;
    let dst = Endpoint::parse(&args.dst)?;
    let tls = match &args.ca {
        Some(ca) => Some(
            ClientTls::from_ca_file(ca)
                .with_context(|| format!("loading CA file {}", ca.display()))?,
        ),
        None if [&src, &dst]
            .iter()
            .any(|e| matches!(e, Endpoint::Remote(r) if r.tls)) =>
        {
            anyhow::bail!("haul:// URLs need --ca FILE with the server's CA certificate")
        }
        None => None,
    };
    let (parallelism, block, tcp_buffer) = settings(&args)?;
    let opts = Options {
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
        tls: tls.clone(),
        pasv: pasv_address(&args),
        data_timeout: Duration::from_secs(args.data_timeout),
        len: args.len,
        max_rate: args.max_rate,
        transport: args.transport,
        plut_rate: args.plut_rate,
        clustering: None,
        piece: None,
    };
    let mut opts = opts;
    let policy = args
        .clusters
        .map_or(args.tune.then_some(Policy::MultiCluster), |m| m.0);
    if let Some(policy) = policy.filter(|_| args.transport == Transport::Tcp) {
        match path_estimate(&src, &dst, &args, opts.tcp_buffer, tls.as_ref()) {
            Ok(path) => {
                opts.clustering = Some(Clustering {
                    path,
                    cutoffs: args.cluster_cutoffs.unwrap_or_default(),
                    policy,
                })
            }
            Err(e) => tracing::warn!("clustering off: cannot measure the path: {e}"),
        }
    }
    let started_at = now_unix();
    let tune_cfg = args.tune.then(|| tune_config(&args, &src, &dst));
    let mut tuning = Vec::new();
    let limits = WalkLimits {
        max_depth: args.max_depth,
        max_entries: args.max_entries,
    };
    let plan_opts = PlanOptions {
        recursive: args.recursive,
        len: args.len,
        tls: tls.clone(),
        pasv: opts.pasv,
        limits,
        mkdir: args.mkdir,
        data_timeout: Some(opts.data_timeout),
    };
    let result = haul_xfer::plan::plan(&src, &dst, &plan_opts).and_then(|(route, jobs)| {
        let total: u64 = jobs.iter().map(|j| j.size).sum();
        let files = jobs.len();
        let piece = piece_bytes(args.piece_size, opts.clustering.as_ref(), &jobs);
        let t = Transfer::start(
            route,
            jobs,
            Options {
                piece,
                ..opts.clone()
            },
        );
        let bar = (!args.quiet && !args.json && std::io::stderr().is_terminal())
            .then(|| progress_bar(total, files));
        let view = Watched {
            t: &t,
            bar: bar.as_ref(),
            total,
        };
        match tune_cfg {
            Some((cfg, from_history)) => {
                let cfg = at_clusters(cfg, &t, from_history, args.tune_floor);
                tuning = autotune::drive(&view, &cfg, opts.sample_interval.as_secs_f64())?
            }
            None => {
                while !view.finished() {
                    view.show();
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        t.wait()
    });
    record(&args, &src, &dst, &opts, started_at, &result, &tuning);
    let summary = result?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json_summary(&args, &opts, &summary, &tuning))?
        );
    } else if !args.quiet {
        let rate = if summary.duration_s > 0.0 {
            summary.bytes as f64 * 8.0 / summary.duration_s
        } else {
            0.0
        };
        let verify = match (&summary.checksum, args.no_verify) {
            (Some(a), _) => format!("{} of {} verified ({a})", summary.verified, summary.files),
            (None, true) => "NOT verified: --no-verify was given, nothing was checked".into(),
            (None, false) => "nothing to verify (memory-to-memory)".into(),
        };
        println!(
            "{} files, {} in {:.2} s, {}; {}{}",
            summary.files,
            human_bytes(summary.bytes),
            summary.duration_s,
            human_rate(rate),
            verify,
            if summary.retransferred > 0 {
                format!(
                    "; {} re-sent after checksum mismatch",
                    summary.retransferred
                )
            } else {
                String::new()
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn progress_bar(total: u64, files: usize) -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::new(total);
    let style = indicatif::ProgressStyle::with_template(&format!(
        "{{spinner}} {files} files [{{bar:30}}] {{bytes}}/{{total_bytes}} {{binary_bytes_per_sec}} ETA {{eta}}"
    ))
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    b.set_style(style);
    b
}

/// The running transfer as the tuner and the progress bar see it.
struct Watched<'a> {
    t: &'a Transfer,
    bar: Option<&'a indicatif::ProgressBar>,
    total: u64,
}

impl Watched<'_> {
    fn show(&self) {
        if let Some(b) = self.bar {
            b.set_position(self.t.bytes().min(self.total));
        }
    }
}

impl Tunable for Watched<'_> {
    fn set_concurrency(&self, n: u32) {
        tracing::info!("tuner: concurrency {n}");
        self.t.set_concurrency(n);
    }
    fn next_sample(&self, wait: Duration) -> Option<haul_xfer::engine::Sample> {
        self.show();
        self.t.next_sample(wait)
    }
    fn finished(&self) -> bool {
        self.t.is_finished()
    }
    fn observe_bandwidth(&self, bps: f64) {
        self.t.observe_bandwidth(bps);
    }
    fn channels(&self) -> Option<u32> {
        Some(self.t.channels())
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

/// The tuner's settings: start from the best concurrency this host pair has seen (true when
/// the history had one).
fn tune_config(args: &Args, src: &Endpoint, dst: &Endpoint) -> (autotune::AutoTuneConfig, bool) {
    let mut cfg = autotune::AutoTuneConfig::default();
    cfg.search.cap = args.tune_cap.max(1);
    cfg.search.utility = args.tune_utility;
    cfg.estimate = args.tune_estimate;
    let path = args.history.clone().unwrap_or_else(Store::default_path);
    let best = Store::open(&path).ok().and_then(|s| {
        s.best_for_host_pair(&host_of(src), &host_of(dst), "cp")
            .ok()
            .flatten()
    });
    match best.and_then(|r| r.params.concurrency) {
        Some(c) => {
            cfg.search.start = c.clamp(1, cfg.search.cap);
            (cfg, true)
        }
        None => (cfg, false),
    }
}

/// The search does not go below the number of file-size clusters (or `--tune-floor`): the
/// smallest concurrency at which Multi-Cluster runs every cluster at once, one channel each
/// (Alg. 1 of 003). Below it a level is measured on whichever clusters its channels happen to
/// carry: on the mixed benchmark one channel on a big file reads 750–800 Mb/s and the same
/// channel on small files 400–550. Without history the search also starts there rather than at
/// 1. Without clustering both stay at 1.
fn at_clusters(
    mut cfg: autotune::AutoTuneConfig,
    t: &Transfer,
    from_history: bool,
    floor: Option<u32>,
) -> autotune::AutoTuneConfig {
    let clusters = t.clusters().0.len() as u32;
    // ConcurrencySearch::new clamps both into [1, cap], the start to at least the floor.
    cfg.search.floor = floor.unwrap_or(clusters);
    if !from_history {
        cfg.search.start = cfg.search.start.max(clusters);
        if clusters > 1 {
            tracing::info!("tuner: no history for this host pair; starting at {clusters} channels, one per cluster");
        }
    }
    cfg
}

/// How the files were checked, for `--json`: `checksum`, or why not.
fn verification(args: &Args, s: &Summary) -> &'static str {
    match (&s.checksum, args.no_verify) {
        (Some(_), _) => "checksum",
        (None, true) => "skipped: --no-verify, nothing was checked",
        (None, false) => "not applicable: memory-to-memory",
    }
}

fn json_summary(
    args: &Args,
    opts: &Options,
    s: &Summary,
    tuning: &[autotune::TuneStep],
) -> serde_json::Value {
    let rate = if s.duration_s > 0.0 {
        s.bytes as f64 * 8.0 / s.duration_s
    } else {
        0.0
    };
    serde_json::json!({
        "source": args.src,
        "destination": args.dst,
        "outcome": "ok",
        "files": s.files,
        "bytes": s.bytes,
        "duration_s": s.duration_s,
        "throughput_bps": rate,
        "verification": verification(args, s),
        "verified_files": s.verified,
        "unverified_files": s.files.saturating_sub(s.verified),
        "retransferred_files": s.retransferred,
        "checksum": s.checksum,
        "parallelism": opts.parallelism,
        "block": opts.block,
        "tcp_buffer": opts.tcp_buffer,
        "concurrency": args.concurrency,
        "pipeline": args.pipeline,
        "transport": transport_name(args.transport),
        "clusters": s.clusters,
        "pieces": s.pieces,
        "samples": s.samples,
        "tuning": tuning,
    })
}

/// What the history keeps beyond the common parameters: the tuner's steps and the clusters.
fn extra(tuning: &[autotune::TuneStep], clusters: &[haul_xfer::ClusterInfo]) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    if !tuning.is_empty() {
        m.insert("tuning".into(), serde_json::json!(tuning));
    }
    if !clusters.is_empty() {
        m.insert("clusters".into(), serde_json::json!(clusters));
    }
    if m.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::Value::Object(m)
    }
}

fn record(
    args: &Args,
    src: &Endpoint,
    dst: &Endpoint,
    opts: &Options,
    started_at: f64,
    result: &Result<Summary, haul_xfer::XferError>,
    tuning: &[autotune::TuneStep],
) {
    let path = args.history.clone().unwrap_or_else(Store::default_path);
    let mut store = match Store::open(&path) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("history not recorded: {e}");
            return;
        }
    };
    let (outcome, error, files, bytes, samples, duration) = match result {
        Ok(s) => (
            Outcome::Ok,
            None,
            s.files,
            s.bytes,
            s.samples
                .iter()
                .map(|x| haul_store::Sample {
                    t_s: x.t_s,
                    bytes: x.bytes,
                    bps: x.bps,
                })
                .collect(),
            s.duration_s,
        ),
        Err(e) => (
            Outcome::Failed,
            Some(e.to_string()),
            0,
            0,
            Vec::new(),
            now_unix() - started_at,
        ),
    };
    let rec = TransferRecord {
        id: None,
        kind: "cp".into(),
        started_at,
        duration_s: duration,
        source: src.to_string(),
        destination: dst.to_string(),
        source_host: host_of(src),
        destination_host: host_of(dst),
        params: Params {
            parallelism: Some(opts.parallelism),
            concurrency: Some(tuning.last().map_or(opts.concurrency, |s| s.next)),
            pipelining: Some(opts.pipeline as u32),
            tcp_buffer: opts.tcp_buffer.map(|b| b as u64),
            block_size: Some(opts.block as u64),
            checksum: result.as_ref().ok().and_then(|s| s.checksum.clone()),
            transport: Some(transport_name(opts.transport).into()),
            extra: extra(
                tuning,
                result.as_ref().map(|s| &s.clusters[..]).unwrap_or_default(),
            ),
        },
        files,
        bytes,
        outcome,
        error,
        samples,
    };
    if let Err(e) = store.insert(&rec) {
        tracing::warn!("history not recorded: {e}");
    }
}

#[cfg(test)]
mod tests {
    use haul_xfer::plan::Job;

    #[test]
    fn bandwidth_is_in_bits_per_second() {
        // 10gbit was read as 1.25e9 (bytes per second) where the BDP wants bits: 8x too small.
        assert_eq!(super::parse_bandwidth("10gbit"), Ok(1e10));
        assert_eq!(super::parse_bandwidth("1Gb/s"), Ok(1e9));
        assert!(super::parse_bandwidth("0gbit").is_err());
    }

    #[test]
    fn tune_utility_and_estimate_flags_parse() {
        use super::{parse_estimate, parse_utility, SampleEstimate, Utility};
        assert_eq!(
            parse_utility("gamma"),
            Ok(Utility::Gamma { tolerance: 0.10 })
        );
        assert_eq!(
            parse_utility("GAMMA:0.2"),
            Ok(Utility::Gamma { tolerance: 0.2 })
        );
        assert_eq!(
            parse_utility("cost:1.03"),
            Ok(Utility::ChannelCost { k: 1.03 })
        );
        for bad in [
            "cost:0.5", "cost:x", "gamma:0", "gamma:-1", "cost:inf", "cost", "falcon", "",
        ] {
            assert!(parse_utility(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(parse_estimate("mean"), Ok(SampleEstimate::Mean));
        assert_eq!(parse_estimate("Forecast"), Ok(SampleEstimate::Forecast));
        assert!(parse_estimate("median").is_err());
    }

    #[test]
    fn auto_pieces_only_when_few_files_are_big() {
        let big = |n: usize| {
            (0..n)
                .map(|i| Job::new(format!("s{i}"), format!("d{i}"), 300 << 20))
                .collect::<Vec<_>>()
        };
        assert_eq!(super::auto_piece(64 << 20, &big(5)), Some(64 << 20));
        assert_eq!(super::auto_piece(64 << 20, &big(20)), None);
        let mut mixed = big(3);
        mixed.extend((0..40).map(|i| Job::new(format!("t{i}"), format!("e{i}"), 1 << 20)));
        assert_eq!(
            super::auto_piece(64 << 20, &mixed),
            Some(64 << 20),
            "small files do not count"
        );
    }
}
