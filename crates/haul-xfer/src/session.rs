//! One client session with one server: a control connection plus its MODE E data connections,
//! kept across files so that a tree of small files costs no connection set-up per file. As
//! GridFTP requires (GFD.020, and as Globus enforces), the sender opens data connections:
//! downloads listen and send PORT, uploads send PASV and connect.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use haul_proto::command::{Restart, TransferMode};
use haul_proto::{Command, RangeSet};
use haul_transport::io::{Sink, Source};
use haul_transport::mode_e::{self, Progress};
use haul_transport::{socket, Conn};

use std::path::Path;

use crate::checksum::{parse_cksm_reply, Algorithm};
use crate::control::Control;
use crate::error::XferError;
use crate::tls::ClientTls;
use crate::url::RemoteUrl;

mod data;
mod plut;

pub use data::PasvAddress;
use data::{prepare, ListenAcceptor};

/// How long a data channel may stay silent by default (`--data-timeout`): the read deadline
/// reused connections always had.
pub const DEFAULT_DATA_TIMEOUT: Duration = Duration::from_secs(120);

/// Data-channel settings of a session.
#[derive(Debug, Clone)]
pub struct DataParams {
    /// TCP streams per file.
    pub parallelism: u32,
    /// Socket buffer size (None: kernel autotuning).
    pub tcp_buffer: Option<usize>,
    /// MODE E block size.
    pub block: usize,
}

/// Which way the session's cached data connections point.
enum DataState {
    None,
    /// We listen; the server connects (downloads, and the destination side of nothing else).
    Download {
        listener: TcpListener,
        parallelism: u32,
        cached: Vec<Conn>,
    },
    /// The server listens at `addr`; we connect (uploads).
    Upload {
        cached: Vec<Conn>,
        pending: Vec<std::net::TcpStream>,
    },
}

/// A logged-in session with its data-channel state.
pub struct Session {
    /// The control connection.
    pub ctl: Control,
    url: RemoteUrl,
    tls: Option<ClientTls>,
    mode_e: bool,
    data: DataState,
    data_timeout: Duration,
    pasv_address: PasvAddress,
    /// PLUT parameters once `OPTS HAUL Transport=plut` was accepted.
    plut: Option<haul_transport::plut::params::Params>,
    /// Set when [`Session::get_many`] left a pipeline early: replies to commands already sent
    /// are still due, so the control connection can only be closed.
    abandoned: bool,
    /// The data-connection token (`DTOK`), once asked for.
    token: Option<haul_transport::token::DataToken>,
}

/// One file to fetch in a pipelined batch.
pub struct GetItem<'a> {
    /// Remote path.
    pub path: String,
    /// Where the bytes go.
    pub sink: &'a dyn Sink,
    /// Expected length (bounds block offsets), if known.
    pub len: Option<u64>,
    /// Ranges already held (sent as REST).
    pub have: Option<RangeSet>,
    /// A partial read `(offset, length)` sent as ERET P instead of RETR; blocks land at 0-based
    /// offsets relative to `offset`, as Globus does.
    pub eret: Option<(u64, u64)>,
    /// Checksum to ask the server for after the RETR; the local file is hashed meanwhile.
    pub cksm: Option<(Algorithm, &'a Path)>,
    /// Live counters.
    pub progress: &'a Progress,
}

/// One file to store in a pipelined batch.
pub struct PutItem<'a> {
    /// Remote path.
    pub path: String,
    /// Where the bytes come from.
    pub src: &'a dyn Source,
    /// File length.
    pub len: u64,
    /// Ranges the server already holds (sent as REST; only the rest is sent).
    pub have: Option<RangeSet>,
    /// Checksum algorithm to ask the server for, after the STOR.
    pub cksm: Option<Algorithm>,
    /// Live counters.
    pub progress: &'a Progress,
}

