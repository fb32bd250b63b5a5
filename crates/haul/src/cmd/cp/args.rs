//! The command line of `haul cp`: its [`Args`] and the parsers of its values.

use std::path::PathBuf;

use haul_tune::cluster::{Cutoffs, Policy};
use haul_tune::concurrency::Utility;
use haul_xfer::autotune::SampleEstimate;
use haul_xfer::checksum::Algorithm;
use haul_xfer::walk;
use haul_xfer::Transport;

use crate::cmd::{parse_bytes, parse_rate_bytes};

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
    /// Checksum algorithm: xxhc (default with haul peers), xxh128, md5, adler32, crc32c, sha1,
    /// sha256, sha512.
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
    /// Write every downloaded file through the page cache. By default a new file of 64 MiB or
    /// more on a local disk, not read back to verify it, is written around the cache (O_DIRECT).
    #[arg(long)]
    pub no_direct_io: bool,
    /// Data channel: tcp (MODE E streams), udt (MODE E over UDT4 connections; `SITE SETNETSTACK
    /// udt`) or plut (reliable UDP; the server must offer PLUT).
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
    /// Protection of gsiftp:// data channels (globus-url-copy's -dcsafe, -dcpriv): clear
    /// (PROT C, authenticated by DCAU, the default), safe (PROT S, integrity) or private
    /// (PROT P, integrity and confidentiality).
    #[arg(long, value_name = "LEVEL", default_value = "clear", value_parser = ["clear", "safe", "private"])]
    pub data_protection: String,
    /// Authentication of gsiftp:// data channels: self (DCAU A: the peer is your own
    /// identity, through the proxy the server was delegated; the default), none (DCAU N:
    /// plain TCP, as globus-url-copy -nodcau) or a subject such as "/O=Grid/CN=Jane Doe"
    /// (DCAU S: the peer must present it).
    #[arg(long, value_name = "MODE", default_value = "self")]
    pub dcau: String,
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
    /// Progress: auto (a bar on a terminal), none, or json (one JSON object a line for each
    /// event: start, interval, file, end; on stdout, or on stderr with --json).
    #[arg(long, value_enum, default_value_t = super::progress::Mode::Auto)]
    pub progress: super::progress::Mode,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
    /// The route: direct; auto (chosen from the predictions the servers share and the history,
    /// as `haul route` prints it); or relays HOST:PORT[,HOST:PORT] to go through, the one
    /// nearest this client first (docs/relay.md).
    #[arg(
        long,
        default_value = "direct",
        value_name = "direct|auto|RELAY[,RELAY]"
    )]
    pub route: String,
    #[command(flatten)]
    pub route_choice: crate::cmd::route::RouteArgs,
    /// With `--route auto`: re-route, once, when the copy's rate over this window stays under
    /// half the route's prediction while the other route (direct, or the best chain when the
    /// copy went direct) is predicted at more than 1.2x that; the rest continues from what
    /// arrived. 0 never re-routes.
    #[arg(long, value_parser = crate::cmd::parse_seconds, default_value = "10s", value_name = "DURATION")]
    pub reroute_window: f64,
    /// Through relays: TCP streams on the relay's next leg (OPTS RELAY), 1 to 64.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub relay_streams: Option<u32>,
    /// Through relays: socket buffer size of the relay's next leg, e.g. 16M.
    #[arg(long, value_parser = parse_bytes)]
    pub relay_tcp_buffer: Option<u64>,
    /// The relays `--route auto` chose and the route's prediction (bits/s), for the history:
    /// predicted against achieved is how each relay's overhead is learned.
    #[arg(skip)]
    pub chosen: Option<(Vec<String>, f64)>,
    /// The history kind this copy is recorded under (`cp` unless `haul send` says otherwise).
    #[arg(skip)]
    pub kind: Option<&'static str>,
    /// What `haul send` adds to the record's `params.extra` (its plan, under `send`).
    #[arg(skip)]
    pub send: Option<serde_json::Value>,
    /// `haul send`'s hand on the running copy: sees every throughput sample and may stop it.
    #[arg(skip)]
    pub watchdog: Option<Watchdog>,
    /// Only the files with these destinations (`haul send` continuing a stopped copy).
    #[arg(skip)]
    pub only: Option<std::collections::HashSet<String>>,
    /// The route and files already planned (`haul send` lists the source once).
    #[arg(skip)]
    pub planned: Option<Box<(haul_xfer::Route, Vec<haul_xfer::plan::Job>)>>,
    /// The route a re-routed copy left and why, for the report (set by [`super::copy`]).
    #[arg(skip)]
    pub rerouted: Option<serde_json::Value>,
    /// Where `--progress json` writes its events (set by [`super::copy`]).
    #[arg(skip)]
    pub events: Option<std::sync::Arc<super::progress::Events>>,
}

