//! Data channels of a session and the transfer commands that use them, following what real
//! Globus peers do (docs/globus-interop.md §3): in MODE E the sender always connects, data
//! connections are cached after a transfer and reused by the next one (`125`), and the EOF
//! block announces the EOD count (GFD.020 §3). MODE S is RFC 959 stream mode, one connection
//! per transfer, closed to mark the end.
//! Uploads are in `upload`.

use std::io;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use haul_proto::command::{Restart, TransferMode};
use haul_proto::server::{ListKind, Outcome};
use haul_proto::{Command, RangeSet};
use haul_transport::checksum::{Algorithm, HashingSource};
use haul_transport::io::{Sink, Source, Zero, ZeroCopyFile};
use haul_transport::mode_e::{self, Acceptor, Progress};
use haul_transport::net::NetStack;
use haul_transport::udt;
use haul_transport::{stream, Conn};

use crate::datachan::{send_markers, watched, Cut, Dial, ListenAcceptor, Setup, Watch};
use crate::listing;
use crate::session::{fs_error, FileId, KnownDigest, Session};
use crate::vfs::{Root, Target};

/// How long after a MODE S upload's close the control connection is watched for the client's
/// own close (a killed client closes both at once; the second may trail the first).
const STREAM_END_GRACE: Duration = Duration::from_millis(20);

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