/// What the server reported for one file.
#[derive(Debug, Default, Clone)]
pub struct ItemResult {
    /// The server's checksum, when asked.
    pub server_cksm: Option<String>,
    /// Our checksum of the downloaded file, computed while the server computed its own.
    pub local_cksm: Option<String>,
    /// Ranges the server reported written (111 markers), uploads only.
    pub markers: RangeSet,
}

fn retr_of(it: &GetItem<'_>) -> Command {
    match it.eret {
        Some((offset, length)) => Command::Eret {
            offset,
            length,
            path: it.path.clone(),
        },
        None => Command::Retr(it.path.clone()),
    }
}

/// Files larger than this are hashed while they arrive.
const FOLLOW_MIN: u64 = 8 << 20;

fn cksm_of(alg: Algorithm, path: &str) -> Command {
    Command::Cksm {
        algorithm: alg.name().into(),
        offset: 0,
        length: None,
        path: path.to_string(),
    }
}

impl Session {
    /// Connects and logs in; data connections after `PASV` go where `pasv` says.
    pub fn open(
        url: &RemoteUrl,
        tls: Option<&ClientTls>,
        pasv: PasvAddress,
    ) -> Result<Session, XferError> {
        let ctl = Control::connect(url, tls, Duration::from_secs(30))?;
        Ok(Session {
            ctl,
            url: url.clone(),
            tls: tls.cloned(),
            mode_e: false,
            data: DataState::None,
            data_timeout: DEFAULT_DATA_TIMEOUT,
            pasv_address: pasv,
            plut: None,
            abandoned: false,
            token: None,
        })
    }

    /// Sets how long a data channel may stay silent: connecting, waiting for the server's
    /// connection, or between bytes (default [`DEFAULT_DATA_TIMEOUT`]).
    pub fn set_data_timeout(&mut self, t: Duration) {
        self.data_timeout = t;
    }

    /// Fails once [`Session::get_many`] has left a pipeline early: replies to commands already
    /// sent are still due, so no new command's reply could be told apart from them.
    fn usable(&self) -> Result<(), XferError> {
        if self.abandoned {
            return Err(XferError::Usage(
                "session left a pipeline early; it cannot be reused".into(),
            ));
        }
        Ok(())
    }

    /// The URL this session was opened for.
    pub fn url(&self) -> &RemoteUrl {
        &self.url
    }

    pub(crate) fn set_mode_e(&mut self) -> Result<(), XferError> {
        if !self.mode_e {
            self.ctl
                .expect(&Command::Mode(TransferMode::Extended), 200)?;
            self.mode_e = true;
        }
        Ok(())
    }

    fn tls_host(&self) -> Option<(&ClientTls, &str)> {
        self.tls.as_ref().map(|t| (t, self.url.host.as_str()))
    }

    /// Remote file size (SIZE).
    pub fn size(&mut self, path: &str) -> Result<u64, XferError> {
        let r = self.ctl.expect(&Command::Size(path.to_string()), 213)?;
        r.text().trim().parse().map_err(|_| XferError::Protocol {
            host: self.ctl.name.clone(),
            reply: r.to_string(),
        })
    }

    /// Remote checksum (CKSM alg 0 -1 path).
    pub fn cksm(&mut self, alg: Algorithm, path: &str) -> Result<String, XferError> {
        self.usable()?;
        let cmd = cksm_of(alg, path);
        let r = self.ctl.expect(&cmd, 213)?;
        parse_cksm_reply(&r).ok_or_else(|| XferError::Protocol {
            host: self.ctl.name.clone(),
            reply: r.to_string(),
        })
    }

    /// Makes a directory; an existing one is fine.
    pub fn mkdir(&mut self, path: &str) -> Result<(), XferError> {
        let cmd = Command::Mkd(path.to_string());
        self.ctl.send(&cmd)?;
        let r = self.ctl.final_reply(&mut |_| {})?;
        if r.is_success() || r.text().to_ascii_lowercase().contains("exist") {
            return Ok(());
        }
        Err(XferError::from_reply(&self.ctl.name, &cmd, &r))
    }

