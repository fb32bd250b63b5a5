//! The profiling client (sender): drives the control flow, connects the data channels, runs one
//! sender thread per stream and samples the report intervals.

use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::streams::{self, counters, SendJob};
use super::{flush, read_some};
use crate::report::{Interval, ProfileReport};
use crate::tpg::{Client, ClientEvent, SideReport};
use crate::transport::{self, Channel};
use crate::{ProfileError, ProfileParams, Result, TransportKind};

/// Default control port (iperf3's).
pub const DEFAULT_PORT: u16 = 5201;

/// How the client reaches the server and reports progress.
pub struct ClientOptions<'a> {
    /// `HOST[:PORT]` (port 5201 when absent).
    pub server: String,
    /// Control and data connect timeout.
    pub connect_timeout: Duration,
    /// Called after every report interval.
    pub on_interval: Option<&'a mut dyn FnMut(&Interval)>,
}

impl ClientOptions<'_> {
    /// Options for `server` with a 10 s connect timeout and no interval callback.
    pub fn new(server: &str) -> ClientOptions<'static> {
        ClientOptions {
            server: server.to_string(),
            connect_timeout: Duration::from_secs(10),
            on_interval: None,
        }
    }
}

/// Resolves `HOST[:PORT]`, `[v6]:PORT` or a bare address.
pub fn resolve(server: &str) -> Result<SocketAddr> {
    let with_port = if server.parse::<SocketAddr>().is_ok()
        || server
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.contains(':') && p.parse::<u16>().is_ok())
    {
        server.to_string()
    } else if server.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv6()) {
        format!("[{server}]:{DEFAULT_PORT}")
    } else {
        format!("{server}:{DEFAULT_PORT}")
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| ProfileError::io(format!("resolving {server}"), e))?
        .next()
        .ok_or_else(|| ProfileError::param("HOST", format!("{server} resolves to no address")))
}

/// Runs one profiling (TPG steps 2–13) against the server and returns the combined report.
pub fn run_client(mut params: ProfileParams, mut opts: ClientOptions<'_>) -> Result<ProfileReport> {
    params.validate()?;
    if params.transport == TransportKind::Plut && params.plut.session.is_none() {
        // The PLUT session id, agreed in PARAMS: datagrams of other runs are dropped.
        params.plut.session = Some(rand::random());
    }
    let t = transport::for_kind(params.transport)?;
    t.init(&params.channel())?;
    let warnings: Vec<String> = params.block_warning().into_iter().collect();
    let addr = resolve(&opts.server)?;
    let peer = addr.to_string();
    let mut ctl = TcpStream::connect_timeout(&addr, opts.connect_timeout)
        .map_err(|e| ProfileError::io(format!("control connection to {addr}"), e))?;
    let _ = ctl.set_nodelay(true);
    let budget =
        Duration::from_secs_f64(params.duration_s.min(86_400.0) + params.idle_timeout_s + 60.0);
    ctl.set_read_timeout(Some(budget))
        .map_err(|e| ProfileError::io("control read timeout", e))?;
    let started_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut m = Client::new(params);
    let mut buf = vec![0u8; 64 * 1024];
    let mut channels: Vec<Box<dyn Channel>> = Vec::new();
    let mut addrs = Vec::new();
    let mut accepted = ProfileParams::default();
    let mut sender = SideReport::default();
    let mut intervals = Vec::new();
    loop {
        let n = read_some(&mut ctl, &mut buf, &peer)?;
        let events = match m.feed(&buf[..n]) {
            Ok(ev) => ev,
            Err(e) => {
                let _ = flush(&mut ctl, &m.transmit(), &peer);
                return Err(e);
            }
        };
        for ev in events {
            let step = match ev {
                ClientEvent::ConnectStreams { params, ports } => {
                    accepted = *params;
                    connect_all(
                        &*t,
                        &accepted,
                        addr.ip(),
                        &ports,
                        opts.connect_timeout,
                        &mut channels,
                        &mut addrs,
                    )
                    .and_then(|()| m.streams_connected())
                }
                ClientEvent::StartTransfer => {
                    let chans = std::mem::take(&mut channels);
                    send_all(&accepted, chans, &mut opts, &mut intervals).and_then(|r| {
                        sender = r;
                        m.transfer_done()
                    })
                }
                ClientEvent::TransferEnded => m.send_results(sender.clone()),
                ClientEvent::Finished(receiver) => {
                    flush(&mut ctl, &m.transmit(), &peer)?;
                    return Ok(ProfileReport::build(
                        &opts.server,
                        accepted,
                        started_at,
                        &sender,
                        &receiver,
                        &addrs,
                        intervals,
                        warnings,
                    ));
                }
            };
            if let Err(e) = step {
                m.fail(&e.to_string());
                let _ = flush(&mut ctl, &m.transmit(), &peer);
                return Err(e);
            }
        }
        flush(&mut ctl, &m.transmit(), &peer)?;
    }
}

