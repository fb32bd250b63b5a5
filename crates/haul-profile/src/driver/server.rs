//! The profiling server (receiver): one client at a time; it listens on one data channel per
//! stream, runs one receiver thread per stream, and resets for the next run (TPG step 10).

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::streams::{self, counters};
use super::{flush, read_some};
use crate::tpg::{self, ServerEvent, SideReport, StreamSide};
use crate::transport::{self, Connector, Listener};
use crate::{ProfileError, ProfileParams, Result};

/// How long the server waits for each data connection after PROFILING_START.
const ACCEPT_TIMEOUT: Duration = Duration::from_secs(10);

/// What one served run did.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// The client's control address.
    pub client: SocketAddr,
    /// θ of the run (if it got that far).
    pub params: Option<ProfileParams>,
    /// The receiver-side results (if the run completed).
    pub received: Option<SideReport>,
}

/// A `haul profile serve` instance.
pub struct Server {
    listener: TcpListener,
}

type Receivers = Vec<JoinHandle<Result<StreamSide>>>;

/// Per-run state of the server driver.
struct Run {
    params: Option<ProfileParams>,
    transport: Option<Box<dyn Connector>>,
    listeners: Vec<Box<dyn Listener>>,
    receivers: Receivers,
    stop: Arc<AtomicBool>,
    start: Instant,
    received: Option<SideReport>,
}

impl Server {
    /// Binds the control listener.
    pub fn bind(addr: SocketAddr) -> Result<Server> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| ProfileError::io(format!("listen on {addr}"), e))?;
        Ok(Server { listener })
    }

    /// The bound control address.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| ProfileError::io("control listener address", e))
    }

    /// Serves runs forever, calling `on_run` after each one (successful or not).
    pub fn serve(
        &self,
        mut on_run: impl FnMut(std::result::Result<RunSummary, (Option<SocketAddr>, ProfileError)>),
    ) {
        loop {
            on_run(self.serve_one());
        }
    }

    /// Accepts one control connection and serves one run.
    pub fn serve_one(&self) -> std::result::Result<RunSummary, (Option<SocketAddr>, ProfileError)> {
        let (ctl, client) = self
            .listener
            .accept()
            .map_err(|e| (None, ProfileError::io("accept control connection", e)))?;
        let mut run = Run {
            params: None,
            transport: None,
            listeners: Vec::new(),
            receivers: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            start: Instant::now(),
            received: None,
        };
        let r = serve_conn(ctl, client, &mut run);
        run.stop.store(true, Ordering::Relaxed);
        for h in run.receivers.drain(..) {
            let _ = h.join();
        }
        r.map(|()| RunSummary {
            client,
            params: run.params,
            received: run.received,
        })
        .map_err(|e| (Some(client), e))
    }
}

fn serve_conn(mut ctl: TcpStream, client: SocketAddr, run: &mut Run) -> Result<()> {
    let peer = client.to_string();
    let local_ip = ctl
        .local_addr()
        .map_err(|e| ProfileError::io("control socket address", e))?
        .ip();
    let _ = ctl.set_nodelay(true);
    ctl.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| ProfileError::io("control read timeout", e))?;
    let mut m = tpg::Server::new();
    flush(&mut ctl, &m.transmit(), &peer)?;
    let mut buf = vec![0u8; 64 * 1024];
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
            if ev == ServerEvent::Finished {
                flush(&mut ctl, &m.transmit(), &peer)?;
                return Ok(());
            }
            if let ServerEvent::Configure(p) = &ev {
                let budget = p.duration_s.min(86_400.0) + p.idle_timeout_s + 60.0;
                let _ = ctl.set_read_timeout(Some(Duration::from_secs_f64(budget)));
            }
            if let Err(e) = handle(ev, &mut m, run, local_ip) {
                m.fail(&e.to_string());
                let _ = flush(&mut ctl, &m.transmit(), &peer);
                return Err(e);
            }
        }
        flush(&mut ctl, &m.transmit(), &peer)?;
    }
}

fn handle(ev: ServerEvent, m: &mut tpg::Server, run: &mut Run, local_ip: IpAddr) -> Result<()> {
    match ev {
        ServerEvent::Configure(p) => {
            p.validate()?;
            let t = transport::for_kind(p.transport)?;
            t.init(&p.channel())?;
            run.transport = Some(t);
            run.params = Some((*p).clone());
            m.params_accepted(*p)
        }
        ServerEvent::CreateStreams => {
            let (p, t) = parts(run)?;
            let cp = p.channel();
            let mut ports = Vec::new();
            let mut listeners = Vec::new();
            for i in 0..p.streams as usize {
                let ip = if p.nics.is_empty() {
                    local_ip
                } else {
                    p.nics[i % p.nics.len()].dst
                };
                let l = t.listen(&cp, SocketAddr::new(ip, 0))?;
                ports.push(l.port());
                listeners.push(l);
            }
            run.listeners = listeners;
            m.listening(ports)
        }
        ServerEvent::Start => {
            let p = run
                .params
                .clone()
                .ok_or_else(|| ProfileError::Protocol("START before PARAMS".into()))?;
            let mut chans = Vec::new();
            for l in run.listeners.iter_mut() {
                chans.push(l.accept(ACCEPT_TIMEOUT)?);
            }
            run.listeners.clear();
            let ctr = counters(chans.len());
            run.start = Instant::now();
            for (i, ch) in chans.into_iter().enumerate() {
                let (p, ctr, stop, start) = (p.clone(), ctr.clone(), run.stop.clone(), run.start);
                run.receivers.push(std::thread::spawn(move || {
                    streams::run_receiver(&p, i, ch, start, &ctr, &stop)
                }));
            }
            m.started()
        }
        ServerEvent::End => {
            run.stop.store(true, Ordering::Relaxed);
            let mut sides = Vec::new();
            for h in run.receivers.drain(..) {
                sides.push(
                    h.join().map_err(|_| {
                        ProfileError::Protocol("a receiver thread panicked".into())
                    })??,
                );
            }
            let duration_s = sides.iter().map(|s| s.seconds).fold(0.0, f64::max);
            run.received = Some(SideReport {
                streams: sides,
                duration_s,
            });
            m.ended()
        }
        ServerEvent::Exchange(_) => m.results(run.received.clone().unwrap_or_default()),
        ServerEvent::Finished => Ok(()),
    }
}

fn parts(run: &Run) -> Result<(&ProfileParams, &dyn Connector)> {
    match (&run.params, &run.transport) {
        (Some(p), Some(t)) => Ok((p, t.as_ref())),
        _ => Err(ProfileError::Protocol(
            "CREATE_STREAMS before PARAMS".into(),
        )),
    }
}
