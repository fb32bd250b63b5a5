//! Data channels of a session and the transfer commands that use them, following what real
//! Globus peers do (docs/globus-interop.md §3): in MODE E the sender always connects, data
//! connections are cached after a transfer and reused by the next one (`125`), and the EOF
//! block announces the EOD count (GFD.020 §3). MODE S is RFC 959 stream mode, one connection
//! per transfer, closed to mark the end.
//!
//! Uploads never damage an existing file on failure: a plain STOR writes `.<name>.haul-part`
//! next to the target and renames it over the target only after every EOD arrived; a failed
//! upload leaves the part file for a restart (`REST <ranges>` + STOR continues it). `ESTO` and
//! `APPE` write in place, as their callers asked for.

use std::fs::{self, OpenOptions};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use haul_proto::command::{Restart, TransferMode};
use haul_proto::hostport::format_port;
use haul_proto::{Command, PerfMarker, RangeSet, Reply};
use haul_transport::io::{Null, Sink, Source, Zero};
use haul_transport::mode_e::{self, Acceptor, Progress};
use haul_transport::{socket, stream, tls, Conn};
use haul_xfer::checksum::{Algorithm, HashingSink, HashingSource};

use crate::control::Control;
use crate::listing;
use crate::session::{fs_error, FileId, KnownDigest, Session};
use crate::vfs::{Target, Vfs};

/// How long connecting to a PORT address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// Which passive command was given.
pub enum Passive {
    /// PASV (RFC 959).
    Pasv,
    /// EPSV (RFC 2428).
    Epsv,
    /// SPAS (GFD.020 striped passive).
    Spas,
}

/// Which listing command was given.
pub enum ListKind {
    /// LIST: `ls -l` lines.
    List,
    /// NLST: names.
    Nlst,
    /// MLSD: RFC 3659 facts.
    Mlsd,
}

/// How an upload writes its file.
pub enum WriteKind {
    /// STOR: replace the file (through a part file).
    Stor,
    /// APPE: append to the file.
    Appe,
    /// ESTO A offset: write in place at offset + block offset (GFD.020).
    Esto(u64),
}

#[derive(Default)]
enum Setup {
    #[default]
    None,
    Active(Vec<SocketAddr>),
    Passive(TcpListener),
}

/// A session's data-channel set-up and cached MODE E connections.
#[derive(Default)]
pub struct DataState {
    setup: Setup,
    cached: Vec<Conn>,
    /// Streams to open when sending (OPTS RETR Parallelism).
    pub parallelism: usize,
    /// TCP buffer size for new data connections (SBUF).
    pub sbuf: Option<usize>,
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

    /// PORT / EPRT / SPOR: the peer listens at `addrs`.
    pub fn set_active(&mut self, ctl: &mut Control, addrs: Vec<SocketAddr>, verb: &str) -> io::Result<()> {
        self.drop_all();
        self.setup = Setup::Active(addrs);
        ctl.reply(200, format!("{verb} Command successful."))
    }
}

/// How new data connections are made: buffer size, timeouts, TLS (PROT P, this side is the
/// TLS server on every data connection, RFC 4217 §9).
struct Dial {
    sbuf: Option<usize>,
    timeout: Duration,
    tls: Option<Arc<rustls::ServerConfig>>,
}

impl Dial {
    fn wrap(&self, tcp: TcpStream) -> io::Result<Conn> {
        tcp.set_read_timeout(Some(self.timeout))?;
        tcp.set_write_timeout(Some(self.timeout))?;
        Ok(match &self.tls {
            Some(cfg) => Box::new(tls::accept(cfg.clone(), tcp)?),
            None => Box::new(tcp),
        })
    }

    fn connect(&self, addr: SocketAddr) -> io::Result<Conn> {
        self.wrap(socket::connect(addr, self.sbuf, CONNECT_TIMEOUT)?)
    }

    fn accept(&self, l: &TcpListener) -> io::Result<Conn> {
        self.wrap(socket::accept_timeout(l, self.timeout)?.0)
    }
}

/// Accepts further MODE E connections on the passive listener during a receive.
struct ListenAcceptor<'a> {
    listener: &'a TcpListener,
    dial: &'a Dial,
    deadline: Instant,
    have_conns: AtomicBool,
}