    /// MLST facts of one path: (is_dir, size).
    pub fn stat(&mut self, path: &str) -> Result<(bool, u64), XferError> {
        let r = self
            .ctl
            .expect(&Command::Mlst(Some(path.to_string())), 250)?;
        let facts = r
            .lines
            .iter()
            .find(|l| l.contains('=') && l.contains(';'))
            .cloned()
            .unwrap_or_default();
        crate::listing::parse_mlst(&facts).ok_or_else(|| XferError::Protocol {
            host: self.ctl.name.clone(),
            reply: r.to_string(),
        })
    }

    /// Lists a directory with MLSD in stream mode over a passive connection.
    pub fn mlsd(&mut self, path: &str) -> Result<Vec<crate::listing::Entry>, XferError> {
        if self.mode_e {
            self.ctl.expect(&Command::Mode(TransferMode::Stream), 200)?;
            self.mode_e = false;
            self.data = DataState::None;
        }
        let token = self.data_token()?;
        let addr = self.pasv()?;
        let tcp = socket::connect(addr, None, self.data_timeout)
            .map_err(|e| XferError::io(&self.ctl.name, e))?;
        self.ctl.send(&Command::Mlsd(Some(path.to_string())))?;
        let r = self.ctl.reply()?;
        if !r.is_preliminary() {
            return Err(XferError::from_reply(
                &self.ctl.name,
                &Command::Mlsd(Some(path.to_string())),
                &r,
            ));
        }
        let mut conn = prepare(tcp, self.tls_host(), self.data_timeout)
            .map_err(|e| XferError::io(&self.ctl.name, e))?;
        data::present(&mut conn, token).map_err(|e| XferError::io(&self.ctl.name, e))?;
        let sink = crate::listing::VecSink::default();
        haul_transport::stream::receive(conn, &sink, 0, &Progress::default())
            .map_err(|e| XferError::io(&self.ctl.name, e))?;
        let r = self.ctl.final_reply(&mut |_| {})?;
        if !r.is_success() {
            return Err(XferError::from_reply(
                &self.ctl.name,
                &Command::Mlsd(Some(path.to_string())),
                &r,
            ));
        }
        Ok(crate::listing::parse_mlsd(&sink.into_bytes()))
    }

