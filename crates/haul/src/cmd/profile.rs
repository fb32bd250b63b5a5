//! `haul profile`: the TPG profiler (serve / run), parameter sweeps with profile tables and
//! plots, and FastProf tuning. All protocol and measurement logic lives in `haul-profile`.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use haul_profile::driver::ClientOptions;
use haul_profile::params::{parse_nic_file, PlutController, PlutOptions, TcpOptions, UdtOptions};
use haul_profile::report::{self, ProfileReport};
use haul_profile::{sweep, tune, ProfileParams, TransportKind};
use haul_store::Store;

use super::{parse_bytes, parse_rate_bits};

/// Arguments of `haul profile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Run the profiling server: serves one client at a time, resets after each run.
    Serve(ServeArgs),
    /// One profiling run against a server (TPG client).
    Run(RunArgs),
    /// Run a grid over parameters; write the profile table (CSV) and plots (SVG).
    Sweep(SweepArgs),
    /// FastProf: SPSA over block size and buffer size with real probes.
    Tune(TuneArgs),
}

#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// Control address to listen on.
    #[arg(long, default_value = "0.0.0.0:5201")]
    listen: SocketAddr,
    /// Serve one run, then exit.
    #[arg(long)]
    once: bool,
}

/// θ: everything that sets up one profiling run.
#[derive(clap::Args, Debug, Clone)]
struct Theta {
    /// Server as HOST[:PORT] (port 5201 by default).
    server: String,
    /// Data-channel transport: tcp, udp, udt or plut.
    #[arg(long, default_value = "tcp")]
    transport: TransportKind,
    /// Parallel streams P (one thread each).
    #[arg(short = 'P', long, default_value_t = 1)]
    parallel: u32,
    /// Profiling duration d in seconds.
    #[arg(short = 't', long, default_value_t = 10.0)]
    time: f64,
    /// Send this many bytes in total instead of a duration (a size, e.g. 1G).
    #[arg(short = 'n', long, value_parser = parse_bytes)]
    bytes: Option<u64>,
    /// Block size l: bytes per send/recv call (TCP 128K, UDP = -M, UDT 10(m-16)-1).
    #[arg(short = 'l', long, value_parser = parse_bytes)]
    block: Option<u64>,
    /// Packet size m: UDT_MSS - 28 for UDT (1472), datagram size for UDP and PLUT.
    #[arg(short = 'M', long)]
    packet: Option<u32>,
    /// Socket buffer (SO_SNDBUF/SO_RCVBUF) for TCP, UDP and PLUT, e.g. 4M.
    #[arg(short = 'w', long, value_parser = parse_bytes)]
    window: Option<u64>,
    /// Bandwidth cap over all streams, a rate (500mbit, 1gbit, 62.5MB/s; UDP default 1gbit).
    #[arg(short = 'b', long, value_parser = parse_rate_bits)]
    bitrate: Option<u64>,
    /// Report interval in seconds (0: none).
    #[arg(short = 'i', long, default_value_t = 1.0)]
    interval: f64,
    /// Receiver idle timeout in seconds.
    #[arg(long, default_value_t = 5.0)]
    idle_timeout: f64,
    /// TCP congestion control (cubic, bbr, reno, ...).
    #[arg(short = 'C', long)]
    congestion: Option<String>,
    /// TCP maximum segment size (TCP_MAXSEG).
    #[arg(long)]
    mss: Option<u32>,
    /// TCP pacing rate per stream, a rate such as 2gbit (SO_MAX_PACING_RATE).
    #[arg(long, value_parser = parse_rate_bits)]
    pacing: Option<u64>,
    /// UDT send buffer (UDT_SNDBUF).
    #[arg(long, value_parser = parse_bytes)]
    udt_sndbuf: Option<u64>,
    /// UDT receive buffer (UDT_RCVBUF).
    #[arg(long, value_parser = parse_bytes)]
    udt_rcvbuf: Option<u64>,
    /// UDP send buffer under UDT (UDP_SNDBUF).
    #[arg(long, value_parser = parse_bytes)]
    udp_sndbuf: Option<u64>,
    /// UDP receive buffer under UDT (UDP_RCVBUF).
    #[arg(long, value_parser = parse_bytes)]
    udp_rcvbuf: Option<u64>,
    /// Most bandwidth one UDT connection may use, a rate such as 1gbit (UDT_MAXBW).
    #[arg(long, value_parser = parse_rate_bits)]
    udt_maxbw: Option<u64>,
    /// PLUT source-rate controller: rm (Robbins-Monro) or tsunami (ARET).
    #[arg(long, default_value = "rm")]
    plut_controller: PlutController,
    /// PLUT rate each stream starts from, a rate (default: the maximum rate / 16).
    #[arg(long, value_parser = parse_rate_bits)]
    plut_initial_rate: Option<u64>,
    /// PLUT maximum rate (NIC rate B) per stream, a rate (default: -b / P, else 10gbit).
    #[arg(long, value_parser = parse_rate_bits)]
    plut_max_rate: Option<u64>,
    /// Multi-NIC profiling: file of `SRC_IP DST_IP` lines; stream i uses line i mod N.
    #[arg(long)]
    nics: Option<PathBuf>,
    /// CPU affinity: stream i is pinned to CPU list[i mod N] (e.g. 0,1).
    #[arg(short = 'A', long, value_delimiter = ',')]
    affinity: Vec<usize>,
    /// History database (default: $XDG_DATA_HOME/haul/history.sqlite).
    #[arg(long)]
    history: Option<PathBuf>,
    /// Do not record runs in the history.
    #[arg(long)]
    no_history: bool,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    theta: Theta,
    /// Print the result as JSON (`aggregate_bps` at the top level).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct SweepArgs {
    #[command(flatten)]
    theta: Theta,
    /// A swept parameter: NAME=V1,V2,... or NAME=START:END:STEP or NAME=START:END:xFACTOR (repeatable).
    #[arg(long = "vary", required = true)]
    vary: Vec<String>,
    /// Repetitions per grid point.
    #[arg(long, default_value_t = 1)]
    reps: u32,
    /// Output directory for the CSV and SVG files.
    #[arg(long, default_value = ".")]
    out: PathBuf,
    /// File stem of the outputs.
    #[arg(long, default_value = "profile")]
    name: String,
}

