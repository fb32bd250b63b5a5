//! PLUT data channels on the server (docs/protocol.md, "PLUT data channels"). `OPTS HAUL
//! Transport=plut;…` switches the session's RETR / ERET / STOR to PLUT; before each of them the
//! client names the UDP flow: `PLUT PORT h1,…,p2 SESSION` (it receives there: RETR/ERET) or
//! `PLUT PASV SESSION LENGTH` (we bind and receive: STOR). The flow is consumed by the next
//! transfer. Replies are the usual 150 / 226 / 426; listings and everything else stay on TCP.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc;

use haul_proto::hostport::{format_port, parse_port};
use haul_proto::{Command, PerfMarker, Reply};
use haul_transport::checksum::{HashingSink, HashingSource};
use haul_transport::io::{Null, Sink, Source, Zero};
use haul_transport::mode_e::Progress;
use haul_transport::plut::{self, params, Tuning};

use crate::session::{fs_error, FileId, Session};
use crate::upload::{lock_exclusive, start_empty};
use crate::vfs::Target;

/// File data a PLUT end buffers, bytes (window and send buffer are sized from it).
const BUFFER_BYTES: usize = 96 << 20;

/// The flow named for the next transfer.
enum Flow {
    /// We send to the client at `peer` (RETR / ERET).
    Send { peer: SocketAddr, session: u64 },
    /// We bound `sock` and receive `len` bytes from the client (STOR).
    Receive {
        sock: UdpSocket,
        session: u64,
        len: u64,
    },
}

/// A session's PLUT state.
#[derive(Default)]
pub struct PlutState {
    params: Option<params::Params>,
    flow: Option<Flow>,
}

impl PlutState {
    /// True when RETR / ERET / STOR go over PLUT.
    pub fn enabled(&self) -> bool {
        self.params.is_some()
    }
}

