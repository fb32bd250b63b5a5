//! Data channels of a session and the transfer commands that use them, following what real
//! Globus peers do (docs/globus-interop.md §3): in MODE E the sender always connects, data
//! connections are cached after a transfer and reused by the next one (`125`), and the EOF
//! block announces the EOD count (GFD.020 §3). MODE S is RFC 959 stream mode, one connection
//! per transfer, closed to mark the end.
//! Uploads are in `upload`.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use haul_proto::command::{Restart, TransferMode};
use haul_proto::hostport::format_port;
use haul_proto::{Command, RangeSet, Reply};
use haul_transport::checksum::{Algorithm, HashingSource};
use haul_transport::io::{Sink, Source, Zero};
use haul_transport::mode_e::{self, Acceptor, Progress};
use haul_transport::net::{DataListener, NetStack};
use haul_transport::udt;
use haul_transport::{stream, Conn};

use crate::datachan::{send_markers, watched, Cut, Dial, ListenAcceptor, Peers, Setup, Watch};
use crate::listing;
use crate::session::{fs_error, FileId, KnownDigest, Session};
use crate::vfs::{Root, Target};

/// How long after a MODE S upload's close the control connection is watched for the client's
/// own close (a killed client closes both at once; the second may trail the first).
const STREAM_END_GRACE: Duration = Duration::from_millis(20);

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

