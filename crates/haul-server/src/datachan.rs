//! A session's data channels: how they are set up (PORT / PASV and their kin), who may be at
//! their other end, and the watch kept over a data phase.
//!
//! Peers: a data connection is made only to, and accepted only from, the address of the client's
//! own control connection, unless the user holds the third-party permission (server-to-server
//! copies with another host). `PORT`/`EPRT`/`SPOR` naming another host, or a privileged port,
//! are refused (RFC 2577's bounce attack); a connection to the passive port from another address
//! is closed unread and the real one still awaited, so a thief that connects first gets nothing
//! and spoils nothing. Every transfer opens or accepts at most the server's parallelism limit.
//!
//! Token: a client that asked for one with `DTOK` (a haul extension) has every data connection
//! carry the session's token as its first 16 bytes (inside TLS under `PROT P`), which keeps out
//! other processes on the client's own host too.
//!
//! Watch: while data moves on a worker thread, the session thread sends markers, and cuts the
//! phase short (shuts its sockets down, so blocked reads and writes return at once) when the
//! client closes its control connection, sends `ABOR`, or no byte has moved for the data
//! timeout.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use haul_proto::{PerfMarker, Reply};
use haul_transport::mode_e::{Acceptor, Progress};
use haul_transport::net::{DataListener, NetStack, RawConn};
use haul_transport::token::DataToken;
use haul_transport::{tls, Conn, Cutter};

use crate::control::Control;

/// How long connecting to a PORT address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// How often a data phase's watcher looks at the client and the progress.
const TICK: Duration = Duration::from_millis(200);

/// Most ranges listed in one 111 restart marker: the lowest ones (any subset of what was written
/// is a correct restart marker; the client re-sends the rest).
const MARKER_RANGES: usize = 256;

/// How the next transfer's data connections are made.
#[derive(Default)]
pub enum Setup {
    /// Nothing set up yet.
    #[default]
    None,
    /// PORT / EPRT / SPOR: the client listens at these addresses.
    Active(Vec<SocketAddr>),
    /// PASV / EPSV / SPAS: we listen.
    Passive(DataListener),
}

/// A session's data-channel set-up and cached MODE E connections.
#[derive(Default)]
pub struct DataState {
    /// How new connections are made.
    pub setup: Setup,
    /// MODE E connections kept from the last transfer.
    pub cached: Vec<Conn>,
    /// Streams to open when sending (OPTS RETR Parallelism).
    pub parallelism: usize,
    /// What carries new data connections (`SITE SETNETSTACK`).
    pub stack: NetStack,
}

impl DataState {
    /// Drops the cached MODE E connections.
    pub fn drop_cached(&mut self) {
        self.cached.clear();
    }

    /// Drops cached connections and any PORT / PASV set-up.
    pub fn drop_all(&mut self) {
        self.cached.clear();
        self.setup = Setup::None;
    }
}

pub use haul_proto::server::Peers;

/// Cuts a data phase short: holds a second handle of every data socket the phase uses and shuts
/// them all down on [`Cut::cut`].
#[derive(Default)]
pub struct Cut {
    socks: Mutex<Vec<Cutter>>,
    why: Mutex<Option<String>>,
}

impl Cut {
    /// Watches `conn` for the rest of the phase (a connection held after a cut is cut at once).
    pub fn hold(&self, conn: &Conn) {
        if let Ok(c) = conn.cutter() {
            self.hold_cutter(c);
        }
    }

    /// Watches the connection `c` cuts for the rest of the phase.
    pub fn hold_cutter(&self, c: Cutter) {
        if self.reason().is_some() {
            c.cut();
        }
        self.socks.lock().unwrap_or_else(|p| p.into_inner()).push(c);
    }

    /// Ends the phase: records why (the first reason stands) and shuts every socket down.
    pub fn cut(&self, why: impl Into<String>) {
        self.why
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(|| why.into());
        for s in self.socks.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            s.cut();
        }
    }

    /// Why the phase was cut, if it was.
    pub fn reason(&self) -> Option<String> {
        self.why.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The phase's error, in the words of the cut when there was one.
    pub fn explain(&self, e: io::Error) -> io::Error {
        match self.reason() {
            Some(why) => io::Error::new(io::ErrorKind::TimedOut, why),
            None => e,
        }
    }
}