impl Session<'_> {
    /// RETR, ERET and STOR once the client selected PLUT: the session machine forwards them,
    /// and they are run and answered here.
    pub(crate) fn plut_command(&mut self, cmd: Command) -> io::Result<()> {
        let nested = match &cmd {
            Command::Retr(p) | Command::Stor(p) | Command::Eret { path: p, .. } => {
                haul_proto::nested::is_nested(p)
            }
            _ => false,
        };
        if nested {
            return self.ctl.reply(
                504,
                "PLUT between a client and a relay is not built: use TCP (OPTS HAUL Transport=tcp;).",
            );
        }
        match cmd {
            Command::Retr(p) => self.plut_retr(&p, None),
            Command::Eret {
                offset,
                length,
                path,
            } => self.plut_retr(&path, Some((offset, length))),
            Command::Stor(p) => self.plut_stor(&p),
            other => self
                .ctl
                .reply(503, format!("{} is not a PLUT transfer.", other.verb())),
        }
    }

    /// `OPTS HAUL Transport=plut;Mds=N;Rate=B;` or `Transport=tcp;`.
    pub(crate) fn plut_opts(&mut self, options: &str) -> io::Result<()> {
        match params::parse_opts(options) {
            Ok(Some(_)) if self.shared.cfg.require_tls => self.ctl.reply(
                521,
                "PLUT data channels are not encrypted, and this server requires TLS.",
            ),
            Ok(p) => {
                self.plut = PlutState {
                    params: p,
                    flow: None,
                };
                self.machine.set_own_transfers(p.is_some());
                let t = if p.is_some() { "PLUT" } else { "TCP" };
                self.ctl
                    .reply(200, format!("OPTS HAUL: transfers use {t}."))
            }
            Err(e) => self.ctl.reply(501, format!("{e}.")),
        }
    }

    /// `PLUT PORT h1,h2,h3,h4,p1,p2 SESSION` / `PLUT PASV SESSION LENGTH`.
    pub(crate) fn cmd_plut(&mut self, arg: &str) -> io::Result<()> {
        if !self.plut.enabled() {
            return self
                .ctl
                .reply(503, "PLUT needs OPTS HAUL Transport=plut first.");
        }
        let words: Vec<&str> = arg.split_whitespace().collect();
        match words.as_slice() {
            [sub, addr, session] if sub.eq_ignore_ascii_case("PORT") => {
                let (peer, session) = match (parse_port(addr), params::parse_session(session)) {
                    (Ok(a), Ok(s)) => (a, s),
                    (Err(e), _) | (_, Err(e)) => {
                        return self.ctl.reply(501, format!("PLUT PORT: {e}."))
                    }
                };
                // Data goes only to the client itself, so the server cannot be aimed at others.
                if peer.ip() != self.ctl.peer_ip()? {
                    return self.ctl.reply(
                        501,
                        format!("PLUT PORT {peer}: not the control connection's address."),
                    );
                }
                self.plut.flow = Some(Flow::Send { peer, session });
                self.ctl.reply(200, "PLUT PORT command successful.")
            }
            [sub, session, len] if sub.eq_ignore_ascii_case("PASV") => {
                let (session, len) = match (params::parse_session(session), len.parse::<u64>()) {
                    (Ok(s), Ok(l)) => (s, l),
                    (Err(e), _) => return self.ctl.reply(501, format!("PLUT PASV: {e}.")),
                    (_, Err(_)) => {
                        return self
                            .ctl
                            .reply(501, format!("PLUT PASV: length {len:?} is not a number."))
                    }
                };
                let ip = self.ctl.local_ip()?;
                let sock = match self.bind_passive(ip, |a| plut::bind(a, &Tuning::default())) {
                    Ok(s) => s,
                    Err(e) => return self.ctl.reply(425, format!("Can't open PLUT socket: {e}")),
                };
                // Only the client may be the sender of the flow it asked for.
                if let Err(e) = plut::only_from(&sock, self.ctl.peer_ip()?) {
                    return self
                        .ctl
                        .reply(425, format!("Can't filter the PLUT socket: {e}"));
                }
                let addr = sock.local_addr()?;
                self.plut.flow = Some(Flow::Receive { sock, session, len });
                self.ctl.reply(
                    227,
                    format!("Entering PLUT Passive Mode ({})", format_port(&addr)),
                )
            }
            _ => self.ctl.reply(
                501,
                "Usage: PLUT PORT h1,h2,h3,h4,p1,p2 SESSION | PLUT PASV SESSION LENGTH.",
            ),
        }
    }

    fn plut_tuning(&self) -> Tuning {
        Tuning {
            idle_timeout: self.shared.cfg.idle_timeout,
            ..Tuning::default()
        }
    }

    /// RETR / ERET over PLUT: send the file (or the ERET range) to the named flow.
    pub(crate) fn plut_retr(&mut self, arg: &str, eret: Option<(u64, u64)>) -> io::Result<()> {
        let rest = self.machine.transfers().take_rest();
        let Some(Flow::Send { peer, session }) = self.plut.flow.take() else {
            return self
                .ctl
                .reply(425, "Can't open data connection: send PLUT PORT first.");
        };
        if rest.is_some() {
            return self
                .ctl
                .reply(501, "REST is not supported over PLUT; use ERET or TCP.");
        }
        let file;
        let mut id = None;
        let (src, size, virt): (&dyn Source, Option<u64>, String) = match self.resolve(arg) {
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
                    id = Some(FileId::of(&m));
                    file = f;
                    (&file, Some(m.len()), virt)
                }
                Err(e) => return self.ctl.reply(550, fs_error(&virt, &e)),
            },
        };
        let (base, len) = match span(eret, size) {
            Ok(s) => s,
            Err(why) => return self.ctl.reply(550, format!("{virt}: {why}")),
        };
        let Some(p) = self.plut.params else {
            return self.ctl.reply(503, "PLUT not selected.");
        };
        let cfg = p.config(session, BUFFER_BYTES);
        let tuning = self.plut_tuning();
        // As over TCP: hashed as it is sent, not read again for the CKSM after the 226.
        let hash = self.hash_as_sent(&virt, id, eret.is_none());
        let hashing = hash.map(|(alg, _)| HashingSource::new(src, alg));
        let src: &dyn Source = match &hashing {
            Some(h) => h,
            None => src,
        };
        self.ctl
            .reply(150, format!("Beginning PLUT transfer of {len} bytes."))?;
        let ip = self.ctl.local_ip()?;
        // Acknowledgements are taken only from the client.
        let result = plut::bind(SocketAddr::new(ip, 0), &tuning)
            .and_then(|sock| plut::only_from(&sock, peer.ip()).map(|()| sock))
            .map_err(|e| e.to_string())
            .and_then(|sock| {
                plut::send(
                    &sock,
                    peer,
                    src,
                    base,
                    len,
                    &cfg,
                    &tuning,
                    &Progress::default(),
                )
                .map_err(|e| e.to_string())
            });
        match result {
            Ok(stats) => {
                tracing::info!(path = %virt, len, ?stats, "PLUT send done");
                if let (Some(h), Some(hash)) = (hashing, hash) {
                    self.remember_sent_digest(virt, hash, h, len);
                }
                self.ctl.reply(226, "Transfer Complete.")
            }
            Err(e) => {
                tracing::warn!(path = %virt, error = %e, "PLUT send failed");
                self.ctl
                    .reply(426, format!("PLUT data channel failed: {e}"))
            }
        }
    }

    /// STOR over PLUT: receive into a part file and rename it over the target once complete.
    pub(crate) fn plut_stor(&mut self, arg: &str) -> io::Result<()> {
        let rest = self.machine.transfers().take_rest();
        let Some(Flow::Receive { sock, session, len }) = self.plut.flow.take() else {
            return self
                .ctl
                .reply(425, "Can't open data connection: send PLUT PASV first.");
        };
        if rest.is_some() {
            return self
                .ctl
                .reply(501, "REST is not supported over PLUT; use TCP to resume.");
        }
        let virt = match self.resolve(arg) {
            Target::Null => {
                if self.plut_receive(&sock, session, len, &Null)? {
                    self.ctl.reply(226, "Transfer Complete.")?;
                }
                return Ok(());
            }
            Target::Zero => {
                return self
                    .ctl
                    .reply(550, "/dev/zero: Permission denied (read-only device)")
            }
            Target::Path(virt) => virt,
        };
        let Some((parent, _writing)) = self.start_upload(&virt)? else {
            return Ok(());
        };
        let file = match parent.open_part(true) {
            Ok(f) => f,
            Err(e) => return self.ctl.reply(550, fs_error(&virt, &e)),
        };
        if !lock_exclusive(&file) {
            return self.ctl.reply(
                450,
                format!("{virt}: another upload to this file is in progress"),
            );
        }
        if let Err(e) = start_empty(&file) {
            return self.ctl.reply(550, fs_error(&virt, &e));
        }
        // The checksum the client asks for next is computed as the data is written (in order,
        // behind PLUT's write-behind buffer), not by reading the file back.
        let alg = self.pipelined_cksm(&virt);
        let hashing = alg.map(|a| HashingSink::over(&file, a, &file));
        let sink: &dyn Sink = match &hashing {
            Some(h) => h,
            None => &file,
        };
        if !self.plut_receive(&sock, session, len, sink)? {
            tracing::warn!(path = %virt, "PLUT upload failed; partial data kept in the part file");
            return Ok(());
        }
        let digest = hashing.and_then(|h| h.finish_full(len));
        drop(file);
        if let Err(e) = parent.commit_part() {
            return self.ctl.reply(550, fs_error(&virt, &e));
        }
        self.remember_upload_digest(virt, alg.zip(digest));
        self.ctl.reply(226, "Transfer Complete.")
    }

    /// Receives `len` bytes into `sink` with 112 markers meanwhile; on failure replies 426 and
    /// returns false (the caller replies 226 on success).
    fn plut_receive(
        &mut self,
        sock: &UdpSocket,
        session: u64,
        len: u64,
        sink: &dyn Sink,
    ) -> io::Result<bool> {
        let Some(p) = self.plut.params else {
            self.ctl.reply(503, "PLUT not selected.")?;
            return Ok(false);
        };
        let cfg = p.config(session, BUFFER_BYTES);
        let tuning = self.plut_tuning();
        self.ctl
            .reply(150, format!("Beginning PLUT transfer of {len} bytes."))?;
        let progress = Progress::default();
        let interval = self.shared.cfg.marker_interval;
        let ctl = &mut self.ctl;
        let (tx, rx) = mpsc::channel::<()>();
        let result = std::thread::scope(|s| {
            let worker = s.spawn(|| {
                let _done = tx;
                plut::receive(sock, sink, 0, len, &cfg, &tuning, &progress)
            });
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(interval) {
                let m = PerfMarker {
                    timestamp: now_s(),
                    stripe_index: 0,
                    stripe_bytes: progress.bytes(),
                    total_stripes: 1,
                };
                if let Err(e) = ctl.send(&Reply::multi(112, m.to_lines())) {
                    tracing::debug!(error = %e, "marker not sent");
                }
            }
            worker.join().unwrap_or_else(|_| {
                Err(plut::PlutError::Io {
                    what: "receiving",
                    source: io::Error::other("receiver thread panicked"),
                })
            })
        });
        match result {
            Ok(stats) => {
                tracing::info!(len, ?stats, "PLUT receive done");
                Ok(true)
            }
            Err(e) => {
                tracing::warn!(error = %e, "PLUT receive failed");
                self.ctl
                    .reply(426, format!("PLUT data channel failed: {e}"))?;
                Ok(false)
            }
        }
    }
}

/// The bytes a RETR / ERET of a file of `size` bytes (None: endless) sends: `(offset, length)`,
/// or why none.
fn span(eret: Option<(u64, u64)>, size: Option<u64>) -> Result<(u64, u64), String> {
    match (eret, size) {
        (Some((off, _)), Some(n)) if off > n => {
            Err(format!("ERET offset {off} lies beyond the end ({n} bytes)"))
        }
        (Some((off, l)), Some(n)) => Ok((off, l.min(n - off))),
        (Some((off, l)), None) => Ok((off, l)),
        (None, Some(n)) => Ok((0, n)),
        (None, None) => Err("endless; use ERET P <offset> <length>".into()),
    }
}

fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