/// What moves a send's data on its connections: `(connections, MODE E?, progress)`.
pub(crate) type Mover<'a> = dyn Fn(&mut Vec<Conn>, bool, &Progress) -> io::Result<()> + Sync + 'a;

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
    fn dial(&self) -> Dial {
        let cfg = &self.shared.cfg;
        Dial {
            stack: self.data.stack,
            sbuf: self.sbuf(),
            timeout: cfg.data_timeout,
            tls: if self.prot_private() {
                self.shared.tls()
            } else {
                None
            },
            gsi: self.data_gsi(),
            peers: self.machine.transfer_state().peers(),
            limit: cfg.max_parallelism,
            token: self.data_token,
            from: self.ctl.local_ip().ok(),
        }
    }

    /// The GSI settings of the next data connections: under GSI with `DCAU A` or `S`.
    fn data_gsi(&self) -> Option<haul_transport::gsi::DataGsi> {
        use haul_proto::server::Dcau;
        use haul_transport::gsi::Expect;
        let g = self.shared.gsi()?;
        let peer = self.gsi.peer.as_ref()?;
        let expect = match self.machine.transfer_state().dcau() {
            Dcau::None => return None,
            Dcau::SelfId => Expect::Identity(peer.identity.clone()),
            Dcau::Subject(s) => Expect::Subject(s.clone()),
        };
        Some(g.data(self.gsi.data.as_ref()?, expect, self.prot_private()))
    }

    fn watch(&self, markers: bool) -> Watch {
        let cfg = &self.shared.cfg;
        Watch {
            markers: markers.then_some(cfg.marker_interval),
            stall: cfg.data_timeout,
        }
    }

    /// `SITE SETNETSTACK <drivers>` (as Globus names it): what carries the next data
    /// connections, `tcp` or `udt`, see [`net_stack`].
    pub(crate) fn cmd_setnetstack(&mut self, arg: &str) -> io::Result<()> {
        let stack = match net_stack(arg) {
            Ok(s) => s,
            Err(e) => return self.ctl.reply(501, format!("SETNETSTACK: {e}.")),
        };
        // Built without UDT4, or its library cannot be loaded: `usable` says which.
        if let (NetStack::Udt, Err(e)) = (stack, udt::usable()) {
            return self.ctl.reply(504, format!("SETNETSTACK udt: {e}."));
        }
        if stack == NetStack::Udt && (self.prot_private() || self.shared.cfg.require_tls) {
            return self.ctl.reply(
                504,
                "SETNETSTACK udt: UDT data channels carry no TLS, and this session's must.",
            );
        }
        self.data.drop_all();
        self.machine.transfers().reset_data();
        self.data.stack = stack;
        self.ctl
            .reply(200, format!("Data connections now use {stack}."))
    }

    /// The transfer mode in force.
    pub(crate) fn mode(&self) -> TransferMode {
        self.machine.transfer_state().mode()
    }

    /// Sends `ranges` of `src`: MODE E over cached or new connections, or MODE S on one.
    /// Returns whether the transfer completed (the machine defers its `226`).
    fn send_source(&mut self, src: &dyn Source, ranges: Vec<(u64, u64)>) -> io::Result<bool> {
        let ranges: Vec<(u64, u64)> = ranges.into_iter().filter(|(a, b)| b > a).collect();
        let block = self.shared.cfg.block_size;
        self.send_with(&|conns, extended, progress| {
            if extended {
                return mode_e::send(conns, src, &ranges, block, progress, false);
            }
            let (start, end) = (
                ranges.first().map_or(0, |r| r.0),
                ranges.last().map_or(0, |r| r.1),
            );
            let conn = conns
                .pop()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?;
            stream::send(conn, src, start, Some(end), progress)
        })
    }

    /// Runs a send whose data `mover` writes on the data connections (MODE E: cached or new
    /// ones, kept afterwards; MODE S: one, consumed), told whether the mode is extended.
    /// Returns whether the transfer completed (the machine defers its `226`).
    pub(crate) fn send_with(&mut self, mover: &Mover<'_>) -> io::Result<bool> {
        let progress = Progress::default();
        let extended = self.mode() == TransferMode::Extended;
        let (dial, watch, cut) = (self.dial(), self.watch(false), Cut::default());
        let mut conns = if extended {
            std::mem::take(&mut self.data.cached)
        } else {
            Vec::new()
        };
        conns.iter().for_each(|c| cut.hold(c));
        if !self.opening(!conns.is_empty(), true)? {
            self.data.cached = conns;
            return Ok(false);
        }
        let n = if extended {
            self.data.parallelism.max(1)
        } else {
            1
        };
        let setup = &self.data.setup;
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
                mover(&mut conns, extended, &progress).map_err(|e| (false, e))?;
                Ok(if extended { conns } else { Vec::new() })
            },
        )?;
        self.meter.bytes = progress.bytes();
        self.meter.streams = if extended { n } else { 1 };
        match result {
            Ok(conns) => {
                if extended {
                    self.data.cached = conns;
                }
                self.finish(Outcome::Complete)?;
                Ok(true)
            }
            Err((no_conn, e)) => {
                let e = cut.explain(e);
                tracing::warn!(error = %e, "send failed");
                self.finish(if no_conn {
                    Outcome::NoConnection(e.to_string())
                } else {
                    Outcome::Failed(e.to_string())
                })
                .map(|()| false)
            }
        }
    }

    /// Receives into `sink` (MODE E blocks at `base` + offset; MODE S from `stream_start`),
    /// sending markers meanwhile when `markers` (a relay sends none: what it holds is not yet
    /// stored). On success the final 112 and 111 are sent and the ranges written are returned.
    /// On failure, `Err(None)` if the outcome was reported (no data channel), else the cause,
    /// for the caller's outcome.
    pub(crate) fn receive_into(
        &mut self,
        sink: &dyn Sink,
        base: u64,
        stream_start: u64,
        markers: bool,
    ) -> io::Result<Result<RangeSet, Option<io::Error>>> {
        let progress = Progress::default();
        let extended = self.mode() == TransferMode::Extended;
        let (dial, watch, cut) = (self.dial(), self.watch(markers), Cut::default());
        let mut conns = if extended {
            std::mem::take(&mut self.data.cached)
        } else {
            Vec::new()
        };
        conns.iter().for_each(|c| cut.hold(c));
        if !self.opening(!conns.is_empty(), false)? {
            self.data.cached = conns;
            return Ok(Err(None));
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
                    let e = cut.explain(e);
                    return self
                        .finish(Outcome::NoConnection(e.to_string()))
                        .map(|()| Err(None));
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
        self.received(result, extended, markers, &progress)
    }

    /// The end of [`Session::receive_into`]: the connections kept for the next file, the
    /// final markers, what the journal records.
    fn received(
        &mut self,
        result: io::Result<Vec<Conn>>,
        extended: bool,
        markers: bool,
        progress: &Progress,
    ) -> io::Result<Result<RangeSet, Option<io::Error>>> {
        self.meter.bytes = progress.bytes();
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
                self.meter.streams = reusable.len().max(1);
                if extended {
                    self.data.cached = reusable;
                }
                if markers {
                    send_markers(&mut self.ctl, progress)?;
                }
                Ok(Ok(progress.ranges()))
            }
            Err(e) => {
                tracing::warn!(error = %e, "receive failed");
                Ok(Err(Some(e)))
            }
        }
    }

    /// RETR / ERET: send a file, the missing ranges after REST, or a partial range.
    pub(crate) fn cmd_retr(
        &mut self,
        arg: &str,
        eret: Option<(u64, u64)>,
        rest: Option<Restart>,
    ) -> io::Result<()> {
        let file;
        let zero_copy;
        let mut id = None;
        let (src, len, virt): (&dyn Source, Option<u64>, String) = match self.resolve(arg) {
            Target::Zero => (&Zero, None, "/dev/zero".into()),
            Target::Null => {
                return self.answer(550, "/dev/null: Permission denied (write-only device)")
            }
            Target::Path(virt) => match self.shared.vfs.open_read(&virt) {
                Ok((_, m)) if !m.is_file() => {
                    return self.answer(550, format!("{virt}: not a regular file"))
                }
                Ok((f, m)) => {
                    id = Some(FileId::of(&m));
                    let src: &dyn Source = if self.shared.cfg.sendfile {
                        zero_copy = ZeroCopyFile(f);
                        &zero_copy
                    } else {
                        file = f;
                        &file
                    };
                    (src, Some(m.len()), virt)
                }
                Err(e) => return self.answer(550, fs_error(&virt, &e)),
            },
        };
        if let Some((off, l)) = eret {
            let l = match len {
                Some(n) if off > n => {
                    return self.answer(
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
            return self.answer(
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
        let Some(hash) = self.hash_as_sent(&virt, id, whole) else {
            return self.send_source(src, ranges).map(drop);
        };
        let hashing = HashingSource::new(src, hash.0);
        if self.send_source(&hashing, ranges)? {
            self.remember_sent_digest(virt, hash, hashing, n);
        }
        Ok(())
    }

    /// What to hash `virt` with as it is sent, rather than reading it again for the `CKSM`:
    /// when the whole file goes, it has not changed for a while, and the client has already
    /// queued a `CKSM` of it next.
    pub(crate) fn hash_as_sent(
        &mut self,
        virt: &str,
        id: Option<FileId>,
        whole: bool,
    ) -> Option<(Algorithm, FileId)> {
        match id {
            Some(id) if whole && id.settled() => self.pipelined_cksm(virt).map(|alg| (alg, id)),
            _ => None,
        }
    }

    /// Keeps the digest `hashing` computed of the `len` bytes of `virt` as they were sent, for
    /// the `CKSM` that follows (none unless exactly those bytes were hashed).
    pub(crate) fn remember_sent_digest(
        &mut self,
        virt: String,
        (alg, id): (Algorithm, FileId),
        hashing: HashingSource<'_>,
        len: u64,
    ) {
        if let Some((hex, chunks)) = hashing.finish_full(len) {
            self.known_digest = Some(KnownDigest {
                virt,
                alg,
                id,
                hex,
                chunks,
            });
        }
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

    /// Sends a listing's bytes.
    pub(crate) fn send_bytes(&mut self, b: Vec<u8>) -> io::Result<()> {
        let len = b.len() as u64;
        self.send_source(&Bytes(b), vec![(0, len)]).map(drop)
    }

    /// LIST / NLST / MLSD / MLSR: send a listing over the data channel (MODE S, or MODE E
    /// blocks).
    pub(crate) fn cmd_listing(&mut self, arg: Option<&str>, kind: ListKind) -> io::Result<()> {
        let Some(virt) = self.resolve_real(arg.unwrap_or("."))? else {
            return Ok(());
        };
        let write = self.access.is_some_and(|a| a.write);
        let root = &self.shared.vfs;
        let body = match kind {
            ListKind::Mlsd | ListKind::Mlsr => match root.stat(&virt) {
                Ok(m) if !m.is_dir() => {
                    return self.answer(501, format!("{virt}: Not a directory"))
                }
                Ok(_) if kind == ListKind::Mlsd => listing::mlsd(root, &virt, write),
                Ok(_) => {
                    let watch = self.ctl.watcher();
                    let gone = || watch.gone(Duration::ZERO);
                    listing::mlsr(root, &virt, write, self.shared.cfg.mlsr_limits, &gone)
                }
                Err(e) => Err(e),
            },
            ListKind::List => listing::list(root, &virt, true),
            ListKind::Nlst => listing::list(root, &virt, false),
        };
        match body {
            Ok(b) => self.send_bytes(b),
            Err(e) => self.answer(550, fs_error(&virt, &e)),
        }
    }
}

/// The transport named by a Globus XIO driver list: `tcp`, `udt`, `tcp,gsi` (what
/// globus-url-copy sends under DCAU: XIO lists a stack bottom up, the transport first) or
/// `gsi,tcp`, each driver with optional `:options`. `gsi` is the data-channel
/// authentication, which `DCAU` governs here; any other driver is refused.
fn net_stack(arg: &str) -> Result<NetStack, String> {
    let mut transport = None;
    for driver in arg
        .split(',')
        .map(|d| d.split(':').next().unwrap_or("").trim())
    {
        if driver.eq_ignore_ascii_case("gsi") {
            continue;
        }
        let stack = driver.parse::<NetStack>()?;
        if transport.replace(stack).is_some() {
            return Err(format!("two transports in {arg:?}"));
        }
    }
    transport.ok_or_else(|| format!("no transport in {arg:?} (haul has tcp and udt)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_stack_takes_the_transport_with_gsi_on_either_side() {
        assert_eq!(net_stack("tcp"), Ok(NetStack::Tcp));
        assert_eq!(net_stack("tcp,gsi"), Ok(NetStack::Tcp));
        assert_eq!(net_stack("gsi,tcp"), Ok(NetStack::Tcp));
        assert_eq!(net_stack("udt:opt=1,GSI"), Ok(NetStack::Udt));
        assert!(net_stack("gsi").unwrap_err().contains("tcp and udt"));
        assert!(net_stack("tcp,udt").unwrap_err().contains("two transports"));
        assert!(net_stack("tcp,carrier-pigeon")
            .unwrap_err()
            .contains("tcp and udt"));
    }
}