#[derive(clap::Args, Debug)]
struct TuneArgs {
    #[command(flatten)]
    theta: Theta,
    /// Block range in payloads (m - 16), MIN:MAX.
    #[arg(long, default_value = "1:25")]
    block_range: String,
    /// Buffer range in bytes, MIN:MAX.
    #[arg(long, default_value = "1M:1G")]
    buffer_range: String,
    /// Map buffer iterates exponentially (2^f') instead of linearly.
    #[arg(long)]
    buffer_exp: bool,
    /// Target bandwidth B for the gain-ratio stop rule, a rate such as 9gbit.
    #[arg(long, value_parser = parse_rate_bits)]
    target: Option<u64>,
    /// Gain ratio C: stop when best/B reaches it.
    #[arg(long, default_value_t = 0.90)]
    gain_ratio: f64,
    /// R: stop after this many probes without improvement.
    #[arg(long, default_value_t = 30)]
    patience: usize,
    /// M: most probes (one-time profilings).
    #[arg(long, default_value_t = 60)]
    max_probes: usize,
    /// Seed of the random start point.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seconds to pause between probes.
    #[arg(long, default_value_t = 0.0)]
    pause: f64,
    /// Write the full trace (every probe) as JSON here.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

fn params_of(t: &Theta) -> anyhow::Result<ProfileParams> {
    let nics = match &t.nics {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading NIC pairs from {}", path.display()))?;
            parse_nic_file(&text)?
        }
        None => Vec::new(),
    };
    let p = ProfileParams {
        transport: t.transport,
        streams: t.parallel,
        duration_s: t.time,
        bytes: t.bytes,
        block: t.block,
        packet: t.packet,
        buffer: t.window,
        rate_bps: t.bitrate,
        interval_s: t.interval,
        idle_timeout_s: t.idle_timeout,
        nics,
        affinity: t.affinity.clone(),
        tcp: TcpOptions {
            congestion: t.congestion.clone(),
            mss: t.mss,
            pacing: t.pacing.map(|b| b / 8),
        },
        udt: UdtOptions {
            sndbuf: t.udt_sndbuf,
            rcvbuf: t.udt_rcvbuf,
            udp_sndbuf: t.udp_sndbuf,
            udp_rcvbuf: t.udp_rcvbuf,
            maxbw: t.udt_maxbw.map(|b| b / 8),
        },
        plut: PlutOptions {
            controller: t.plut_controller,
            initial_rate: t.plut_initial_rate.map(|b| b / 8),
            max_rate: t.plut_max_rate.map(|b| b / 8),
            session: None,
        },
    };
    p.validate()?;
    Ok(p)
}