/// How new data connections are made: stack, buffer size, timeouts, TLS (PROT P, this side is
/// the TLS server on every data connection, RFC 4217 §9), and who may be at the other end.
pub struct Dial {
    /// TCP or UDT.
    pub stack: NetStack,
    /// SBUF.
    pub sbuf: Option<usize>,
    /// Read / write timeout of a data socket.
    pub timeout: Duration,
    /// TLS for PROT P.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// GSI for `DCAU A`/`S` on a `gsiftp://` session (before `tls`, which it replaces).
    pub gsi: Option<haul_transport::gsi::DataGsi>,
    /// Who may connect.
    pub peers: Peers,
    /// Most connections one transfer may open or accept.
    pub limit: usize,
    /// The session's data-connection token (`DTOK`), if the client asked for one.
    pub token: Option<DataToken>,
    /// The local address the client reached the server at: data connections leave from it.
    pub from: Option<std::net::IpAddr>,
}

impl Dial {
    /// Prepares a new connection: timeouts, TLS, and the token (sent on connections this side
    /// opened, checked on those it accepted).
    fn wrap(&self, raw: RawConn, cut: &Cut, opened: bool) -> io::Result<Conn> {
        // A little longer than the watch's stall limit, so that the watch, which says why,
        // ends a stalled phase before a socket timeout does.
        let timeout = self.timeout + 5 * TICK;
        raw.set_timeouts(Some(timeout), Some(timeout))?;
        // Held from the start, so the watcher can cut a handshake that stalls; cut at once if
        // the connection is refused, since the cut's handle would keep it open.
        let own = raw.cutter()?;
        cut.hold_cutter(raw.cutter()?);
        let r = (|| {
            let mut conn: Conn = match (&self.gsi, &self.tls) {
                (Some(g), _) => g.handshake(raw.into_tcp()?, !opened)?,
                (None, Some(cfg)) => Box::new(tls::accept(cfg.clone(), raw.into_tcp()?)?),
                (None, None) => raw.into_conn(),
            };
            match (&self.token, opened) {
                (Some(t), true) => t.present(&mut conn)?,
                (Some(t), false) => t.check(&mut conn, timeout)?,
                (None, _) => {}
            }
            Ok(conn)
        })();
        if r.is_err() {
            own.cut();
        }
        r
    }

    /// Whether a wrap failed because the connection lacked the token (it is then refused and
    /// the wait goes on, as for a connection from another host).
    fn refused(e: &io::Error) -> bool {
        e.kind() == io::ErrorKind::PermissionDenied
    }

    /// Connects to `addr` (already checked against the peers when PORT named it).
    pub fn connect(&self, addr: SocketAddr, cut: &Cut) -> io::Result<Conn> {
        if let Some(why) = cut.reason() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, why));
        }
        let raw = RawConn::connect_from(self.stack, addr, self.from, self.sbuf, CONNECT_TIMEOUT)?;
        self.wrap(raw, cut, true)
    }

    /// Accepts one connection from an allowed peer, closing any other, until the phase is cut.
    pub fn accept(&self, l: &DataListener, cut: &Cut) -> io::Result<Conn> {
        loop {
            if let Some(why) = cut.reason() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, why));
            }
            if let Some(tcp) = self.accept_allowed(l, TICK)? {
                match self.wrap(tcp, cut, false) {
                    Err(e) if Dial::refused(&e) => {
                        tracing::warn!(error = %e, "data connection refused")
                    }
                    r => return r,
                }
            }
        }
    }

    /// Waits up to `wait` for one connection from an allowed peer; None if none came.
    fn accept_allowed(&self, l: &DataListener, wait: Duration) -> io::Result<Option<RawConn>> {
        match l.accept_timeout(wait) {
            Ok((tcp, from)) if self.peers.allows(from.ip()) => Ok(Some(tcp)),
            Ok((tcp, from)) => {
                tracing::warn!(%from, client = %self.peers.client, "data connection from another host refused");
                drop(tcp);
                Ok(None)
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens `n` (at most the limit) new data connections in the direction `setup` allows.
    pub fn open(&self, setup: &Setup, n: usize, cut: &Cut) -> io::Result<Vec<Conn>> {
        let n = n.clamp(1, self.limit.max(1));
        match setup {
            // Secured connections are set up side by side: each handshake costs round trips
            // and signatures, which n in a row would add up.
            Setup::Active(addrs) if n > 1 && (self.gsi.is_some() || self.tls.is_some()) => {
                std::thread::scope(|s| {
                    let handles: Vec<_> = (0..n)
                        .map(|i| {
                            let addr = addrs[i % addrs.len()];
                            s.spawn(move || self.connect(addr, cut))
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| {
                            h.join().unwrap_or_else(|_| {
                                Err(io::Error::other("data connection set-up panicked"))
                            })
                        })
                        .collect()
                })
            }
            Setup::Active(addrs) => (0..n)
                .map(|i| self.connect(addrs[i % addrs.len()], cut))
                .collect(),
            Setup::Passive(l) => (0..n).map(|_| self.accept(l, cut)).collect(),
            Setup::None => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "no PORT or PASV given",
            )),
        }
    }
}

/// Accepts further MODE E connections on the passive listener during a receive, from allowed
/// peers and up to the limit.
pub struct ListenAcceptor<'a> {
    /// The passive listener.
    pub listener: &'a DataListener,
    /// How connections are wrapped and who may connect.
    pub dial: &'a Dial,
    /// The phase's cut.
    pub cut: &'a Cut,
    /// Connections accepted so far (with the cached ones the receive started with).
    pub accepted: AtomicUsize,
}