    /// Ensures the session is set up to download with `p` streams.
    fn ready_download(&mut self, p: &DataParams) -> Result<(), XferError> {
        self.set_mode_e()?;
        if let DataState::Download { parallelism, .. } = &self.data {
            if *parallelism == p.parallelism {
                return Ok(());
            }
        }
        self.data_token()?;
        self.ctl.ok(&Command::Opts {
            command: "RETR".into(),
            options: format!("Parallelism={0},{0},{0};", p.parallelism),
        })?;
        if let Some(b) = p.tcp_buffer {
            self.ctl.ok(&Command::Sbuf(b as u64))?;
        }
        let listener = socket::listen(SocketAddr::new(self.ctl.local.ip(), 0), p.tcp_buffer)
            .map_err(|e| XferError::io("data listener", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| XferError::io("data listener", e))?;
        let cmd = if addr.is_ipv4() {
            Command::Port(addr)
        } else {
            Command::Eprt(addr)
        };
        self.ctl.ok(&cmd)?;
        self.data = DataState::Download {
            listener,
            parallelism: p.parallelism,
            cached: Vec::new(),
        };
        Ok(())
    }

    /// Ensures the session is set up to upload with `p` streams.
    fn ready_upload(&mut self, p: &DataParams) -> Result<(), XferError> {
        self.set_mode_e()?;
        if let DataState::Upload { cached, pending } = &self.data {
            if cached.len() + pending.len() == p.parallelism as usize {
                return Ok(());
            }
        }
        if let Some(b) = p.tcp_buffer {
            self.ctl.ok(&Command::Sbuf(b as u64))?;
        }
        self.data_token()?;
        let addr = self.pasv()?;
        let mut pending = Vec::with_capacity(p.parallelism as usize);
        for _ in 0..p.parallelism {
            pending.push(
                socket::connect(addr, p.tcp_buffer, self.data_timeout)
                    .map_err(|e| XferError::io(&self.ctl.name, e))?,
            );
        }
        // The server accepts (and does its TLS handshake) only once a STOR runs, so the
        // connections are wrapped after the first 150 reply, in `put_many`.
        self.data = DataState::Upload {
            cached: Vec::new(),
            pending,
        };
        Ok(())
    }

    /// Downloads `items` in order with up to `depth` commands in flight (pipelining).
    ///
    /// `leave` is asked after each item: when it says yes and items remain, the results so far
    /// are returned (fewer than `items`) and the rest were not received. The commands already
    /// sent for them are still pending at the server, so the session is then spent: close it
    /// (drop it; [`Session::quit`] does only that) and give the rest to another session. This is
    /// how a lowered concurrency takes effect after a session's current file rather than after
    /// its whole batch.
    pub fn get_many(
        &mut self,
        items: &[GetItem<'_>],
        p: &DataParams,
        depth: usize,
        leave: &dyn Fn() -> bool,
    ) -> Result<Vec<ItemResult>, XferError> {
        self.usable()?;
        self.ready_download(p)?;
        let depth = depth.max(1);
        let mut results = Vec::with_capacity(items.len());
        let mut sent = 0;
        for (i, item) in items.iter().enumerate() {
            while sent < items.len() && sent < i + depth {
                let it = &items[sent];
                if let Some(h) = &it.have {
                    self.ctl.send(&Command::Rest(Restart::Ranges(h.clone())))?;
                }
                self.ctl.send(&retr_of(it))?;
                if let Some((alg, _)) = it.cksm {
                    self.ctl.send(&cksm_of(alg, &it.path))?;
                }
                sent += 1;
            }
            let mut res = ItemResult::default();
            if let Some(h) = &item.have {
                let r = self.ctl.final_reply(&mut |_| {})?;
                if r.code != 350 {
                    return Err(XferError::from_reply(
                        &self.ctl.name,
                        &Command::Rest(Restart::Ranges(h.clone())),
                        &r,
                    ));
                }
            }
            let retr = retr_of(item);
            let r = self.ctl.final_reply(&mut |_| {})?;
            if !r.is_preliminary() {
                return Err(XferError::from_reply(&self.ctl.name, &retr, &r));
            }
            // Small files: hash the bytes as they are written (one stream delivers them in
            // order), so the digest is ready with the last byte and the file is never read back.
            // Large files: hash our copy as its contiguous prefix grows, on another core.
            let small = item.len.is_some_and(|l| l <= FOLLOW_MIN);
            let inline = item
                .cksm
                .filter(|_| small && item.have.is_none())
                .map(|(alg, local)| crate::checksum::HashingSink::new(item.sink, alg, local));
            let follow = item.cksm.filter(|_| !small);
            let finished = std::sync::atomic::AtomicBool::new(false);
            let prefix = || {
                item.progress
                    .ranges
                    .lock()
                    .ok()
                    .and_then(|r| r.ranges().first().filter(|r| r.0 == 0).map(|r| r.1))
                    .unwrap_or(0)
            };
            let (prefix, finished) = (&prefix, &finished);
            let sink: &dyn Sink = match &inline {
                Some(h) => h,
                None => item.sink,
            };
            let (got, followed) = std::thread::scope(|s| {
                let follower = follow.map(|(alg, local)| {
                    s.spawn(move || crate::checksum::follow(local, alg, prefix, finished))
                });
                let got = self.receive_into(item, sink);
                finished.store(true, std::sync::atomic::Ordering::Release);
                (got, follower.map(|h| h.join()))
            });
            got?;
            let hashed = match (inline, item.len) {
                (Some(h), Some(len)) => h
                    .finish(len)
                    .map_err(|e| XferError::io(&format!("hashing {}", item.path), e))?,
                _ => None,
            };
            let r = self.ctl.final_reply(&mut |_| {})?;
            if !r.is_success() {
                return Err(XferError::from_reply(&self.ctl.name, &retr, &r));
            }
            self.check_complete(item)?;
            if let Some((alg, local)) = item.cksm {
                let ctl = &mut self.ctl;
                // Whatever was not hashed on the way in is hashed now, while the server
                // computes its digest.
                let ready = followed.or(hashed.map(|d| Ok(Ok(d))));
                let (reply, mine) = std::thread::scope(|s| {
                    let h = ready
                        .is_none()
                        .then(|| s.spawn(move || crate::checksum::checksum_path(local, alg)));
                    (ctl.final_reply(&mut |_| {}), h.map(|h| h.join()))
                });
                let r = reply?;
                if r.code != 213 {
                    return Err(XferError::from_reply(
                        &self.ctl.name,
                        &cksm_of(alg, &item.path),
                        &r,
                    ));
                }
                res.server_cksm = parse_cksm_reply(&r);
                let joined = ready
                    .or(mine)
                    .ok_or_else(|| XferError::Usage("no local checksum was computed".into()))?;
                res.local_cksm = Some(joined.unwrap_or_else(|_| {
                    Err(XferError::Usage("checksum thread panicked".into()))
                })?);
            }
            results.push(res);
            if results.len() < items.len() && leave() {
                self.abandoned = true;
                break;
            }
        }
        Ok(results)
    }

    /// Fails unless the ranges received plus those already held cover the whole of what was
    /// asked for: MODE E ends when the announced EODs have arrived, which a server can announce
    /// after sending only part of a file.
    fn check_complete(&self, item: &GetItem<'_>) -> Result<(), XferError> {
        let Some(len) = item.len else { return Ok(()) };
        let mut held = item.progress.ranges();
        if let Some(h) = &item.have {
            held.union(h);
        }
        let missing = held.missing(len);
        if missing.is_empty() {
            return Ok(());
        }
        let missing = missing
            .iter()
            .map(|(a, b)| format!("{a}-{b}"))
            .collect::<Vec<_>>()
            .join(",");
        Err(XferError::Incomplete {
            host: self.ctl.name.clone(),
            path: item.path.clone(),
            missing,
            len,
        })
    }

    fn receive_into(&mut self, item: &GetItem<'_>, sink: &dyn Sink) -> Result<(), XferError> {
        let tls = self.tls.clone();
        let host = self.url.host.clone();
        let DataState::Download {
            listener, cached, ..
        } = &mut self.data
        else {
            return Err(XferError::Usage(
                "session is not set up for downloads".into(),
            ));
        };
        let tls = tls.as_ref().map(|t| (t, host.as_str()));
        let acceptor = ListenAcceptor::new(
            listener,
            tls,
            self.ctl.peer.ip(),
            self.token,
            item.progress,
            self.data_timeout,
        );
        let got = mode_e::receive(
            std::mem::take(cached),
            Some(&acceptor),
            sink,
            item.progress,
            item.len,
            haul_transport::DEFAULT_BLOCK,
        )
        .map_err(|e| XferError::io(&format!("receiving {}", item.path), e))?;
        *cached = got.reusable;
        Ok(())
    }

    /// Uploads `items` in order with up to `depth` commands in flight (pipelining).
    pub fn put_many(
        &mut self,
        items: &[PutItem<'_>],
        p: &DataParams,
        depth: usize,
    ) -> Result<Vec<ItemResult>, XferError> {
        self.ready_upload(p)?;
        let depth = depth.max(1);
        let mut results = Vec::with_capacity(items.len());
        let mut sent = 0;
        for (i, item) in items.iter().enumerate() {
            while sent < items.len() && sent < i + depth {
                let it = &items[sent];
                if let Some(h) = &it.have {
                    self.ctl.send(&Command::Rest(Restart::Ranges(h.clone())))?;
                }
                self.ctl.send(&Command::Stor(it.path.clone()))?;
                if let Some(alg) = it.cksm {
                    self.ctl.send(&cksm_of(alg, &it.path))?;
                }
                sent += 1;
            }
            if let Some(h) = &item.have {
                let r = self.ctl.final_reply(&mut |_| {})?;
                if r.code != 350 {
                    return Err(XferError::from_reply(
                        &self.ctl.name,
                        &Command::Rest(Restart::Ranges(h.clone())),
                        &r,
                    ));
                }
            }
            let stor = Command::Stor(item.path.clone());
            let r = self.ctl.final_reply(&mut |_| {})?;
            if !r.is_preliminary() {
                return Err(XferError::from_reply(&self.ctl.name, &stor, &r));
            }
            let ranges: Vec<(u64, u64)> = match &item.have {
                Some(h) => h.missing(item.len),
                None => vec![(0, item.len)],
            };
            let tls = self.tls.clone();
            let host = self.url.host.clone();
            let DataState::Upload { cached, pending } = &mut self.data else {
                return Err(XferError::Usage("session is not set up for uploads".into()));
            };
            // Each connection carries the token right after its TLS handshake: the server
            // checks one connection's token before it accepts (and handshakes) the next.
            for tcp in pending.drain(..) {
                let mut conn = prepare(
                    tcp,
                    tls.as_ref().map(|t| (t, host.as_str())),
                    self.data_timeout,
                )
                .map_err(|e| XferError::io(&host, e))?;
                data::present(&mut conn, self.token).map_err(|e| XferError::io(&host, e))?;
                cached.push(conn);
            }
            // Send on the data connections while reading 111/112 markers on the control
            // connection, so restart markers are journaled as they arrive.
            let ctl = &mut self.ctl;
            let (reply, sent) = std::thread::scope(|s| {
                let h = s.spawn(|| {
                    mode_e::send(cached, item.src, &ranges, p.block, item.progress, false)
                });
                let reply = ctl.final_reply(&mut |m| {
                    if m.code == 111 {
                        if let (Some(rs), Ok(mut have)) = (
                            haul_proto::markers::parse_range_marker(&m.text()),
                            item.progress.ranges.lock(),
                        ) {
                            have.union(&rs);
                        }
                    }
                });
                (reply, h.join())
            });
            let r = reply?;
            sent.unwrap_or_else(|_| Err(std::io::Error::other("sender panicked")))
                .map_err(|e| XferError::io(&format!("sending {}", item.path), e))?;
            if !r.is_success() {
                return Err(XferError::from_reply(&self.ctl.name, &stor, &r));
            }
            let mut res = ItemResult {
                markers: item.progress.ranges(),
                ..ItemResult::default()
            };
            if let Some(alg) = item.cksm {
                res.server_cksm = self.cksm_reply(alg, &item.path)?;
            }
            results.push(res);
        }
        Ok(results)
    }

    /// Reads the reply to a queued `CKSM` and returns its digest.
    fn cksm_reply(&mut self, alg: Algorithm, path: &str) -> Result<Option<String>, XferError> {
        let r = self.ctl.final_reply(&mut |_| {})?;
        if r.code != 213 {
            return Err(XferError::from_reply(
                &self.ctl.name,
                &cksm_of(alg, path),
                &r,
            ));
        }
        Ok(parse_cksm_reply(&r))
    }

    /// Ends the session politely (or, after [`Session::get_many`] left early, just closes it).
    pub fn quit(mut self) {
        if self.abandoned {
            return;
        }
        let _ = self.ctl.send(&Command::Quit);
        let _ = self.ctl.final_reply(&mut |_| {});
    }
}