fn connect_all(
    t: &dyn transport::Connector,
    p: &ProfileParams,
    server_ip: IpAddr,
    ports: &[u16],
    timeout: Duration,
    out: &mut Vec<Box<dyn Channel>>,
    addrs: &mut Vec<(String, String)>,
) -> Result<()> {
    let cp = p.channel();
    for (i, port) in ports.iter().enumerate() {
        let nic = (!p.nics.is_empty()).then(|| p.nics[i % p.nics.len()]);
        let remote = SocketAddr::new(nic.map_or(server_ip, |n| n.dst), *port);
        out.push(t.connect(&cp, nic.map(|n| n.src), remote, timeout)?);
        addrs.push((
            nic.map_or("default".to_string(), |n| n.src.to_string()),
            remote.to_string(),
        ));
    }
    Ok(())
}

/// Runs every sender thread and samples the counters each interval.
fn send_all(
    p: &ProfileParams,
    chans: Vec<Box<dyn Channel>>,
    opts: &mut ClientOptions<'_>,
    intervals: &mut Vec<Interval>,
) -> Result<SideReport> {
    let n = chans.len();
    let ctr = counters(n);
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let handles: Vec<_> = chans
        .into_iter()
        .enumerate()
        .map(|(index, channel)| {
            let (p, ctr, stop) = (p.clone(), ctr.clone(), stop.clone());
            let quota = p.bytes.map(|b| streams::quota(b, n, index));
            std::thread::spawn(move || {
                let r = streams::run_sender(
                    &p,
                    SendJob {
                        index,
                        channel,
                        quota,
                    },
                    start,
                    &ctr,
                    &stop,
                );
                if r.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                r
            })
        })
        .collect();
    let step = (p.interval_s > 0.0).then(|| Duration::from_secs_f64(p.interval_s));
    let mut last = vec![0u64; n];
    let mut t0 = 0.0;
    let mut k = 1u32;
    while !handles.iter().all(|h| h.is_finished()) {
        let Some(step) = step else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let due = start + step * k;
        let now = Instant::now();
        if now < due {
            std::thread::sleep((due - now).min(Duration::from_millis(20)));
            continue;
        }
        let t1 = start.elapsed().as_secs_f64();
        let cur: Vec<u64> = ctr.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let stream_bytes: Vec<u64> = cur.iter().zip(&last).map(|(c, l)| c - l).collect();
        let bytes = stream_bytes.iter().sum::<u64>();
        let iv = Interval {
            start_s: t0,
            end_s: t1,
            bps: bytes as f64 * 8.0 / (t1 - t0).max(1e-9),
            stream_bytes,
            bytes,
        };
        if let Some(cb) = opts.on_interval.as_mut() {
            cb(&iv);
        }
        intervals.push(iv);
        last = cur;
        t0 = t1;
        k += 1;
    }
    let mut sides = Vec::with_capacity(n);
    for h in handles {
        sides.push(
            h.join()
                .map_err(|_| ProfileError::Protocol("a sender thread panicked".into()))??,
        );
    }
    Ok(SideReport {
        duration_s: start.elapsed().as_secs_f64(),
        streams: sides,
    })
}