/// Called with every throughput sample of a copy; `Some(why)` stops it
/// ([`haul_xfer::Transfer::abort`]): what arrived is kept for `--resume`.
pub struct Watchdog(pub Box<WatchFn>);

/// What a [`Watchdog`] calls with each sample.
pub type WatchFn = dyn FnMut(&haul_xfer::engine::Sample) -> Option<String>;

impl std::fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watchdog")
    }
}

/// `--clusters`: a policy, or off.
#[derive(Debug, Clone, Copy)]
pub struct ClusterMode(pub(super) Option<Policy>);

/// `--clusters`: mc, promc, or off (none).
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

/// `--tune-estimate`: mean or forecast.
pub(super) fn parse_estimate(s: &str) -> Result<SampleEstimate, String> {
    match s.to_ascii_lowercase().as_str() {
        "mean" => Ok(SampleEstimate::Mean),
        "forecast" => Ok(SampleEstimate::Forecast),
        _ => Err(format!(
            "unknown sample estimate {s:?}: expected mean or forecast"
        )),
    }
}

/// `--tune-utility`: gamma, gamma:TOL or cost:K.
pub(super) fn parse_utility(s: &str) -> Result<Utility, String> {
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
    /// [`AUTO_MAX_SPLIT_FILES`](super::plan::AUTO_MAX_SPLIT_FILES) files to split; off
    /// otherwise.
    Auto,
    /// Files move whole.
    Off,
    /// This many bytes.
    Bytes(u64),
}

/// The smallest piece `--piece-size` accepts: below it the ERET round trip per piece costs
/// more than the sharing gains.
const MIN_PIECE: u64 = 1 << 20;

/// `--piece-size`: auto, off, or a size of at least [`MIN_PIECE`].
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

/// `--cluster-cutoffs`: SMALL,MIDDLE,LARGE, multiples of the BDP.
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

/// `--bandwidth`: a link rate (`1gbit`, `10Gb/s`), in bits per second as the path estimate
/// takes it.
pub(super) fn parse_bandwidth(s: &str) -> Result<f64, String> {
    match haul_units::parse_rate(s) {
        Ok(r) if r.bits_per_sec() > 0.0 => Ok(r.bits_per_sec()),
        Ok(_) => Err(format!("{s:?}: the bandwidth must be positive")),
        Err(e) => Err(e.to_string()),
    }
}

/// `--transport`: tcp, udt or plut.
fn parse_transport(s: &str) -> Result<Transport, String> {
    match s.to_ascii_lowercase().as_str() {
        "tcp" => Ok(Transport::Tcp),
        "plut" => Ok(Transport::Plut),
        "udt" => Ok(Transport::Udt),
        _ => Err(format!(
            "unknown transport {s:?}: expected tcp, udt or plut"
        )),
    }
}

/// The name `--transport` takes for `t`, as the JSON summary and the history report it.
pub(super) fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Tcp => "tcp",
        Transport::Plut => "plut",
        Transport::Udt => "udt",
    }
}