fn open_history(t: &Theta) -> Option<Store> {
    if t.no_history {
        return None;
    }
    let path = t.history.clone().unwrap_or_else(Store::default_path);
    Store::open(&path)
        .map_err(|e| tracing::warn!("history not recorded: {e}"))
        .ok()
}

fn record(store: &mut Option<Store>, r: &ProfileReport) {
    if let Some(s) = store.as_mut() {
        if let Err(e) = s.insert(&r.to_record()) {
            tracing::warn!("history not recorded: {e}");
        }
    }
}

/// Runs `haul profile`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Serve(a) => serve(a),
        Command::Run(a) => run_once(a),
        Command::Sweep(a) => run_sweep(a),
        Command::Tune(a) => run_tune(a),
    }
}

fn serve(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let server = haul_profile::Server::bind(a.listen)?;
    let addr = server.local_addr()?;
    println!("haul profile serve: listening on {addr}");
    std::io::stdout().flush()?;
    loop {
        match server.serve_one() {
            Ok(s) => {
                let got: u64 = s
                    .received
                    .as_ref()
                    .map_or(0, |r| r.streams.iter().map(|x| x.bytes).sum());
                let t = s
                    .params
                    .as_ref()
                    .map_or("?".into(), |p| format!("{} -P {}", p.transport, p.streams));
                println!("run from {}: {t}, received {} bytes", s.client, got);
            }
            Err((client, e)) => eprintln!(
                "run from {}: error: {e}",
                client.map_or("?".into(), |c| c.to_string())
            ),
        }
        std::io::stdout().flush()?;
        if a.once {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

fn run_once(a: RunArgs) -> anyhow::Result<ExitCode> {
    let p = params_of(&a.theta)?;
    haul_profile::transport::for_kind(p.transport)?;
    if let Some(w) = p.block_warning() {
        eprintln!("haul: warning: {w}");
    }
    let mut store = open_history(&a.theta);
    let json = a.json;
    if !json {
        println!(
            "Connecting to {} ({}, {} stream{}, block {} B)",
            a.theta.server,
            p.transport,
            p.streams,
            if p.streams == 1 { "" } else { "s" },
            p.block_size()
        );
        println!("{}", report::header());
    }
    let mut print = |iv: &report::Interval| {
        if !json {
            for l in report::interval_lines(iv) {
                println!("{l}");
            }
        }
    };
    let opts = ClientOptions {
        on_interval: Some(&mut print),
        ..ClientOptions::new(&a.theta.server)
    };
    let r = haul_profile::run_client(p, opts)
        .with_context(|| format!("profiling against {}", a.theta.server))?;
    record(&mut store, &r);
    if json {
        println!("{}", r.to_json());
    } else {
        for l in report::summary_lines(&r)
            .into_iter()
            .filter(|l| !l.starts_with("warning:"))
        {
            println!("{l}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_sweep(a: SweepArgs) -> anyhow::Result<ExitCode> {
    let base = params_of(&a.theta)?;
    let axes = a
        .vary
        .iter()
        .map(|s| sweep::parse_axis(s))
        .collect::<Result<Vec<_>, _>>()?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let names: Vec<&str> = axes.iter().map(|x| x.name.as_str()).collect();
    eprintln!(
        "sweep over {} ({} points x {} reps)",
        names.join(" x "),
        sweep::grid(&axes).len(),
        a.reps
    );
    let rows = sweep::run(&base, &a.theta.server, &axes, a.reps, |r| {
        let vals: Vec<String> = names
            .iter()
            .zip(&r.values)
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        match &r.error {
            None => eprintln!(
                "  {} rep {}: {}",
                vals.join(" "),
                r.rep,
                report::fmt_rate(r.aggregate_bps)
            ),
            Some(e) => eprintln!("  {} rep {}: error: {e}", vals.join(" "), r.rep),
        }
    })?;
    let csv = a.out.join(format!("{}.csv", a.name));
    sweep::write_csv(&csv, &axes, &rows)?;
    let title = format!("{} profile ({})", base.transport, a.theta.server);
    let mut files = vec![csv];
    files.extend(haul_profile::plot::line_plots(
        &a.out, &a.name, &title, &axes, &rows,
    )?);
    if axes.len() == 2 {
        let hm = a.out.join(format!("{}-heatmap.svg", a.name));
        haul_profile::plot::heat_map(&hm, &title, &axes, &rows)?;
        files.push(hm);
    }
    for f in files {
        println!("{}", f.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn range(
    s: &str,
    flag: &str,
    parse: impl Fn(&str) -> Result<f64, String>,
) -> anyhow::Result<(f64, f64)> {
    let (a, b) = s
        .split_once(':')
        .with_context(|| format!("{flag}: expected MIN:MAX, got {s:?}"))?;
    let (a, b) = (
        parse(a).map_err(anyhow::Error::msg)?,
        parse(b).map_err(anyhow::Error::msg)?,
    );
    anyhow::ensure!(a < b, "{flag}: MIN must be below MAX in {s:?}");
    Ok((a, b))
}

fn run_tune(a: TuneArgs) -> anyhow::Result<ExitCode> {
    let base = params_of(&a.theta)?;
    let mut store = open_history(&a.theta);
    anyhow::ensure!(
        a.pause >= 0.0 && a.pause.is_finite(),
        "--pause must be >= 0"
    );
    let cfg = tune::TuneConfig {
        block_payloads: range(&a.block_range, "--block-range", |v| {
            v.parse::<f64>().map_err(|e| format!("{v:?}: {e}"))
        })?,
        buffer: range(&a.buffer_range, "--buffer-range", |v| {
            parse_bytes(v).map(|b| b as f64)
        })?,
        buffer_exponential: a.buffer_exp,
        target_bps: a.target.map(|t| t as f64),
        gain_ratio: a.gain_ratio,
        patience: a.patience,
        budget: a.max_probes,
        seed: a.seed,
        pause: Duration::from_secs_f64(a.pause),
    };
    let json = a.json;
    let result = tune::run(&base, &a.theta.server, &cfg, |i, p, r| match r {
        Ok(r) => {
            record(&mut store, r);
            if !json {
                let buf = p.udt.sndbuf.or(p.buffer).unwrap_or(0);
                eprintln!(
                    "probe {:3}: block {:>8} buffer {:>11}: {}",
                    i + 1,
                    p.block_size(),
                    buf,
                    report::fmt_rate(r.aggregate_bps)
                );
            }
        }
        Err(e) => eprintln!("probe {:3}: error: {e}", i + 1),
    })?;
    if let Some(path) = &a.trace {
        std::fs::write(path, result.trace.to_json())
            .with_context(|| format!("writing the trace to {}", path.display()))?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else if let (Some(b), Some(p)) = (&result.best, &result.best_params) {
        let buf = p.udt.sndbuf.or(p.buffer).unwrap_or(0);
        println!(
            "best: block {} B, buffer {buf} B: {} ({} probes, stop: {:?})",
            p.block_size(),
            report::fmt_rate(b.y),
            result.trace.probes.len(),
            result.trace.stop
        );
    } else {
        println!("no successful probe");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_rate_bits;

    #[test]
    fn bit_rates_say_their_unit() {
        assert_eq!(parse_rate_bits("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate_bits("2.5Gb/s"), Ok(2_500_000_000));
        assert_eq!(parse_rate_bits("62.5MB/s"), Ok(500_000_000));
        assert!(parse_rate_bits("500M").unwrap_err().contains("ambiguous"));
        assert!(parse_rate_bits("fast").is_err());
    }
}