impl Acceptor for ListenAcceptor<'_> {
    fn accept(&self, wait: Duration) -> io::Result<Option<Conn>> {
        match socket::accept_timeout(self.listener, wait) {
            Ok((tcp, _)) => {
                self.have_conns.store(true, Ordering::Relaxed);
                self.dial.wrap(tcp).map(Some)
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                if !self.have_conns.load(Ordering::Relaxed) && Instant::now() > self.deadline {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "no data connection arrived in time"));
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

/// A byte range of another source seen from 0 (ERET) or a sink written at an offset (ESTO).
struct Shifted<'a, T: ?Sized>(&'a T, u64);

impl<T: Source + ?Sized> Source for Shifted<'_, T> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, self.1 + offset)
    }
}

impl<T: Sink + ?Sized> Sink for Shifted<'_, T> {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_at(buf, self.1 + offset)
    }
}

/// Listing bytes as a source.
struct Bytes(Vec<u8>);

impl Source for Bytes {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = (offset as usize).min(self.0.len());
        let n = buf.len().min(self.0.len() - start);
        buf[..n].copy_from_slice(&self.0[start..start + n]);
        Ok(n)
    }
}

/// Hidden part file an upload to `real` goes to before it is renamed into place.
/// Takes an exclusive `flock` on `file` without waiting; false if another holds it. Where the
/// file system does not support `flock`, the write goes ahead unlocked.
fn lock_exclusive(file: &fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor owned by `file`.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EWOULDBLOCK)
}

pub fn part_path(real: &Path) -> PathBuf {
    let name = real.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    real.with_file_name(format!(".{name}.haul-part"))
}

fn perf_marker(progress: &Progress) -> Reply {
    let timestamp = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let m = PerfMarker { timestamp, stripe_index: 0, stripe_bytes: progress.bytes(), total_stripes: 1 };
    Reply::multi(112, m.to_lines())
}

/// Sends the 112 performance marker and the 111 restart marker (GFD.020 §4).
fn send_markers(ctl: &mut Control, progress: &Progress) -> io::Result<()> {
    ctl.send(&perf_marker(progress))?;
    let ranges = progress.ranges();
    if !ranges.is_empty() {
        ctl.reply(111, format!("Range Marker {ranges}"))?;
    }
    Ok(())
}