impl Session<'_> {
    fn dial(&self) -> io::Result<Dial> {
        let cfg = &self.shared.cfg;
        Ok(Dial {
            stack: self.data.stack,
            sbuf: self.data.sbuf,
            timeout: cfg.data_timeout,
            tls: if self.prot_private {
                self.shared.tls.clone()
            } else {
                None
            },
            peers: self.peers()?,
            limit: cfg.max_parallelism,
            token: self.data_token,
        })
    }

    /// Who this session's data connections may reach.
    pub(crate) fn peers(&self) -> io::Result<Peers> {
        Ok(Peers {
            client: self.ctl.peer_ip()?,
            third_party: self.access.is_some_and(|a| a.third_party),
        })
    }

    fn watch(&self, markers: bool) -> Watch {
        let cfg = &self.shared.cfg;
        Watch {
            markers: markers.then_some(cfg.marker_interval),
            stall: cfg.data_timeout,
        }
    }

    /// PORT / EPRT / SPOR: the client listens at `addrs`, which must be its own address (or any,
    /// with the third-party permission) and unprivileged ports, at most the parallelism limit.
    pub(crate) fn cmd_port(&mut self, addrs: Vec<SocketAddr>, verb: &str) -> io::Result<()> {
        self.data.drop_all();
        let max = self.shared.cfg.max_parallelism;
        if addrs.is_empty() || addrs.len() > max {
            return self
                .ctl
                .reply(501, format!("{verb}: between 1 and {max} addresses."));
        }
        let peers = self.peers()?;
        if let Some(why) = addrs.iter().find_map(|a| peers.refuse_port(a)) {
            tracing::warn!(verb, %why, "data address refused");
            return self.ctl.reply(501, format!("{verb} refused: {why}."));
        }
        self.data.setup = Setup::Active(addrs);
        self.ctl.reply(200, format!("{verb} Command successful."))
    }

    /// PASV / EPSV / SPAS: listen for the peer's data connections.
    pub(crate) fn cmd_passive(&mut self, kind: Passive) -> io::Result<()> {
        self.data.drop_all();
        let ip = self.ctl.local_ip()?;
        let l = match DataListener::bind(self.data.stack, SocketAddr::new(ip, 0), self.data.sbuf) {
            Ok(l) => l,
            Err(e) => {
                return self
                    .ctl
                    .reply(425, format!("Can't open data connection: {e}"))
            }
        };
        let addr = l.local_addr()?;
        self.data.setup = Setup::Passive(l);
        match kind {
            Passive::Pasv => self.ctl.reply(
                227,
                format!("Entering Passive Mode ({})", format_port(&addr)),
            ),
            Passive::Epsv => self.ctl.reply(
                229,
                format!("Entering Extended Passive Mode (|||{}|)", addr.port()),
            ),
            Passive::Spas => self.ctl.send(&Reply::multi(
                229,
                vec![
                    "Entering Striped Passive Mode.".into(),
                    format!(" {}", format_port(&addr)),
                    "End".into(),
                ],
            )),
        }
    }

    /// `SITE SETNETSTACK <drivers>` (as Globus names it): what carries the next data
    /// connections, `tcp` or `udt`. A Globus driver list (`gsi,tcp`) names its transport last.
    pub(crate) fn cmd_setnetstack(&mut self, arg: &str) -> io::Result<()> {
        let last = arg.rsplit(',').next().unwrap_or("");
        let driver = last.split(':').next().unwrap_or("");
        let stack = match driver.parse::<NetStack>() {
            Ok(s) => s,
            Err(e) => return self.ctl.reply(501, format!("SETNETSTACK: {e}.")),
        };
        if stack == NetStack::Udt && !udt::AVAILABLE {
            return self
                .ctl
                .reply(504, "SETNETSTACK udt: this server was built without UDT4.");
        }
        if stack == NetStack::Udt && (self.prot_private || self.shared.cfg.require_tls) {
            return self.ctl.reply(
                504,
                "SETNETSTACK udt: UDT data channels carry no TLS, and this session's must.",
            );
        }
        self.data.drop_all();
        self.data.stack = stack;
        self.ctl
            .reply(200, format!("Data connections now use {stack}."))
    }

    /// Replies 425 and returns false when no data channel can be had.
    pub(crate) fn check_setup(&mut self) -> io::Result<bool> {
        if self.shared.cfg.require_tls && !self.prot_private {
            self.ctl.reply(
                521,
                "Data connections must be protected on this server: send PROT P.",
            )?;
            return Ok(false);
        }
        if self.mode == TransferMode::Extended && !self.data.cached.is_empty() {
            return Ok(true);
        }
        if matches!(self.data.setup, Setup::None) {
            self.ctl.reply(
                425,
                "Can't open data connection: send PORT, EPRT, SPOR, PASV, EPSV or SPAS first.",
            )?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Sends `ranges` of `src`: MODE E over cached or new connections, or MODE S on one.
    /// Returns whether the transfer completed (its `226` is deferred, see `Control::defer`).
    fn send_source(&mut self, src: &dyn Source, ranges: Vec<(u64, u64)>) -> io::Result<bool> {
        if !self.check_setup()? {
            return Ok(false);
        }
        let progress = Progress::default();
        let ranges: Vec<(u64, u64)> = ranges.into_iter().filter(|(a, b)| b > a).collect();
        let extended = self.mode == TransferMode::Extended;
        let (dial, watch, cut) = (self.dial()?, self.watch(false), Cut::default());
        let mut conns = if extended {
            std::mem::take(&mut self.data.cached)
        } else {
            Vec::new()
        };
        conns.iter().for_each(|c| cut.hold(c));
        match (conns.is_empty(), extended) {
            (false, _) => self
                .ctl
                .reply(125, "Beginning transfer; reusing existing data connection.")?,
            (true, true) => self.ctl.reply(150, "Beginning transfer.")?,
            (true, false) => self.ctl.reply(150, "Opening data connection.")?,
        }
        let n = if extended {
            self.data.parallelism.max(1)
        } else {
            1
        };
        let (setup, block) = (&self.data.setup, self.shared.cfg.block_size);
        // Err(true): no data connection could be had (425); Err(false): the transfer failed.
        let result = watched(
            &mut self.ctl,
            &progress,
            &cut,
            &watch,
            || -> Result<Vec<Conn>, (bool, io::Error)> {
                if conns.is_empty() {
                    conns = dial.open(setup, n, &cut).map_err(|e| (true, e))?;
                }
                if extended {
                    mode_e::send(&mut conns, src, &ranges, block, &progress, false)
                        .map(|()| conns)
                        .map_err(|e| (false, e))
                } else {
                    let (start, end) = (
                        ranges.first().map_or(0, |r| r.0),
                        ranges.last().map_or(0, |r| r.1),
                    );
                    let conn = conns
                        .pop()
                        .ok_or_else(|| (true, io::Error::from(io::ErrorKind::NotConnected)))?;
                    stream::send(conn, src, start, Some(end), &progress)
                        .map(|()| Vec::new())
                        .map_err(|e| (false, e))
                }
            },
        )?;
        match result {
            Ok(conns) => {
                if extended {
                    self.data.cached = conns;
                }
                self.ctl.defer_reply(226, "Transfer Complete.");
                Ok(true)
            }
            Err((no_conn, e)) => {
                let e = cut.explain(e);
                tracing::warn!(error = %e, "send failed");
                let (code, what) = if no_conn {
                    (425, "Can't open data connection")
                } else {
                    (426, "Data connection closed")
                };
                self.ctl.reply(code, format!("{what}: {e}")).map(|()| false)
            }
        }
    }

    /// Receives into `sink` (MODE E blocks at `base` + offset; MODE S from `stream_start`),
    /// sending markers meanwhile. On success the final 112 and 111 are sent and the ranges
    /// written are returned. On failure, `Err(None)` if the reply was sent (no data channel),
    /// else the cause, for the caller's final reply.
    pub(crate) fn receive_into(
        &mut self,
        sink: &dyn Sink,
        base: u64,
        stream_start: u64,
    ) -> io::Result<Result<RangeSet, Option<io::Error>>> {
        if !self.check_setup()? {
            return Ok(Err(None));
        }
        let progress = Progress::default();
        let extended = self.mode == TransferMode::Extended;
        let (dial, watch, cut) = (self.dial()?, self.watch(true), Cut::default());
        let mut conns = if extended {
            std::mem::take(&mut self.data.cached)
        } else {
            Vec::new()
        };
        conns.iter().for_each(|c| cut.hold(c));
        if conns.is_empty() {
            self.ctl.reply(150, "Beginning transfer.")?;
        } else {
            self.ctl
                .reply(125, "Beginning transfer; reusing existing data connection.")?;
        }
        if matches!(self.data.setup, Setup::Active(_)) && conns.is_empty() {
            let n = if extended {
                self.data.parallelism.max(1)
            } else {
                1
            };
            match dial.open(&self.data.setup, n, &cut) {
                Ok(c) => conns = c,
                Err(e) => {
                    return self
                        .ctl
                        .reply(425, format!("Can't open data connection: {e}"))
                        .map(|()| Err(None))
                }
            }
        }
        let acceptor = match &self.data.setup {
            Setup::Passive(l) => Some(ListenAcceptor {
                listener: l,
                dial: &dial,
                cut: &cut,
                accepted: AtomicUsize::new(conns.len()),
            }),
            _ => None,
        };
        let shifted = Shifted(sink, base);
        let block = self.shared.cfg.block_size;
        let result = watched(
            &mut self.ctl,
            &progress,
            &cut,
            &watch,
            || -> io::Result<Vec<Conn>> {
                if extended {
                    let a = acceptor.as_ref().map(|a| a as &dyn Acceptor);
                    mode_e::receive(conns, a, &shifted, &progress, None, block).map(|r| r.reusable)
                } else {
                    let conn = match (conns.pop(), &acceptor) {
                        (Some(c), _) => c,
                        (None, Some(a)) => a.dial.accept(a.listener, &cut)?,
                        (None, None) => {
                            return Err(io::Error::new(
                                io::ErrorKind::NotConnected,
                                "no data connection",
                            ))
                        }
                    };
                    stream::receive(conn, sink, stream_start, &progress).map(|_| Vec::new())
                }
            },
        )?
        .map_err(|e| cut.explain(e));
        // MODE S ends by a close, which a client killed mid-file also makes: the upload is whole
        // only if the client is still there to hear about it.
        let result = match result {
            Ok(_) if !extended && self.ctl.client_gone(STREAM_END_GRACE) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the client left with its MODE S data connection: the upload is incomplete",
            )),
            r => r,
        };
        match result {
            Ok(reusable) => {
                if extended {
                    self.data.cached = reusable;
                }
                send_markers(&mut self.ctl, &progress)?;
                Ok(Ok(progress.ranges()))
            }
            Err(e) => {
                tracing::warn!(error = %e, "receive failed");
                Ok(Err(Some(e)))
            }
        }
    }

    /// RETR / ERET: send a file, the missing ranges after REST, or a partial range.
    pub(crate) fn cmd_retr(&mut self, arg: &str, eret: Option<(u64, u64)>) -> io::Result<()> {
        let rest = self.rest.take();
        let file;
        let mut id = None;
        let (src, len, virt): (&dyn Source, Option<u64>, String) = match self.resolve(arg) {
            Target::Zero => (&Zero, None, "/dev/zero".into()),
            Target::Null => {
                return self
                    .ctl
                    .reply(550, "/dev/null: Permission denied (write-only device)")
            }
            Target::Path(virt) => match self.shared.vfs.open_read(&virt) {
                Ok((_, m)) if !m.is_file() => {
                    return self.ctl.reply(550, format!("{virt}: not a regular file"))
                }
                Ok((f, m)) => {
                    file = f;
                    id = Some(FileId::of(&m));
                    (&file, Some(m.len()), virt)
                }
                Err(e) => return self.ctl.reply(550, fs_error(&virt, &e)),
            },
        };
        if let Some((off, l)) = eret {
            let l = match len {
                Some(n) if off > n => {
                    return self.ctl.reply(
                        550,
                        format!("{virt}: ERET offset {off} lies beyond the end ({n} bytes)"),
                    )
                }
                Some(n) => l.min(n - off),
                None => l,
            };
            return self.send_source(&Shifted(src, off), vec![(0, l)]).map(drop);
        }
        let Some(n) = len else {
            return self.ctl.reply(
                550,
                format!("{virt}: endless; use ERET P <offset> <length>"),
            );
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
            (true, Some(id)) if id.settled() => self.pipelined_cksm(&virt).map(|alg| (alg, id)),
            _ => None,
        };
        let Some((alg, id)) = hash else {
            return self.send_source(src, ranges).map(drop);
        };
        let hashing = HashingSource::new(src, alg);
        if self.send_source(&hashing, ranges)? {
            if let Some(hex) = hashing.finish(n) {
                self.known_digest = Some(KnownDigest { virt, alg, id, hex });
            }
        }
        Ok(())
    }

    /// The algorithm of a `CKSM` of the whole of `virt` that the client has already sent as
    /// the next command, if it has.
    pub(crate) fn pipelined_cksm(&mut self, virt: &str) -> Option<Algorithm> {
        let cwd = self.cwd.clone();
        let line = self.ctl.peek_line()?;
        match Command::parse(line).ok()? {
            Command::Cksm {
                algorithm,
                offset: 0,
                path,
                ..
            } if Root::normalize(&cwd, &path) == virt => algorithm.parse().ok(),
            _ => None,
        }
    }

    /// LIST / NLST / MLSD: send a listing over the data channel (MODE S, or MODE E blocks).
    pub(crate) fn cmd_listing(&mut self, arg: Option<&str>, kind: ListKind) -> io::Result<()> {
        let Some(virt) = self.resolve_real(arg.unwrap_or("."))? else {
            return Ok(());
        };
        let write = self.access.is_some_and(|a| a.write);
        let root = &self.shared.vfs;
        let body = match kind {
            ListKind::Mlsd => match root.stat(&virt) {
                Ok(m) if !m.is_dir() => {
                    return self.ctl.reply(501, format!("{virt}: Not a directory"))
                }
                Ok(_) => listing::mlsd(root, &virt, write),
                Err(e) => Err(e),
            },
            ListKind::List => listing::list(root, &virt, true),
            ListKind::Nlst => listing::list(root, &virt, false),
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