impl Acceptor for ListenAcceptor<'_> {
    fn accept(&self, wait: Duration) -> io::Result<Option<Conn>> {
        if let Some(why) = self.cut.reason() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, why));
        }
        let Some(tcp) = self.dial.accept_allowed(self.listener, wait)? else {
            return Ok(None);
        };
        if self.accepted.fetch_add(1, Ordering::Relaxed) >= self.dial.limit {
            tracing::warn!(
                limit = self.dial.limit,
                "data connection over the per-transfer limit refused"
            );
            return Ok(None);
        }
        match self.dial.wrap(tcp, self.cut, false) {
            Err(e) if Dial::refused(&e) => {
                tracing::warn!(error = %e, "data connection refused");
                Ok(None)
            }
            r => r.map(Some),
        }
    }
}

fn perf_marker(progress: &Progress) -> Reply {
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let m = PerfMarker {
        timestamp,
        stripe_index: 0,
        stripe_bytes: progress.bytes(),
        total_stripes: 1,
    };
    Reply::multi(112, m.to_lines())
}

/// Sends the 112 performance marker and the 111 restart marker (GFD.020 §4), the latter with at
/// most [`MARKER_RANGES`] ranges.
pub fn send_markers(ctl: &mut Control, progress: &Progress) -> io::Result<()> {
    ctl.send(&perf_marker(progress))?;
    let mut ranges = progress.ranges();
    if ranges.ranges().len() > MARKER_RANGES {
        let mut lowest = haul_proto::RangeSet::new();
        for &(a, b) in &ranges.ranges()[..MARKER_RANGES] {
            lowest.insert(a, b);
        }
        ranges = lowest;
    }
    if !ranges.is_empty() {
        ctl.reply(111, format!("Range Marker {ranges}"))?;
    }
    Ok(())
}

/// The limits a watched phase runs under.
pub struct Watch {
    /// Send 112/111 markers at this interval (receives).
    pub markers: Option<Duration>,
    /// Cut the phase when no byte moved for this long.
    pub stall: Duration,
}

/// Runs a data phase (`work`) on a worker thread while this thread keeps watch (see the module
/// comment); returns what `work` returned.
pub fn watched<T: Send>(
    ctl: &mut Control,
    progress: &Progress,
    cut: &Cut,
    watch: &Watch,
    work: impl FnOnce() -> T + Send,
) -> io::Result<T> {
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let worker = s.spawn(move || {
            let _done = tx;
            work()
        });
        let tick = watch.markers.map_or(TICK, |m| m.min(TICK));
        let (mut last_marker, mut last_move, mut last_bytes) =
            (Instant::now(), Instant::now(), progress.bytes());
        while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(tick) {
            if let Some(every) = watch.markers {
                if last_marker.elapsed() >= every {
                    last_marker = Instant::now();
                    if let Err(e) = send_markers(ctl, progress) {
                        tracing::debug!(error = %e, "marker not sent");
                    }
                }
            }
            let bytes = progress.bytes();
            if bytes != last_bytes {
                (last_bytes, last_move) = (bytes, Instant::now());
            } else if last_move.elapsed() >= watch.stall {
                cut.cut(format!("no data moved for {} s", watch.stall.as_secs_f64()));
            }
            if ctl.client_gone(Duration::ZERO) {
                cut.cut("the client closed its control connection");
            }
            if ctl.abor_pending() {
                cut.cut("aborted by the client (ABOR)");
            }
        }
        worker
            .join()
            .map_err(|_| io::Error::other("data thread panicked"))
    })
}