impl Session<'_> {
    fn dial(&self) -> Dial {
        Dial {
            sbuf: self.data.sbuf,
            timeout: self.shared.cfg.idle_timeout,
            tls: if self.prot_private { self.shared.tls.clone() } else { None },
        }
    }

    /// PASV / EPSV / SPAS: listen for the peer's data connections.
    pub(crate) fn cmd_passive(&mut self, kind: Passive) -> io::Result<()> {
        self.data.drop_all();
        let ip = self.ctl.local_ip()?;
        let l = match socket::listen(SocketAddr::new(ip, 0), self.data.sbuf) {
            Ok(l) => l,
            Err(e) => return self.ctl.reply(425, format!("Can't open data connection: {e}")),
        };
        let addr = l.local_addr()?;
        self.data.setup = Setup::Passive(l);
        match kind {
            Passive::Pasv => self.ctl.reply(227, format!("Entering Passive Mode ({})", format_port(&addr))),
            Passive::Epsv => self.ctl.reply(229, format!("Entering Extended Passive Mode (|||{}|)", addr.port())),
            Passive::Spas => self.ctl.send(&Reply::multi(
                229,
                vec!["Entering Striped Passive Mode.".into(), format!(" {}", format_port(&addr)), "End".into()],
            )),
        }
    }

    /// Replies 425 and returns false when no data channel can be had.
    fn check_setup(&mut self) -> io::Result<bool> {
        if self.mode == TransferMode::Extended && !self.data.cached.is_empty() {
            return Ok(true);
        }
        if matches!(self.data.setup, Setup::None) {
            self.ctl.reply(425, "Can't open data connection: send PORT, EPRT, SPOR, PASV, EPSV or SPAS first.")?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Opens `n` new data connections in the direction the set-up allows.
    fn open_conns(&self, n: usize) -> io::Result<Vec<Conn>> {
        let dial = self.dial();
        match &self.data.setup {
            Setup::Active(addrs) => (0..n).map(|i| dial.connect(addrs[i % addrs.len()])).collect(),
            Setup::Passive(l) => (0..n).map(|_| dial.accept(l)).collect(),
            Setup::None => Err(io::Error::new(io::ErrorKind::NotConnected, "no PORT or PASV given")),
        }
    }

    /// Sends `ranges` of `src`: MODE E over cached or new connections, or MODE S on one.
    /// Returns whether the transfer completed (its `226` is deferred, see `Control::defer`).
    fn send_source(&mut self, src: &dyn Source, ranges: Vec<(u64, u64)>) -> io::Result<bool> {
        if !self.check_setup()? {
            return Ok(false);
        }
        let progress = Progress::default();
        let ranges: Vec<(u64, u64)> = ranges.into_iter().filter(|(a, b)| b > a).collect();
        let result = if self.mode == TransferMode::Extended {
            let mut conns = std::mem::take(&mut self.data.cached);
            if conns.is_empty() {
                self.ctl.reply(150, "Beginning transfer.")?;
                match self.open_conns(self.data.parallelism.max(1)) {
                    Ok(c) => conns = c,
                    Err(e) => return self.ctl.reply(425, format!("Can't open data connection: {e}")).map(|()| false),
                }
            } else {
                self.ctl.reply(125, "Beginning transfer; reusing existing data connection.")?;
            }
            let block = self.shared.cfg.block_size;
            let r = mode_e::send(&mut conns, src, &ranges, block, &progress, false);
            if r.is_ok() {
                self.data.cached = conns;
            }
            r
        } else {
            self.ctl.reply(150, "Opening data connection.")?;
            let conn = match self.open_conns(1).map(|mut v| v.pop()) {
                Ok(Some(c)) => c,
                Ok(None) => return self.ctl.reply(425, "Can't open data connection.").map(|()| false),
                Err(e) => return self.ctl.reply(425, format!("Can't open data connection: {e}")).map(|()| false),
            };
            let start = ranges.first().map_or(0, |r| r.0);
            let end = ranges.last().map_or(0, |r| r.1);
            stream::send(conn, src, start, Some(end), &progress)
        };
        match result {
            Ok(()) => {
                self.ctl.defer_reply(226, "Transfer Complete.");
                Ok(true)
            }
            Err(e) => {
                tracing::warn!(error = %e, "send failed");
                self.ctl.reply(426, format!("Data connection closed: {e}")).map(|()| false)
            }
        }
    }

    /// Receives into `sink` (MODE E blocks at `base` + offset; MODE S from `stream_start`),
    /// sending markers meanwhile. On success the final 112 and 111 are sent and the ranges
    /// written are returned; on failure the error reply has been sent.
    fn receive_into(&mut self, sink: &dyn Sink, base: u64, stream_start: u64) -> io::Result<Option<RangeSet>> {
        if !self.check_setup()? {
            return Ok(None);
        }
        let progress = Progress::default();
        let dial = self.dial();
        let extended = self.mode == TransferMode::Extended;
        let mut conns = std::mem::take(&mut self.data.cached);
        if conns.is_empty() || !extended {
            self.ctl.reply(150, "Beginning transfer.")?;
        } else {
            self.ctl.reply(125, "Beginning transfer; reusing existing data connection.")?;
        }
        if matches!(self.data.setup, Setup::Active(_)) && (conns.is_empty() || !extended) {
            let n = if extended { self.data.parallelism.max(1) } else { 1 };
            match self.open_conns(n) {
                Ok(c) => conns = c,
                Err(e) => return self.ctl.reply(425, format!("Can't open data connection: {e}")).map(|()| None),
            }
        }
        let listener = match &self.data.setup {
            Setup::Passive(l) => Some(l),
            _ => None,
        };
        let acceptor = listener.map(|l| ListenAcceptor {
            listener: l,
            dial: &dial,
            deadline: Instant::now() + self.shared.cfg.idle_timeout,
            have_conns: AtomicBool::new(!conns.is_empty()),
        });
        let shifted = Shifted(sink, base);
        let block = self.shared.cfg.block_size;
        let interval = self.shared.cfg.marker_interval;
        let ctl = &mut self.ctl;
        let (tx, rx) = mpsc::channel::<()>();
        let result: io::Result<Vec<Conn>> = std::thread::scope(|s| {
            let (progress, acceptor, shifted) = (&progress, acceptor.as_ref(), &shifted);
            let worker = s.spawn(move || {
                let _done = tx;
                if extended {
                    let a = acceptor.map(|a| a as &dyn Acceptor);
                    mode_e::receive(conns, a, shifted, progress, None, block).map(|r| r.reusable)
                } else {
                    let conn = match conns.pop() {
                        Some(c) => c,
                        None => match acceptor {
                            Some(a) => a.dial.accept(a.listener)?,
                            None => return Err(io::Error::new(io::ErrorKind::NotConnected, "no data connection")),
                        },
                    };
                    stream::receive(conn, sink, stream_start, progress).map(|_| Vec::new())
                }
            });
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(interval) {
                if let Err(e) = send_markers(ctl, progress) {
                    tracing::debug!(error = %e, "marker not sent");
                }
            }
            worker.join().unwrap_or_else(|_| Err(io::Error::other("receiver thread panicked")))
        });
        match result {
            Ok(reusable) => {
                if extended {
                    self.data.cached = reusable;
                }
                send_markers(&mut self.ctl, &progress)?;
                Ok(Some(progress.ranges()))
            }
            Err(e) => {
                tracing::warn!(error = %e, "receive failed");
                self.ctl.reply(426, format!("Data connection closed: {e}"))?;
                Ok(None)
            }
        }
    }

    /// RETR / ERET: send a file, the missing ranges after REST, or a partial range.
    pub(crate) fn cmd_retr(&mut self, arg: &str, eret: Option<(u64, u64)>) -> io::Result<()> {
        let rest = self.rest.take();
        let Some(target) = self.resolve(arg)? else { return Ok(()) };
        let file;
        let mut id = None;
        let (src, len, virt): (&dyn Source, Option<u64>, String) = match target {
            Target::Zero => (&Zero, None, "/dev/zero".into()),
            Target::Null => return self.ctl.reply(550, "/dev/null: Permission denied (write-only device)"),
            Target::Path { virt, real } => {
                match fs::File::open(&real).and_then(|f| f.metadata().map(|m| (f, m))) {
                    Ok((_, m)) if !m.is_file() => return self.ctl.reply(550, format!("{virt}: not a regular file")),
                    Ok((f, m)) => {
                        file = f;
                        id = Some((FileId::of(&m), real));
                        (&file, Some(m.len()), virt)
                    }
                    Err(e) => return self.ctl.reply(550, fs_error(&virt, &e)),
                }
            }
        };
        if let Some((off, l)) = eret {
            let l = match len {
                Some(n) if off > n => {
                    return self.ctl.reply(550, format!("{virt}: ERET offset {off} lies beyond the end ({n} bytes)"))
                }
                Some(n) => l.min(n - off),
                None => l,
            };
            return self.send_source(&Shifted(src, off), vec![(0, l)]).map(drop);
        }
        let Some(n) = len else {
            return self.ctl.reply(550, format!("{virt}: endless; use ERET P <offset> <length>"));
        };
        let whole = rest.is_none();
        let ranges = match rest {
            None => vec![(0, n)],
            Some(Restart::Offset(o)) => vec![(o.min(n), n)],
            Some(Restart::Ranges(r)) => r.missing(n),
        };
        // A whole file whose checksum the client asks for next: hash the bytes as they are
        // sent, rather than reading the file again for the CKSM.
        let hash = match (whole, id) {
            (true, Some(id)) if id.0.settled() => self.pipelined_cksm(&virt).map(|alg| (alg, id)),
            _ => None,
        };
        let Some((alg, (id, real))) = hash else { return self.send_source(src, ranges).map(drop) };
        let hashing = HashingSource::new(src, alg);
        if self.send_source(&hashing, ranges)? {
            if let Some(hex) = hashing.finish(n) {
                self.known_digest = Some(KnownDigest { virt, real, alg, id, hex });
            }
        }
        Ok(())
    }

    /// The algorithm of a `CKSM` of the whole of `virt` that the client has already sent as
    /// the next command, if it has.
    fn pipelined_cksm(&mut self, virt: &str) -> Option<Algorithm> {
        let cwd = self.cwd.clone();
        let line = self.ctl.peek_line()?;
        match Command::parse(line).ok()? {
            Command::Cksm { algorithm, offset: 0, path, .. } if Vfs::normalize(&cwd, &path) == virt => algorithm.parse().ok(),
            _ => None,
        }
    }

    /// STOR / APPE / ESTO: receive a file, never damaging the target on failure.
    pub(crate) fn cmd_stor(&mut self, arg: &str, kind: WriteKind) -> io::Result<()> {
        let rest = self.rest.take();
        let Some(target) = self.resolve(arg)? else { return Ok(()) };
        let (virt, real) = match target {
            Target::Null => {
                if self.receive_into(&Null, 0, 0)?.is_some() {
                    self.ctl.reply(226, "Transfer Complete.")?;
                }
                return Ok(());
            }
            Target::Zero => return self.ctl.reply(550, "/dev/zero: Permission denied (read-only device)"),
            Target::Path { virt, real } => (virt, real),
        };
        if !self.check_write()? {
            return Ok(());
        }
        if real.is_dir() {
            return self.ctl.reply(550, format!("{virt}: Is a directory"));
        }
        if !self.check_setup()? {
            return Ok(());
        }
        let part = part_path(&real);
        let held_end = |r: &Restart| match r {
            Restart::Offset(o) => *o,
            Restart::Ranges(r) => r.missing(u64::MAX).first().map_or(0, |m| m.0),
        };
        let (path, truncate, base, start) = match (&kind, &rest) {
            (WriteKind::Stor, None) => (part.clone(), true, 0, 0),
            (WriteKind::Stor, Some(r)) => {
                let p = if part.exists() { part.clone() } else { real.clone() };
                (p, false, 0, held_end(r))
            }
            (WriteKind::Appe, _) => {
                let len = fs::metadata(&real).map_or(0, |m| m.len());
                (real.clone(), false, len, len)
            }
            (WriteKind::Esto(o), _) => (real.clone(), false, *o, *o),
        };
        // Not truncating yet: another session may be writing this file, and nothing of its
        // data may be lost before the lock below says so.
        let file = match OpenOptions::new().write(true).create(true).truncate(false).open(&path) {
            Ok(f) => f,
            Err(e) => return self.ctl.reply(550, fs_error(&virt, &e)),
        };
        // One writer per file: two uploads interleaving their blocks in one inode would leave a
        // mix of both, and the digest hashed from one session's blocks would vouch for it. The
        // lock is the open file description's, so it ends with `file` (or a crashed session).
        if !lock_exclusive(&file) {
            return self.ctl.reply(450, format!("{virt}: another upload to this file is in progress"));
        }
        if truncate {
            if let Err(e) = file.set_len(0) {
                return self.ctl.reply(550, fs_error(&virt, &e));
            }
        }
        // A new file whose checksum the client asks for next: hash the blocks as they are
        // written, rather than reading the file back for the CKSM.
        let alg = match (&kind, &rest) {
            (WriteKind::Stor, None) => self.pipelined_cksm(&virt),
            _ => None,
        };
        let hashing = alg.map(|a| HashingSink::new(&file, a, &path));
        let sink: &dyn Sink = match &hashing {
            Some(h) => h,
            None => &file,
        };
        let Some(got) = self.receive_into(sink, base, start)? else {
            tracing::warn!(path = %virt, part = %path.display(), "upload failed; partial data kept");
            return Ok(());
        };
        let len = got.ranges().last().map_or(0, |r| r.1);
        let digest = match hashing {
            // None unless every byte of [0, len) was hashed.
            Some(h) => h.finish(len).ok().flatten(),
            None => None,
        };
        drop(file);
        if path == part {
            if let Err(e) = fs::rename(&part, &real) {
                return self.ctl.reply(550, fs_error(&virt, &e));
            }
        }
        // The identity after the rename, which changes the file's ctime.
        if let (Some(hex), Some(alg), Ok(m)) = (digest, alg, fs::metadata(&real)) {
            self.known_digest = Some(KnownDigest { virt, real, alg, id: FileId::of(&m), hex });
        }
        self.ctl.defer_reply(226, "Transfer Complete.");
        Ok(())
    }

    /// LIST / NLST / MLSD: send a listing over the data channel (MODE S, or MODE E blocks).
    pub(crate) fn cmd_listing(&mut self, arg: Option<&str>, kind: ListKind) -> io::Result<()> {
        let Some((virt, real)) = self.resolve_real(arg.unwrap_or("."))? else { return Ok(()) };
        let write = self.access.is_some_and(|a| a.write);
        let body = match kind {
            ListKind::Mlsd => {
                if !real.is_dir() {
                    return self.ctl.reply(501, format!("{virt}: Not a directory"));
                }
                let parent = if virt == "/" { real.clone() } else { real.parent().map_or(real.clone(), Path::to_path_buf) };
                listing::mlsd(&real, &parent, write)
            }
            ListKind::List => listing::list(&real, true),
            ListKind::Nlst => listing::list(&real, false),
        };
        match body {
            Ok(b) => {
                let len = b.len() as u64;
                self.send_source(&Bytes(b), vec![(0, len)]).map(drop)
            }
            Err(e) => self.ctl.reply(550, fs_error(&virt, &e)),
        }
    }
}
